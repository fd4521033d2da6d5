"""The helpers the DR DAGs' tasks share (kafka_dr.airflow.common): step timing and report files. No stack needed."""

from __future__ import annotations

import inspect
import json
import time
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from airflow.sdk import DAG, task
from support.topology import write_topology

from kafka_dr.airflow.common import timed, write_report
from kafka_dr.airflow.failover import stop_replication
from kafka_dr.failover.plan import FailoverPlan


def move(plan: dict[str, Any], roles: tuple[str, ...] = ("consumer",)) -> dict[str, Any]:
    """A step that takes a little time."""
    time.sleep(0.02)
    return {"moved": list(roles)}


def test_timed_adds_when_the_step_started_and_ended() -> None:
    result = timed(move)({"mode": "planned"})
    assert list(result) == ["moved", "step"] and result["moved"] == ["consumer"]
    started, ended = (datetime.fromisoformat(result["step"][key]) for key in ("started", "ended"))
    assert started.utcoffset() == timedelta(0) and timedelta(seconds=0.02) <= ended - started < timedelta(seconds=5)
    assert len(result["step"]["started"].split(".")[1]) == len("000+00:00"), "milliseconds, as the report shows"


def test_a_timed_task_is_the_task_it_was() -> None:
    timed_move = timed(move)
    assert (timed_move.__name__, timed_move.__doc__) == (move.__name__, move.__doc__)
    assert inspect.signature(timed_move) == inspect.signature(move), "Airflow passes params by the signature"
    with DAG("timed_helper_plain", schedule=None):
        plain = task(move)({}).operator
    with DAG("timed_helper_timed", schedule=None):
        wrapped = task(timed_move)({}).operator
    assert (wrapped.task_id, wrapped.multiple_outputs) == (plain.task_id, plain.multiple_outputs) == ("move", True)


def test_dr_failover_tasks_time_their_step(tmp_path: Path) -> None:
    topology = write_topology(tmp_path / "t.yaml", {"dc1": "127.0.0.1:1", "dc2": "127.0.0.1:2"})
    plan = FailoverPlan(str(topology), "dc1", "dc2", "disaster", ".*", flows=("f",), stop_flows=())
    result = stop_replication.function(plan.to_dict())
    assert result["replicators"] == {} and set(result["step"]) == {"started", "ended"}


def test_write_report_puts_json_and_page_under_reports(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KDR_STATE_DIR", str(tmp_path))
    written = write_report("dr_failover", "manual__2026-03-01T10:00:00+00:00", {"rto_seconds": 9.5}, "# page\n")
    path = Path(written["report_file"])
    assert path == tmp_path / "reports" / "dr_failover-manual__2026-03-01T10_00_00_00_00.json"
    assert json.loads(path.read_text()) == {"rto_seconds": 9.5} and written["rto_seconds"] == 9.5
    assert path.with_suffix(".md").read_text() == "# page\n"
    assert not Path(write_report("dr_bringup", "r", {})["report_file"]).with_suffix(".md").exists()
