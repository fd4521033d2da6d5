"""The application's side of offset translation on embedded brokers: `translated_offsets` and `kafka-dr offsets`
give, from the checkpoints kept in the target and translated live from the source, the offsets the DAG's own
translation gives, named as the target names its topics; `--apply` commits them only while the group has no
active member there, and a refusal changes nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest
from confluent_kafka import Consumer
from support.drills import copy_flow
from support.kafka import Record, commit_offsets, committed_offsets, create_topic, high_watermarks, produce
from support.topology import write_topology

from kafka_dr.access import ClusterAccess
from kafka_dr.topology import load_topology
from kafka_dr.translation.checkpoints import checkpoint_groups
from kafka_dr.translation.group_offsets import CHECKPOINTS, LIVE, translated_offsets
from kafka_dr.translation.offsets import close_readers

pytestmark = pytest.mark.integration

TOPIC, GROUP, FLOW = "go-orders", "go-billing", "go-flow"
LOCAL = 7  # records dc2 holds of its own before the copies: translated offsets differ from the source's


def two_partitions(topic: str, per_partition: int) -> list[Record]:
    """`per_partition` records in each of partitions 0 and 1, valued <topic>-<partition>-<i>."""
    return [Record(f"{topic}-{p}-{i}".encode(), partition=p) for p in (0, 1) for i in range(per_partition)]


def kafka_dr(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kafka_dr.cli", *args], capture_output=True, text=True, timeout=120, check=False, env=env
    )


@pytest.fixture(scope="module")
def replicated(broker_pair, tmp_path_factory):
    """`go-orders` (2 partitions, 50 records each) copied into dc2's `go-orders.replica` after dc2's own 7 per
    partition; the group committed 30 and 45 in dc1; one checkpoint pass kept its translation in dc2."""
    dc1, dc2 = broker_pair.dc1, broker_pair.dc2
    path = write_topology(
        tmp_path_factory.mktemp("go") / "topology.yaml",
        {"dc1": dc1.bootstrap, "dc2": dc2.bootstrap},
        f'  - {{name: {FLOW}, source: dc1, target: dc2, topics: {{include: ["{TOPIC}"]}}, '
        f'rename: {{"{TOPIC}": "{{topic}}.replica"}}}}',
    )
    create_topic(dc1.config, TOPIC, 2)
    create_topic(dc2.config, f"{TOPIC}.replica", 2)
    produce(dc2.config, f"{TOPIC}.replica", two_partitions(f"{TOPIC}.replica", LOCAL))
    produce(dc1.config, TOPIC, two_partitions(TOPIC, 50))
    topology = load_topology(path)
    copy_flow(topology, FLOW)
    commit_offsets(dc1.config, GROUP, {(TOPIC, 0): 30, (TOPIC, 1): 45})
    dag = checkpoint_groups(ClusterAccess.from_environ(topology), topology.flow(FLOW), None)[
        GROUP
    ]  # what dr_failover applies in a disaster
    close_readers()
    return path, topology, {(t.dest_topic, t.partition): t.dest_offset for t in dag}


def test_the_library_call_gives_the_dags_offsets_from_checkpoints_and_live(replicated, broker_pair):
    _, topology, dag = replicated
    ends = high_watermarks(broker_pair.dc2.config)  # after the copies' commit markers too, as Kafka's lag counts
    assert dag == {(f"{TOPIC}.replica", 0): LOCAL + 30, (f"{TOPIC}.replica", 1): LOCAL + 45}
    for source in (CHECKPOINTS, LIVE):
        found = translated_offsets(GROUP, "dc2", ClusterAccess.from_environ(topology), source=source)
        assert {(p.topic, p.partition): p.offset for p in found.partitions} == dag, source
        assert [(p.source_topic, p.source_offset) for p in found.partitions] == [(TOPIC, 30), (TOPIC, 45)]
        assert [p.lag for p in found.partitions] == [ends[(p.topic, p.partition)] - p.offset for p in found.partitions]
        assert all(p.method == "provenance" and p.flow == FLOW for p in found.partitions)
    close_readers()
    kept = translated_offsets(GROUP, "dc2", ClusterAccess.from_environ(topology))
    assert kept.source == CHECKPOINTS and all(p.checkpoint_ms is not None for p in kept.partitions)
    age = kept.checkpoint_age_s()
    assert age is not None and 0 <= age < 600
    live = translated_offsets(GROUP, "dc2", ClusterAccess.from_environ(topology), source=LIVE)
    assert live.checkpoint_age_s() is None and all(p.checkpoint_ms is None for p in live.partitions)
    assert [(tp.topic, tp.partition, tp.offset) for tp in live.topic_partitions()] == [
        (f"{TOPIC}.replica", 0, LOCAL + 30),
        (f"{TOPIC}.replica", 1, LOCAL + 45),
    ]


def test_the_cli_prints_the_same_offsets_as_a_table_and_as_json(replicated):
    path, _, dag = replicated
    for extra in ([], ["--live"]):
        done = kafka_dr("offsets", GROUP, "--to", "dc2", "--topology", str(path), "--json", *extra)
        assert done.returncode == 0, done.stderr
        printed = json.loads(done.stdout)
        assert {(p["topic"], p["partition"]): p["offset"] for p in printed["partitions"]} == dag
        assert printed["applied"] is None
    table = kafka_dr("offsets", GROUP, "--to", "dc2", "--topology", str(path))
    assert table.returncode == 0, table.stderr
    header, *rows = table.stdout.splitlines()
    assert header.split() == [
        "TOPIC", "PARTITION", "SOURCE-TOPIC", "SOURCE-OFFSET", "OFFSET", "METHOD", "CHECKPOINT", "LAG",
    ]  # fmt: skip
    assert rows[0].split()[:6] == [f"{TOPIC}.replica", "0", TOPIC, "30", str(LOCAL + 30), "provenance"]
    assert rows[2].startswith("oldest checkpoint: ")


def test_bad_input_is_one_line_and_exit_2(replicated):
    path, _, _ = replicated
    for args, expected in (
        (["--to", "dc9"], "unknown cluster 'dc9'"),
        (["--to", "dc1"], "no flow of the topology replicates group"),
        (["--to", "dc2", "--flow", "nope"], "unknown flow 'nope'"),
    ):
        done = kafka_dr("offsets", GROUP, "--topology", str(path), *args)
        assert done.returncode == 2 and done.stdout == "", done
        assert done.stderr.count("\n") == 1 and expected in done.stderr, done.stderr


def test_apply_refuses_while_the_group_has_an_active_member_and_changes_nothing(replicated, broker_pair):
    path, _, dag = replicated
    dc2 = broker_pair.dc2
    member = Consumer({**dc2.config, "group.id": GROUP, "session.timeout.ms": 6000})
    member.subscribe([f"{TOPIC}.replica"])
    deadline = time.monotonic() + 30
    while not member.assignment() and time.monotonic() < deadline:
        member.poll(0.2)
    assert member.assignment(), "the member never joined"
    try:
        refused = kafka_dr("offsets", GROUP, "--to", "dc2", "--topology", str(path), "--apply")
        assert refused.returncode == 1, refused
        assert refused.stderr.count("\n") == 1 and "1 active member(s)" in refused.stderr, refused.stderr
        assert committed_offsets(dc2.config, GROUP) == {}
    finally:
        member.close()
    applied = kafka_dr("offsets", GROUP, "--to", "dc2", "--topology", str(path), "--apply")
    assert applied.returncode == 0, applied.stderr
    assert committed_offsets(dc2.config, GROUP) == dag


def test_an_error_stays_one_line_while_librdkafka_talks_and_verbose_shows_what_it_said(replicated):
    """librdkafka's debug log of dc2's clients (many lines a second) goes through Python logging: dropped by a
    command's plain run, which ends with its one error line, and shown named and timed with --verbose."""
    path, _, _ = replicated
    env = {**os.environ, "KDR_CLUSTER_DC2_CONFIG": json.dumps({"debug": "broker,protocol"})}
    args = ("offsets", "go-nobody", "--to", "dc2", "--topology", str(path))
    quiet = kafka_dr(*args, env=env)
    assert quiet.returncode == 1 and quiet.stdout == "", quiet
    expected = "kafka-dr: error: group go-nobody has no offsets checkpointed in dc2 (no commit in the flows' topics"
    expected += " yet?)"
    assert quiet.stderr == expected + "\n", quiet.stderr
    verbose = kafka_dr(*args, "--verbose", env=env)
    assert verbose.returncode == 1, verbose
    said = [line for line in verbose.stderr.splitlines() if " DEBUG kafka_dr.librdkafka: " in line]
    assert len(said) > 10 and verbose.stderr.endswith(quiet.stderr), verbose.stderr[-3000:]
