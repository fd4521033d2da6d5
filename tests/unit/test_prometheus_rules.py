"""monitoring/prometheus/ checked by Prometheus's own promtool (Debian's `prometheus` package, installed by
`make venv`): the rules load, their unit tests pass and would fail on a rule made laxer, every alert has a test in
which it fires, and every kafka-dr metric a rule reads is one that kafka_dr.metrics exports."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from support.topology import write_topology

from kafka_dr import metrics

MONITORING = Path(__file__).resolve().parents[2] / "monitoring" / "prometheus"
RULES = MONITORING / "rules.yml"
RULE_TESTS = MONITORING / "rules_test.yml"


@pytest.fixture(scope="module")
def promtool() -> str:
    found = shutil.which("promtool")
    if found is None:
        pytest.fail("promtool is missing: `make venv` installs Debian's prometheus package, which ships it")
    return found


def run(promtool: str, *args: str, cwd: Path = MONITORING) -> subprocess.CompletedProcess[str]:
    return subprocess.run([promtool, *args], cwd=cwd, capture_output=True, text=True, timeout=120)


def alerts() -> dict[str, dict]:
    return {rule["alert"]: rule for group in yaml.safe_load(RULES.read_text())["groups"] for rule in group["rules"]}


def test_the_rules_load_and_their_unit_tests_pass(promtool: str) -> None:
    checked = run(promtool, "check", "rules", RULES.name)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    tested = run(promtool, "test", "rules", RULE_TESTS.name)
    assert tested.returncode == 0, tested.stdout + tested.stderr


def test_the_unit_tests_fail_when_a_rule_fires_too_early(promtool: str, tmp_path: Path) -> None:
    """The flow-ERR alert's `for:` cut in half: the test that waits 10 minutes for it must now fail."""
    (tmp_path / "rules.yml").write_text(RULES.read_text().replace("for: 10m", "for: 5m", 1))
    (tmp_path / "rules_test.yml").write_text(RULE_TESTS.read_text())
    tested = run(promtool, "test", "rules", "rules_test.yml", cwd=tmp_path)
    assert tested.returncode != 0 and "KafkaDrFlowError" in tested.stdout + tested.stderr


def test_the_unit_tests_fail_when_drills_may_be_older_before_the_overdue_alert(promtool: str, tmp_path: Path) -> None:
    """KafkaDrDrillOverdue's 35 days made 36: the test that expects it a minute past 35 days must now fail."""
    rules = RULES.read_text()
    assert rules.count("> 35 * 86400") == 1
    (tmp_path / "rules.yml").write_text(rules.replace("> 35 * 86400", "> 36 * 86400"))
    (tmp_path / "rules_test.yml").write_text(RULE_TESTS.read_text())
    tested = run(promtool, "test", "rules", "rules_test.yml", cwd=tmp_path)
    assert tested.returncode != 0 and "KafkaDrDrillOverdue" in tested.stdout + tested.stderr


def test_every_alert_has_a_test_in_which_it_fires() -> None:
    tests = yaml.safe_load(RULE_TESTS.read_text())["tests"]
    fired = {case["alertname"] for test in tests for case in test.get("alert_rule_test", []) if case.get("exp_alerts")}
    assert set(alerts()) == fired, set(alerts()) ^ fired


def test_every_kafka_dr_metric_a_rule_reads_is_exported(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A misspelt metric in a rule matches nothing and the alert never fires: each name must be one that
    kafka_dr.metrics declares (its families are declared even when they have no sample)."""
    monkeypatch.setenv("KDR_STATE_DIR", str(tmp_path / "state"))
    flow = "  - {name: out, source: dc1, target: dc2, topics: {include: [orders]}}\n"
    topology = write_topology(tmp_path / "t.yaml", {"dc1": "127.0.0.1:1", "dc2": "127.0.0.1:2"}, flow)
    exported = set(re.findall(r"^# TYPE (\w+) ", metrics.render(topology).decode(), re.M))
    read = {name for rule in alerts().values() for name in re.findall(r"\bkafka_dr_\w+", rule["expr"])}
    assert read and read - exported == set(), read - exported
