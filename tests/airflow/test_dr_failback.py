"""dr_failback with dag.test() on an embedded stack of its own: the white paper's disaster (seed 004) followed by a
failback that measures exactly what never left dc1 and, with `unreplicated=report`, stops before anything changes,
then a dry run and `republish` (rejected at its approval, then approved); seed 001, a lost cluster restored with
`data_lost`; `discard`; bad params that fail at the first task with nothing changed. Round trips in a row, on the
real scheduler, are tests/e2e/test_local_executor.py's."""

from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path
from typing import Any

import pytest
from airflow.utils.state import DagRunState, TaskInstanceState
from support.airflow import answered
from support.drills import (
    committed,
    copy_flow,
    fail_back,
    fail_over,
    high_watermarks,
    produce,
    read_and_commit,
    run_job,
    send,
    states_of,
    values_of,
    write_topology,
)
from support.kafka import commit_offsets, create_topic, first_round
from support.topology import write_topology as write_clusters_topology

from kafka_dr import client_switch, roles
from kafka_dr.replication import replicators
from kafka_dr.replication.copier import close_clients, copy_ranges
from kafka_dr.topology import load_topology
from kafka_dr_dev.local.stack import LocalStack

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.usefixtures("jobs_in_process")]


def test_bad_params_fail_at_the_first_task_and_change_nothing(dags, own_stack, state, tmp_path):
    topology = write_topology(own_stack, tmp_path / "t.yaml", "untouched", registry=False)
    before = (high_watermarks(own_stack.config.dc("dc1").broker_address), client_switch.history())
    # One bad param shows the wiring (each param's refusal is tests/unit/failback/test_plan.py's), then an unreachable
    # restored cluster.
    run = fail_back(dags, topology, serving_cluster="dc1")
    states = states_of(run)
    assert run.state == DagRunState.FAILED and states["validate_failback"] == TaskInstanceState.FAILED, states
    assert all(s != TaskInstanceState.SUCCESS for s in states.values()), states
    own_stack.stop("dc1")
    try:
        run = fail_back(dags, topology)
        assert states_of(run)["validate_failback"] == TaskInstanceState.FAILED
    finally:
        own_stack.start("dc1")
    assert (high_watermarks(own_stack.config.dc("dc1").broker_address), client_switch.history()) == before
    assert not (state / "reports").exists() or not list((state / "reports").glob("dr_failback-*"))


def test_white_paper_failback_report_dry_run_then_republish(dags, own_stack, state, tmp_path, capfd):
    """10,000 records in dc1, 9,998 replicated, a disaster failover to dc2, 500 records produced in dc2 and a group
    reading there, dc1 back with its data: `report` stops with exactly 2 records (dc1 offsets 9,998-9,999), the
    failover report gains the exact figure beside its estimate, and nothing changed; a dry run does the same and
    succeeds; `republish` then ends with the group back in dc1 having read each of the 10,500 records once overall
    and dc1 holding the 500."""
    dc1, dc2 = own_stack.config.dc("dc1"), own_stack.config.dc("dc2")
    topology = write_topology(own_stack, tmp_path / "t.yaml", "orders", registry=False)
    white_paper_disaster_and_return(dags, own_stack, topology)
    before = observed(own_stack)

    run = fail_back(dags, topology)

    assert_reported_what_never_left(run, state, capfd)
    assert observed(own_stack) == before

    dry = fail_back(dags, topology, unreplicated="republish", dry_run=True)
    assert dry.state == DagRunState.SUCCESS, states_of(dry)
    assert len(list((state / "reports").glob("dr_failback-*.json"))) == 2
    assert observed(own_stack) == before

    # Seed 004 to the end: the group reads on in dc2 (the rest of the copies and the 500 new records), then
    # `republish`, with an approval asked (dr.approval: required): bob rejects the first run at `approve`, after
    # its report, and nothing changes; he approves the second: dc1 gets the 500, the 2 records that never left are
    # read once by the group back in dc1, clients are home, and the flow out of dc1 runs again.
    read_in_dc2 = read_and_commit(dc2.broker_address, "billing", "orders")
    write_topology(own_stack, topology, "orders", registry=False, dr="{approval: required}")
    before = observed(own_stack)
    rejected = answered("dr_failback", "Reject", "bob", lambda: fail_back(dags, topology, unreplicated="republish"))
    states = states_of(rejected)
    assert rejected.state == DagRunState.FAILED and states["approve"] == TaskInstanceState.FAILED, states
    assert states["prepare_switch_back"] == TaskInstanceState.UPSTREAM_FAILED, states
    assert "rejected by bob: nothing changed" in capfd.readouterr().out
    assert observed(own_stack) == before
    try:
        run = answered("dr_failback", "Approve", "bob", lambda: fail_back(dags, topology, unreplicated="republish"))
        states = states_of(run)
        assert run.state == DagRunState.SUCCESS, states
        read_in_dc1 = read_and_commit(dc1.broker_address, "billing", "orders")
        overall = [f"order {i}".encode() for i in range(8_000)] + read_in_dc2 + read_in_dc1
        assert sorted(overall) == sorted(f"order {i}".encode() for i in range(10_500))  # each once, none lost
        assert read_in_dc1 == [b"order 9998", b"order 9999"]
        report = json.loads(sorted((state / "reports").glob("dr_failback-*.json"))[-1].read_text())
        assert report["unreplicated"]["records"] == 2 and report["unreplicated"]["republished"] == 2
        assert report["resynced"]["records"] == 500 and report["rto_seconds"] > 0
        assert (report["triggered_by"], report["approved_by"]) == ("dag_test", "bob")
        assert report["rto_seconds"] == round(report["rto_with_approval_seconds"] - report["approval_wait_seconds"], 3)
        assert {s.alias: s.active for s in client_switch.states(load_topology(topology))} == {
            "orders-producer": "dc1",
            "billing": "dc1",
        }
        assert replicators.is_running("wp-dc1-to-dc2")
    finally:
        replicators.stop("wp-dc1-to-dc2")


def white_paper_disaster_and_return(dags: dict[str, Any], own_stack: LocalStack, topology: Path) -> None:
    """Seed 004 up to dc1's return: 10,000 records in dc1, 9,998 replicated, the group's checkpoint at 8,000, a
    disaster failover to dc2, 500 records produced in dc2, dc1 back with its data."""
    dc1, dc2 = own_stack.config.dc("dc1"), own_stack.config.dc("dc2")
    create_topic({"bootstrap.servers": dc1.broker_address}, "orders")
    produce(dc1.broker_address, "orders", 0, 9_998)
    copy_flow(load_topology(topology), "wp-dc1-to-dc2")
    produce(dc1.broker_address, "orders", 9_998, 2)  # never replicated
    commit_offsets({"bootstrap.servers": dc1.broker_address}, "billing", {("orders", 0): 8_000})
    run_job("translate_offsets", "--topology", str(topology), "--flow", "wp-dc1-to-dc2")
    own_stack.stop("dc1")  # the disaster
    assert fail_over(dags, topology, "disaster", groups="billing").state == DagRunState.SUCCESS
    produce(dc2.broker_address, "orders", 10_000, 500)  # the business goes on in dc2
    own_stack.start("dc1")  # back, with its data


def observed(own_stack: LocalStack) -> tuple[Any, ...]:
    """What `report` and a dry run must leave as it was: both clusters' ends, the group, the aliases."""
    dc1, dc2 = own_stack.config.dc("dc1"), own_stack.config.dc("dc2")
    return (
        high_watermarks(dc1.broker_address),
        high_watermarks(dc2.broker_address),
        committed(dc1.broker_address, "billing"),
        committed(dc2.broker_address, "billing"),
        client_switch.history(),
    )


def assert_reported_what_never_left(run: Any, state: Path, capfd: pytest.CaptureFixture[str]) -> None:
    """`unreplicated=report`: the run stops at `decide` with the 2 records dc1 offsets 9,998-9,999 in its report, and
    the failover report gains the exact figure beside its estimate."""
    states = states_of(run)
    assert run.state == DagRunState.FAILED and states["decide"] == TaskInstanceState.FAILED, states
    assert "AirflowFailException: 2 records never left dc1 (orders 2; ranges in " in "".join(capfd.readouterr())
    report = json.loads(next((state / "reports").glob("dr_failback-*.json")).read_text())
    assert report["unreplicated"]["records"] == 2 and report["unreplicated"]["per_topic"] == {"orders": 2}
    assert [(r["topic"], r["from_offset"], r["to_offset"]) for r in report["unreplicated"]["ranges"]] == [
        ("orders", 9_998, 9_999)
    ]
    assert report["unreplicated"]["action"] == "report" and report["rto_seconds"] is None
    failover_file = next((state / "reports").glob("dr_failover-*.json"))
    failover = json.loads(failover_file.read_text())
    assert failover["rpo"]["records"] == 2 and failover["rpo"]["exact"] is False  # the estimate stays
    assert failover["rpo"]["exact_after_failback"] == {
        "records": 2,
        "per_topic": {"orders": 2},
        "failback_run": report["run_id"],
    }
    assert "exact RPO measured by failback" in failover_file.with_suffix(".md").read_text()


def test_discard_leaves_the_records_that_never_left_unread_and_listed_and_the_flow_copies_what_comes_after(
    dags, own_stack, state, tmp_path
):
    """dc1 comes back with 2 records dc2 never got; `discard` lists them in the report, leaves them where they are,
    and the flow out of dc1, resumed, copies the next new record and never those 2."""
    dc1, dc2 = own_stack.config.dc("dc1"), own_stack.config.dc("dc2")
    topology = write_topology(own_stack, tmp_path / "t.yaml", "refunds", registry=False)
    create_topic({"bootstrap.servers": dc1.broker_address}, "refunds")
    send(dc1.broker_address, "refunds", [f"refund {i}" for i in range(100)])
    loaded = load_topology(topology)
    tasks = first_round(loaded, "wp-dc1-to-dc2").tasks
    copy_ranges([t if t.topic != "refunds" else dataclasses.replace(t, end=98) for t in tasks])
    close_clients()
    try:
        run = fail_back(dags, topology, unreplicated="discard")
        assert run.state == DagRunState.SUCCESS, states_of(run)
        report = json.loads(sorted((state / "reports").glob("dr_failback-*.json"))[-1].read_text())
        assert report["unreplicated"]["action"] == "discard" and report["unreplicated"]["records"] == 2
        assert [(r["from_offset"], r["to_offset"]) for r in report["unreplicated"]["ranges"]] == [(98, 99)]
        assert report["unreplicated"]["flows_moved"] == {"wp-dc1-to-dc2 refunds[0]": 100}
        send(dc1.broker_address, "refunds", ["refund after"])
        deadline = time.monotonic() + 90
        while b"refund after" not in values_of(dc2.broker_address, "refunds") and time.monotonic() < deadline:
            time.sleep(1)
        assert values_of(dc2.broker_address, "refunds") == [f"refund {i}".encode() for i in range(98)] + [
            b"refund after"
        ]
        assert values_of(dc1.broker_address, "refunds")[98:100] == [b"refund 98", b"refund 99"]  # nothing deleted
    finally:
        replicators.stop("wp-dc1-to-dc2")


def test_seed_001_a_lost_cluster_comes_back_with_every_record_once_and_both_flows_run_again(
    dags, own_stack, state, tmp_path
):
    """Active-active topic1 plus a dc2-only topic; dc2 lost (wiped), its consumers failed over to dc1, dc2 started
    empty with a new cluster id; `data_lost` failback restores every record of both origins into dc2 once, dc2's group
    resumes where it was, both flows run again, and a new record on either side arrives once on the other and never
    returns."""
    dc1, dc2 = own_stack.config.dc("dc1"), own_stack.config.dc("dc2")
    path = active_active_topology(own_stack, tmp_path / "aa.yaml")
    topology = load_topology(path)
    for config, topics in ((dc1, ["topic1"]), (dc2, ["topic1", "dc2-only"])):
        for topic in topics:
            create_topic({"bootstrap.servers": config.broker_address}, topic)
    send(dc1.broker_address, "topic1", [f"dc1-{i}" for i in range(100)])
    send(dc2.broker_address, "topic1", [f"dc2-{i}" for i in range(100)])
    send(dc2.broker_address, "dc2-only", [f"only-{i}" for i in range(50)])
    for flow in ("aa-dc1-to-dc2", "aa-dc2-to-dc1"):
        copy_flow(topology, flow)
    read_before = read_and_commit(dc2.broker_address, "app2", "topic1")  # app2 read everything in dc2
    run_job("translate_offsets", "--topology", str(path), "--flow", "aa-dc2-to-dc1")  # checkpoints in dc1
    own_stack.wipe("dc2")  # the loss
    failover = dags["dr_failover"].test(
        run_conf={
            "topology": str(path),
            "failed_cluster": "dc2",
            "target_cluster": "dc1",
            "mode": "disaster",
            "groups": "app2",
            "reset_to_datetime": None,
        }
    )
    assert failover.state == DagRunState.SUCCESS, states_of(failover)
    (away,) = roles.pending().values()  # the known state the DR page, status, metrics and health runs read
    assert (away.away, away.serving, away.mode, away.run_id) == ("dc2", "dc1", "disaster", failover.run_id)
    send(dc1.broker_address, "topic1", [f"dc1-late-{i}" for i in range(10)])  # while dc2 is away
    read_in_dc1 = read_and_commit(dc1.broker_address, "app2", "topic1", limit=5)  # app2 goes on in dc1
    both = [f"dc1-{i}" for i in range(100)] + [f"dc2-{i}" for i in range(100)]
    assert sorted(read_before) == sorted(v.encode() for v in both)
    assert read_in_dc1 == [f"dc1-late-{i}".encode() for i in range(5)]
    own_stack.start("dc2")  # empty, with a new cluster id

    try:
        run = fail_back(dags, path, restored_cluster="dc2", serving_cluster="dc1", mode="data_lost")
        assert run.state == DagRunState.SUCCESS, states_of(run)
        every = (
            [f"dc1-{i}" for i in range(100)] + [f"dc2-{i}" for i in range(100)] + [f"dc1-late-{i}" for i in range(10)]
        )
        assert sorted(values_of(dc2.broker_address, "topic1")) == sorted(v.encode() for v in every)  # each once
        assert values_of(dc2.broker_address, "dc2-only") == [f"only-{i}".encode() for i in range(50)]
        assert read_and_commit(dc2.broker_address, "app2", "topic1") == [f"dc1-late-{i}".encode() for i in range(5, 10)]
        report = json.loads(sorted((state / "reports").glob("dr_failback-*.json"))[-1].read_text())
        assert report["unreplicated"]["records"] is None and report["resynced"]["records"] == 260
        assert client_switch.active_cluster(topology, "app2") == "dc2"
        assert roles.pending() == {}  # failed back: alerts about dc2 go out as usual again
        assert_new_records_cross_once(dc1.broker_address, dc2.broker_address)
    finally:
        for flow in ("aa-dc1-to-dc2", "aa-dc2-to-dc1"):
            replicators.stop(flow)


def active_active_topology(own_stack: LocalStack, path: Path) -> Path:
    """topic1 both ways, dc2-only from dc2, and app2 a consumer in dc2."""
    dc1, dc2 = own_stack.config.dc("dc1"), own_stack.config.dc("dc2")
    return write_clusters_topology(
        path,
        {"dc1": dc1.broker_address, "dc2": dc2.broker_address},
        """\
  - {name: aa-dc1-to-dc2, source: dc1, target: dc2, topics: {include: ["topic1"]}}
  - {name: aa-dc2-to-dc1, source: dc2, target: dc1, topics: {include: ["topic1", "dc2-only"]}}
""",
        extra="clients:\n  app2: {cluster: dc2, role: consumer}\n",
    )


def assert_new_records_cross_once(dc1: str, dc2: str) -> None:
    """Both flows run again: a new record on either side arrives once on the other and never comes back."""
    send(dc1, "topic1", ["new-in-dc1"])
    send(dc2, "topic1", ["new-in-dc2"])
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        in_dc1, in_dc2 = values_of(dc1, "topic1"), values_of(dc2, "topic1")
        if b"new-in-dc2" in in_dc1 and b"new-in-dc1" in in_dc2:
            break
        time.sleep(1)
    time.sleep(4)  # a running replicator copies a record as it arrives: anything coming back would be here by now
    in_dc1, in_dc2 = values_of(dc1, "topic1"), values_of(dc2, "topic1")
    assert [in_dc1.count(b"new-in-dc1"), in_dc1.count(b"new-in-dc2")] == [1, 1]
    assert [in_dc2.count(b"new-in-dc1"), in_dc2.count(b"new-in-dc2")] == [1, 1]
    assert len(in_dc1) == len(set(in_dc1)) and len(in_dc2) == len(set(in_dc2))
