"""When a dr_backfill run copies (kafka_dr/backfill/plan.py idle_reason): the DAG is unpaused, so a scheduled hourly
run must copy nothing (it would target a past hour of a flow that copies it), while a run triggered by hand or by
Airflow's backfill always copies."""

from __future__ import annotations

import pytest

from kafka_dr.backfill.plan import idle_reason


@pytest.mark.parametrize(
    ("run_type", "copies"),
    [("scheduled", False), ("manual", True), ("backfill", True), ("asset_triggered", True)],
)
def test_only_a_scheduled_run_copies_nothing(run_type: str, copies: bool):
    reason = idle_reason(run_type)
    assert (reason is None) is copies
    if reason is not None:
        assert reason.startswith("a scheduled run copies nothing: trigger dr_backfill")
