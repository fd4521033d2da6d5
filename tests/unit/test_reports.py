"""The failover report's rules (kafka_dr.reports) with hand-built lag readings and task results: RPO exact or
estimated and summed per topic, RTO from the step times, steps without an end, the JSON fields DESIGN.md fixes and
the Markdown page. No Airflow, no Kafka."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from kafka_dr.replication.lag import FlowLag, PartitionLag
from kafka_dr.reports import (
    LagReading,
    failback_page,
    failback_report,
    failover_page,
    failover_report,
    group_summary,
    rpo,
    rto_seconds,
    step_seconds,
    with_exact_rpo,
)

MEASURED_MS = 1_700_000_000_000
SNAPSHOT_MS = 1_699_999_990_000
RUN_START = datetime(2026, 3, 1, 10, 0, 0, tzinfo=UTC)


def lag(flow: str, *partitions: tuple[str, int, int], measured_at_ms: int = MEASURED_MS) -> FlowLag:
    """A flow's lag from (topic, partition, records behind) triples."""
    return FlowLag(
        flow, "dc1", "dc2", tuple(PartitionLag(t, p, t, 0, n, n, 0.0) for t, p, n in partitions), None, measured_at_ms
    )


def at(seconds: float) -> str:
    """A step time as the tasks record it (UTC ISO with milliseconds), `seconds` after the run started."""
    return datetime.fromtimestamp(RUN_START.timestamp() + seconds, UTC).isoformat(timespec="milliseconds")


PLAN = {
    "topology": "t.yaml",
    "failed": "dc1",
    "target": "dc2",
    "mode": "disaster",
    "groups": ".*",
    "flows": ["orders-flow"],
    "step": {"started": at(0.5), "ended": at(1.0)},
}
TRANSLATIONS = [
    {
        "flow": "orders-flow",
        "group_count": 3,
        "applied": ["billing", "audit"],
        "seconds": 4.25,
        "skipped": [{"group": "live-app", "reason": "2 active members"}],
    }
]
RESULTS: dict[str, Any] = {
    "stop_replication": {"replicators": {"orders-flow": "stopped"}, "step": {"started": at(1.0), "ended": at(2.0)}},
    "translations": TRANSLATIONS,
    "schema_registry": {"store": "dc2", "probe_id": 12, "step": {"started": at(7.0), "ended": at(10.5)}},
    "switch_consumers": {"moved": ["billing"], "step": {"started": at(10.5), "ended": at(11.25)}},
    "verify": {"groups_checked": 2, "step": {"started": at(11.25), "ended": at(17.25)}},
}


def report(**changes: Any) -> dict[str, Any]:
    readings = {"orders-flow": LagReading(lag("orders-flow", ("orders", 0, 2), ("_schemas", 0, 0)), exact=False)}
    kwargs: dict[str, Any] = {
        "plan": PLAN,
        "results": RESULTS,
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


def test_rto_runs_from_the_run_start_to_the_end_of_the_clients_switch() -> None:
    assert rto_seconds(RUN_START, {"started": at(10.5), "ended": at(11.25)}) == 11.25
    assert rto_seconds(RUN_START, {"started": at(10.5)}) is None  # the switch never ended
    assert rto_seconds(RUN_START, None) is None  # never reached


def test_step_seconds_from_its_times_or_its_job_and_none_without_an_end() -> None:
    assert step_seconds({"started": at(1.0), "ended": at(2.5)}) == 1.5
    assert step_seconds({"seconds": 4.25}) == 4.25  # a Spark job's own measurement
    assert step_seconds({"started": at(1.0)}) is None


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
        "rpo",
        "rto_seconds",
        "groups",
        "schema_registry",
        "clients",
        "steps",
    ]
    assert body["rpo"] | {"flows": None} == {
        "records": 2,
        "per_topic": {"orders": 2, "_schemas": 0},
        "exact": False,
        "flows": None,
    }
    assert body["rto_seconds"] == 11.25 and body["run_started"] == "2026-03-01T10:00:00+00:00"
    assert body["groups"]["applied"] == ["audit", "billing"]
    assert body["clients"] == {"producers_first": ["orders-producer"], "moved": ["billing"]}
    assert body["schema_registry"]["store"] == "dc2"
    assert list(body["steps"]) == [
        "validate",
        "stop_replication",
        "schema_registry",
        "switch_consumers",
        "verify",
        "translate_offsets orders-flow",
    ]
    assert body["steps"]["translate_offsets orders-flow"] == {"seconds": 4.25}


def test_a_translation_step_is_the_operators_start_and_end_when_it_recorded_them() -> None:
    timed = [{**TRANSLATIONS[0], "step": {"started": at(2.0), "ended": at(7.0)}}]
    body = report(results={**RESULTS, "translations": timed})
    assert body["steps"]["translate_offsets orders-flow"] == {"started": at(2.0), "ended": at(7.0)}
    assert step_seconds(body["steps"]["translate_offsets orders-flow"]) == 5.0  # not the job's own 4.25


def test_without_a_recorded_run_start_the_run_counts_from_validation() -> None:
    body = report(run_started=None)
    assert body["run_started"] == "2026-03-01T10:00:00.500000+00:00" and body["rto_seconds"] == 10.75


def test_report_of_a_run_that_never_switched_clients() -> None:
    body = report(results={"stop_replication": RESULTS["stop_replication"]})
    assert body["rto_seconds"] is None
    assert body["groups"] == {"translated": 0, "applied": [], "skipped": []}
    assert body["clients"]["moved"] == [] and body["schema_registry"] is None
    assert list(body["steps"]) == ["validate", "stop_replication"]


def test_page_leads_with_rpo_and_rto_and_tables_every_step() -> None:
    page = failover_page(report(producers_first=["orders-producer"])).splitlines()
    assert page[0] == "# Failover dc1 -> dc2 (disaster)"
    assert "- run `manual__1`, started 2026-03-01T10:00:00+00:00" in page
    assert "- **RPO: 2 records** (estimate from the last lag measurement); _schemas: 0; orders: 2" in page
    assert "- **RTO: 11.25 s** (trigger to clients switched)" in page
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
    open_step = {**RESULTS, "verify": {"step": {"started": at(11.25)}}}
    page = failover_page(report(results=open_step))
    assert f"| verify | {at(11.25)} |  |  |" in page.splitlines()
    assert "- clients moved: billing\n" in page


FAILBACK_PLAN = {
    "topology": "t.yaml",
    "restored": "dc1",
    "serving": "dc2",
    "mode": "data_kept",
    "unreplicated": "report",
    "groups": ".*",
    "dry_run": False,
    "step": {"started": at(0.5), "ended": at(1.0)},
}
MEASURED = {
    "unreplicated": {
        "records": 2,
        "per_topic": {"orders": 2},
        "ranges": [
            {"flow": "f", "topic": "orders", "partition": 0, "from_offset": 9998, "to_offset": 9999, "records": 2}
        ],
        "flows": ["f"],
        "deleted_before_copied": [{"topic": "orders", "partition": 1, "from_offset": 40, "to_offset": 49}],
    },
    "step": {"started": at(1.0), "ended": at(2.5)},
}


def failback(**changes: Any) -> dict[str, Any]:
    return failback_report(
        FAILBACK_PLAN | changes,
        {"measure_unreplicated": MEASURED},
        dag_id="dr_failback",
        run_id="fb1",
        run_started=RUN_START,
    )


def test_failback_report_has_the_fields_design_md_fixes_before_anything_was_resynced() -> None:
    body = failback()
    assert json.loads(json.dumps(body)) == body
    assert {"unreplicated", "resynced", "rto_seconds", "steps"} <= set(body)
    assert body["unreplicated"] == {**MEASURED["unreplicated"], "action": "report"}
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
    back = {"flows": ["f.failback"], "inverse_flows": ["f.failback"], "force": {"cluster": "abc", "to": "T"}}
    verify = {"flows": {"f": {"expected": 10, "copied": 10, "filtered": 3, "skipped": 2}}, "step": {}}
    body = failback_report(
        FAILBACK_PLAN | {"mode": "data_lost"},
        {"prepare_switch_back": back, "resync": {"records": 12}, "verify": verify},
        dag_id="dr_failback",
        run_id="fb2",
        run_started=RUN_START,
    )
    assert body["resynced"] == {"records": 12, "flows": ["f.failback"], "inverse_flows": ["f.failback"]} | {
        "forced": {"cluster": "abc", "to": "T"}
    }
    assert body["verify"] == {"flows": verify["flows"]}
    page = failback_page(body).splitlines()
    assert "  - by the inverse of the flows out (f.failback): the topology has no flow back for those topics" in page
    assert "  - records first from dc1 forced past the cycle rule: {'cluster': 'abc', 'to': 'T'}" in page
    assert "- verified f: 10 records expected, 10 copied once, 3 filtered by the cycle rule, 2 skipped" in page


def test_a_failover_report_gains_the_exact_rpo_beside_its_estimate() -> None:
    failover = report()
    exact = with_exact_rpo(failover, MEASURED["unreplicated"], "fb1")
    assert exact["rpo"] == {
        **failover["rpo"],
        "exact_after_failback": {"records": 2, "per_topic": {"orders": 2}, "failback_run": "fb1"},
    }
    assert "- exact RPO measured by failback `fb1`: 2 records" in failover_page(exact).splitlines()
    assert "exact RPO measured" not in failover_page(failover)
