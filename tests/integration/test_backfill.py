"""The backfill job on the session's embedded brokers: a flow started at `latest` after three hours of records, then
hour 2 backfilled into `{topic}.backfill` exactly once (a rerun copies nothing), the flow's own destination refused, a
dry run that changes nothing, a window partly deleted by retention, and bad windows refused with one line."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from confluent_kafka import Message, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from support.kafka import HOUR_MS, Record, create_topic, high_watermarks, hourly_records, iso, produce, read_all
from support.spark import run_in_process
from support.stack import StackBroker
from support.topology import write_topology

from kafka_dr.clients import read_committed
from kafka_dr.replication.provenance import HEADER, Hop, hops
from kafka_dr.topology import COPIED_INTERNAL_TOPICS

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("spark")]
PER_HOUR = 100  # records per hour, over 2 partitions


@pytest.fixture(scope="module")
def clusters(broker_pair) -> dict[str, StackBroker]:
    return {"dc1": broker_pair.dc1, "dc2": broker_pair.dc2}


def backfill(topology: Path, *args: str) -> tuple[int, dict, str]:
    return run_in_process("backfill", "--topology", str(topology), "--flow", "bf-flow", *args)


def origins(broker: StackBroker, topic: str) -> list[tuple[int, int]]:
    """(partition, origin offset) of every copy in `topic`."""
    ends = {key: end for key, end in high_watermarks(broker.config).items() if key[0] == topic}
    copies = read_committed(broker.config, {key: (0, end) for key, end in ends.items()}, 30)
    return sorted((m.partition(), hops(m.headers())[-1].offset) for m in copies)


def copied(summary: dict, topic: str) -> int:
    """Records a replicate run copied of `topic`, once nothing else it copied is outside kafka-dr's internal topics
    that every flow carries from their start (heartbeats, drill probes): those hold what earlier files of the
    worker's session wrote on these brokers. A fresh clone's run once counted one record more than `bf` should have,
    in the summary's total; which topic it was in was not kept."""
    others = {p["topic"] for p in summary["partitions"] if p["records"] and p["topic"] != topic}
    assert others <= set(COPIED_INTERNAL_TOPICS), summary["partitions"]
    return sum(p["records"] for p in summary["partitions"] if p["topic"] == topic)


def test_a_flow_started_at_latest_gets_hour_2_backfilled_once_beside_its_destination(clusters, tmp_path):
    dc1, dc2 = clusters["dc1"], clusters["dc2"]
    create_topic(dc1.config, "bf", 2)
    hour1 = hourly_records(dc1.config, "bf", PER_HOUR)
    flow = "  - {name: bf-flow, source: dc1, target: dc2, topics: {include: ['bf']}, start: latest}"
    topology = write_topology(tmp_path / "bf.yaml", {"dc1": dc1.bootstrap, "dc2": dc2.bootstrap}, flow)
    code, first, err = run_in_process("replicate", "--topology", str(topology), "--flow", "bf-flow")
    assert (code, copied(first, "bf")) == (0, 0), (first["partitions"], err[-2000:])  # started at latest: no history
    producer = Producer(dc1.config)
    for i in range(4):
        producer.produce("bf", value=f"live-{i}".encode(), partition=i % 2)
    assert producer.flush(10) == 0
    code, live, err = run_in_process("replicate", "--topology", str(topology), "--flow", "bf-flow")
    assert (code, copied(live, "bf")) == (0, 4), err[-2000:]
    hour2 = ["--window-start", iso(hour1 + HOUR_MS), "--window-end", iso(hour1 + 2 * HOUR_MS)]

    # Into the flow's own destination, hour 2's copies would follow the live ones: refused, nothing changed.
    before = high_watermarks(dc2.config)
    code, refused, _ = backfill(topology, *hour2)
    assert code == 2 and "--target-topic '{topic}.backfill'" in refused["error"]
    assert "bf[0] holds copies of offsets past 50" in refused["error"]
    assert refused["error"].endswith("; see docs/runbooks/dr_backfill.md#the-target-would-take-copies-out-of-order")
    assert high_watermarks(dc2.config) == before

    # A dry run plans the hour and changes nothing.
    code, planned, err = backfill(topology, *hour2, "--target-topic", "{topic}.backfill", "--dry-run")
    assert code == 0, err[-2000:]
    assert (planned["status"], planned["to_copy"], planned["copied"]) == ("planned", PER_HOUR, 0)
    assert high_watermarks(dc2.config) == before

    code, done, err = backfill(topology, *hour2, "--target-topic", "{topic}.backfill")
    assert code == 0, err[-2000:]
    assert (done["copied"], done["already_present"], done["unavailable"]) == (PER_HOUR, 0, [])
    assert done["verify"]["status"] == "verified" and done["verify"]["expected"] == PER_HOUR
    assert origins(dc2, "bf.backfill") == sorted((i % 2, 50 + i // 2) for i in range(PER_HOUR))  # hour 2 exactly
    code, again, err = backfill(topology, *hour2, "--target-topic", "{topic}.backfill")
    assert (code, again["copied"], again["already_present"]) == (0, 0, PER_HOUR), err[-2000:]
    assert len(origins(dc2, "bf.backfill")) == PER_HOUR

    # The flow goes on where it was: the backfill moved nothing of it.
    producer.produce("bf", value=b"after", partition=0)
    assert producer.flush(10) == 0
    code, after, err = run_in_process("replicate", "--topology", str(topology), "--flow", "bf-flow")
    assert (code, copied(after, "bf")) == (0, 1), err[-2000:]


def test_a_window_partly_deleted_by_retention_reports_it_and_copies_the_rest(clusters, tmp_path):
    dc1, dc2 = clusters["dc1"], clusters["dc2"]
    create_topic(dc1.config, "bf-old", 2)
    hour1 = hourly_records(dc1.config, "bf-old", PER_HOUR)
    admin = AdminClient(dc1.config)  # held: a dropped client abandons its futures
    admin.delete_records([TopicPartition("bf-old", 0, 20)])[TopicPartition("bf-old", 0, 20)].result(10)
    flow = "  - {name: bf-flow, source: dc1, target: dc2, topics: {include: ['bf-old']}}"
    topology = write_topology(tmp_path / "old.yaml", {"dc1": dc1.bootstrap, "dc2": dc2.bootstrap}, flow)

    code, summary, err = backfill(
        topology, "--offsets", json.dumps({"bf-old:0": [10, 59]}), "--target-topic", "{topic}.bf"
    )
    assert code == 0, err[-2000:]
    assert summary["unavailable"] == [{"topic": "bf-old", "partition": 0, "from_offset": 10, "to_offset": 19}]
    assert summary["copied"] == 40 and summary["verify"]["status"] == "verified"
    assert origins(dc2, "bf-old.bf") == [(0, offset) for offset in range(20, 60)]

    hour1_window = ["--window-start", iso(hour1), "--window-end", iso(hour1 + HOUR_MS)]
    code, timed, err = backfill(topology, *hour1_window, "--target-topic", "{topic}.bf")
    assert code == 0, err[-2000:]  # partition 0 begins in what retention deleted: reported, never skipped silently
    assert timed["unavailable"] == [{"topic": "bf-old", "partition": 0, "from_offset": None, "to_offset": 19}]
    assert (timed["copied"], timed["already_present"]) == (PER_HOUR // 2, 30)  # partition 0's 20-49 are there


def test_a_target_already_holding_a_duplicate_and_a_changed_copy_fails_verify_naming_both(clusters, tmp_path):
    """Backfill copies only what the target lacks, so copies already there are what its verify must judge: a
    duplicate and a copy whose value was changed are named with their offsets, and the job exits 1."""
    dc1, dc2 = clusters["dc1"], clusters["dc2"]
    create_topic(dc1.config, "bf-audit", 1)
    produce(dc1.config, "bf-audit", [Record(b"v%d" % i, b"k%d" % i) for i in range(10)])
    now_ms = int(time.time() * 1000)

    def copy(m: Message, value: bytes) -> Record:
        hop = Hop(dc1.cluster_id, "bf-audit", 0, m.offset(), now_ms)
        return Record(value, m.key(), 0, m.timestamp()[1], [(HEADER, hop.encode())])

    source = read_all(dc1.config, "bf-audit")
    create_topic(dc2.config, "bf-audit.bf", 1)
    produce(dc2.config, "bf-audit.bf", [copy(source[2], b"v2"), copy(source[2], b"v2"), copy(source[4], b"changed")])
    flow = "  - {name: bf-flow, source: dc1, target: dc2, topics: {include: ['bf-audit']}}"
    topology = write_topology(tmp_path / "audit.yaml", {"dc1": dc1.bootstrap, "dc2": dc2.bootstrap}, flow)

    code, summary, err = backfill(topology, "--offsets", '{"bf-audit:0": [0, 9]}', "--target-topic", "{topic}.bf")
    assert code == 1, (summary, err[-2000:])
    assert (summary["status"], summary["copied"], summary["already_present"]) == ("failed", 8, 2)
    verify = summary["verify"]
    assert (verify["status"], verify["expected"], verify["missing"], verify["duplicated"], verify["mismatched"]) == (
        "failed", 10, 0, 1, 1,
    )  # fmt: skip
    assert summary["error"] == (
        "window not verified: 1 duplicated, 1 mismatched (value 1) of 10 records, in 1 of 1 partitions; "
        "bf-audit.bf-0: duplicated [2], mismatched [4]"
    )


@pytest.fixture(scope="module")
def ten_records(clusters) -> str:
    create_topic(clusters["dc1"].config, "bf-bad", 1)
    producer = Producer(clusters["dc1"].config)
    for i in range(10):
        producer.produce("bf-bad", value=b"%d" % i)
    assert producer.flush(10) == 0
    return "bf-bad"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--window-start", "2026-01-02T00:00:00Z", "--window-end", "2026-01-01T00:00:00Z"], "is not after"),
        (["--window-start", "2026-01-01T00:00:00Z", "--window-end", "2999-01-01T00:00:00Z"], "is in the future"),
        (["--window-start", "yesterday", "--window-end", "2026-01-01T00:00:00Z"], "window_start: not an ISO-8601"),
        (["--offsets", '{"bf-bad:0": [0, 10]}'], "offsets past the end of their partition: bf-bad:0 ends at 10"),
        (["--offsets", '{"bf-bad:7": [0, 1]}'], "bf-bad:7: no such partition"),
        (["--offsets", '{"bf-bad:0": [5, 1]}'], "first <= last"),
        (
            ["--topics", "other.*", "--offsets", '{"bf-bad:0": [0, 1]}'],
            "selects none of the topics flow bf-flow copies",
        ),
        (["--offsets", '{"bf-bad:0": [0, 1]}', "--target-topic", "_kdr.{topic}"], "not a legal topic name"),
    ],
)
def test_bad_windows_are_refused_with_one_line_and_change_nothing(clusters, ten_records, tmp_path, args, message):
    dc1, dc2 = clusters["dc1"], clusters["dc2"]
    flow = f"  - {{name: bf-flow, source: dc1, target: dc2, topics: {{include: ['{ten_records}']}}}}"
    topology = write_topology(tmp_path / "bad.yaml", {"dc1": dc1.bootstrap, "dc2": dc2.bootstrap}, flow)
    before = high_watermarks(dc2.config)
    code, summary, _ = backfill(topology, *args)
    assert code == 2 and message in summary["error"] and "\n" not in summary["error"]
    assert high_watermarks(dc2.config) == before
