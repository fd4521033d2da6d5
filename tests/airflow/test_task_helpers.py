"""The helpers the DR DAGs' tasks share (kafka_dr.airflow.common): step timing and report files; and the failure
messages that ask the operator to act, naming their runbook section. No stack needed."""

from __future__ import annotations

import inspect
import json
import os
import time
from dataclasses import replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from airflow.sdk import DAG, task
from airflow.sdk.exceptions import AirflowFailException
from support.steps import failback_plan
from support.topology import write_topology

from kafka_dr.airflow import failback as failback_tasks
from kafka_dr.airflow.common import timed, write_report
from kafka_dr.airflow.failback import registry_back, stop_message
from kafka_dr.airflow.failover import stop_replication
from kafka_dr.codec import encode
from kafka_dr.failover.plan import FailoverPlan
from kafka_dr.schema_registry import RegistryError


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
    result = stop_replication.function(encode(plan))
    assert result["replicators"] == {} and set(result["step"]) == {"started", "ended"}


def test_write_report_puts_json_and_page_under_reports(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KDR_STATE_DIR", str(tmp_path))
    written = write_report("dr_failover", "manual__2026-03-01T10:00:00+00:00", {"rto_seconds": 9.5}, "# page\n")
    path = Path(written["report_file"])
    assert path == tmp_path / "reports" / "dr_failover-manual__2026-03-01T10_00_00_00_00.json"
    assert json.loads(path.read_text()) == {"rto_seconds": 9.5} and written["rto_seconds"] == 9.5
    assert path.with_suffix(".md").read_text() == "# page\n"
    assert not Path(write_report("dr_bringup", "r", {})["report_file"]).with_suffix(".md").exists()


# --- failure messages that ask the operator to act name their runbook section (kafka_dr.runbooks) ------------------

FAILBACK = failback_plan()


def test_a_failback_stopped_by_records_that_never_left_names_its_runbook_section() -> None:
    unreplicated = {"records": 2, "per_topic": {"orders": 2}}
    line = stop_message(FAILBACK, unreplicated, "/r/dr_failback-fb1.json")
    assert line == (
        f"{FAILBACK.stop_line(unreplicated, '/r/dr_failback-fb1.json')}; "
        "see docs/runbooks/dr_failback.md#records-never-left-the-restored-cluster"
    )
    assert stop_message(replace(FAILBACK, unreplicated="republish"), unreplicated, "r") is None
    assert stop_message(FAILBACK, {"records": 0, "per_topic": {}}, "r") is None


def test_a_registry_not_handed_back_names_its_runbook_section(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    topology = write_topology(tmp_path / "t.yaml", {"dc1": "127.0.0.1:1", "dc2": "127.0.0.1:2"})

    line = "the `_schemas` of dc1 knows ids up to 3 but the dc1 registry served ids up to 5: replicate `_schemas` first"

    def refused(*args: Any) -> dict[str, Any]:
        raise RegistryError(line)

    monkeypatch.setattr(failback_tasks, "hand_back", refused)
    with pytest.raises(AirflowFailException) as failed:
        registry_back.function(encode(replace(FAILBACK, topology=str(topology))))
    # As dr_failover's redirect: the section of dr_schema_redirect's runbook on that registry failure.
    assert str(failed.value).startswith(f"{line}; see docs/runbooks/dr_schema_redirect.md#"), str(failed.value)


class _RunsSeen:
    """A task instance's view of other DAG runs, as TriggerOrWaitDagRunOperator asks it: whether the run exists, then
    its state at each look."""

    def __init__(self, exists: bool, states: list[str]) -> None:
        self.exists, self.states, self.pushed = exists, states, {}

    def get_dr_count(self, dag_id: str, run_ids: list[str]) -> int:
        return int(self.exists)

    def get_dagrun_state(self, dag_id: str, run_id: str) -> str:
        return self.states.pop(0)

    def xcom_push(self, key: str, value: Any) -> None:
        self.pushed[key] = value


def test_a_drill_step_run_again_waits_for_the_run_it_triggered_before() -> None:
    """A cleared or retried drill `failover` finds its inner run and waits for it to end (Airflow 3.3's operator would
    end skipped at once, and the drill would go on while its failover ran); a run not triggered yet is triggered."""
    from airflow.sdk.exceptions import AirflowException, DagRunTriggerException

    from kafka_dr.airflow.operators.trigger_or_wait import TriggerOrWaitDagRunOperator

    def step() -> TriggerOrWaitDagRunOperator:
        return TriggerOrWaitDagRunOperator(
            task_id="failover", trigger_dag_id="dr_failover", trigger_run_id="drill__r__failover",
            wait_for_completion=True, poke_interval=0.01,
        )  # fmt: skip

    ran = _RunsSeen(exists=True, states=["queued", "running", "success"])
    assert step().execute({"ti": ran}) is None
    assert ran.states == [] and ran.pushed == {"trigger_run_id": "drill__r__failover"}
    with pytest.raises(AirflowException, match="dr_failover run drill__r__failover ended failed"):
        step().execute({"ti": _RunsSeen(exists=True, states=["running", "failed"])})
    with pytest.raises(DagRunTriggerException):  # the task runner's signal to trigger it, then wait
        step().execute({"ti": _RunsSeen(exists=False, states=[])})


def test_a_drill_brings_its_dc_back_only_when_a_cut_was_tried(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """bring_back runs after a failed failover too (trigger rule all_done): it starts the DC when cut_off left its mark
    in the run's folder, and is skipped when no cut was tried (a planned drill, a run that ended before the cut)."""
    from airflow.sdk.exceptions import AirflowSkipException

    from kafka_dr.airflow import drill as drill_tasks
    from kafka_dr.drill.plan import plan_drill
    from kafka_dr.drill.run import DrillRun
    from kafka_dr.paths import DEFAULT_TOPOLOGY
    from kafka_dr.topology import load_topology

    params = {"scenario": "disaster_round_trip", "from_cluster": "dc1", "to_cluster": "dc2"}
    drill = plan_drill(load_topology(DEFAULT_TOPOLOGY), params)
    run = DrillRun(drill, str(DEFAULT_TOPOLOGY), "0" * 64, tmp_path / "run")
    started: list[str] = []
    monkeypatch.setattr(drill_tasks.cutoff, "bring_back", lambda topo, cluster: started.append(cluster) or "started")
    for plan in (
        None,
        encode(run),
    ):  # validate_drill failed (its XCom resolves to None); the run ended before its cut
        with pytest.raises(AirflowSkipException, match="no cut-off was tried"):
            drill_tasks.bring_back.function(plan)
    assert started == []
    (tmp_path / "run").mkdir()
    run.mark_cut()  # cut_off's mark, left before its command ran
    assert drill_tasks.bring_back.function(encode(run))["started"] == "started"
    assert started == ["dc1"]


def test_a_drills_steps_connect_with_the_clusters_airflow_connections(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A secured deployment keeps credentials in connections only: the drill's steps reach the clusters with them, as
    every other DAG's tasks do, and hand them to the probe process in its environment (never its command line)."""
    from kafka_dr.airflow import drill as drill_tasks
    from kafka_dr.drill.plan import plan_drill
    from kafka_dr.drill.run import DrillRun
    from kafka_dr.paths import DEFAULT_TOPOLOGY
    from kafka_dr.topology import load_topology

    for name in ("KDR_CLUSTER_DC1_CONFIG", "KDR_CLUSTER_DC2_CONFIG", "KDR_REGISTRY_DC1_USER_INFO"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv(
        "AIRFLOW_CONN_KAFKA_DR_DC1", json.dumps({"conn_type": "generic", "extra": {"security.protocol": "SSL"}})
    )
    registry = {"conn_type": "http", "login": "drill", "password": "s3cret"}
    monkeypatch.setenv("AIRFLOW_CONN_KAFKA_DR_DC1_REGISTRY", json.dumps(registry))
    params = {"scenario": "planned_round_trip", "from_cluster": "dc1", "to_cluster": "dc2"}
    drill = plan_drill(load_topology(DEFAULT_TOPOLOGY), params)
    access = drill_tasks._access(DrillRun(drill, str(DEFAULT_TOPOLOGY), "0" * 64, tmp_path / "run"))
    assert access.config("dc1")["security.protocol"] == "SSL"
    assert "security.protocol" not in access.config("dc2")
    probe_env = access.child_environ()
    assert json.loads(probe_env["KDR_CLUSTER_DC1_CONFIG"]) == {"security.protocol": "SSL"}
    assert probe_env["KDR_REGISTRY_DC1_USER_INFO"] == "drill:s3cret" and "KDR_REGISTRY_DC1_USER_INFO" not in os.environ
