"""A failover's preview as people read it (kafka_dr.failover.preview.preview_page) and the report of a dry run
(kafka_dr.failover.report.dry_run_report), from hand-built previews. What the preview reads from the clusters, and
that a dry run changes nothing, is shown on the embedded stack: tests/airflow/test_dr_failover.py."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from support.steps import RUN_START, at, failover_plan

from kafka_dr.codec import decode
from kafka_dr.failover.preview import SAMPLE_GROUPS, Preview, preview_page
from kafka_dr.failover.report import dry_run_report
from kafka_dr.reports import summarize

PLAN = failover_plan(stop_flows=("orders-flow", "back-flow"), dry_run=True)


def previewed(groups: int = 2, **changes: Any) -> Preview:
    """A disaster preview of `groups` groups of one partition each, as the preview task's XCom has it."""
    names = [f"app-{i:02d}" for i in range(groups)]
    body = {
        "failed_cluster": "dc1",
        "target_cluster": "dc2",
        "mode": "disaster",
        "dry_run": True,
        "rpo_estimate": {"records": 12, "per_topic": {"orders": 12}, "exact": False, "flows": {}},
        "lag": {"orders-flow": {"records": 12, "exact": False}},
        "replicators": {
            "orders-flow": "not running: no replicator ever claimed it in its target",
            "back-flow": "stop requested through its source dc2 (its target dc1 is lost)",
        },
        "groups": {
            "count": groups,
            "partitions": groups,
            "sample": names[:SAMPLE_GROUPS],
            "origin": "checkpoints",
            "checkpoint_at_ms": {"orders-flow": 1_700_000_000_000},
            "offsets": {
                "orders-flow": {g: [{"topic": "orders", "partition": 0, "offset": i}] for i, g in enumerate(names)}
            },
        },
        "schema_registry": {"leader": "dc2", "follower": "dc1"},
        "clients": {"producers_first": [], "moved": ["orders-producer", "billing"]},
        "step": {"started": at(1.0), "ended": at(2.5)},
    }
    return decode(Preview, {**body, **changes})


def test_the_page_says_what_the_failover_would_do() -> None:
    page = preview_page(previewed())
    assert page.startswith("# Failover dc1 -> dc2 (disaster): dry run\n")
    for line in (
        "- **RPO: 12 records** (estimate)",
        "  - flow orders-flow: lag 12 records (snapshot)",
        "  - orders-flow: not running: no replicator ever claimed it in its target",
        "  - back-flow: stop requested through its source dc2 (its target dc1 is lost)",
        "- groups: 2 (2 partitions, offsets from checkpoints)",
        "  - app-01 in orders-flow: orders[0]@1",
        "- schema registry: dc2's becomes the leader, dc1's follows when it answers",
        "- producers first: none",
        "- clients moved: orders-producer, billing",
    ):
        assert line in page.splitlines(), (line, page)


def test_the_page_shows_a_sample_of_the_groups_and_the_json_keeps_them_all() -> None:
    many = previewed(groups=40)
    page = preview_page(many)
    assert sum(" in orders-flow: " in line for line in page.splitlines()) == SAMPLE_GROUPS
    assert len(many.groups["offsets"]["orders-flow"]) == 40


def test_a_planned_preview_expects_no_loss_and_a_registry_left_alone_says_why() -> None:
    planned = previewed(
        mode="planned",
        dry_run=False,
        rpo_estimate={"records": 0, "per_topic": {"orders": 3}, "exact": True, "flows": {}},
        lag={"orders-flow": None},
        schema_registry={"skipped": "the primary registry is not set, not on dc1"},
        clients={"producers_first": ["orders-producer"], "moved": ["billing"]},
    )
    lines = preview_page(planned).splitlines()
    assert lines[0] == "# Failover dc1 -> dc2 (planned)"
    assert "- **RPO: 0 records** (producers move first, then the lag drains to 0)" in lines
    assert "  - flow orders-flow: lag unknown" in lines
    assert "- schema registry: unchanged (the primary registry is not set, not on dc1)" in lines
    assert "- producers first: orders-producer" in lines


def test_a_dry_runs_report_is_its_preview_with_no_rto() -> None:
    body = dry_run_report(PLAN, previewed(), dag_id="dr_failover", run_id="r1", run_started=RUN_START)
    assert (body["dry_run"], body["rto_seconds"], body["rpo"]["records"]) == (True, None, 12)
    assert body["run_started"] == RUN_START.isoformat()
    assert list(body["steps"]) == ["validate", "preview"]
    assert "step" not in body["preview"] and body["preview"]["groups"]["count"] == 2
    assert summarize("dr_failover", body)["title"] == "dc1 -> dc2 (disaster, dry run)"
    without_start = dry_run_report(replace(PLAN, step=None), previewed(), dag_id="d", run_id="r", run_started=RUN_START)
    assert list(without_start["steps"]) == ["preview"]
