"""The failover report's rules (kafka_dr.failover.report, kafka_dr.failover.rpo) with hand-built lag readings, plan
and step results: RPO exact or estimated and summed per topic, RTO from the step times, steps without an end, the JSON
fields docs/design.md fixes and the Markdown page. No Airflow, no Kafka."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from support.steps import RUN_START, at, failover_plan

from kafka_dr.failover.outcome import FailoverOutcome
from kafka_dr.failover.report import FailoverRun, failover_page, failover_report, group_summary, with_exact_rpo
from kafka_dr.failover.rpo import LagReading, rpo
from kafka_dr.failover.stop import Stopped
from kafka_dr.failover.switch import Switched
from kafka_dr.replication.lag import FlowLag, PartitionLag
from kafka_dr.reports import Approval, step_seconds
from kafka_dr.schema_redirect.steps import OneLeader, RegistryMove
from kafka_dr.schema_registry import Redirect

MEASURED_MS = 1_700_000_000_000
SNAPSHOT_MS = 1_699_999_990_000


def lag(flow: str, *partitions: tuple[str, int, int], measured_at_ms: int = MEASURED_MS) -> FlowLag:
    """A flow's lag from (topic, partition, records behind) triples."""
    return FlowLag(
        flow, "dc1", "dc2", tuple(PartitionLag(t, p, t, 0, n, n, 0.0) for t, p, n in partitions), None, measured_at_ms
    )


PLAN = failover_plan()
TRANSLATIONS = [
    {
        "flow": "orders-flow",
        "group_count": 3,
        "applied": ["billing", "audit"],
        "seconds": 4.25,
        "skipped": [{"group": "live-app", "reason": "2 active members"}],
    }
]
RUN = FailoverRun(
    stop_replication=Stopped({"orders-flow": "stopped"}, {"started": at(1.0), "ended": at(2.0)}),
    translations=TRANSLATIONS,
    schema_registry=RegistryMove(
        primary=Redirect("dc2", "http://dc2:8081", "dc2", True, 11, 12, 3.0),
        follower=Redirect("dc1", "http://dc1:8081", "dc2", False, 11, None, 2.5),
        one_leader=OneLeader("dc1", 13),
        step={"started": at(7.0), "ended": at(10.5)},
    ),
    switch_consumers=Switched(("billing",), {"started": at(10.5), "ended": at(11.25)}),
    verify=FailoverOutcome((), 2, {}, {"started": at(11.25), "ended": at(17.25)}),
)


def report(**changes: Any) -> dict[str, Any]:
    readings = {"orders-flow": LagReading(lag("orders-flow", ("orders", 0, 2), ("_schemas", 0, 0)), exact=False)}
    kwargs: dict[str, Any] = {
        "plan": PLAN,
        "run": RUN,
        "lag": readings,
        "dag_id": "dr_failover",
        "run_id": "manual__1",
        "run_started": RUN_START,
        "producers_first": [],
    }
    return failover_report(**(kwargs | changes))


def test_rpo_measured_from_every_source_is_exact_and_sums_per_topic() -> None:
    readings = {
        "a": LagReading(lag("a", ("orders", 0, 5), ("orders", 1, 2), ("payments", 0, 0)), exact=True),
        "b": LagReading(lag("b", ("orders", 0, 1), ("_kdr.heartbeats", 0, 40)), exact=True),
    }
    result = rpo(readings)
    assert result == {
        "records": 8,
        "per_topic": {"orders": 8, "payments": 0},
        "exact": True,
        "flows": {
            "a": {"exact": True, "measured_at_ms": MEASURED_MS},
            "b": {"exact": True, "measured_at_ms": MEASURED_MS},
        },
    }


def test_rpo_from_a_snapshot_is_an_estimate_as_of_its_time() -> None:
    readings = {
        "a": LagReading(lag("a", ("orders", 0, 5)), exact=True),
        "b": LagReading(lag("b", ("orders", 0, 2), measured_at_ms=SNAPSHOT_MS), exact=False),
    }
    result = rpo(readings)
    assert (result["records"], result["per_topic"], result["exact"]) == (7, {"orders": 7}, False)
    assert result["flows"]["b"] == {"exact": False, "measured_at_ms": SNAPSHOT_MS}


def test_rpo_is_unknown_when_a_flow_has_neither_source_nor_snapshot() -> None:
    readings = {"a": LagReading(lag("a", ("orders", 0, 5)), exact=True), "b": LagReading(None, exact=False)}
    result = rpo(readings)
    assert (result["records"], result["per_topic"], result["exact"]) == (None, {"orders": 5}, False)
    assert result["flows"]["b"] == {
        "exact": False,
        "measured_at_ms": None,
        "note": "source unreachable and no snapshot",
    }


def test_groups_over_every_flow() -> None:
    second = {"flow": "other", "group_count": 1, "applied": ["accounts"], "skipped": []}
    assert group_summary([*TRANSLATIONS, second]) == {
        "translated": 4,
        "applied": ["accounts", "audit", "billing"],
        "skipped": [{"group": "live-app", "reason": "2 active members"}],
    }
    assert group_summary([]) == {"translated": 0, "applied": [], "skipped": []}


def test_report_has_the_fields_design_md_fixes() -> None:
    body = report(producers_first=["orders-producer"])
    assert json.loads(json.dumps(body)) == body  # written as it is
    assert list(body) == [
        "dag_id",
        "run_id",
        "failed_cluster",
        "target_cluster",
        "mode",
        "run_started",
        "triggered_by",
        "rpo",
        "approved_by",
        "approval_wait_seconds",
        "rto_seconds",
        "rto_with_approval_seconds",
        "groups",
        "schema_registry",
        "clients",
        "steps",
        "dry_run",
        "preview",
    ]
    assert (body["dry_run"], body["preview"]) == (False, None)  # a report made without the preview task's result
    assert body["rpo"] | {"flows": None} == {
        "records": 2,
        "per_topic": {"orders": 2, "_schemas": 0},
        "exact": False,
        "flows": None,
    }
    assert body["rto_seconds"] == 11.25 and body["run_started"] == "2026-03-01T10:00:00+00:00"
    assert body["groups"]["applied"] == ["audit", "billing"]
    assert body["clients"] == {
        "producers_first": ["orders-producer"],
        "moved": ["billing"],
        "writers_before_registry": [],  # no writer is named: writers=() here
    }
    registry = body["schema_registry"]
    assert list(registry) == ["primary", "follower", "one_leader", "step"]  # only what the redirect did
    assert registry["primary"]["store"] == "dc2" and registry["one_leader"] == {"via": "dc1", "probe_id": 13}
    assert registry["follower"]["probe_id"] is None  # a Redirect's own fields are all there
    assert list(body["steps"]) == [
        "validate",
        "stop_replication",
        "schema_registry",
        "switch_consumers",
        "verify",
        "translate_offsets orders-flow",
    ]
    assert body["steps"]["translate_offsets orders-flow"] == {"seconds": 4.25}


def test_writers_moved_before_the_registry_redirect_ended_are_named_and_readers_are_not() -> None:
    """The redirect runs beside the switch: a producing alias the switch moved before the target's registry led is
    named (its new schemas may be missing there); one moved after, a consumer, or a redirect that moved nothing not."""
    beside = replace(
        RUN,
        schema_registry=replace(RUN.schema_registry, step={"started": at(2.0), "ended": at(12.0)}),
        switch_consumers=Switched(("billing", "orders-app"), {"started": at(7.0), "ended": at(11.25)}),
    )
    body = report(run=beside, producers_first=["orders-producer"], writers={"orders-producer", "orders-app"})
    assert body["clients"]["writers_before_registry"] == ["orders-producer", "orders-app"]
    assert body["rto_seconds"] == 11.25  # clients switched: the redirect's end is not in it
    assert (
        "- moved before the target's registry led (new schemas they registered meanwhile may be missing from its "
        "store; reads were served): orders-producer, orders-app" in failover_page(body).splitlines()
    )
    after = report(producers_first=["orders-producer"], writers={"orders-producer", "billing"})
    assert after["clients"]["writers_before_registry"] == ["orders-producer"]  # moved first, billing after it led
    skipped = replace(beside, schema_registry=RegistryMove(skipped="the primary registry is dc2, not on dc1"))
    assert report(run=skipped, writers={"orders-app"})["clients"]["writers_before_registry"] == []
    assert "registry led" not in failover_page(report(run=skipped, writers={"orders-app"}))


def test_a_translation_step_is_the_operators_start_and_end_when_it_recorded_them() -> None:
    timed = [{**TRANSLATIONS[0], "step": {"started": at(2.0), "ended": at(7.0)}}]
    body = report(run=replace(RUN, translations=timed))
    assert body["steps"]["translate_offsets orders-flow"] == {"started": at(2.0), "ended": at(7.0)}
    assert step_seconds(body["steps"]["translate_offsets orders-flow"]) == 5.0  # not the job's own 4.25


def test_without_a_recorded_run_start_the_run_counts_from_validation() -> None:
    body = report(run_started=None)
    assert body["run_started"] == "2026-03-01T10:00:00.500000+00:00" and body["rto_seconds"] == 10.75


def test_report_of_a_run_that_never_switched_clients() -> None:
    body = report(run=FailoverRun(stop_replication=RUN.stop_replication))
    assert body["rto_seconds"] is None
    assert body["groups"] == {"translated": 0, "applied": [], "skipped": []}
    assert body["clients"]["moved"] == [] and body["schema_registry"] is None
    assert list(body["steps"]) == ["validate", "stop_replication"]


def test_the_rto_leaves_out_the_wait_for_the_approval_and_the_report_names_both_people() -> None:
    approved = replace(RUN, approval=Approval("bob", 4.0, {"started": at(1.0), "ended": at(5.0)}))
    body = report(run=approved, triggered_by="alice")
    assert (body["triggered_by"], body["approved_by"], body["approval_wait_seconds"]) == ("alice", "bob", 4.0)
    assert (body["rto_seconds"], body["rto_with_approval_seconds"]) == (7.25, 11.25)
    assert "- triggered by alice; approved by bob after 4.0 s (RTO with the approval: 11.25 s)" in failover_page(body)
    unapproved = report()
    assert (unapproved["approved_by"], unapproved["approval_wait_seconds"]) == (None, None)
    assert unapproved["rto_seconds"] == unapproved["rto_with_approval_seconds"] == 11.25


def test_page_leads_with_rpo_and_rto_and_tables_every_step() -> None:
    page = failover_page(report(producers_first=["orders-producer"])).splitlines()
    assert page[0] == "# Failover dc1 -> dc2 (disaster)"
    assert "- run `manual__1`, started 2026-03-01T10:00:00+00:00" in page
    assert "- **RPO: 2 records** (estimate from the last lag measurement); _schemas: 0; orders: 2" in page
    assert "- **RTO: 11.25 s** (trigger to clients switched, the wait for approval left out)" in page
    assert "- triggered by unknown; no approval asked" in page
    assert "- groups translated: 3, applied: 2, left alone: 1" in page
    assert "  - live-app: 2 active members" in page
    assert "- clients moved: orders-producer, billing" in page
    table = page[page.index("| step | started | ended | seconds |") :]
    assert table[1] == "|---|---|---|---|"
    assert table[2] == f"| validate | {at(0.5)} | {at(1.0)} | 0.5 |"
    assert f"| verify | {at(11.25)} | {at(17.25)} | 6.0 |" in table
    assert table[-1] == "| translate_offsets orders-flow |  |  | 4.25 |"
    assert len(table) == 2 + 6


def test_page_of_an_exact_rpo_an_unknown_one_and_a_step_with_no_end() -> None:
    exact = {"f": LagReading(lag("f", ("payments", 0, 0)), exact=True)}
    page = failover_page(report(lag=exact))
    assert "- **RPO: 0 records** (exact); payments: 0\n" in page
    unknown = failover_page(report(lag={"f": LagReading(None, exact=False)}))
    assert "- **RPO: unknown** (estimate from the last lag measurement)\n" in unknown
    open_step = replace(RUN, verify=FailoverOutcome((), 2, {}, {"started": at(11.25)}))
    page = failover_page(report(run=open_step))
    assert f"| verify | {at(11.25)} |  |  |" in page.splitlines()
    assert "- clients moved: billing\n" in page


UNREPLICATED = {"records": 2, "per_topic": {"orders": 2}, "ranges": [], "flows": ["f"], "deleted_before_copied": []}


def test_a_failover_report_gains_the_exact_rpo_beside_its_estimate() -> None:
    failover = report()
    exact = with_exact_rpo(failover, UNREPLICATED, "fb1")
    assert exact["rpo"] == {
        **failover["rpo"],
        "exact_after_failback": {"records": 2, "per_topic": {"orders": 2}, "failback_run": "fb1"},
    }
    assert "- exact RPO measured by failback `fb1`: 2 records" in failover_page(exact).splitlines()
    assert "exact RPO measured" not in failover_page(failover)
