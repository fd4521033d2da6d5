"""The dag_failed notifier (every kafka-dr task's on_failure_callback) on small fakes of a failed task's context and
of an alert target: a scheduled DAG that fails the same way at every run alerts once per `alerts.repeat_after`, a
manual run once. Real deliveries through Airflow runs are tests/airflow/test_alerts_delivered.py's."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
from support.fakes import FakePlugin
from support.topology import write_topology

from kafka_dr.airflow.notifications import dag_failed
from kafka_dr.alerts import Target


def test_a_scheduled_run_failing_the_same_way_alerts_once_and_each_manual_run_alerts_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KDR_STATE_DIR", str(tmp_path / "state"))
    plugin = FakePlugin()
    monkeypatch.setattr(dag_failed, "topology_targets", lambda _: [Target("alerts.urls[0]", "json://fake", plugin)])
    extra = "alerts: {urls: ['json://127.0.0.1:1/x'], on: [dag_failed], repeat_after: 1h}\n"
    topology = write_topology(tmp_path / "topology.yaml", {"dc1": "127.0.0.1:1"}, extra=extra)

    def failed(run_type: str, run_id: str, error: str = "dc1 unreachable") -> None:
        ti = SimpleNamespace(dag_id="dr_replication_health", run_id=run_id, task_id="evaluate")
        context = {"ti": ti, "exception": error, "params": {"topology": str(topology)}}
        dag_failed.DagFailedNotifier().notify({**context, "dag_run": SimpleNamespace(run_type=run_type)})

    for minute in range(0, 60, 5):  # an hour of a 5-minute schedule failing alike: one alert, not twelve
        failed("scheduled", f"scheduled__{minute}")
    assert len(plugin.sent) == 1
    failed("scheduled", "scheduled__60", "dc2 unreachable")  # another failure is news
    assert len(plugin.sent) == 2
    for run_id in ("manual__a", "manual__a", "manual__b"):  # a person's run: once each
        failed("manual", run_id)
    assert [title for title, _ in plugin.sent] == ["kafka-dr dag_failed dr_replication_health: evaluate failed"] * 4
