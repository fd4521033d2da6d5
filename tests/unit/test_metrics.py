"""kafka_dr.metrics without a broker: health evaluations and reports in a temporary state dir, parsed back with
prometheus_client's own parser, as Prometheus would read them; `kafka-dr metrics` prints or writes the same."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families
from support.drill_evidence import drill_evidence, failed_drill_evidence
from support.reports import failover_report
from support.topology import write_topology

from kafka_dr import alerts, cli, metrics, readiness, roles
from kafka_dr.access import ClusterAccess
from kafka_dr.drill.evidence import write_evidence
from kafka_dr.health import sampler
from kafka_dr.health.check import check_flow, save_evaluation
from kafka_dr.health.rules import FlowFindings, FlowHealth, PartitionStatus
from kafka_dr.readiness import Finding
from kafka_dr.topology import load_topology

FLOWS = """\
  - {name: out, source: dc1, target: dc2, topics: {include: [orders]}}
  - {name: back, source: dc2, target: dc1, topics: {include: [returns]}}
  - {name: third, source: dc1, target: dc3, topics: {include: [orders]}}
"""
HEALTH = "health: {max_lag_records: 1000, max_lag_seconds: 60, max_checkpoint_age_s: 120}\n"


@pytest.fixture(autouse=True)
def state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("KDR_STATE_DIR", str(tmp_path / "state"))
    return tmp_path / "state"


@pytest.fixture
def topology(tmp_path: Path) -> Path:
    clusters = {"dc1": "127.0.0.1:1", "dc2": "127.0.0.1:2", "dc3": "127.0.0.1:3"}
    return write_topology(tmp_path / "topology.yaml", clusters, FLOWS, extra=HEALTH)


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of the exposition: (name, sorted labels) -> value."""
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def test_the_latest_evaluations_and_reports_as_prometheus_reads_them(topology: Path, state_dir: Path) -> None:
    now_ms = int(time.time() * 1000)
    out = FlowHealth(
        "out",
        "ERR",
        ("STALL orders[1] no progress",),
        (PartitionStatus("orders", 0, "OK", 3, 0.5, ""), PartitionStatus("orders", 1, "STALL", 900, 75.0, "x")),
    )
    findings = FlowFindings(
        "out", now_ms, heartbeat_latency_ms=250.0, replicator_alive=False, checkpoint_ms=now_ms - 30_000
    )
    save_evaluation(None, out, now_ms - 60_000, [], findings=findings)
    down = FlowFindings("back", now_ms, unreachable="dc2 down", unreachable_cluster="dc2")
    save_evaluation(None, FlowHealth("back", "ERR", ("dc2 down",), ()), now_ms, [], findings=down)
    (state_dir / "health" / "gone.json").write_text(json.dumps({"status": "OK", "partitions": []}))  # not a flow
    reports = state_dir / "reports"
    reports.mkdir()
    (reports / "dr_failover-r1.json").write_text(json.dumps(failover_report(42, 4.5)))
    (reports / "dr_failback-r2.json").write_text("{not json")  # left out, the rest still served

    got = samples(metrics.render(topology).decode())

    assert got[("kafka_dr_topology_valid", ())] == 1
    assert got[("kafka_dr_flow_status", (("flow", "out"),))] == 2
    assert got[("kafka_dr_flow_status", (("flow", "back"),))] == 2
    assert not any(labels == (("flow", "third"),) or labels == (("flow", "gone"),) for _, labels in got)
    lag = (("flow", "out"), ("partition", "1"), ("topic", "orders"))
    assert (got[("kafka_dr_partition_lag_records", lag)], got[("kafka_dr_partition_lag_seconds", lag)]) == (900, 75)
    assert got[("kafka_dr_heartbeat_latency_seconds", (("flow", "out"),))] == 0.25
    assert 29 <= got[("kafka_dr_checkpoint_age_seconds", (("flow", "out"),))] < 40  # from the scrape's time
    assert got[("kafka_dr_replicator_up", (("flow", "out"),))] == 0
    assert ("kafka_dr_replicator_up", (("flow", "back"),)) not in got  # not known: none is tracked
    reachable = {labels[0][1]: v for (name, labels), v in got.items() if name == "kafka_dr_cluster_reachable"}
    assert reachable == {"dc1": 1, "dc2": 0}  # dc3: no evaluated flow touches it
    assert got[("kafka_dr_health_last_run_timestamp_seconds", ())] == pytest.approx(now_ms / 1000)
    assert got[("kafka_dr_slo_max_lag_seconds", ())] == 60
    assert got[("kafka_dr_slo_max_checkpoint_age_seconds", ())] == 120
    assert got[("kafka_dr_last_rpo_records", (("dag", "dr_failover"),))] == 42
    assert got[("kafka_dr_last_rto_seconds", (("dag", "dr_failover"),))] == 4.5
    assert ("kafka_dr_last_rto_seconds", (("dag", "dr_failback"),)) not in got


def test_a_topology_that_does_not_load_still_serves_every_kept_evaluation(tmp_path: Path) -> None:
    save_evaluation(None, FlowHealth("lone", "WARN", (), ()), 1_795_000_000_000, [])
    got = samples(metrics.render(tmp_path / "missing.yaml").decode())
    assert got[("kafka_dr_topology_valid", ())] == 0
    assert got[("kafka_dr_flow_status", (("flow", "lone"),))] == 1
    assert not any(name == "kafka_dr_cluster_reachable" for name, _ in got)


def test_the_cli_prints_or_writes_a_textfile_atomically(
    topology: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    save_evaluation(None, FlowHealth("out", "OK", (), (PartitionStatus("orders", 0, "OK", 0, 0.0, ""),)), 1, [])
    assert cli.main(["metrics", "--topology", str(topology)]) == 0
    printed = capsys.readouterr().out
    assert 'kafka_dr_flow_status{flow="out"} 0.0' in printed.splitlines()
    textfile = tmp_path / "collector" / "kafka_dr.prom"
    textfile.parent.mkdir()
    assert cli.main(["metrics", "--topology", str(topology), "--textfile", str(textfile)]) == 0
    assert textfile.read_text() == printed and list(textfile.parent.iterdir()) == [textfile]  # no temporary left
    assert "kafka_dr.prom" in capsys.readouterr().err
    assert cli.main(["metrics", "--topology", str(topology), "--textfile", str(tmp_path / "nowhere" / "x.prom")]) == 2
    assert capsys.readouterr().err.strip().count("\n") == 0  # one line


def test_a_health_run_that_cannot_reach_a_cluster_exports_it_unreachable(
    topology: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Nothing listens on the topology's ports: the run's evaluation names the cluster it could not reach."""
    monkeypatch.setattr(sampler, "TIMEOUT_S", 0.5)
    health = check_flow(ClusterAccess.from_environ(load_topology(topology)), "out")
    assert health.status == "ERR"
    got = samples(metrics.render(topology).decode())
    [down] = [labels[0][1] for (name, labels), v in got.items() if name == "kafka_dr_cluster_reachable" and v == 0]
    assert f"cluster {down} (" in health.problems[0], health.problems


def test_alert_deliveries_are_counted_per_target_and_result(topology: Path) -> None:
    class Plugin:
        def __init__(self, accept: bool) -> None:
            self.accept = accept

        def notify(self, **_: object) -> bool:
            return self.accept

    to = [alerts.Target("alerts.urls[0]", "x", Plugin(True)), alerts.Target("alerts.urls[1]", "y", Plugin(False))]
    for _ in range(2):
        alerts.send(alerts.Alert("dr_report", "dr_failover", alerts.SUCCEEDED, "kafka-dr dr_report", "b"), to)
    got = samples(metrics.render(topology).decode())
    assert got[("kafka_dr_alert_deliveries_total", (("result", "accepted"), ("target", "alerts.urls[0]")))] == 2
    assert got[("kafka_dr_alert_deliveries_total", (("result", "failed"), ("target", "alerts.urls[1]")))] == 2


def test_the_newest_drill_of_each_scenario_with_a_verdict(topology: Path, state_dir: Path) -> None:
    """Written newest first, so the files' times are not the drills' order; a drill still running, without a verdict,
    does not count."""
    newer = drill_evidence(
        run_id="newer", started="2026-12-04T14:00:00+00:00", ended="2026-12-04T14:03:00+00:00", rto_seconds=9.5
    )
    write_evidence(newer, pdf=False)
    older = drill_evidence(run_id="older", passed=False, failure="probe lost 3 records", rto_seconds=30.0)
    write_evidence(older, pdf=False)
    write_evidence(failed_drill_evidence(), pdf=False)
    running = drill_evidence(run_id="running", started="2026-12-05T14:00:00+00:00", ended=None, passed=None)
    write_evidence(running, pdf=False)
    (state_dir / "drills" / "torn.json").write_text("{")  # left out, the rest still served

    text = metrics.render(topology).decode()
    got = samples(text)

    disaster, planned = (("scenario", "disaster_round_trip"),), (("scenario", "planned_round_trip"),)
    assert got[("kafka_dr_drill_last_success", disaster)] == 1
    assert got[("kafka_dr_drill_last_rto_seconds", disaster)] == 9.5
    assert got[("kafka_dr_drill_last_timestamp_seconds", disaster)] == 1_796_392_980  # 2026-12-04T14:03:00Z
    assert got[("kafka_dr_drill_last_success", planned)] == 0
    assert got[("kafka_dr_drill_last_rto_seconds", planned)] == 21.0
    assert got[("kafka_dr_drill_last_timestamp_seconds", planned)] == 1_795_856_520  # 2026-11-28T09:02:00Z
    assert len([name for name, _ in got if name.startswith("kafka_dr_drill_")]) == 6
    assert "# HELP kafka_dr_drill_last_success 1 when the newest drill of the scenario passed, else 0" in text


def test_the_newest_failback_has_its_rpo_and_rto_beside_the_failovers() -> None:
    failover, failback = {"rpo_records": 42, "rto_seconds": 4.5}, {"rpo_records": 0, "rto_seconds": 12.5}
    reports = {"dr_failover": failover, "dr_failback": failback}  # as latest_reports gives them
    got = {(m.name, s.labels["dag"]): s.value for m in metrics.report_metrics(reports) for s in m.samples}
    assert got == {
        ("kafka_dr_last_rpo_records", "dr_failover"): 42,
        ("kafka_dr_last_rto_seconds", "dr_failover"): 4.5,
        ("kafka_dr_last_rpo_records", "dr_failback"): 0,
        ("kafka_dr_last_rto_seconds", "dr_failback"): 12.5,
    }


def test_the_newest_readiness_check_per_check_and_when() -> None:
    assert ("kafka_dr_readiness_timestamp_seconds", ()) not in samples(metrics.render(None).decode())
    findings = [
        Finding("dags_unpaused", False, "paused: dr_failover"),
        Finding("flows", True, "1 flow(s) running"),
        Finding("approvers", None, "not gathered here"),
    ]
    readiness.save(findings, datetime(2026, 11, 29, 3, 0, tzinfo=UTC))
    got = {k: v for k, v in samples(metrics.render(None).decode()).items() if k[0].startswith("kafka_dr_readiness")}
    assert got == {
        ("kafka_dr_readiness", (("check", "dags_unpaused"),)): 0,
        ("kafka_dr_readiness", (("check", "flows"),)): 1,
        ("kafka_dr_readiness_timestamp_seconds", ()): datetime(2026, 11, 29, 3, 0, tzinfo=UTC).timestamp(),
    }


def test_a_pending_failback_names_the_cluster_and_the_flows_it_holds(topology: Path) -> None:
    entry = roles.failed_over("dc3", "dc1", "disaster", "manual__1", "2026-11-29T03:00:00+00:00")
    got = {k: v for k, v in samples(metrics.render(topology).decode()).items() if "failed_over" in k[0]}
    assert got == {
        ("kafka_dr_failed_over", (("cluster", "dc3"), ("serving", "dc1"))): 1,
        ("kafka_dr_failed_over_timestamp_seconds", (("cluster", "dc3"),)): datetime.fromisoformat(
            entry.switched_at
        ).timestamp(),
        ("kafka_dr_flow_failed_over", (("flow", "third"),)): 1,
    }
    roles.failed_back("dc3")
    assert not [k for k in samples(metrics.render(topology).decode()) if "failed_over" in k[0]]
