"""dr_replication_health's flow_status alerts, delivered by Apprise to real receivers on this machine: an HTTP
server behind a `json://` URL and an SMTP server (aiosmtpd) that requires a login, behind a `mailto://` URL whose
password is a `${VAR}` of the environment; a third target that nobody listens on fails without failing anything.
Four dag.test() runs on the session stack: records nobody copied break the flow's lag SLO (ERR: fires once to each
target), the same ERR again (no repeat: repeat_after is an hour), the flow's source failed over from (one failed_over
alert instead, the run not failed for the flow), then failed back and the flow copied (OK: both resolve). Neither secret
appears in any log, report or state file; a missing ${VAR} fails the run's first task in one line, nothing sent.
A failed dr_failover run (dag_failed, from the tasks' on_failure_callback), a finished one (dr_report) and one waiting
for approval (approval_needed) reach a target too. The DR page lists the alerts sent and each target's answer."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from airflow.utils.state import DagRunState, TaskInstanceState
from support.airflow import answered, load_dag
from support.drills import produce
from support.kafka import create_topic
from support.ports import free_port
from support.receivers import http_receiver, smtp_receiver, subject_of
from support.reports import failover_report
from support.spark import run_in_process
from support.stack import Stack

from kafka_dr import roles
from kafka_dr.alerts import sent_log
from kafka_dr.dashboard.page import render_page
from kafka_dr.dashboard.view import collect_view
from kafka_dr.state import report_path

pytestmark = [pytest.mark.integration, pytest.mark.slow]
FLOW, TOPIC = "al-flow", "al-orders"
SMTP_USER, SMTP_PASSWORD = "oncall-bot", "Smtp-s3cret-91f2"  # the password only in the environment
ON = "[flow_status, failed_over]"
HOOK_TOKEN = "hook-t0ken-5d7e"  # a webhook credential, written in the URL's user part as Apprise allows


@pytest.fixture(scope="module")
def dag(airflow_db: Path) -> Any:
    return load_dag("dr_replication_health")


def run(dag: Any, path: Path) -> tuple[Any, dict[str, Any]]:
    result = dag.test(run_conf={"topology": str(path), "flows": [FLOW]})
    return result, json.loads(report_path("dr_replication_health", result.run_id).read_text())


def test_a_broken_flow_fires_once_and_resolves_on_each_target(
    dag: Any,
    stack: Stack,
    state: Path,
    spark: object,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("KDR_ALERT_SMTP_PASSWORD", SMTP_PASSWORD)
    dead = free_port()  # nothing listens there
    with http_receiver() as (http_port, posts), smtp_receiver(SMTP_USER, SMTP_PASSWORD) as (smtp_port, mails):
        path = alerting_topology(stack, http_port, smtp_port, dead)
        create_topic({"bootstrap.servers": stack.bootstrap("dc1")}, TOPIC, 1)
        produce(stack.bootstrap("dc1"), TOPIC, 0, 50)  # nobody copies them: 50 behind, the SLO is 10

        broken, report = run(dag, path)
        assert broken.state == DagRunState.FAILED  # the flow is ERR; the dead target is not why
        [alert] = report["alerts"]
        assert alert["title"] == f"kafka-dr flow_status {FLOW}: ERR" and alert["state"] == "firing"
        assert "SLO max_lag_records: 50 records behind (limit 10)" in alert["body"]
        assert [t["accepted"] for t in alert["targets"]] == [True, True, False]
        assert [p["title"] for p in posts.all()] == [alert["title"]] and posts.all()[0]["type"] == "failure"
        assert posts.all()[0]["path"] == "/hooks/kdr"
        assert [subject_of(m) for m in mails.all()] == [alert["title"]]

        again, report = run(dag, path)
        assert again.state == DagRunState.FAILED and report["alerts"] == []  # unchanged ERR: no repeat within 1 h
        assert len(posts.all()) == 1 and len(mails.all()) == 1

        # dc1 failed over from (as a dr_failover's report records it): the flow out of it is still ERR, but its
        # alert is the failover's, and the run does not fail for it.
        roles.failed_over("dc1", "dc2", "disaster", "manual__lost", "2026-11-29T03:00:00+00:00")
        folded, report = run(dag, path)
        assert folded.state == DagRunState.SUCCESS and [f["status"] for f in report["flows"]] == ["ERR"], report
        [pending] = report["alerts"]
        assert pending["title"] == "kafka-dr failed_over dc1: dc2 serves, failback pending", pending
        assert [f["away"] for f in report["failed_over"]] == ["dc1"]

        roles.failed_back("dc1")
        code, summary, err = run_in_process("replicate", "--topology", str(path), "--flow", FLOW)
        assert code == 0, err
        healed, report = run(dag, path)
        assert healed.state == DagRunState.SUCCESS  # the dead target fails again, and the run still succeeds
        resolved, back = report["alerts"]
        assert resolved["title"] == f"kafka-dr flow_status {FLOW}: OK again (was ERR)"
        assert back["title"] == "kafka-dr failed_over dc1: failed back" and back["state"] == "resolved"
        assert [t["accepted"] for t in resolved["targets"]] == [True, True, False]
        assert [p["type"] for p in posts.all()] == ["failure", "failure", "success", "success"]
        titles = [alert["title"], pending["title"], resolved["title"], back["title"]]
        assert [subject_of(m) for m in mails.all()] == titles

    assert_listed_and_no_secret_written(path, state, capfd)


def alerting_topology(stack: Stack, http_port: int, smtp_port: int, dead: int) -> Path:
    """The flow with a lag SLO of 10 records, alerting the HTTP receiver, the SMTP one (its password a ${VAR}) and a
    port nobody listens on."""
    urls = [
        f"json://kdr:{HOOK_TOKEN}@127.0.0.1:{http_port}/hooks/kdr",
        f"mailto://127.0.0.1:{smtp_port}?user={SMTP_USER}&pass=${{KDR_ALERT_SMTP_PASSWORD}}"
        "&from=kafka-dr@example.com&to=oncall@example.com",
        f"json://127.0.0.1:{dead}/nobody",
    ]
    return stack.write_topology(
        "alerts",
        f"  - {{name: {FLOW}, source: dc1, target: dc2, topics: {{include: ['{TOPIC}']}}}}",
        schema_registry=False,
        extra=f"health: {{max_lag_records: 10}}\nalerts: {{urls: {json.dumps(urls)}, on: {ON}}}\n",
    )


def assert_listed_and_no_secret_written(path: Path, state: Path, capfd: pytest.CaptureFixture[str]) -> None:
    """What the DR page lists, newest first, each target by its masked URL; neither secret in the output, the state
    files or the task logs."""
    assert [a["state"] for a in sent_log()[:3]] == ["resolved", "resolved", "firing"]
    shown = [t["shown"] for t in sent_log()[0]["targets"]]
    assert shown[0].startswith("json://kdr:****@127.0.0.1") and "****" in shown[1], shown
    page = render_page(collect_view(path))
    assert f"kafka-dr flow_status {FLOW}: OK again (was ERR)" in page and page.count("badge err'>failed") == 4
    written = capfd.readouterr()
    logs = [written.out, written.err]
    logs += [p.read_text(errors="replace") for p in state.rglob("*") if p.is_file()]
    logs += [p.read_text(errors="replace") for p in Path(dag_logs()).rglob("*.log")]
    for secret in (SMTP_PASSWORD, HOOK_TOKEN):
        assert not any(secret in text for text in logs), f"{secret} written somewhere"


def test_a_missing_variable_fails_the_first_task_in_one_line(dag: Any, stack: Stack, state: Path) -> None:
    with http_receiver() as (http_port, posts):
        urls = [f"json://127.0.0.1:{http_port}/x", "mailto://127.0.0.1:25?user=u&pass=${KDR_NOT_SET_ANYWHERE}"]
        path = stack.write_topology(
            "alerts-missing",
            f"  - {{name: {FLOW}, source: dc1, target: dc2, topics: {{include: ['{TOPIC}']}}}}",
            schema_registry=False,
            extra=f"alerts: {{urls: {json.dumps(urls)}}}\n",
        )
        result = dag.test(run_conf={"topology": str(path), "flows": [FLOW]})
        assert result.state == DagRunState.FAILED
        states = {ti.task_id: ti.state for ti in result.get_task_instances()}
        assert states["validate_flows"] == TaskInstanceState.FAILED and states["report"] != TaskInstanceState.SUCCESS
        assert posts.all() == [] and sent_log() == []


def dag_logs() -> str:
    from airflow.configuration import conf

    return conf.get("logging", "base_log_folder")


def test_a_failed_run_and_a_finished_failover_reach_the_targets(stack: Stack, state: Path, airflow_db: Path) -> None:
    """dag_failed: dr_failover from dc1 to dc1 fails its first task, whose on_failure_callback (Airflow's notifier
    interface) sends the DAG, run, task and one-line error, once for the run. dr_report: what a report task sends
    once its report is written: what happened, RPO and RTO, and where the report is."""
    from kafka_dr.airflow.hooks.alerts import send_report_alert
    from kafka_dr.topology import load_topology

    with http_receiver() as (http_port, posts):
        path = stack.write_topology(
            "alerts-runs",
            f"  - {{name: {FLOW}, source: dc1, target: dc2, topics: {{include: ['{TOPIC}']}}}}",
            schema_registry=False,
            extra=f"alerts: {{urls: ['json://127.0.0.1:{http_port}/runs'], on: [dag_failed, dr_report]}}\n",
        )
        conf = {"topology": str(path), "failed_cluster": "dc1", "target_cluster": "dc1", "mode": "disaster"}
        failed = load_dag("dr_failover").test(run_conf=conf)
        assert failed.state == DagRunState.FAILED
        [post] = posts.all()
        assert (post["title"], post["type"]) == ("kafka-dr dag_failed dr_failover: validate_failover failed", "failure")
        assert post["message"].startswith(f"run {failed.run_id}\n") and "dc1" in post["message"], post["message"]

        body = failover_report(12, 4.25, report_file="/r/f.json")
        send_report_alert(load_topology(path), "dr_failover", "manual__r1", body)
        report = posts.all()[1]
        assert report["title"] == (
            "kafka-dr dr_report dr_failover: dc1 -> dc2 (disaster), RPO 12 records (estimate), RTO 4.2 s"
        )
        assert report["message"] == "run manual__r1\nreport /r/f.json" and report["type"] == "success"


def test_a_failover_waiting_for_approval_is_announced_with_its_preview(
    stack: Stack, state: Path, airflow_db: Path
) -> None:
    """approval_needed: a dr_failover run that waits at `approve` sends what it would do (the preview) as an `info`
    alert; rejected, its dag_failed alert names who rejected it."""
    with http_receiver() as (http_port, posts):
        path = stack.write_topology(
            "alerts-approval",
            f"  - {{name: {FLOW}, source: dc1, target: dc2, topics: {{include: ['{TOPIC}']}}}}",
            schema_registry=False,
            extra=f"alerts: {{urls: ['json://127.0.0.1:{http_port}/ask'], on: [approval_needed, dag_failed]}}\n"
            "dr: {approval: required}\n",
        )
        conf = {"topology": str(path), "failed_cluster": "dc1", "target_cluster": "dc2", "mode": "disaster"}
        rejected = answered("dr_failover", "Reject", "bob", lambda: load_dag("dr_failover").test(run_conf=conf))
        assert rejected.state == DagRunState.FAILED
        asked, failed = posts.all()
        assert (
            asked["title"] == "kafka-dr approval_needed dr_failover: failover dc1 -> dc2 (disaster) waits for approval"
        )
        assert asked["type"] == "info" and asked["message"].startswith(f"run {rejected.run_id}\n# Failover dc1 -> dc2")
        assert "- replicators:" in asked["message"] and "- groups: " in asked["message"], asked["message"]
        assert failed["title"] == "kafka-dr dag_failed dr_failover: approve failed"
        assert "rejected by bob: nothing changed" in failed["message"], failed["message"]


def test_a_variable_may_come_from_the_connection_kafka_dr_alerts(
    airflow_db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An SMTP password kept in Airflow's connections rather than the workers' environment: the connection's extra
    fills `${VAR}`, on top of the environment."""
    from kafka_dr.airflow.hooks.alerts import alert_targets
    from kafka_dr.topology import Alerts, parse_topology

    url = "mailto://127.0.0.1:25?user=bot&pass=${KDR_CONN_ONLY_PASSWORD}&from=kdr@example.com&to=oncall@example.com"
    topology = parse_topology({"clusters": {"dc1": {"bootstrap_servers": "127.0.0.1:1"}}, "alerts": {"urls": [url]}})
    assert topology.alerts == Alerts((url,))
    monkeypatch.delenv("KDR_CONN_ONLY_PASSWORD", raising=False)
    with pytest.raises(Exception, match=r"alerts.urls\[0\]: \$\{KDR_CONN_ONLY_PASSWORD\} is not set"):
        alert_targets(topology)
    connection = {"conn_type": "generic", "extra": {"KDR_CONN_ONLY_PASSWORD": "from-the-connection"}}
    monkeypatch.setenv("AIRFLOW_CONN_KAFKA_DR_ALERTS", json.dumps(connection))
    [target] = alert_targets(topology)
    assert "from-the-connection" not in target.shown and target.shown.startswith("mailto://bot:****@127.0.0.1")
