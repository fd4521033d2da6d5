"""`kafka-dr readiness` gathers its facts from real clusters and the state directory: a flow with no replicator
running is not running, its lag is what a disaster would lose, the newest passing drill's evidence is found, and the
command prints one line per check and exits 1."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from support.drill_evidence import drill_evidence
from support.drills import copy_flow
from support.kafka import Record, create_topic, produce
from support.stack import BrokerPair
from support.topology import write_topology

from kafka_dr import cli, readiness
from kafka_dr.access import ClusterAccess
from kafka_dr.drill.evidence import write_evidence
from kafka_dr.topology import load_topology

pytestmark = pytest.mark.integration


def test_readiness_reads_the_flows_and_the_drill_reports(
    broker_pair: BrokerPair, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    state = tmp_path / "state"
    monkeypatch.setenv("KDR_STATE_DIR", str(state))
    topic = f"ready-{uuid.uuid4().hex[:8]}"
    create_topic(broker_pair.dc1.config, topic, 2)
    produce(broker_pair.dc1.config, topic, [Record(b"v", None, i % 2) for i in range(20)])
    path = write_topology(
        tmp_path / "ready.yaml",
        {"dc1": broker_pair.dc1.bootstrap, "dc2": broker_pair.dc2.bootstrap},
        f"  - {{name: {topic}, source: dc1, target: dc2, topics: {{include: ['{topic}']}}}}",
        extra="dr: {approval: none, airflow_site: dc2, drill_max_age: 7d}",
    )
    topology = load_topology(path)
    copy_flow(topology, topic)  # copied to its end, then 30 more that nothing copies
    produce(broker_pair.dc1.config, topic, [Record(b"v", None, i % 2) for i in range(30)])
    started = (datetime.now(UTC) - timedelta(days=2)).replace(microsecond=0)
    write_evidence(drill_evidence(run_id="passed", started=started.isoformat()), pdf=False)
    failed = drill_evidence(run_id="failed", started=datetime.now(UTC).isoformat(), passed=False)
    write_evidence(failed, pdf=False)  # newer, but failed: the passing one counts

    facts = readiness.gather(ClusterAccess.from_environ(topology), datetime.now(UTC))
    assert (facts.flows_running, facts.rpo_records) == ({topic: False}, {topic: 30})
    assert facts.last_drill_passed == started

    assert cli.main(["readiness", "--topology", str(path)]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert f"flows: NOT READY: {topic} not running (see docs/runbooks/readiness.md#flows)" in lines
    assert "drill_age: ready: the last passing dr_drill is 2 days old" in lines
    assert lines[-1].startswith("NOT READY")
