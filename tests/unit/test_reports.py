"""What the DR reports share (kafka_dr.reports): the RTO and each step's seconds from the times the tasks record,
and the step table of a report page. No Airflow, no Kafka."""

from __future__ import annotations

from datetime import datetime

import pytest
from support.steps import RUN_START, at

from kafka_dr.reports import rto_seconds, run_start, step_seconds, step_table


def test_rto_runs_from_the_run_start_to_the_end_of_the_clients_switch() -> None:
    assert rto_seconds(RUN_START, {"started": at(10.5), "ended": at(11.25)}) == 11.25
    assert rto_seconds(RUN_START, {"started": at(10.5)}) is None  # the switch never ended
    assert rto_seconds(RUN_START, None) is None  # never reached


def test_step_seconds_from_its_times_or_its_job_and_none_without_an_end() -> None:
    assert step_seconds({"started": at(1.0), "ended": at(2.5)}) == 1.5
    assert step_seconds({"seconds": 4.25}) == 4.25  # a Spark job's own measurement
    assert step_seconds({"started": at(1.0)}) is None


def test_step_table_has_a_row_per_step_with_empty_cells_for_what_is_unknown() -> None:
    table = step_table({"validate": {"started": at(0.5), "ended": at(1.0)}, "translate": {"seconds": 4.25}})
    assert table[:3] == ["", "| step | started | ended | seconds |", "|---|---|---|---|"]
    assert table[3:] == [f"| validate | {at(0.5)} | {at(1.0)} | 0.5 |", "| translate |  |  | 4.25 |"]


def test_a_run_starts_when_airflow_recorded_it_else_when_it_was_validated() -> None:
    assert run_start(RUN_START, {"started": at(0.5)}) == RUN_START
    # Resumed by clearing its failed tasks: Airflow's start is the clear's time, later than the validation.
    cleared = datetime.fromisoformat(at(95.0))
    assert run_start(cleared, {"started": at(0.5), "ended": at(1.0)}) == datetime.fromisoformat(at(0.5))
    assert run_start(None, {"started": at(0.5), "ended": at(1.0)}) == datetime.fromisoformat(at(0.5))
    with pytest.raises(ValueError, match="report: the run has no recorded start and its validation no step"):
        run_start(None, None)
