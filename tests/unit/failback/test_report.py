"""The failback report's rules (kafka_dr.failback.report) with a hand-built plan and step results: the fields
docs/design.md fixes before and after the resync, the Markdown page range by range, the resync's data records, and the
exact RPO written into the failover report the failback follows. No Airflow, no Kafka."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from support.steps import RUN_START, at, failback_plan

from kafka_dr.failback.outcome import FailbackOutcome, FlowFigures
from kafka_dr.failback.plan import SwitchBack
from kafka_dr.failback.report import FailbackRun, add_exact_rpo, failback_page, failback_report, resync_records
from kafka_dr.failback.republish import Handled
from kafka_dr.failback.unreplicated import DeletedRange, Measured, UnreplicatedRange
from kafka_dr.failover.plan import FailoverPlan
from kafka_dr.failover.switch import Switched
from kafka_dr.reports import Approval
from kafka_dr.schema_redirect.steps import RegistryMove

FAILBACK_PLAN = failback_plan(step={"started": at(0.5), "ended": at(1.0)})
MEASURED = Measured(
    records=2,
    per_topic={"orders": 2},
    ranges=(UnreplicatedRange("f", "orders", 0, 9998, 9999, 2),),
    flows=("f",),
    deleted_before_copied=(DeletedRange("orders", 1, 40, 49),),
    step={"started": at(1.0), "ended": at(2.5)},
)
UNREPLICATED = {  # the report's fields of MEASURED
    "records": 2,
    "per_topic": {"orders": 2},
    "ranges": [{"flow": "f", "topic": "orders", "partition": 0, "from_offset": 9998, "to_offset": 9999, "records": 2}],
    "flows": ["f"],
    "deleted_before_copied": [{"topic": "orders", "partition": 1, "from_offset": 40, "to_offset": 49}],
}


def failback(**changes: Any) -> dict[str, Any]:
    return failback_report(
        replace(FAILBACK_PLAN, **changes),
        FailbackRun(measure_unreplicated=MEASURED),
        dag_id="dr_failback",
        run_id="fb1",
        run_started=RUN_START,
    )


def test_failback_report_has_the_fields_design_md_fixes_before_anything_was_resynced() -> None:
    body = failback()
    assert json.loads(json.dumps(body)) == body
    assert {"unreplicated", "resynced", "rto_seconds", "steps"} <= set(body)
    assert body["unreplicated"] == {**UNREPLICATED, "action": "report"}
    assert body["resynced"] == {"records": None, "flows": [], "inverse_flows": [], "forced": None}
    assert body["rto_seconds"] is None and body["verify"] == {}  # clients not back yet, nothing verified
    assert list(body["steps"]) == ["validate", "measure_unreplicated"]


def test_failback_page_lists_every_range_and_what_retention_deleted() -> None:
    page = failback_page(failback(dry_run=True)).splitlines()
    assert page[0] == "# Failback dc2 -> dc1 (data_kept, dry run)"
    assert "- **records that never left dc1: 2** (exact RPO of the disaster); orders: 2" in page
    assert "  - orders[0] offsets 9998-9999: 2 records" in page
    assert "  - deleted by retention before they were copied: orders[1] offsets 40-49" in page
    assert "- records resynced: not yet" in page


def test_failback_page_says_which_inverse_flows_resynced_what_was_forced_and_what_each_flow_holds() -> None:
    switch = FailoverPlan("t.yaml", "dc2", "dc1", "planned", ".*", ("f.failback",), (), home="dc1")
    back = SwitchBack(switch, ("f.failback",), {"cluster": "abc", "to": "T"})
    verify = FailbackOutcome(0, {"f": FlowFigures(expected=10, copied=10, filtered=3, skipped=2)}, {})
    body = failback_report(
        replace(FAILBACK_PLAN, mode="data_lost"),
        FailbackRun(prepare_switch_back=back, resync_records=12, verify=verify),
        dag_id="dr_failback",
        run_id="fb2",
        run_started=RUN_START,
    )
    assert body["resynced"] == {"records": 12, "flows": ["f.failback"], "inverse_flows": ["f.failback"]} | {
        "forced": {"cluster": "abc", "to": "T"}
    }
    assert body["verify"] == {
        "groups_checked": 0,
        "flows": {"f": {"expected": 10, "copied": 10, "filtered": 3, "skipped": 2}},
    }
    page = failback_page(body).splitlines()
    assert "  - by the inverse of the flows out (f.failback): the topology has no flow back for those topics" in page
    assert "  - records first from dc1 forced past the cycle rule: {'cluster': 'abc', 'to': 'T'}" in page
    assert "- verified f: 10 records expected, 10 copied once, 3 filtered by the cycle rule, 2 skipped" in page


def test_every_step_run_is_in_the_report_in_the_order_the_steps_run() -> None:
    step = {"started": at(3.0), "ended": at(4.0)}
    back = SwitchBack(FailoverPlan("t.yaml", "dc2", "dc1", "planned", ".*", ("b",), (), home="dc1"), (), None, step)
    run = FailbackRun(
        measure_unreplicated=MEASURED,
        prepare_switch_back=back,
        switch_producers=Switched((), step),
        handle_unreplicated=Handled("republish", 2, republished=2, flows_moved={"f orders[0]": 10_000}, step=step),
        registry_back=RegistryMove(skipped="no primary", step=step),
        switch_consumers=Switched(("billing",), {"started": at(5.0), "ended": at(6.5)}),
        verify=FailbackOutcome(1, {}, step),
    )
    body = failback_report(FAILBACK_PLAN, run, dag_id="dr_failback", run_id="fb3", run_started=RUN_START)
    assert list(body["steps"]) == [
        "validate",
        "measure_unreplicated",
        "prepare_switch_back",
        "switch_producers",
        "handle_unreplicated",
        "registry_back",
        "switch_consumers",
        "verify",
    ]
    assert body["unreplicated"]["republished"] == 2 and body["unreplicated"]["flows_moved"] == {"f orders[0]": 10_000}
    assert "step" not in body["unreplicated"] and body["rto_seconds"] == 6.5
    assert body["schema_registry"] == {"skipped": "no primary"} and body["verify"] == {"groups_checked": 1, "flows": {}}
    assert body["resynced"] == {"records": None, "flows": ["b"], "inverse_flows": [], "forced": None}


def test_an_approved_failback_names_both_people_and_its_rto_leaves_out_the_wait() -> None:
    run = FailbackRun(
        measure_unreplicated=MEASURED,
        approval=Approval("bob", 2.0, {"started": at(2.5), "ended": at(4.5)}),
        switch_consumers=Switched(("billing",), {"started": at(5.0), "ended": at(6.5)}),
    )
    body = failback_report(
        FAILBACK_PLAN, run, dag_id="dr_failback", run_id="fb5", run_started=RUN_START, triggered_by="alice"
    )
    assert list(body["steps"]) == ["validate", "measure_unreplicated", "approve", "switch_consumers"]
    assert (body["triggered_by"], body["approved_by"], body["approval_wait_seconds"]) == ("alice", "bob", 2.0)
    assert (body["rto_seconds"], body["rto_with_approval_seconds"]) == (4.5, 6.5)
    page = failback_page(body)
    assert "- triggered by alice; approved by bob after 2.0 s (RTO with the approval: 6.5 s)" in page
    assert "no approval asked" in failback_page(failback())


def test_without_a_recorded_run_start_the_failback_counts_from_validation() -> None:
    body = failback_report(FAILBACK_PLAN, FailbackRun(), dag_id="dr_failback", run_id="fb4", run_started=None)
    assert body["run_started"] == "2026-03-01T10:00:00.500000+00:00"


def test_resynced_records_are_data_records_of_every_run() -> None:
    runs = [
        {"partitions": [{"topic": "orders", "records": 300}, {"topic": "_kdr.heartbeats", "records": 9}]},
        {"partitions": [{"topic": "orders", "records": 200}]},
        {},  # a run that copied nothing
    ]
    assert resync_records(runs) == 500 and resync_records([]) == 0


def test_the_latest_failover_report_of_the_clusters_gains_the_exact_rpo(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KDR_STATE_DIR", str(tmp_path))
    reports = tmp_path / "reports"
    reports.mkdir()
    rpo = {"records": 5, "per_topic": {"orders": 5}, "exact": False, "flows": {}}
    failover = {
        "run_id": "",
        "failed_cluster": "dc1",
        "target_cluster": "dc2",
        "mode": "disaster",
        "rpo": rpo,
        "rto_seconds": 9.0,
        "groups": {"translated": 0, "applied": [], "skipped": []},
        "schema_registry": None,
        "clients": {"producers_first": [], "moved": []},
        "steps": {},
    }
    for run, started, clusters in (("old", "2026-03-01T09", ("dc1", "dc2")), ("new", "2026-03-01T10", ("dc1", "dc2"))):
        body = {**failover, "run_id": run, "run_started": started, "failed_cluster": clusters[0]}
        (reports / f"dr_failover-{run}.json").write_text(json.dumps(body))
    other = {**failover, "run_id": "other", "run_started": "2026-03-01T11", "failed_cluster": "dc3"}
    (reports / "dr_failover-other.json").write_text(json.dumps(other))

    add_exact_rpo("dc1", "dc2", UNREPLICATED, "fb1")
    exact = {"records": 2, "per_topic": {"orders": 2}, "failback_run": "fb1"}
    assert json.loads((reports / "dr_failover-new.json").read_text())["rpo"] == {**rpo, "exact_after_failback": exact}
    assert "- exact RPO measured by failback `fb1`: 2 records" in (reports / "dr_failover-new.md").read_text()
    for untouched in ("old", "other"):
        assert "exact_after_failback" not in json.loads((reports / f"dr_failover-{untouched}.json").read_text())["rpo"]
    add_exact_rpo("dc2", "dc1", UNREPLICATED, "fb2")  # no failover of dc2 to dc1: nothing written
    assert not (reports / "dr_failover-old.md").exists()


def test_a_plan_stops_the_run_when_records_never_left_and_the_action_is_report() -> None:
    unreplicated = {"records": 2, "per_topic": {"orders": 2, "payments": 0}}
    line = FAILBACK_PLAN.stop_line(unreplicated, "/r/dr_failback-fb1.json")
    assert line == (
        "2 records never left dc1 (orders 2, payments 0; ranges in /r/dr_failback-fb1.json); nothing changed: run "
        "again with unreplicated=republish to have the moved groups read them once, or discard to leave them unread"
    )
    assert replace(FAILBACK_PLAN, dry_run=True).stop_line(unreplicated, "r") is None  # a dry run ends, not fails
    assert replace(FAILBACK_PLAN, unreplicated="republish").stop_line(unreplicated, "r") is None
    assert FAILBACK_PLAN.stop_line({"records": 0, "per_topic": {}}, "r") is None  # nothing never left
    assert FAILBACK_PLAN.stop_line({"records": None, "per_topic": {}}, "r") is None  # data_lost: unknown
