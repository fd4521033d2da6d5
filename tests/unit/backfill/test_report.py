"""The dr_backfill plan and report (kafka_dr.backfill.plan, kafka_dr.backfill.report): the plan's round trip through
its XCom JSON (kafka_dr.codec), whose fields the DAG hands to the backfill job's operator, and the report's fields and
page for a time window, an offsets window, ranges gone to retention and the verification. No Airflow, no Kafka."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from kafka_dr.backfill.plan import BackfillPlan
from kafka_dr.backfill.report import backfill_page, backfill_report
from kafka_dr.codec import CodecError, decode, encode

STEP = {"started": "2026-03-01T10:00:00.000+00:00", "ended": "2026-03-01T10:00:02.000+00:00"}
PLAN = BackfillPlan(
    topology="t.yaml",
    flow="orders-flow",
    topics=None,
    window_start="2026-03-01T08:00:00+00:00",
    window_end="2026-03-01T09:00:00+00:00",
    offsets=None,
    target_topic="{topic}.backfill",
    dry_run=False,
    target_topics=("orders.backfill",),
    step=STEP,
)
SUMMARY = {
    "target_topics": ["orders.backfill"],
    "copied": 40,
    "to_copy": 50,
    "already_present": 10,
    "unavailable": [{"topic": "orders", "partition": 1, "from_offset": None, "to_offset": 4}],
    "verify": {"status": "OK", "expected": 50, "missing": 0, "duplicated": 0},
}


def test_the_plan_comes_back_from_its_xcom_json_a_field_per_job_argument() -> None:
    data = json.loads(json.dumps(encode(PLAN)))
    assert decode(BackfillPlan, data) == PLAN
    assert {"flow", "topology", "window_start", "window_end", "offsets", "topics", "target_topic", "dry_run"} <= set(
        data
    )
    assert data["offsets"] is None  # a field without a default is always in the JSON
    untimed = replace(PLAN, step=None, offsets={"orders:0": [5, 9]}, window_start=None, window_end=None)
    assert "step" not in encode(untimed) and decode(BackfillPlan, encode(untimed)) == untimed
    with pytest.raises(CodecError, match="^BackfillPlan: missing field 'flow'$"):
        decode(BackfillPlan, {k: v for k, v in data.items() if k != "flow"})


def test_report_has_the_fields_design_md_fixes() -> None:
    body = backfill_report(PLAN, SUMMARY, dag_id="dr_backfill", run_id="b1")
    assert json.loads(json.dumps(body)) == body
    assert body == {
        "dag_id": "dr_backfill",
        "run_id": "b1",
        "flow": "orders-flow",
        "dry_run": False,
        "window": {"window_start": "2026-03-01T08:00:00+00:00", "window_end": "2026-03-01T09:00:00+00:00"},
        "target_topics": ["orders.backfill"],
        "copied": 40,
        "to_copy": 50,
        "already_present": 10,
        "unavailable": SUMMARY["unavailable"],
        "verify": SUMMARY["verify"],
        "step": STEP,
    }
    page = backfill_page(body).splitlines()
    assert page[0] == "# Backfill of flow orders-flow"
    assert (
        "- run `b1`; window 2026-03-01T08:00:00+00:00 (inclusive) to 2026-03-01T09:00:00+00:00 (exclusive); into "
        "orders.backfill" in page
    )
    assert "- records copied: 40 (offsets to copy when planned: 50); already present: 10" in page
    assert "- **unavailable**: orders[1] offsets ?-4 deleted by retention at the source" in page
    assert "- verify: OK (50 records of the window expected, 0 missing, 0 duplicated, 0 mismatched)" in page


def test_a_dry_run_of_offsets_before_the_job_said_anything() -> None:
    plan = replace(PLAN, window_start=None, window_end=None, offsets={"orders:0": [5, 9]}, dry_run=True)
    body = backfill_report(plan, {}, dag_id="dr_backfill", run_id="b2")
    assert body["window"] == {"offsets": {"orders:0": [5, 9]}} and body["target_topics"] == ["orders.backfill"]
    assert (body["copied"], body["unavailable"], body["verify"]) == (None, [], None)
    page = backfill_page(body)
    assert page.startswith("# Backfill of flow orders-flow (dry run)\n")
    assert "window offsets {'orders:0': [5, 9]}" in page and "verify" not in page
