"""Offset translation on two embedded clusters: exact from provenance, from checkpoints once the source
is gone, the timestamp fallback, reset to a datetime, and groups with active members left alone."""

from __future__ import annotations

import random
import time

import pytest
from confluent_kafka import Consumer, KafkaError, TopicPartition
from support.drills import copy_flow
from support.kafka import Record, commit_offsets, committed_offsets, create_topic, produce, resume_offsets
from support.spark import close_cached_clients, job_module, run_in_process
from support.stack import StackBroker
from support.topology import write_brokers_topology

from kafka_dr.access import ClusterAccess
from kafka_dr.replication.flow_clients import FlowClients
from kafka_dr.replication.lag import load_snapshot
from kafka_dr.replication.provenance import hops
from kafka_dr.topology import load_topology
from kafka_dr.translation.offsets import PartitionRequest, offsets_for_times, translate_partition

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("spark")]


@pytest.fixture(autouse=True)
def _close_cached_clients():
    yield
    close_cached_clients()


KEEP_2023 = {"retention.ms": "-1"}  # records of 2023: a 7-day retention could drop them while a test reads them


def numbered(
    count: int, partition: int = 0, start: int = 0, base_ms: int | None = None, step_ms: int = 1
) -> list[Record]:
    """Records k<i>/v<i> for i from `start`, CreateTime `base_ms` + i * `step_ms` (default: an hour back)."""
    base_ms = base_ms or int(time.time() * 1000) - 3_600_000
    return [
        Record(f"v{i}".encode(), f"k{i}".encode(), partition, base_ms + i * step_ms)
        for i in range(start, start + count)
    ]


def consume_rest(broker: StackBroker, group: str, topic: str) -> list:
    """What a consumer of `group` reads from its committed offsets to the end."""
    consumer = Consumer(
        {
            **broker.config,
            "group.id": group,
            "enable.partition.eof": True,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe([topic])
    out, eof, deadline = [], set(), time.monotonic() + 60
    partitions = len(consumer.list_topics(topic, timeout=10).topics[topic].partitions)
    while len(eof) < partitions and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is None:
            continue
        if message.error():
            assert message.error().code() == KafkaError._PARTITION_EOF, message.error().str()
            eof.add(message.partition())
            continue
        out.append(message)
    consumer.close()
    return out


def test_white_paper_failover_translates_exactly_from_checkpoints(broker_pair, tmp_path):
    """10,000 records in dc1, 9,998 replicated, a group at 8,000; dc1 lost: the group resumes in dc2 at
    origin offset 8,000 and reads exactly the 1,998 replicated records that follow; RPO = 2."""
    dc1, dc2 = broker_pair.dc1, broker_pair.dc2
    try:
        topology = write_brokers_topology(
            tmp_path / "t.yaml",
            {"dc1": dc1, "dc2": dc2},
            "  - {name: wp, source: dc1, target: dc2, topics: {include: ['orders']}}\n",
        )
        create_topic(dc1.config, "orders", 1)
        produce(dc1.config, "orders", numbered(9_998))
        copy_flow(load_topology(topology), "wp")
        produce(dc1.config, "orders", numbered(2, start=9_998))  # produced, never replicated
        commit_offsets(dc1.config, "billing", {("orders", 0): 8_000})
        code, summary, err = run_in_process("translate_offsets", "--topology", str(topology), "--flow", "wp")
        assert code == 0, err[-3000:]
        resume = resume_offsets(dc2.config, "orders", {0: 8_000})[("orders", 0)]  # 8,000 in one copy transaction
        assert summary["groups"]["billing"][0]["dest_offset"] == resume
        assert "wp" not in summary["groups"], "the flow's own replication group is never translated"
        dc1.stop()  # the disaster
        code, summary, err = run_in_process(
            "translate_offsets", "--topology", str(topology), "--flow", "wp", "--from-checkpoints", "--apply"
        )
        assert code == 0, err[-3000:]
        assert summary["origin"] == "checkpoints" and summary["applied"] == ["billing"]
        assert committed_offsets(dc2.config, "billing") == {("orders", 0): resume}
        rest = consume_rest(dc2, "billing", "orders")
        origins = [hops(m.headers())[-1].offset for m in rest]
        assert origins == list(range(8_000, 9_998))  # 1,998 records, none twice, none missed
        snapshot = load_snapshot(dc2.config, "wp")
        assert snapshot is not None and snapshot.total_records == 2  # the RPO estimate once dc1 is gone
    finally:
        close_cached_clients()
        if not dc1.running():
            dc1.start()  # back with its data, for the tests after this one


@pytest.fixture
def pair(broker_pair) -> tuple[StackBroker, StackBroker]:
    return broker_pair.dc1, broker_pair.dc2


def test_every_group_offset_is_exact_with_interleaved_local_records(pair, tmp_path):
    """Active-active: dc2's partition mixes its own records with copies; every committed offset (start, middle,
    end, past the copies) lands on the first copy whose origin offset is >= it."""
    dc1, dc2 = pair
    create_topic(dc1.config, "mixed", 2)
    create_topic(dc2.config, "mixed", 2)
    topology = write_brokers_topology(
        tmp_path / "t.yaml",
        {"dc1": dc1, "dc2": dc2},
        "  - {name: mix, source: dc1, target: dc2, topics: {include: ['mixed']}}\n",
    )
    for round_ in range(4):  # copies and local dc2 records interleave in dc2
        for partition in (0, 1):
            produce(dc1.config, "mixed", numbered(300, partition, start=round_ * 300))
            produce(dc2.config, "mixed", numbered(37, partition, start=round_ * 37))
        copy_flow(load_topology(topology), "mix")
    produce(dc1.config, "mixed", numbered(50, 0, start=1_200))  # not replicated yet
    truth: dict[tuple[int, int], int] = {}  # (partition, origin offset) -> dc2 offset
    after_last: dict[int, int] = {}
    for partition in (0, 1):
        reader = Consumer({**dc2.config, "group.id": "truth", "enable.partition.eof": True})
        reader.assign([TopicPartition("mixed", partition, 0)])
        while True:
            m = reader.poll(5)
            if m.error():
                break
            chain = hops(m.headers())
            if chain and chain[-1].cluster_id == dc1.cluster_id:
                truth[(partition, chain[-1].offset)] = m.offset()
                after_last[partition] = m.offset() + 1
        reader.close()
    access = ClusterAccess.from_environ(load_topology(topology))  # the environment's settings: no connection
    rng = random.Random(7)
    requests = []
    for partition in (0, 1):
        wanted = sorted({0, 1, 299, 300, 600, 1_199, 1_200, 1_249} | {rng.randrange(1_250) for _ in range(200)})
        wanted = [o for o in wanted if partition == 0 or o < 1_200]
        requests.append(
            PartitionRequest(
                access.config("dc1"),
                access.config("dc2"),
                dc1.cluster_id,
                "mixed",
                partition,
                "mixed",
                tuple(wanted),
                1_250 if partition == 0 else 1_200,
            )
        )
    for request in requests:
        for t in translate_partition(request):
            expected = truth.get((request.partition, t.source_offset), after_last[request.partition])
            assert t.dest_offset == expected, (request.partition, t.source_offset)
    # The job translates in its driver until Spark is up, then in Spark tasks: the same answers either way.
    by: dict[str, int] = {"driver": 0, "spark_tasks": 0}
    beside = job_module("translate_offsets").translate_beside_spark(SparkUpAfter(1), requests, by)
    alone = [t for r in requests for t in translate_partition(r)]
    assert len(beside) == len(alone) and set(beside) == set(alone)
    assert by == {"driver": 1, "spark_tasks": 1}


class SparkUpAfter:
    """A SparkStart stand-in on the tests' shared session that says it is ready after `checks` checks."""

    def __init__(self, checks: int) -> None:
        self.checks = checks

    def ready(self) -> bool:
        self.checks -= 1
        return self.checks < 0

    def context(self):
        from pyspark.sql import SparkSession

        return SparkSession.getActiveSession().sparkContext


def test_groups_with_active_members_are_left_alone_and_reported(pair, tmp_path):
    dc1, dc2 = pair
    create_topic(dc1.config, "busy", 1)
    produce(dc1.config, "busy", numbered(100))
    topology = write_brokers_topology(
        tmp_path / "t.yaml",
        {"dc1": dc1, "dc2": dc2},
        "  - {name: busy-flow, source: dc1, target: dc2, topics: {include: ['busy']}}\n",
    )
    copy_flow(load_topology(topology), "busy-flow")
    commit_offsets(dc1.config, "busy-idle", {("busy", 0): 40})
    commit_offsets(dc1.config, "busy-live", {("busy", 0): 60})
    live = Consumer({**dc2.config, "group.id": "busy-live", "session.timeout.ms": 30_000})
    live.subscribe(["busy"])
    deadline = time.monotonic() + 30
    while not live.assignment() and time.monotonic() < deadline:
        live.poll(0.2)
    before = committed_offsets(dc2.config, "busy-live")
    try:
        code, summary, err = run_in_process(
            "translate_offsets", "--topology", str(topology), "--flow", "busy-flow", "--groups", "busy-.*", "--apply"
        )
    finally:
        live.close()
    assert code == 0, err[-3000:]
    assert summary["applied"] == ["busy-idle"]
    assert summary["skipped"] == [{"group": "busy-live", "reason": "1 active member(s) in the target"}]
    assert committed_offsets(dc2.config, "busy-idle") == {("busy", 0): 40}
    assert committed_offsets(dc2.config, "busy-live") == before  # untouched


def test_timestamp_fallback_matches_offsets_for_times(pair, tmp_path):
    """A flow without provenance translates by the source record's timestamp, as offsetsForTimes does."""
    dc1, dc2 = pair
    create_topic(dc1.config, "plain", 1)
    create_topic(dc2.config, "plain", 1)
    base = int(time.time() * 1000) - 3_600_000
    produce(dc2.config, "plain", numbered(10, base_ms=base - 10_000))  # older records already in the destination
    produce(dc1.config, "plain", numbered(500, base_ms=base, step_ms=10))
    topology = write_brokers_topology(
        tmp_path / "t.yaml",
        {"dc1": dc1, "dc2": dc2},
        "  - {name: plain-flow, source: dc1, target: dc2, topics: {include: ['plain']}, provenance: false}\n",
    )
    copy_flow(load_topology(topology), "plain-flow")
    clients = FlowClients(
        ClusterAccess.from_environ(load_topology(topology)), load_topology(topology).flow("plain-flow")
    )
    request = PartitionRequest(
        clients.source_config,
        clients.target_config,
        dc1.cluster_id,
        "plain",
        0,
        "plain",
        (0, 123, 499, 500),
        500,
        provenance=False,
    )
    result = {t.source_offset: t for t in translate_partition(request)}
    probe = Consumer({**dc2.config, "group.id": "probe"})
    for offset in (0, 123, 499):
        expected = probe.offsets_for_times([TopicPartition("plain", 0, base + offset * 10)], timeout=10)[0].offset
        assert result[offset].dest_offset == expected == 10 + offset and result[offset].method == "timestamp"
    # Caught up: the log end, past the last copy (509) and the commit marker of its transaction.
    assert result[500].dest_offset == probe.get_watermark_offsets(TopicPartition("plain", 0), timeout=10)[1] == 511
    probe.close()


def test_reset_to_datetime_behaves_like_the_cli(pair):
    """--to-datetime: the earliest offset with timestamp >= the time; after the last record, the log end."""
    dc1, _ = pair
    create_topic(dc1.config, "dated", 2, **KEEP_2023)
    base = 1_700_000_000_000
    produce(dc1.config, "dated", numbered(100, 0, base_ms=base, step_ms=1000))
    produce(dc1.config, "dated", numbered(100, 1, base_ms=base + 50_500, step_ms=1000))
    offsets = offsets_for_times(dc1.config, "dated", {0: base + 50_500, 1: base + 50_500})
    assert offsets == {0: 51, 1: 0}
    assert offsets_for_times(dc1.config, "dated", {0: base + 10**9, 1: base - 1}) == {0: 100, 1: 0}


def test_job_resets_groups_to_a_datetime_in_the_target(pair, tmp_path):
    """--reset-to-datetime --apply commits, per partition of the group's topics, offsetsForTimes (or the end)."""
    dc1, dc2 = pair
    create_topic(dc1.config, "ticks", 2, **KEEP_2023)
    base = 1_700_000_000_000
    for partition in (0, 1):
        produce(dc1.config, "ticks", numbered(100, partition, base_ms=base + partition * 60_000, step_ms=1000))
    topology = write_brokers_topology(
        tmp_path / "t.yaml",
        {"dc1": dc1, "dc2": dc2},
        "  - {name: ticks-flow, source: dc1, target: dc2, topics: {include: ['ticks']}}\n",
    )
    copy_flow(load_topology(topology), "ticks-flow")
    commit_offsets(dc1.config, "ticks-app", {("ticks", 0): 10})
    code, summary, err = run_in_process(
        "translate_offsets",
        "--topology",
        str(topology),
        "--flow",
        "ticks-flow",
        "--groups",
        "ticks-app",
        "--reset-to-datetime",
        "2023-11-14T22:14:10.5Z",
        "--apply",
    )
    assert code == 0, err[-3000:]
    # 2023-11-14T22:14:10.5Z is base + 50.5 s: partition 0 at record 51, partition 1 starts after that time.
    assert committed_offsets(dc2.config, "ticks-app") == {("ticks", 0): 51, ("ticks", 1): 0}
    code, summary, err = run_in_process(
        "translate_offsets", "--topology", str(topology), "--flow", "ticks-flow", "--reset-to-datetime", "yesterday"
    )
    assert code == 2 and "not an ISO-8601 time" in summary["error"]
