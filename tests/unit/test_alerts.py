"""kafka_dr.alerts without a network: the Alertmanager-like rules of flow_status (a change fires or resolves, an
unchanged ERR repeats only after repeat_after, a delivery nobody accepted is tried again), targets checked before
anything is sent, and URLs shown masked. Targets are small fakes of an Apprise plugin; the real deliveries are
tests/airflow/test_health_alerts.py's."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.drill_evidence import drill_evidence, failed_drill_evidence
from support.fakes import FakePlugin
from support.topology import write_topology

from kafka_dr import alerts, roles
from kafka_dr.alerts import AlertConfigError, Target
from kafka_dr.health.rules import FlowHealth
from kafka_dr.readiness import Finding
from kafka_dr.topology import ALERT_EVENTS, Alerts, load_topology

CONFIG = Alerts(urls=("json://fake",), repeat_after_s=3600)


@pytest.fixture(autouse=True)
def state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("KDR_STATE_DIR", str(tmp_path / "state"))
    return tmp_path / "state"


def health(status: str, name: str = "out") -> FlowHealth:
    return FlowHealth(name, status, () if status == "OK" else (f"{status} problem",), ())


def test_a_change_fires_an_unchanged_err_repeats_after_repeat_after_and_ok_resolves() -> None:
    plugin = FakePlugin()
    to = [Target("alerts.urls[0]", "json://fake", plugin)]

    def titles(status: str, now: float) -> list[str]:
        return [a["title"] for a in alerts.notify_flow_statuses(CONFIG, [health(status)], to, now)]

    assert titles("OK", 0) == []  # a first OK is no news
    assert titles("WARN", 10) == ["kafka-dr flow_status out: WARN"]
    assert titles("WARN", 20) == []  # unchanged WARN: never repeated
    assert titles("ERR", 30) == ["kafka-dr flow_status out: ERR"]
    assert titles("ERR", 30 + 3599) == []
    assert titles("ERR", 30 + 3600) == ["kafka-dr flow_status out: ERR (still)"]
    assert titles("ERR", 30 + 3700) == []  # the repeat restarted the clock
    assert titles("OK", 4000) == ["kafka-dr flow_status out: OK again (was ERR)"]
    assert titles("OK", 5000) == []
    assert [kind for _, kind in plugin.sent] == ["failure", "failure", "failure", "success"]


def test_a_delivery_nobody_accepted_is_tried_again_and_one_flow_does_not_hide_another() -> None:
    down, up = FakePlugin(accept=False), FakePlugin()
    refused = alerts.notify_flow_statuses(CONFIG, [health("ERR")], [Target("alerts.urls[0]", "x", down)], 0)
    assert [t["accepted"] for t in refused[0]["targets"]] == [False]
    to = [Target("alerts.urls[0]", "x", down), Target("alerts.urls[1]", "y", up)]
    again = alerts.notify_flow_statuses(CONFIG, [health("ERR"), health("ERR", "back")], to, 60)
    assert [(a["subject"], [t["accepted"] for t in a["targets"]]) for a in again] == [
        ("out", [False, True]),
        ("back", [False, True]),
    ]
    assert alerts.notify_flow_statuses(CONFIG, [health("ERR"), health("ERR", "back")], to, 120) == []


def test_events_not_listed_are_not_sent() -> None:
    plugin = FakePlugin()
    to = [Target("alerts.urls[0]", "x", plugin)]
    only_reports = Alerts(urls=("json://fake",), on=("dr_report",))
    assert alerts.notify_flow_statuses(only_reports, [health("ERR")], to) == []
    alert = alerts.Alert("dag_failed", "dr_failover", alerts.FIRING, "kafka-dr dag_failed dr_failover", "x")
    assert alerts.notify(only_reports, alert, to) == [] and plugin.sent == []


def test_targets_take_variables_from_the_environment_and_show_no_secret() -> None:
    config = Alerts(
        urls=(
            "json://bot:${HOOK}@127.0.0.1:9/kdr",
            "mailto://127.0.0.1:25?user=u&pass=${PW}&from=kdr@example.com&to=oncall@example.com",
        )
    )
    found = alerts.targets(config, {"HOOK": "t0ken-x", "PW": "pass-y"})
    assert [t.key for t in found] == ["alerts.urls[0]", "alerts.urls[1]"]
    assert all("t0ken-x" not in t.shown and "pass-y" not in t.shown for t in found), [t.shown for t in found]
    with pytest.raises(AlertConfigError, match=r"^alerts.urls\[1\]: \$\{PW\} is not set \(environment or connect"):
        alerts.targets(config, {"HOOK": "t0ken-x"})
    with pytest.raises(AlertConfigError, match=r"^alerts.urls\[0\]: not a URL Apprise can send to \(scheme 'nosuch'"):
        alerts.targets(Alerts(urls=("nosuch://127.0.0.1/x",)), {})


def test_the_topology_section(tmp_path: Path) -> None:
    text = "alerts:\n  urls: ['json://127.0.0.1:9099/kdr']\n  on: [flow_status, dr_report]\n  repeat_after: 30m\n"
    topology = load_topology(write_topology(tmp_path / "t.yaml", {"dc1": "127.0.0.1:1"}, extra=text))
    assert topology.alerts == Alerts(("json://127.0.0.1:9099/kdr",), ("flow_status", "dr_report"), 1800.0)
    plain = load_topology(write_topology(tmp_path / "u.yaml", {"dc1": "127.0.0.1:1"}))
    assert plain.alerts.urls == () and plain.alerts.repeat_after_s == 3600 and plain.alerts.on == ALERT_EVENTS


def test_a_drills_report_alert_names_its_verdict_and_a_failed_one_is_a_failure() -> None:
    passed = alerts.dr_report_alert("dr_drill", "r1", drill_evidence(), "/s/drills/r1.json")
    assert passed.state == alerts.SUCCEEDED
    title = "kafka-dr dr_report dr_drill: drill disaster_round_trip dc1 -> dc2 passed, RPO 0 records, RTO 11.2 s"
    assert passed.title == title
    failed = alerts.dr_report_alert("dr_drill", "r2", failed_drill_evidence(), "/s/drills/r2.json")
    assert failed.state == alerts.FIRING
    assert "FAILED: RTO objective missed: 21.0 s > 0.5 s (dr.rto_seconds)" in failed.title


def test_readiness_alerts_once_per_change_repeats_what_stays_not_ready_and_resolves() -> None:
    plugin = FakePlugin()
    to = [Target("alerts.urls[0]", "json://fake", plugin)]
    ready, unknown = Finding("flows", True, "1 flow(s) running"), Finding("approvers", None, "not gathered here")
    paused = Finding("dags_unpaused", False, "paused: dr_failover")
    old = Finding("drill_age", False, "no dr_drill has passed")

    def titles(now: float, *findings: Finding) -> list[str]:
        return [a["title"] for a in alerts.notify_readiness(CONFIG, [ready, unknown, *findings], to, now)]

    assert titles(0) == []  # ready (a check not gathered is no news)
    assert titles(10, paused) == ["kafka-dr readiness: NOT READY: dags_unpaused"]
    assert titles(20, paused) == []
    assert titles(30, paused, old) == ["kafka-dr readiness: NOT READY: dags_unpaused, drill_age"]
    assert titles(30 + 3599, paused, old) == []
    assert titles(30 + 3600, paused, old) == ["kafka-dr readiness: NOT READY (still): dags_unpaused, drill_age"]
    assert titles(4000) == ["kafka-dr readiness: ready again"]
    assert titles(5000) == []
    assert [kind for _, kind in plugin.sent] == ["failure", "failure", "failure", "success"]
    assert "(see docs/runbooks/readiness.md#dags-unpaused)" in alerts.sent_log()[-1]["body"]  # the oldest: its lines
    assert alerts.readiness_alert(Alerts(urls=("json://fake",), on=("flow_status",)), [paused]) is None


def test_a_pending_failback_is_one_alert_repeated_at_repeat_after_and_resolved_once_failed_back() -> None:
    plugin = FakePlugin()
    to = [Target("alerts.urls[0]", "json://fake", plugin)]
    lost = roles.FailedOver("dc1", "dc2", "disaster", "manual__1", "2026-11-29T03:00:00+00:00", "2026-11-29T03:01:00")

    def titles(now: float, pending: dict[str, roles.FailedOver]) -> list[str]:
        return [a["title"] for a in alerts.notify_failovers(CONFIG, pending, to, now)]

    assert titles(0, {}) == []
    assert titles(10, {"dc1": lost}) == ["kafka-dr failed_over dc1: dc2 serves, failback pending"]
    assert titles(20, {"dc1": lost}) == []
    assert titles(10 + 3600, {"dc1": lost}) == ["kafka-dr failed_over dc1: dc2 serves, failback pending (still)"]
    assert titles(4000, {}) == ["kafka-dr failed_over dc1: failed back"]
    assert titles(5000, {}) == []
    assert [kind for _, kind in plugin.sent] == ["failure", "failure", "success"]
    assert "dc1 lost (dr_failover run manual__1, started 2026-11-29T03:00:00+00:00)" in alerts.sent_log()[-1]["body"]
