"""The replication job end to end on embedded clusters: the Replicator demo topology, a chain with a
cycle, SIGKILL at random moments, and bad input. Jobs that are killed, raced or run continuously are real
spark-submit processes; the others run the job's main in process on the session's Spark (support.spark)."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import (
    Consumer,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewPartitions
from support.kafka import (
    HOUR_MS,
    Record,
    commit_offsets,
    committed_offsets,
    create_topic,
    first_round,
    hourly_records,
    iso,
    partitions,
    produce,
    read_all,
)
from support.servers import FAST_GROUPS, ApacheBroker, BrokerProcess, start_brokers, stop_all
from support.spark import close_cached_clients, run_in_process, submit_in_background, topic_total
from support.topology import write_brokers_topology

from kafka_dr import processes
from kafka_dr.access import ClusterAccess
from kafka_dr.cli import main
from kafka_dr.health import rules
from kafka_dr.health.check import check_flow
from kafka_dr.replication import activity, replicators
from kafka_dr.replication.copier import copy_ranges
from kafka_dr.replication.internal import HEARTBEATS, PROGRESS, latest_value, newest_value, owner_key
from kafka_dr.replication.lag import flow_lag, load_snapshot
from kafka_dr.replication.provenance import HEADER, hops
from kafka_dr.spark.submit import spark_env, spark_submit_command
from kafka_dr.topology import load_topology
from kafka_dr.translation.checkpoints import load_checkpoints

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("spark")]


@pytest.fixture(scope="module")
def clusters(tmp_path_factory) -> Iterator[dict[str, BrokerProcess]]:
    brokers = start_brokers(tmp_path_factory.mktemp("replication"), "dc1", "dc2", "dc3", configs=FAST_GROUPS)
    try:
        yield brokers
    finally:
        close_cached_clients()
        stop_all(brokers.values())


def one_flow(tmp_path: Path, clusters: dict[str, BrokerProcess], flow: str, topics: str) -> Path:
    """A topology with the flow `flow` from dc1 to dc2 of the topics matching the regex `topics`."""
    line = f"  - {{name: {flow}, source: dc1, target: dc2, topics: {{include: ['{topics}']}}}}"
    return write_brokers_topology(tmp_path / f"{flow}.yaml", clusters, line)


def tagged(count: int, partitions: int, tag: str) -> list[Record]:
    """`count` records round-robin over `partitions`, CreateTimes an hour back: every 97th value null, four in five
    with headers, so a copy can be compared field by field."""
    base = int(time.time() * 1000) - 3_600_000
    return [
        Record(
            None if i % 97 == 0 else f"{tag}-{i}".encode(),
            f"k{i}".encode(),
            i % partitions,
            base + i,
            [("origin", tag.encode()), ("seq", str(i).encode())] if i % 5 else None,
        )
        for i in range(count)
    ]


def test_demo_topology_copies_every_record_once_and_never_back(clusters, tmp_path):
    dc1, dc2 = clusters["dc1"], clusters["dc2"]
    for broker in (dc1, dc2):
        create_topic(broker.config, "topic1", 2)
    create_topic(dc1.config, "topic2", 3, **{"retention.ms": "86400000"})
    create_topic(dc1.config, "_schemas", 1, **{"cleanup.policy": "compact"})
    produce(dc1.config, "topic1", tagged(50_000, 2, "dc1"))
    produce(dc1.config, "topic2", tagged(50_000, 3, "dc1"))
    produce(dc2.config, "topic1", tagged(50_000, 2, "dc2"))
    schemas = Producer(dc1.config)
    schemas.produce("_schemas", key=b'{"keytype":"NOOP","magic":0}', value=None)
    assert schemas.flush(10) == 0
    topology = write_brokers_topology(
        tmp_path / "topology.yaml",
        clusters,
        """\
  - name: dc1-to-dc2
    source: dc1
    target: dc2
    topics: {include: ["topic1", "topic2", "_schemas"]}
    rename: {topic2: "{topic}.replica"}
  - name: dc2-to-dc1
    source: dc2
    target: dc1
    topics: {include: ["topic1"]}
""",
    )
    for flow in ("dc1-to-dc2", "dc2-to-dc1", "dc1-to-dc2"):
        code, summary, err = run_in_process(
            "replicate", "--topology", str(topology), "--flow", flow, "--mode", "bounded"
        )
        assert code == 0, err[-3000:]
        assert summary["status"] == "done" and summary["lost"] == 0
    # The second dc1-to-dc2 run resumed after its own copies and refused the 50,000 dc2 records that
    # dc2-to-dc1 had just brought into dc1's topic1: they name (dc2, topic1) already.
    assert summary["records"] == 0 and summary["filtered"] == 50_000

    for flow in ("dc1-to-dc2", "dc2-to-dc1"):
        code, report, err = run_in_process("verify", "--topology", str(topology), "--flow", flow)
        assert code == 0, (report, err[-2000:])
        assert report["missing"] == report["duplicated"] == report["mismatched"] == 0
    assert report["filtered"] == 50_000  # dc2-to-dc1 saw dc1's records in dc2's topic1 and refused them

    dc1_ids = {dc1.cluster_id}
    topic1_dc1 = read_all(dc1.config, "topic1")
    assert len(topic1_dc1) == 100_000
    assert not [m for m in topic1_dc1 if any(h.cluster_id in dc1_ids for h in hops(m.headers()))]
    replica = read_all(dc2.config, "topic2.replica")
    assert len(replica) == 50_000
    assert partitions(AdminClient(dc2.config), "topic2.replica") == 3
    assert len(read_all(dc2.config, "_schemas")) == 1


def test_a_rename_naming_the_source_lands_records_in_source_dot_topic(clusters, tmp_path):
    dc1, dc2 = clusters["dc1"], clusters["dc2"]
    create_topic(dc1.config, "mm2-named", 2)
    produce(dc1.config, "mm2-named", tagged(200, 2, "m"))
    line = "  - {name: mm2-flow, source: dc1, target: dc2, topics: {include: ['mm2-.*']}, "
    topology = write_brokers_topology(tmp_path / "mm2.yaml", clusters, line + "rename: {'.*': '{source}.{topic}'}}")
    code, summary, err = run_in_process("replicate", "--topology", str(topology), "--flow", "mm2-flow")
    assert code == 0, err[-3000:]
    assert summary["records"] == 200
    code, report, err = run_in_process("verify", "--topology", str(topology), "--flow", "mm2-flow")
    assert code == 0, (report, err[-2000:])
    assert report["missing"] == report["duplicated"] == report["mismatched"] == 0
    copies = read_all(dc2.config, "dc1.mm2-named")
    assert len(copies) == 200
    assert {(hop.cluster_id, hop.topic) for m in copies for hop in hops(m.headers())} == {(dc1.cluster_id, "mm2-named")}
    assert "mm2-named" not in AdminClient(dc2.config).list_topics(timeout=10).topics


def test_a_run_with_nothing_left_to_copy_brings_a_group_left_behind_to_its_copies(clusters, tmp_path):
    """A bounded run killed after its last copy and before its group commit leaves the flow's group behind; the run
    resumed after it copies nothing, and still moves the group to where the copies are, or a lag gate reading the
    group (a failback's after its resync) waits for ever."""
    dc1 = clusters["dc1"]
    create_topic(dc1.config, "behind-events", 2)
    produce(dc1.config, "behind-events", tagged(60, 2, "b"))
    topology = one_flow(tmp_path, clusters, "behind-flow", "behind-.*")
    code, summary, err = run_in_process("replicate", "--topology", str(topology), "--flow", "behind-flow")
    assert (code, summary["records"]) == (0, 60), err[-3000:]
    copied = {
        key: offset for key, offset in committed_offsets(dc1.config, "behind-flow").items() if key[0] != HEARTBEATS
    }
    assert copied == {("behind-events", 0): 30, ("behind-events", 1): 30}
    commit_offsets(dc1.config, "behind-flow", {key: 0 for key in copied})  # the commit the killed run never made
    code, summary, err = run_in_process("replicate", "--topology", str(topology), "--flow", "behind-flow")
    assert (code, summary["records"]) == (0, 0), err[-3000:]
    assert {k: v for k, v in committed_offsets(dc1.config, "behind-flow").items() if k in copied} == copied
    assert flow_lag(ClusterAccess.from_environ(load_topology(topology)), "behind-flow").total_records == 0


def test_until_quiet_copies_what_arrives_after_the_start_until_the_source_is_quiet(clusters, tmp_path):
    """A bounded run plans its ends at start; `--until-quiet` (the failback's catch-up after producers moved away)
    copies again what arrived meanwhile, here records written for 2 s after the run began, and ends once the source
    has been quiet for a second."""
    dc1 = clusters["dc1"]
    create_topic(dc1.config, "quieting", 2)
    produce(dc1.config, "quieting", tagged(100, 2, "before"))
    line = "  - {name: quiet-flow, source: dc1, target: dc2, topics: {include: ['quieting']}}"
    topology = str(write_brokers_topology(tmp_path / "quiet.yaml", clusters, line))
    args = ("--topology", topology, "--flow", "quiet-flow")
    assert topic_total(run_in_process("replicate", *args)[1], "quieting") == 100

    def late_writer() -> None:  # a producer that moves away only after the run started
        for i in range(10):
            time.sleep(0.2)
            produce(dc1.config, "quieting", tagged(2, 2, f"late{i}"))

    writer = threading.Thread(target=late_writer)
    writer.start()
    try:
        code, summary, err = run_in_process("replicate", *args, "--until-quiet", "1")
    finally:
        writer.join()
    assert code == 0, err[-3000:]
    assert topic_total(summary, "quieting") == 20, summary  # every late record, none of the first 100 again
    code, report, err = run_in_process("verify", *args)
    assert (code, report["missing"], report["duplicated"]) == (0, 0, 0), (report, err[-2000:])


def test_verify_names_a_missing_a_duplicated_and_changed_copies_and_exits_1(clusters, tmp_path):
    """What every "0 missing, 0 duplicated" of the suite rests on, shown failing: a destination built by hand from
    honest copies, with one left out, one twice and one each with a changed value, header and timestamp."""
    dc1, dc2 = clusters["dc1"], clusters["dc2"]
    create_topic(dc1.config, "audited", 1)
    produce(dc1.config, "audited", tagged(10, 1, "a"))
    line = "  - {{name: {0}, source: dc1, target: dc2, topics: {{include: ['audited']}}, rename: {{'.*': '{1}'}}}}"
    flows = "\n".join([line.format("honest-flow", "{topic}"), line.format("tampered-flow", "{topic}.tampered")])
    topology = str(write_brokers_topology(tmp_path / "audit.yaml", {"dc1": dc1, "dc2": dc2}, flows))
    code, summary, err = run_in_process("replicate", "--topology", topology, "--flow", "honest-flow")
    assert code == 0, err[-3000:]
    code, report, err = run_in_process("verify", "--topology", topology, "--flow", "honest-flow")
    assert (code, report["status"], topic_total(report, "audited", "copied")) == (0, "verified", 10), (
        report,
        err[-2000:],
    )

    tampered = []
    for m in read_all(dc2.config, "audited"):  # the honest copies, provenance header last
        offset, headers, time_ms = hops(m.headers())[-1].offset, m.headers(), m.timestamp()[1]
        if offset == 3:
            continue  # missing
        copies = 2 if offset == 5 else 1  # duplicated
        value = b"changed" if offset == 6 else m.value()
        if offset == 7:
            headers = [("injected", b"x"), *headers]
        time_ms += 1 if offset == 8 else 0
        tampered += [Record(value, m.key(), 0, time_ms, headers)] * copies
    create_topic(dc2.config, "audited.tampered", 1)
    produce(dc2.config, "audited.tampered", tampered)
    report_file = tmp_path / "verify.json"
    code, report, err = run_in_process(
        "verify", "--topology", topology, "--flow", "tampered-flow", "--report", str(report_file)
    )
    assert code == 1, (report, err[-2000:])
    assert report["status"] == "failed" and json.loads(report_file.read_text()) == report
    kinds = ("expected", "copied", "missing", "duplicated", "mismatched")
    audited = next(p for p in report["partitions"] if p["topic"] == "audited")
    assert tuple(audited[k] for k in kinds) == (10, 9, 1, 1, 3), report
    assert audited["examples"] == {"missing": [3], "duplicated": [5], "mismatched": [6, 7, 8]}, report
    # The flow copies `_kdr.heartbeats` too: as many as the module's earlier tests sent (none when it runs first),
    # each copied once and unchanged.
    heartbeats = report["expected"] - 10
    assert tuple(report[k] for k in kinds) == (10 + heartbeats, 9 + heartbeats, 1, 1, 3), report
    assert report["mismatched_fields"] == {"value": 1, "headers": 1, "timestamp": 1}
    assert report["error"] == (
        "1 missing, 1 duplicated, 3 mismatched (value 1, headers 1, timestamp 1) of "
        f"{10 + heartbeats} records, in 1 of {len(report['partitions'])} partitions; "
        "audited.tampered-0: missing [3], duplicated [5], mismatched [6, 7, 8]"
    )


def test_chain_carries_one_provenance_entry_per_hop_and_refuses_the_cycle(clusters, tmp_path):
    a, b, c = clusters["dc1"], clusters["dc2"], clusters["dc3"]
    create_topic(a.config, "chain", 1)
    produce(a.config, "chain", tagged(100, 1, "a"))
    topology = load_topology(
        write_brokers_topology(
            tmp_path / "chain.yaml",
            clusters,
            """\
  - {name: a-to-b, source: dc1, target: dc2, topics: {include: ["chain"]}}
  - {name: b-to-c, source: dc2, target: dc3, topics: {include: ["chain"]}}
  - {name: c-to-a, source: dc3, target: dc1, topics: {include: ["chain"]}}
""",
        )
    )
    results = {}
    for name in ("a-to-b", "b-to-c", "c-to-a"):
        results[name] = copy_ranges(first_round(topology, name).tasks)
    assert sum(r.records for r in results["a-to-b"]) == 100
    assert sum(r.records for r in results["b-to-c"]) == 100
    assert sum(r.records for r in results["c-to-a"]) == 0
    assert sum(r.filtered for r in results["c-to-a"]) == 100
    in_c = read_all(c.config, "chain")
    assert len(in_c) == 100
    chains = [hops(m.headers()) for m in in_c]
    assert all(len(chain) == 2 for chain in chains)
    assert {(chain[0].cluster_id, chain[1].cluster_id) for chain in chains} == {(a.cluster_id, b.cluster_id)}
    assert len(read_all(a.config, "chain")) == 100


@pytest.mark.slow
def test_sigkill_at_random_moments_loses_and_duplicates_nothing(clusters, tmp_path):
    dc1, dc2 = clusters["dc1"], clusters["dc2"]
    create_topic(dc1.config, "killed", 4)
    produced = 100_000
    produce(dc1.config, "killed", tagged(produced, 4, "kill"))
    topology = one_flow(tmp_path, clusters, "kill-flow", "killed")
    args = ["--topology", str(topology), "--flow", "kill-flow", "--mode", "bounded"]
    rng = random.Random(7)
    kills = 0
    copied_before_kill = []
    for attempt in range(12):
        if kills == 6:
            break
        before = end_offsets(dc2, "killed", 4)
        proc = submit_in_background(
            "replicate", *args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
        )
        if kills < 2:
            time.sleep(rng.uniform(3, 15))  # during JVM start-up and planning
        else:
            deadline = time.monotonic() + 120
            while end_offsets(dc2, "killed", 4) == before and time.monotonic() < deadline and proc.poll() is None:
                time.sleep(0.1)
            time.sleep(rng.uniform(0, 0.4))  # while records are being copied
        if proc.poll() is not None:
            # The copy finished before the kill: give the next replicator more to copy, so a fast
            # machine still sees six kills instead of ending the test with fewer.
            produce(dc1.config, "killed", tagged(50_000, 4, f"more{attempt}"))
            produced += 50_000
            continue
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        kills += 1
        copied_before_kill.append(end_offsets(dc2, "killed", 4))
    code, summary, err = run_in_process("replicate", *args)
    assert code == 0, err[-3000:]
    code, report, err = run_in_process("verify", "--topology", str(topology), "--flow", "kill-flow")
    assert code == 0, (report, err[-2000:])
    assert (report["missing"], report["duplicated"], report["mismatched"]) == (0, 0, 0), report
    assert (topic_total(report, "killed", "expected"), topic_total(report, "killed", "copied")) == (produced, produced)
    copies = read_all(dc2.config, "killed")  # what a consumer of dc2 reads, not only verify's count
    assert len(copies) == produced == len({(m.partition(), hops(m.headers())[-1].offset) for m in copies})
    assert kills == 6, f"only {kills} kills landed before the copy finished"
    assert any(0 < n < produced for n in copied_before_kill), copied_before_kill  # some kills hit mid-copy


def end_offsets(broker: BrokerProcess, topic: str, partitions: int) -> int:
    """Sum of a topic's high watermarks: how many records (committed or not) a never-truncated topic holds."""
    consumer = Consumer({**broker.config, "group.id": "count", "isolation.level": "read_uncommitted"})
    try:
        return sum(consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(partitions))
    except KafkaException:  # the destination topic does not exist yet
        return 0
    finally:
        consumer.close()


def test_bad_inputs_fail_with_one_clear_line(clusters, tmp_path):
    dc1, dc2 = clusters["dc1"], clusters["dc2"]
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "clusters: {dc1: {bootstrap_servers: '127.0.0.1:1'}}\n"
        "flows:\n  - {name: x, source: dc1, target: dc9, topics: {include: ['t']}}\n"
    )
    for job in ("replicate", "verify"):
        code, summary, err = run_in_process(job, "--topology", str(bad), "--flow", "x")
        assert code == 2 and "flows[0].target: unknown cluster 'dc9'" in summary["error"], job

    dead = {"dc1": ApacheBroker("dead", tmp_path / "dead"), "dc2": dc2}  # never started
    topology = one_flow(tmp_path, dead, "dead-flow", "t")
    code, summary, err = run_in_process(
        "replicate", "--topology", str(topology), "--flow", "dead-flow", "--retries", "1"
    )  # one 10 s attempt: the back-off between attempts is unit-tested (tests/unit/replication/test_flow_clients.py)
    assert code == 1 and summary["status"] == "failed"
    assert "source cluster dc1" in summary["error"] and "unreachable after 1 attempt" in summary["error"]

    create_topic(dc1.config, "narrow", 4)
    create_topic(dc2.config, "narrow", 2)  # made by someone else, with fewer partitions than its source
    produce(dc1.config, "narrow", tagged(10, 4, "n"))
    topology = one_flow(tmp_path, {"dc1": dc1, "dc2": dc2}, "narrow-flow", "narrow")
    code, summary, err = run_in_process("replicate", "--topology", str(topology), "--flow", "narrow-flow")
    assert code == 2 and "fewer" in summary["error"], summary
    assert AdminClient(dc2.config).list_topics(timeout=10).topics["narrow"].partitions.keys() == {0, 1}


def test_records_deleted_before_they_were_copied_are_reported_lost(clusters, tmp_path):
    dc1, dc2 = clusters["dc1"], clusters["dc2"]
    create_topic(dc1.config, "expiring", 1)
    produce(dc1.config, "expiring", tagged(1000, 1, "e"))
    topology = one_flow(tmp_path, {"dc1": dc1, "dc2": dc2}, "lost-flow", "expiring")
    flow_topology = load_topology(topology)
    first = next(t for t in first_round(flow_topology, "lost-flow").tasks if t.topic == "expiring")
    copy_ranges([dataclasses.replace(first, end=400)])  # the replicator copied 400 records...
    # ...then the source dropped offsets below 700 (as retention does) before the replicator came back.
    admin = AdminClient(dc1.config)  # held: a dropped client abandons its futures
    for future in admin.delete_records([TopicPartition("expiring", 0, 700)]).values():
        future.result(10)
    code, summary, err = run_in_process("replicate", "--topology", str(topology), "--flow", "lost-flow")
    assert code == 0, err[-2000:]
    assert summary["lost"] == 300 and summary["lost_ranges"][0]["from_offset"] == 400
    assert summary["records"] == 300


def test_source_partition_increase_is_propagated(clusters, tmp_path):
    dc1, dc2 = clusters["dc1"], clusters["dc2"]
    create_topic(dc1.config, "growing", 1)
    produce(dc1.config, "growing", tagged(10, 1, "g"))
    topology = load_topology(one_flow(tmp_path, {"dc1": dc1, "dc2": dc2}, "grow-flow", "growing"))

    def replicate_once() -> None:
        copy_ranges(first_round(topology, "grow-flow").tasks)

    replicate_once()
    admin = AdminClient(dc1.config)
    admin.create_partitions([NewPartitions("growing", 3)])["growing"].result(10)
    produce(dc1.config, "growing", tagged(30, 3, "g2"))
    replicate_once()
    assert partitions(AdminClient(dc2.config), "growing") == 3
    copies = read_all(dc2.config, "growing")
    assert len(copies) == 40 and all(HEADER in dict(m.headers() or []) for m in copies)


def test_continuous_picks_up_new_topics_and_stops_cleanly(clusters, tmp_path, monkeypatch, capsys):
    dc1, dc2 = clusters["dc1"], clusters["dc2"]
    monkeypatch.setenv("KDR_STATE_DIR", str(tmp_path / "state"))
    create_topic(dc1.config, "live.a", 2)
    produce(dc1.config, "live.a", tagged(100, 2, "a1"))
    topology = one_flow(tmp_path, {"dc1": dc1, "dc2": dc2}, "live-flow", "live[.].*")
    # Checked per partition: a coordinator still loading answers NOT_COORDINATOR inside a successful result.
    commit_offsets(dc1.config, "live-reader", {("live.a", 0): 10})
    replicator, started = replicators.start("live-flow", live_replicator_command(topology), env=spark_env())
    assert started
    try:
        wait_for_copies(dc2, "live.a", 100, timeout=180)  # JVM and Spark start-up
        create_topic(dc1.config, "live.b", 3)
        created = time.monotonic()
        produce(dc1.config, "live.b", tagged(50, 3, "b"))
        wait_for_copies(dc2, "live.b", 50, timeout=30)
        print(f"new topic copied {time.monotonic() - created:.1f}s after it was created")
        produce(dc1.config, "live.a", tagged(100, 2, "a2"))  # while the job runs
        wait_for_copies(dc2, "live.a", 200, timeout=30)
        deadline = time.monotonic() + 30
        while "live-reader" not in load_checkpoints(dc2.config, "live-flow")[0]:  # the pass at start
            assert time.monotonic() < deadline, "no group-offset checkpoint within 30 s"
            time.sleep(1)
        # Taken as the run began: offset 10 translated against what dc2 held then (at most its 10 first copies).
        [checkpoint] = load_checkpoints(dc2.config, "live-flow")[0]["live-reader"]
        assert (checkpoint.topic, checkpoint.partition, checkpoint.source_offset) == ("live.a", 0, 10), checkpoint
        assert checkpoint.dest_offset <= 10
        commit_offsets(dc1.config, "live-reader", {("live.a", 0): 60})
        assert_stalled_then_resumed(replicator.pid, dc1, dc2, topology, monkeypatch, capsys)
        # From another PID namespace (a container, a Celery worker's): the tracker's pid means nothing there, the
        # target answers, and the stop travels through it.
        listed = in_another_pid_namespace("replicators", "list", "live-flow", "--topology", str(topology))
        assert listed.startswith("live-flow: running: claims it in its target (") and "pid" in listed, listed
        stopping = time.monotonic()
        assert in_another_pid_namespace("replicators", "stop", "live-flow", "--topology", str(topology)) == (
            "live-flow: stopped"
        )
        print(f"stopped {time.monotonic() - stopping:.1f}s after the request, in an epoch of 120 s")
        assert not processes.wait_gone(processes.tree(replicator.pid), 30), "the job ends: no process of it is left"
    finally:
        final = replicators.stop("live-flow")  # a no-op unless the stop above failed
    assert final is not None and not final.running and final.stopped_at is not None
    assert_ended_on_request(dc2, Path(replicator.log))


def live_replicator_command(topology: Path) -> list[str]:
    """A continuous replicator of live-flow: discovery every 5 s, a checkpoint pass at start and at the stop only."""
    return spark_submit_command(
        "replicate",
        [
            "--topology",
            str(topology),
            "--flow",
            "live-flow",
            "--mode",
            "continuous",
            "--discover-interval",
            "5",
            "--checkpoint-interval",
            "600",  # the pass at start and the last one at the stop only
            # Longer than every wait in the test: a new topic is copied because discovery ends the epoch early, and
            # the stop ends within replicators.stop's 30 s (else SIGKILL, and no summary) because it does not wait
            # for the epoch's deadline.
            "--epoch",
            "120",
        ],
    )


def assert_ended_on_request(dc2: BrokerProcess, log: Path) -> None:
    """The stopped replicator recorded why it ended, took its last checkpoint pass, left no lag, and its summary
    counts every record it copied, each origin copied once."""
    ended = json.loads(latest_value(dc2.config, PROGRESS, owner_key("live-flow")) or b"{}")
    assert ended["reason"].startswith("stop request from ") and ended["request"], ended
    # The last pass, after the last epoch: the group's latest offset, and no lag left.
    [checkpoint] = load_checkpoints(dc2.config, "live-flow")[0]["live-reader"]
    assert (checkpoint.topic, checkpoint.partition, checkpoint.source_offset) == ("live.a", 0, 60), checkpoint
    assert checkpoint.dest_offset >= 60  # past the copy of source offset 59 (transaction markers in between)
    snapshot = load_snapshot(dc2.config, "live-flow")
    assert snapshot is not None and snapshot.total_records == 0, snapshot
    summary = json.loads([line for line in log.read_text().splitlines() if line.startswith("{")][-1])
    assert summary["status"] == "done", summary  # SIGTERM ends the epoch at once and the run, with a summary
    copied = {p["topic"]: 0 for p in summary["partitions"]}
    for p in summary["partitions"]:
        copied[p["topic"]] += p["records"]
    assert copied["live.a"] == 200 + STALLED_RECORDS and copied["live.b"] == 50
    for topic, count in (("live.a", 200 + STALLED_RECORDS), ("live.b", 50)):
        copies = read_all(dc2.config, topic)
        assert len(copies) == count
        assert len({(m.partition(), hops(m.headers())[-1].offset) for m in copies}) == count  # each origin once


STALLED_RECORDS = 30  # written to live.a while the replicator's Python workers are stopped


def assert_stalled_then_resumed(
    pid: int,
    dc1: BrokerProcess,
    dc2: BrokerProcess,
    topology: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A replicator stalled on purpose: its Spark Python workers stopped (SIGSTOP) while its driver runs and renews
    its claim, and records arrive. The health check names it STALLED (the rules' wait for a partition without
    progress shortened from 60 s to 3 s), `replicators list` says so and exits 1; SIGCONT, and every record is
    copied (the test's later counts)."""
    workers = [p for p in processes.tree(pid) if "daemon" in " ".join(processes.cmdline(p))]
    assert workers, [" ".join(processes.cmdline(p))[:120] for p in processes.tree(pid)]
    monkeypatch.setattr(rules, "STOP_MIN_MS", 3_000)
    for worker in workers:
        os.kill(worker, signal.SIGSTOP)
    try:
        produce(dc1.config, "live.a", tagged(STALLED_RECORDS, 2, "stalled"))
        time.sleep(5)
        health = check_flow(ClusterAccess.from_environ(load_topology(topology)), "live-flow")
        assert health.stalled_seconds is not None and health.stalled_seconds >= 3, health
        assert health.problems[0].startswith("STALLED for "), health.problems
        capsys.readouterr()
        assert main(["replicators", "list", "live-flow", "--topology", str(topology)]) == 1
        listed = capsys.readouterr().out
        assert listed.startswith("live-flow: running, STALLED for ") and "at the last health run" in listed, listed
    finally:
        for worker in workers:
            with contextlib.suppress(ProcessLookupError):
                os.kill(worker, signal.SIGCONT)
    wait_for_copies(dc2, "live.a", 200 + STALLED_RECORDS, timeout=60)
    # A health run finds it moving again. Not always the first one: Apache Kafka writes a transaction's markers
    # into each of its partitions on its own, so the copies can be readable a moment before their progress record
    # in `_kdr.progress` (CI, 2026-11-28: one run 1.7 s after the copies still found none).
    deadline = time.monotonic() + 30
    while (
        stalled := check_flow(ClusterAccess.from_environ(load_topology(topology)), "live-flow").stalled_seconds
    ) is not None:
        assert time.monotonic() < deadline, f"still STALLED ({stalled:.0f}s) 30 s after every record was copied"
        time.sleep(1)


OUTAGE_S = 10.0


def test_a_continuous_replicator_copies_every_record_once_through_a_target_and_then_a_source_outage(
    clusters, tmp_path, monkeypatch
):
    """A continuous replicator on a 3-partition topic while an idempotent producer writes 30,000 records about 1 ms
    apart into dc1: dc2 is killed for 10 s and started again, then dc1 likewise. Every record the producer had
    acknowledged is in dc2 once, read from dc2 itself, and verify agrees."""
    dc1, dc2 = clusters["dc1"], clusters["dc2"]
    monkeypatch.setenv("KDR_STATE_DIR", str(tmp_path / "state"))
    topic, total = "outage", 30_000
    create_topic(dc1.config, topic, 3)
    create_topic(dc1.config, "outage.warmup", 1)
    produce(dc1.config, "outage.warmup", [Record(b"first")])
    topology = one_flow(tmp_path, clusters, "outage-flow", "outage.*")
    args = ["--topology", str(topology), "--flow", "outage-flow", "--mode", "continuous"]
    command = spark_submit_command("replicate", args)
    replicator, started = replicators.start("outage-flow", command, env=spark_env())
    assert started
    acknowledged: list[int] = []
    errors: list[str] = []

    def write() -> None:
        producer = Producer({**dc1.config, "enable.idempotence": True, "linger.ms": 5, "message.timeout.ms": 120_000})

        def delivered(err, msg) -> None:  # noqa: ANN001 - confluent-kafka's callback
            (errors.append(str(err)) if err else acknowledged.append(int(msg.value())))

        for i in range(total):
            producer.produce(topic, str(i).encode(), partition=i % 3, on_delivery=delivered)
            producer.poll(0)
            time.sleep(0.001)
        producer.flush(150)

    try:
        wait_for_copies(dc2, "outage.warmup", 1, timeout=180)  # the job copies (JVM and Spark start-up)
        writer = threading.Thread(target=write, daemon=True)
        writer.start()
        for broker in (dc2, dc1):  # the target's outage, then the source's
            time.sleep(6)
            broker.kill()
            time.sleep(OUTAGE_S)
            broker.start()
        writer.join(240)
        assert not writer.is_alive() and not errors, errors[:3]
        assert sorted(acknowledged) == list(range(total))
        wait_for_copies(dc2, topic, total, timeout=120)
    finally:
        final = replicators.stop("outage-flow")
        for broker in (dc1, dc2):
            if not broker.running():
                broker.start()
    assert final is not None and not final.running, final
    copies = read_all(dc2.config, topic)
    origins = [(m.partition(), hops(m.headers())[-1].offset) for m in copies]
    assert len(copies) == total and len(set(origins)) == total, (len(copies), len(set(origins)))
    assert sorted(int(m.value()) for m in copies) == list(range(total))
    code, report, err = run_in_process("verify", "--topology", str(topology), "--flow", "outage-flow")
    assert code == 0 and (report["missing"], report["duplicated"]) == (0, 0), (report, err[-2000:])


def in_another_pid_namespace(*args: str) -> str:
    """`kafka-dr ARGS` run in a PID namespace of its own (`unshare`, as root): what it printed."""
    command = ["unshare", "--pid", "--fork", "--mount-proc", str(Path(sys.executable).parent / "kafka-dr"), *args]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr[-3000:]}"
    return done.stdout.strip()


def wait_for_copies(broker: BrokerProcess, topic: str, count: int, timeout: float) -> None:
    """Wait until `count` records are readable (committed) in `topic`: offsets would also count transaction markers."""
    deadline = time.monotonic() + timeout
    while True:
        topics = AdminClient(broker.config).list_topics(timeout=10).topics
        total = len(read_all(broker.config, topic)) if topic in topics else 0
        if total >= count:
            return
        assert time.monotonic() < deadline, f"{topic}: {total} of {count} copies after {timeout:g}s"
        time.sleep(0.5)


def test_two_replicators_of_one_flow_raced_on_purpose_copy_each_record_once(clusters, tmp_path, monkeypatch):
    """A replicator started without this host's tracker (as on another host) and a second one started through
    it: the second fences the first out as it starts writing, the first stops by itself, and verify finds every
    record exactly once."""
    dc1, dc2 = clusters["dc1"], clusters["dc2"]
    monkeypatch.setenv("KDR_STATE_DIR", str(tmp_path / "state"))
    create_topic(dc1.config, "raced", 4)
    produce(dc1.config, "raced", tagged(20_000, 4, "r1"))
    topology = one_flow(tmp_path, clusters, "race-flow", "raced")
    window = activity.WINDOW_S
    command = spark_submit_command(
        "replicate",
        ["--topology", str(topology), "--flow", "race-flow", "--mode", "continuous", "--checkpoint-interval", "0"],
    )
    other_host = subprocess.Popen(
        command, env=spark_env(), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, start_new_session=True
    )  # not through the tracker
    try:
        wait_for_copies(dc2, "raced", 1, timeout=180)  # the first one copies
        first_claim = latest_value(dc2.config, PROGRESS, owner_key("race-flow"))  # written at each of its epochs
        assert not replicators.is_running("race-flow")  # this host's tracker cannot see it...
        replicators.start("race-flow", command, env=spark_env())  # ...so a second one starts
        produce(dc1.config, "raced", tagged(20_000, 4, "r2"))  # while both run
        first_pid = json.loads(first_claim)["pid"]
        deadline = time.monotonic() + 180
        while json.loads(newest_value(dc2.config, PROGRESS, owner_key("race-flow")))["pid"] == first_pid:
            assert replicators.is_running("race-flow"), replicators.last_error("race-flow")
            assert time.monotonic() < deadline, "the second replicator did not claim the flow within 180 s"
            time.sleep(0.5)
        try:  # claimed: the first is fenced at its next claim renewal (every second) or transaction
            out, _ = other_host.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            pytest.fail("the first replicator still ran 60 s after the second claimed the flow: it was not fenced")
        summary = json.loads([line for line in out.splitlines() if line.startswith("{")][-1])
        assert other_host.returncode == 1, summary
        assert "fenced out of dc2 by a newer replicator of this flow" in summary["error"]
        deadline = time.monotonic() + 120
        # Caught up, and running epochs (its own claim written): the first may have copied everything before it was
        # fenced, while the second was still starting Spark, which no window of `activity` can see.
        while (
            flow_lag(ClusterAccess.from_environ(load_topology(topology)), "race-flow").total_records
            or latest_value(dc2.config, PROGRESS, owner_key("race-flow")) == first_claim
        ):
            assert replicators.is_running("race-flow"), replicators.last_error("race-flow")
            assert time.monotonic() < deadline, "the second replicator did not catch up within 120 s"
            time.sleep(1)
        assert activity.watch(dc2.config, ["race-flow"], window)["race-flow"].records > 0, "an idle one is seen too"
    finally:
        if other_host.poll() is None:
            os.killpg(other_host.pid, signal.SIGKILL)
            other_host.wait()
        final = replicators.stop("race-flow")
    assert final is not None and not final.running
    assert activity.watch(dc2.config, ["race-flow"], window)["race-flow"].records == 0, "stopped: nothing copies"
    code, report, err = run_in_process("verify", "--topology", str(topology), "--flow", "race-flow")
    assert code == 0, (report, err[-2000:])
    assert (report["missing"], report["duplicated"], report["mismatched"]) == (0, 0, 0), report
    assert report["copied"] == report["expected"] >= 40_000  # and the heartbeats both replicators sent


@pytest.mark.parametrize("start", ["latest", "time"])
def test_a_new_flow_begins_at_its_start_and_topics_found_later_at_earliest(clusters, tmp_path, start):
    """`start: latest` or an ISO time applies once, to a flow with no progress: the next run resumes where the first
    left off, and a topic created after the first run is copied from its first record."""
    dc1, dc2 = clusters["dc1"], clusters["dc2"]
    topic, later = f"start-{start}", f"start-{start}-later"
    create_topic(dc1.config, topic, 2)
    hour1 = hourly_records(dc1.config, topic, 50)  # three hours, 50 records each
    moment = "latest" if start == "latest" else iso(hour1 + HOUR_MS)
    flow = f"start-{start}-flow"
    line = f"  - {{name: {flow}, source: dc1, target: dc2, topics: {{include: ['{topic}.*']}}, start: '{moment}'}}"
    topology = write_brokers_topology(tmp_path / "start.yaml", {"dc1": dc1, "dc2": dc2}, line)
    code, first, err = run_in_process("replicate", "--topology", str(topology), "--flow", flow)
    assert code == 0, err[-2000:]
    expected = 0 if start == "latest" else 100  # latest: none of the history; the time: hours 2 and 3
    assert topic_total(first, topic) == expected, first  # a heartbeat this run sent after planning may be copied too
    produce(dc1.config, topic, tagged(10, 2, "new"))
    create_topic(dc1.config, later, 1)
    produce(dc1.config, later, tagged(7, 1, "later"))
    code, second, err = run_in_process("replicate", "--topology", str(topology), "--flow", flow)
    assert code == 0, err[-2000:]
    copied = {name: topic_total(second, name) for name in (topic, later)}
    assert copied == {topic: 10, later: 7}  # the new records only; the later topic from its first record
    assert len(read_all(dc2.config, topic)) == expected + 10
