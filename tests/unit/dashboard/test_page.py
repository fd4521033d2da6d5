"""The dashboard page from hand-built state: the lag chart of a flow's history, a switch's approval on its card, the
RTO chart of a scenario's drills."""

from __future__ import annotations

from kafka_dr.dashboard.page import lag_chart, render_page, rto_chart
from kafka_dr.readiness import Finding
from kafka_dr.reports import summarize
from kafka_dr.roles import FailedOver


def test_lag_chart_is_inline_svg_with_escaped_tooltips() -> None:
    chart = lag_chart(
        [
            {"at_ms": 1000, "status": "OK", "problems": [], "lag_records": 0, "lag_seconds": 0.0},
            {"at_ms": 2000, "status": "WARN", "problems": ["<b>"], "lag_records": 1200, "lag_seconds": 3.0},
            {"at_ms": 3000, "status": "ERR", "problems": ["dc1 down"], "lag_records": None, "lag_seconds": None},
        ]
    )
    assert chart.startswith("<svg") and chart.count("<circle") == 2 and chart.count("<rect") == 1
    assert "<polyline" in chart and "1,200" in chart and "&lt;b&gt;" in chart and "<b>" not in chart


def test_a_switch_card_says_who_approved_it_after_how_long_and_who_triggered_it() -> None:
    body = {
        "dag_id": "dr_failover",
        "run_id": "manual__1",
        "failed_cluster": "dc2",
        "target_cluster": "dc1",
        "mode": "disaster",
        "run_started": "2026-11-26T10:00:00+00:00",
        "triggered_by": "admin",
        "approved_by": "approver",
        "approval_wait_seconds": 6.5,
        "rpo": {"records": 0, "exact": False},
        "rto_seconds": 20.25,
    }
    summary = {"dag_id": "dr_failover", "run_id": "manual__1", "file": "f.json", "error": None, "written_at": "now"}
    approved = {**summary, **summarize("dr_failover", body)}
    unasked = {**summary, **summarize("dr_failover", {**body, "approved_by": None, "approval_wait_seconds": None})}
    state = {"topology": {"path": "t.yaml", "error": None}, "generated_at": "now", "collected_in_s": 0.1}
    state |= {"clusters": [], "flows": [], "clients": [], "clients_error": None}
    page = render_page({**state, "reports": {"dr_failover": approved}})
    assert "<dt>Approved</dt><dd>by approver after 6.5 s; triggered by admin</dd>" in page
    page = render_page({**state, "reports": {"dr_failover": unasked}})
    assert "<dt>Approved</dt><dd>no approval asked; triggered by admin</dd>" in page


def test_rto_chart_marks_failed_drills_apart_and_escapes_its_tooltips() -> None:
    drill = {"scenario": "planned_round_trip", "from_cluster": "dc1", "to_cluster": "<dc2>", "failure": None}
    chart = rto_chart(
        [
            {**drill, "started": "2026-10-01T10:00:00+00:00", "rto_seconds": 12.0, "passed": True},
            {**drill, "started": "2026-11-01T12:00:00+02:00", "rto_seconds": 30.5, "passed": False, "failure": "slow"},
            {**drill, "started": "2026-12-01T10:00:00+00:00", "rto_seconds": None, "passed": False, "failure": "x"},
            {**drill, "started": "2026-12-02T10:00:00+00:00", "rto_seconds": 8.0, "passed": None},
        ]
    )
    assert chart.startswith("<svg") and chart.endswith("</svg>") and "<polyline" in chart
    assert chart.count("<circle") == 2 and chart.count("fill='#6b7280'") == 1  # passed, and no verdict in grey
    assert chart.count("width='8' height='8' fill='#dc2626'") == 1  # the failed drill's square
    assert chart.count("width='2' height='8' fill='#dc2626'") == 1  # a failed drill that measured no RTO: a tick
    assert ">30.5 s</text>" in chart and ">2026-10-01 10:00:00 UTC</text>" in chart
    assert "2026-11-01 10:00:00 UTC dc1 → &lt;dc2&gt;: RTO 30.5 s, FAILED; slow" in chart and "<dc2>" not in chart


def test_a_stalled_flow_says_so_beside_its_status() -> None:
    flow = {"name": "out", "source": "dc1", "target": "dc2", "status": "ERR", "error": None, "lag_records": 52}
    flow |= {"lag_seconds": 300.0, "evaluated_at_ms": 1000, "history": [], "history_error": None}
    flow |= {"problems": ["STALLED for 300s: the replicator runs but has copied none of the 52 records waiting"]}
    state = {"topology": {"path": "t.yaml", "error": None}, "generated_at": "now", "collected_in_s": 0.1}
    state |= {"clusters": [], "clients": [], "clients_error": None, "reports": {}}
    stalled = render_page({**state, "flows": [{**flow, "stalled_seconds": 300.0}]})
    assert "<span class='badge err'>ERR</span> <span class='badge err'>STALLED 300 s</span>" in stalled
    assert "STALLED 300 s" not in render_page({**state, "flows": [{**flow, "stalled_seconds": None}]})


def test_readiness_says_what_would_stop_a_failover_with_its_runbook_and_when_it_was_checked() -> None:
    state = {"topology": {"path": "t.yaml", "error": None}, "generated_at": "now", "collected_in_s": 0.1}
    state |= {"clusters": [], "flows": [], "clients": [], "clients_error": None, "reports": {}}
    assert "Not checked yet: each dr_replication_health run checks it." in render_page(state)
    paused = Finding("dags_unpaused", False, "paused: dr_failover: a run triggered now would never start")
    findings = [paused, Finding("flows", True, "1 flow(s) running"), Finding("approvers", None, "<not> gathered")]
    state["readiness"] = {"checked_at": "2026-11-29T03:00:00+00:00", "ready": False}
    state["readiness"]["findings"] = [f.to_dict() for f in findings]
    page = render_page(state)
    assert "NOT READY</span> <span class='muted'>checked at 2026-11-29T03:00:00+00:00" in page
    assert "paused: dr_failover: a run triggered now would never start" in page
    assert "href='/kafka-dr/docs/runbooks/readiness/#dags-unpaused'>runbook</a>" in page
    assert "href='/kafka-dr/docs/runbooks/readiness/#flows'" not in page  # a ready check needs no runbook
    assert "&lt;not&gt; gathered" in page and "<not>" not in page


def test_a_pending_failback_is_a_banner_naming_who_serves_since_when_with_the_way_back() -> None:
    state = {"topology": {"path": "t.yaml", "error": None}, "generated_at": "now", "collected_in_s": 0.1}
    state |= {"clusters": [], "flows": [], "clients": [], "clients_error": None, "reports": {}}
    assert "Failed over:" not in render_page(state)
    lost = FailedOver("dc1", "dc2", "disaster", "manual__1", "2026-11-29T03:00:00+00:00", "2026-11-29T03:01:00+00:00")
    state["failed_over"] = [{"line": lost.line()}]
    page = render_page(state, "/ui")
    assert (
        "<div class='banner'>Failed over: dc1 lost (dr_failover run manual__1, started 2026-11-29T03:00:00+00:00); "
        "dc2 serves since 2026-11-29T03:01:00+00:00; failback pending (<a href='/ui/dags/dr_failback'>dr_failback</a>)"
    ) in page
