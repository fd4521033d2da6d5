"""When a dr_backfill run copies (kafka_dr/backfill/plan.py idle_reason): the DAG is unpaused, so a scheduled hourly
run must copy nothing unless the topology asks for hourly gap repair, while a run triggered by hand or by Airflow's
backfill always copies."""

from __future__ import annotations

import pytest

from kafka_dr.backfill.plan import idle_reason
from kafka_dr.topology import DrPolicy, Topology


@pytest.mark.parametrize(
    ("run_type", "repair", "copies"),
    [
        ("scheduled", False, False),
        ("scheduled", True, True),
        ("manual", False, True),
        ("backfill", False, True),
        ("asset_triggered", False, True),
    ],
)
def test_only_a_scheduled_run_without_hourly_gap_repair_copies_nothing(run_type: str, repair: bool, copies: bool):
    topology = Topology({}, (), dr=DrPolicy(hourly_gap_repair=repair))
    reason = idle_reason(run_type, topology)
    assert (reason is None) is copies
    if reason is not None:
        assert reason == "a scheduled run copies nothing unless the topology sets dr.hourly_gap_repair: true"
