"""Replication health on two embedded clusters, each test starting from a healthy flow: a stopped replicator
(WARN, then STOP), records deleted at the source before they were copied (GAP), partitions added at the source
with no replicator running (DRIFT), a planted record whose provenance names the destination (CYCLE), and bad
input (exit 2, nothing written). Copies are made in process (copy_ranges), as a bounded replicator does."""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import IsolationLevel, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions
from support.drills import copy_flow
from support.kafka import Record, create_topic, partitions, produce
from support.retry import eventually
from support.stack import BrokerPair
from support.topology import write_topology

from kafka_dr import cli
from kafka_dr.access import ClusterAccess
from kafka_dr.clients import end_offsets
from kafka_dr.health.check import check_flow, load_evaluation
from kafka_dr.health.sampler import load_windows
from kafka_dr.replication.internal import HEALTH
from kafka_dr.replication.provenance import HEADER, Hop
from kafka_dr.topology import Topology, load_topology

pytestmark = pytest.mark.integration


@pytest.fixture(autouse=True)
def state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("KDR_STATE_DIR", str(tmp_path / "state"))
    return tmp_path / "state"


def healthy_flow(pair: BrokerPair, tmp_path: Path, partitions: int = 2, records: int = 100) -> tuple[Topology, str]:
    """A flow dc1 -> dc2 over a topic of its own, copied to its end: lag 0."""
    topic = f"health-{uuid.uuid4().hex[:8]}"
    create_topic(pair.dc1.config, topic, partitions)
    produce(pair.dc1.config, topic, keyed(records, partitions))
    flow = f"{topic}-flow"
    path = write_topology(
        tmp_path / f"{flow}.yaml",
        {"dc1": pair.dc1.bootstrap, "dc2": pair.dc2.bootstrap},
        f"  - {{name: {flow}, source: dc1, target: dc2, topics: {{include: ['{topic}']}}}}",
    )
    topology = load_topology(path)
    copy_flow(topology, flow)
    return topology, topic


def keyed(count: int, partitions: int) -> list[Record]:
    """Records k<i>/v<i>, round-robin over `partitions`."""
    return [Record(f"v{i}".encode(), f"k{i}".encode(), i % partitions) for i in range(count)]


def statuses(health) -> dict[tuple[str, int], str]:
    return {(p.topic, p.partition): p.status for p in health.partitions}


def test_a_stopped_replicator_is_warn_then_stop(broker_pair: BrokerPair, tmp_path: Path) -> None:
    topology, topic = healthy_flow(broker_pair, tmp_path)
    flow = topology.flows[0].name
    first = check_flow(ClusterAccess.from_environ(topology), flow)
    assert first.status == "OK" and set(statuses(first).values()) == {"OK"}, first
    time.sleep(5)
    produce(broker_pair.dc1.config, topic, keyed(10, 2))
    copy_flow(topology, flow)  # a second copy 5 s after the first: the window's progress spans 5 s or more
    assert check_flow(ClusterAccess.from_environ(topology), flow).status == "OK"
    produce(broker_pair.dc1.config, topic, keyed(50, 2))  # and now nothing copies
    warned = check_flow(
        ClusterAccess.from_environ(topology), flow
    )  # well within the span since the second copy, even on a loaded machine
    assert warned.status == "WARN", warned
    assert all(p.status == "WARN" and p.lag_records == 25 for p in warned.partitions), warned
    assert "lag growing (0 -> 25 records), no progress since the previous sample" in warned.problems[0]
    # Wait until, on each partition, the time without progress exceeds the span its window saw it progressing, plus a
    # second (the partitions' copies end at slightly different times).
    windows = load_windows(broker_pair.dc2.config, flow, [(topic, 0), (topic, 1)])
    stop_ms = max(2 * max(p) - min(p) for p in ([s.last_progress_ms for s in w] for w in windows.values()))
    time.sleep(max(0.0, stop_ms / 1000 - time.time()) + 1)
    stopped = check_flow(ClusterAccess.from_environ(topology), flow)
    assert stopped.status == "ERR" and set(statuses(stopped).values()) == {"STOP"}, stopped
    assert stopped.problems[0].startswith(f"STOP {topic}[0] no progress for ")
    # Every run kept its sample: the next run's window holds them all, oldest first.
    windows = load_windows(broker_pair.dc2.config, flow, [(topic, 0), (topic, 1)])
    assert [s.lag_records for s in windows[(topic, 0)]] == [0, 0, 25, 25]
    assert load_evaluation(broker_pair.dc2.config, flow)["status"] == "ERR"


def test_records_deleted_before_they_were_copied_are_a_gap_with_count_and_range(
    broker_pair: BrokerPair, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    topology, topic = healthy_flow(broker_pair, tmp_path, partitions=1, records=1200)
    produce(broker_pair.dc1.config, topic, keyed(500, 1))  # offsets 1200-1699, not copied
    admin = AdminClient(broker_pair.dc1.config)
    admin.delete_records([TopicPartition(topic, 0, 1500)])[TopicPartition(topic, 0, 1500)].result(10)
    flow = topology.flows[0].name
    code = cli.main(["health", "--topology", str(tmp_path / f"{flow}.yaml"), "--flow", flow, "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 1
    [health] = out["flows"]
    assert health["status"] == "ERR"
    [partition] = health["partitions"]
    assert (partition["status"], partition["gap"]) == ("GAP", [1200, 1499])
    assert health["problems"] == [
        f"GAP {topic}[0] 300 records deleted at the source before they were copied (offsets 1200-1499)"
    ]


def test_partitions_added_at_the_source_with_no_replicator_are_drift(broker_pair: BrokerPair, tmp_path: Path) -> None:
    topology, topic = healthy_flow(broker_pair, tmp_path)
    admin = AdminClient(broker_pair.dc1.config)
    admin.create_partitions([NewPartitions(topic, 3)])[topic].result(10)
    eventually(lambda: partitions(admin, topic) == 3, "the source's 3 partitions", 30)  # its metadata, a moment on
    health = check_flow(ClusterAccess.from_environ(topology), topology.flows[0].name)
    assert health.status == "ERR"
    assert f"DRIFT {topic} -> {topic}: 2 partitions in dc2, 3 at the source" in health.problems
    assert statuses(health)[(topic, 0)] == "DRIFT"


def test_a_record_whose_provenance_names_the_destination_is_a_cycle(broker_pair: BrokerPair, tmp_path: Path) -> None:
    topology, topic = healthy_flow(broker_pair, tmp_path, partitions=1)
    dc2_id = broker_pair.dc2.cluster_id
    planted = Hop(dc2_id, topic, 0, 5, int(time.time() * 1000)).encode()
    producer, delivered = Producer(broker_pair.dc2.config), []
    producer.produce(
        topic, b"again", b"back", 0, lambda _err, msg: delivered.append(msg.offset()), headers=[(HEADER, planted)]
    )
    assert producer.flush(10) == 0
    health = check_flow(ClusterAccess.from_environ(topology), topology.flows[0].name)
    assert health.status == "ERR"
    assert f"CYCLE {topic}[0] offset {delivered[0]}: provenance names this cluster and topic" in health.problems
    assert statuses(health)[(topic, 0)] == "CYCLE"


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["--flow", "no-such-flow"], "unknown flow 'no-such-flow'"),
        (["--topology", "missing.yaml"], "missing.yaml: file not found"),
    ],
)
def test_bad_input_is_exit_2_and_writes_nothing(
    broker_pair: BrokerPair,
    tmp_path: Path,
    state: Path,
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
    expected: str,
) -> None:
    path = write_topology(
        tmp_path / "t.yaml",
        {"dc1": broker_pair.dc1.bootstrap, "dc2": broker_pair.dc2.bootstrap},
        "  - {name: f, source: dc1, target: dc2, topics: {include: ['t']}}",
    )
    before = health_records(broker_pair)
    code = cli.main(["health", "--topology", str(path), *argv])
    err = capsys.readouterr().err
    assert code == 2 and expected in err and len(err.strip().splitlines()) == 1, err
    assert not (state / "health").exists() and health_records(broker_pair) == before


def health_records(pair: BrokerPair) -> int | None:
    """How many samples dc2's `_kdr.health` holds (None: no such topic)."""
    admin = AdminClient(pair.dc2.config)
    if HEALTH not in admin.list_topics(timeout=10).topics:
        return None
    return end_offsets(admin, [(HEALTH, 0)], IsolationLevel.READ_UNCOMMITTED)[(HEALTH, 0)]
