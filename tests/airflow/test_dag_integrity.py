"""Every file in dags/ imports cleanly, defines only docs/design.md's DAG ids, and dr_bringup is wired as designed."""

from __future__ import annotations

import copy
import inspect
import os
from pathlib import Path

import pendulum
import pytest
from airflow.dag_processing.dagbag import DagBag
from airflow.sdk.exceptions import ParamValidationError

DESIGN_DAG_IDS = {
    "dr_bringup",
    "dr_replication_health",
    "dr_failover",
    "dr_schema_redirect",
    "dr_failback",
    "dr_backfill",
    "dr_drill",
}
BRINGUP_ORDER = [
    "validate_topology",
    "clusters_reachable",
    "internal_topics",
    "destination_topics_synced",
    "schema_registries_checked",
    "replicators_started",
    "lag_gate",
    "heartbeat_round_trip",
    "report",
]


@pytest.fixture(scope="module")
def dagbag() -> DagBag:
    return DagBag(dag_folder=os.environ["AIRFLOW__CORE__DAGS_FOLDER"])


def test_every_dag_file_imports_without_errors(dagbag: DagBag) -> None:
    assert dagbag.import_errors == {}
    assert dagbag.dag_ids, "no DAG found"


def test_dag_ids_are_the_designed_ones(dagbag: DagBag) -> None:
    assert set(dagbag.dag_ids) <= DESIGN_DAG_IDS, f"unexpected DAG ids: {set(dagbag.dag_ids) - DESIGN_DAG_IDS}"
    assert "dr_bringup" in dagbag.dag_ids
    for dag_id in dagbag.dag_ids:
        assert Path(dagbag.dags[dag_id].fileloc).name == f"{dag_id}.py", "one DAG per file, named by its id"


def test_every_dag_starts_unpaused(dagbag: DagBag) -> None:
    """In an Airflow whose DAGs are paused at creation (its default), a DR DAG paused would queue a 3 a.m. failover
    and never start it: every kafka-dr DAG says so itself, whatever the deployment's setting."""
    assert {dag_id: dag.is_paused_upon_creation for dag_id, dag in dagbag.dags.items()} == dict.fromkeys(
        DESIGN_DAG_IDS, False
    )


def test_every_dag_links_its_runbook(dagbag: DagBag) -> None:
    """The DAG's docs in the UI open its runbook on the DR page's copy of the site (docs/runbooks/<dag_id>.md)."""
    docs = Path(__file__).resolve().parents[2] / "docs" / "runbooks"
    for dag_id, dag in dagbag.dags.items():
        assert f"](/kafka-dr/docs/runbooks/{dag_id}/)" in dag.doc_md, dag_id
        assert (docs / f"{dag_id}.md").exists(), dag_id


def test_a_drill_brings_its_dc_back_after_any_failover_and_fails_back_only_after_a_good_one(dagbag: DagBag) -> None:
    from kafka_dr.airflow.operators.trigger_or_wait import TriggerOrWaitDagRunOperator

    dag = dagbag.dags["dr_drill"]
    assert dag.task_dict["bring_back"].trigger_rule == "all_done"
    assert dag.task_dict["failback"].upstream_task_ids == {"after_failover", "bring_back"}
    assert dag.task_dict["failback"].trigger_rule == "none_failed"  # a planned drill skips bring_back
    for step in ("failover", "failback"):  # a cleared step waits for its inner run
        assert isinstance(dag.task_dict[step], TriggerOrWaitDagRunOperator), step


def test_the_drill_report_takes_each_steps_result_as_an_argument(dagbag: DagBag) -> None:
    """The evidence reads the steps' results wired in the DAG (a step renamed breaks the DAG, not the evidence), and
    runs whatever happened before it."""
    report = dagbag.dags["dr_drill"].task_dict["drill_report"]
    assert report.trigger_rule == "all_done"
    assert {name: arg.operator.task_id for name, arg in report.op_kwargs.items()} == {
        "validated": "validate_drill",
        "opened": "open_ledger",
        "health_before": "health_before",
        "approved": "approve",
        "probe": "start_probe",
        "cut": "cut_off",
        "caught_up": "after_failover",
        "back": "bring_back",
        "stopped": "stop_probe",
        "health_after": "health_after",
    }
    assert set(report.op_kwargs) | {"params"} == set(inspect.signature(report.python_callable).parameters)


def test_dr_bringup_runs_the_designed_steps_in_order(dagbag: DagBag) -> None:
    dag = dagbag.dags["dr_bringup"]
    assert dag.schedule is None
    assert set(dag.task_ids) == set(BRINGUP_ORDER)
    for upstream, downstream in zip(BRINGUP_ORDER, BRINGUP_ORDER[1:], strict=False):
        assert downstream in dag.task_dict[upstream].downstream_task_ids, f"{upstream} -> {downstream}"
    assert dag.task_dict["validate_topology"].upstream_task_ids == set(), "params are checked first"
    assert set(dag.params) == {"topology", "flows", "max_lag_records", "max_lag_seconds"}
    assert dag.params["flows"] == []


def test_dr_backfill_has_hourly_data_intervals_and_starts_unpaused(dagbag: DagBag) -> None:
    from airflow.timetables.interval import CronDataIntervalTimetable

    dag = dagbag.dags["dr_backfill"]
    assert isinstance(dag.timetable, CronDataIntervalTimetable)  # start and end differ, so a run is a window
    interval = dag.timetable.infer_manual_data_interval(run_after=pendulum.datetime(2026, 5, 1, 10, 30, tz="UTC"))
    assert (interval.start, interval.end) == (
        pendulum.datetime(2026, 5, 1, 9, tz="UTC"),
        pendulum.datetime(2026, 5, 1, 10, tz="UTC"),
    )
    assert dag.is_paused_upon_creation is False and dag.max_active_runs == 1  # a triggered run starts at once


def test_dr_replication_health_is_scheduled_one_run_at_a_time(dagbag: DagBag, monkeypatch: pytest.MonkeyPatch) -> None:
    dag = dagbag.dags["dr_replication_health"]
    assert (dag.schedule, dag.catchup, dag.max_active_runs) == ("*/5 * * * *", False, 1)
    assert {t.task_id: sorted(t.downstream_task_ids) for t in dag.tasks} == {
        "validate_flows": ["check"],
        "check": ["count_outages", "readiness", "report", "self_heal"],
        "self_heal": ["report"],
        "report": [],
        "count_outages": ["propose_failover"],
        "readiness": [],
        "propose_failover": [],
    }
    assert dag.task_dict["check"].is_mapped, "one mapped check per flow: an outage cannot hide another flow"
    assert dag.task_dict["propose_failover"].is_mapped, "one proposal per cluster, none when no cluster is lost"
    monkeypatch.setenv("KDR_HEALTH_SCHEDULE", "@hourly")  # the schedule is set where the DAG runs, not in its file
    rescheduled = DagBag(dag_folder=os.environ["AIRFLOW__CORE__DAGS_FOLDER"]).dags["dr_replication_health"]
    assert rescheduled.schedule == "@hourly"


@pytest.mark.parametrize(
    "dag_id, first",
    [
        ("dr_failover", "validate_failover"),
        ("dr_schema_redirect", "validate_redirect"),
        ("dr_replication_health", "validate_flows"),
        ("dr_failback", "validate_failback"),
        ("dr_backfill", "validate_backfill"),
        ("dr_drill", "validate_drill"),
    ],
)
def test_trigger_forms_explain_themselves_and_validate_first(dagbag: DagBag, dag_id: str, first: str) -> None:
    dag = dagbag.dags[dag_id]
    for name in dag.params:
        param = dag.params.get_param(name)
        assert param.schema.get("title") and param.description, f"{dag_id}: param {name} needs title and description"
    assert dag.task_dict[first].upstream_task_ids == set(), "params are checked first"
    assert dag.task_dict[first].get_flat_relative_ids(upstream=False) == set(dag.task_ids) - {first}
    if dag_id == "dr_failback":
        assert dag.params.get_param("unreplicated").schema["enum"] == ["report", "republish", "discard"]
        assert dag.params["unreplicated"] == "report" and dag.params["dry_run"] is False
    if dag_id == "dr_failover":
        assert dag.params.get_param("mode").schema["enum"] == ["planned", "disaster"]
        assert set(dag.params.get_param("failed_cluster").schema["enum"]) == {"dc1", "dc2"}


@pytest.mark.parametrize(
    "dag_id, switch",
    [
        ("dr_failover", {"failed_cluster": "dc1", "target_cluster": "dc2", "mode": "planned"}),
        ("dr_failback", {"restored_cluster": "dc1", "serving_cluster": "dc2", "mode": "data_kept"}),
    ],
)
def test_a_dr_switch_has_no_defaults_and_a_trigger_without_them_is_refused(
    dagbag: DagBag, dag_id: str, switch: dict[str, str]
) -> None:
    """The form requires the clusters and the mode; a trigger that leaves one out is refused by Airflow's check of
    the conf (the REST API's 400), before any run exists."""
    dag = dagbag.dags[dag_id]
    assert not any(dag.params.get_param(name).has_value for name in switch)
    for left_out in switch:
        params = copy.deepcopy(dag.params)
        params.update({name: value for name, value in switch.items() if name != left_out})
        with pytest.raises(ParamValidationError, match=f"^Invalid input for param {left_out}: No value passed"):
            params.validate()
    params = copy.deepcopy(dag.params)
    params.update(switch)
    assert params.validate()[next(iter(switch))] == "dc1"  # those chosen, the rest may keep their defaults


def test_dr_failover_switches_consumers_once_their_offsets_are_in_with_the_registry_redirect_beside(
    dagbag: DagBag,
) -> None:
    """The redirect waits for replication to stop (no copy of the failed store lands after the target leads), not the
    switch for the redirect; verify and the report wait for both."""
    tasks = dagbag.dags["dr_failover"].task_dict
    assert tasks["switch_consumers"].upstream_task_ids == {"translate_offsets", "validate_failover"}
    assert tasks["redirect_schema_registry"].upstream_task_ids == {"stop_replication", "validate_failover"}
    assert {"switch_consumers", "redirect_schema_registry"} <= tasks["verify_failover"].upstream_task_ids


def test_dr_failover_previews_before_anything_changes_and_a_dry_run_ends_there(dagbag: DagBag) -> None:
    dag = dagbag.dags["dr_failover"]
    assert dag.params["dry_run"] is False
    assert dag.task_dict["preview"].upstream_task_ids == {"validate_failover"}
    assert dag.task_dict["unless_dry_run"].upstream_task_ids == {"validate_failover", "preview"}
    assert dag.task_dict["unless_dry_run"].ignore_downstream_trigger_rules  # skips even none_failed_* tasks
    after = dag.task_dict["unless_dry_run"].get_flat_relative_ids(upstream=False)
    changing = {"switch_producers", "stop_replication", "translate_offsets", "redirect_schema_registry"}
    assert changing | {"switch_consumers", "failover_report"} <= after


def test_dr_failover_changes_nothing_unless_approved(dagbag: DagBag) -> None:
    """Every step that changes something comes after `approve`, and none runs once an upstream task failed: a rejected
    or refused approval fails the run with nothing changed (shown on a real scheduler by tests/e2e)."""
    dag = dagbag.dags["dr_failover"]
    after = dag.task_dict["approve"].get_flat_relative_ids(upstream=False)
    changing = {"switch_producers", "stop_inbound", "stop_replication", "translate_offsets", "redirect_schema_registry"}
    assert changing | {"switch_consumers", "verify_failover", "failover_report"} <= after
    rules = {task_id: dag.task_dict[task_id].trigger_rule for task_id in after}
    runs_after_a_failure = {
        task_id: rule
        for task_id, rule in rules.items()
        if rule not in ("all_success", "none_failed", "none_failed_min_one_success")
    }
    assert runs_after_a_failure == {}
