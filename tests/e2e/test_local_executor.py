"""dr_drill on a two-DC stack through `kafka-dr airflow up` (the real scheduler, a process per task): a disaster
drill that passes and leaves its evidence, and a planned drill stopped half-way, after its failover, whose successor
refuses to start, naming what it left.

Each drill's inner dr_failover and dr_failback are real runs the drill triggers; its probe application produces and
consumes through the topology's client aliases; its evidence is read back from .kafka-dr/drills/ as an auditor
would. The module shares one stack and one Airflow (started once, dr_bringup run once) across its tests, in file
order: the interrupted drill comes last, as it leaves production changed.

The two drills cover both approval modes: the disaster drill asks once for the whole drill (`skip`: its inner runs
name the drill's approval), the planned one lets each switch ask (`as_topology`). The disaster round trip is
active-active (the probe topic flows both ways, written in dc1, then dc2, then dc1 again): after it every probe record
is once in each cluster, a copy one hop from its origin, and the schema registries have changed roles with the data
each time, one leader (after the failover dc2's, after the failback dc1's again), shown by a registration through the
follower that the leader serves under a new id. A drill that misses an objective fails naming the figure:
tests/unit/drill/test_plan_and_checks.py (the verdict is pure logic on the reports' figures).
"""

from __future__ import annotations

import hashlib
import json
import time
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer
from confluent_kafka.serialization import MessageField, SerializationContext
from support.airflow import airflow_up
from support.drills import high_watermarks, one_leader
from support.retry import eventually
from support.stack import Stack, running_stack
from support.topology import cut_off_commands

from kafka_dr import client_switch
from kafka_dr.airflow_rest import AirflowRest
from kafka_dr.cli import main
from kafka_dr.clients import read_committed
from kafka_dr.demo.drill import trigger_and_wait
from kafka_dr.drill import ledger, probe_process
from kafka_dr.drill.evidence import evidence_path
from kafka_dr.drill.plan import inner_run_id
from kafka_dr.failback.republish import REPUBLISHED_HEADER
from kafka_dr.local.airflow import APPROVER, APPROVER_PASSWORD, PASSWORD, USER
from kafka_dr.replication import replicators
from kafka_dr.replication.provenance import hops
from kafka_dr.state import report_path, safe_name, subdir
from kafka_dr.topology import DRILL_TOPIC, load_topology

# On the suite's loaded 2-core machine a drill's round trip takes 6-7 minutes (3.5 idle), the module's set-up 3 more.
pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(1200)]

# 30 s epochs: the two continuous replicators run for the whole module, and each epoch is a Spark job to launch (a stop
# or a new topic ends one early, so the drills wait no longer).
FLOWS = """
  - {name: drill-dc1-to-dc2, source: dc1, target: dc2, topics: {include: ["orders", "_schemas"]}, epoch_seconds: 30}
  - {name: drill-dc2-to-dc1, source: dc2, target: dc1, topics: {include: ["orders"]}, epoch_seconds: 30}
"""
RATE = 10  # probe records a second: enough to cross every switch with records in flight, light on the suite's cores
POLL_S = 5.0  # between two looks at a drill's runs: the api-server answers each look for three runs
CLIENTS = """clients:
  orders-producer: {cluster: dc1, role: producer}
  orders-consumer: {cluster: dc1, role: consumer}
"""


@dataclass
class Deployment:
    stack: Stack
    api: AirflowRest
    approver: AirflowRest
    url: str

    def topology(self, name: str, rto_seconds: float) -> Path:
        # Only approver may answer (dr.approvers): its answers through the REST API are an assigned user's.
        dr = f"dr: {{approval: required, approvers: [{APPROVER}], rpo_records: 1000, rto_seconds: {rto_seconds}, "
        return self.stack.write_topology(
            name, FLOWS, extra=CLIENTS + dr + cut_off_commands(self.stack.local.data_dir) + "}\n"
        )

    def drill(self, topology: Path, scenario: str, approval: str) -> tuple[str, str]:
        """A drill through the REST API as admin, its approvals given by approver; (run id, state)."""
        conf = {"topology": str(topology), "scenario": scenario, "approval": approval, "rate": RATE}
        step = trigger_and_wait(self.api, "dr_drill", conf, print, self.approver, POLL_S)
        return step.run_id, step.state


@pytest.fixture(scope="module")
def deployment(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    root = tmp_path_factory.mktemp("drill")
    state = root / "state"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("KDR_STATE_DIR", str(state))  # where this process reads the evidence, ledger and aliases
        with running_stack(root / "stack") as stack:
            first = stack.write_topology("bringup", FLOWS, extra=CLIENTS)
            with airflow_up(first, state, root / "airflow-up.log") as airflow:
                try:
                    deployment = Deployment(
                        stack,
                        AirflowRest(airflow.url, USER, PASSWORD),
                        AirflowRest(airflow.url, APPROVER, APPROVER_PASSWORD),
                        airflow.url,
                    )
                    bringup = deployment.api.trigger("dr_bringup", {"topology": str(first)})["dag_run_id"]
                    assert deployment.api.wait("dr_bringup", bringup, 300)["state"] == "success"
                    yield deployment
                finally:
                    for folder in subdir("drill-runs").glob("*/probe"):
                        probe_process.kill(folder)
                    for flow in ("drill-dc1-to-dc2", "drill-dc2-to-dc1"):
                        replicators.stop(flow, timeout=15)


def evidence(run_id: str) -> dict[str, Any]:
    return json.loads(evidence_path(run_id, ".json").read_text())


def task_states(api: AirflowRest, dag_id: str, run_id: str) -> dict[str, str]:
    return {ti["task_id"]: ti.get("state") for ti in api.task_instances(dag_id, run_id)}


def test_a_disaster_drill_passes_and_leaves_evidence(deployment: Deployment) -> None:
    topology = deployment.topology("drill", rto_seconds=300)
    run_id, state = deployment.drill(topology, "disaster_round_trip", "skip")
    found = evidence(run_id)
    assert state == "success", found.get("failure")
    assert found["passed"] is True and found["failure"] is None and found["left"] == []
    assert (found["scenario"], found["from_cluster"], found["to_cluster"]) == ("disaster_round_trip", "dc1", "dc2")
    assert found["triggered_by"] == USER
    assert found["topology_sha256"] == hashlib.sha256(topology.read_bytes()).hexdigest()
    runs = {run["dag_id"]: run for run in found["runs"]}
    assert set(runs) == {"dr_failover", "dr_failback"} and {r["state"] for r in runs.values()} == {"success"}
    for dag_id, run in runs.items():
        step = "failover" if dag_id == "dr_failover" else "failback"
        assert run["run_id"] == inner_run_id(run_id, step)
        assert run["url"] == f"{deployment.url}/dags/{dag_id}/runs/{run['run_id']}"
        assert run["approved_by"] == f"{APPROVER} (drill {run_id})"  # the drill's one approval covered both
    # The RPO is the failback's exact count of what never left dc1: the probe records dc1 holds twice, the original
    # and the failback's republished copy (read from dc1, not from a report); the RTO the failover's.
    tally = json.loads((subdir("drill-runs") / safe_name(run_id) / "probe" / "tally.json").read_text())
    never_left = republished(deployment.stack, "dc1", tally["run"])
    assert found["rpo"] == {**found["rpo"], "exact": True, "records": len(never_left)}, (found["rpo"], never_left)
    assert runs["dr_failback"]["rpo_records"] == len(never_left)
    assert found["rto_seconds"] == runs["dr_failover"]["rto_seconds"] and 0 < found["rto_seconds"] <= 300
    assert found["objectives"]["rto_seconds"] == {"objective": 300, "measured": found["rto_seconds"], "passed": True}
    probe = found["probe"]
    assert probe["produced"] > 0 and probe["delivered"] == probe["produced"], probe
    assert (probe["lost"], probe["duplicated"], probe["refused"], probe["unacknowledged"]) == (0, 0, 0, 0), probe
    assert probe["behind_at_cut"] > 0, probe  # the consumer was held: it resumed in dc2 where it had been
    assert found["health_before"]["passed"] and found["health_after"]["passed"]
    assert [c["check"] for c in found["checks"] if not c["passed"]] == []
    steps = [entry["step"] for entry in found["timeline"]]
    assert steps.index("DC cut off") < steps.index("dr_failover") < steps.index("DC back") < steps.index("dr_failback")
    html = evidence_path(run_id, ".html").read_text()
    assert "PASSED" in html and found["topology_sha256"] in html and runs["dr_failover"]["run_id"] in html
    assert evidence_path(run_id, ".pdf").read_bytes().startswith(b"%PDF")
    # Put back as found: the aliases home, both replicators running, the ledger closed.
    assert {s.alias: s.active for s in client_switch.states(load_topology(topology))} == {
        "orders-producer": "dc1",
        "orders-consumer": "dc1",
    }
    assert ledger.open_record() is None
    dc1, dc2 = (deployment.stack.registry(dc) for dc in ("dc1", "dc2"))
    assert one_leader(dc2, dc1, "after-disaster-drill")  # dc1's registry leads again, dc2's follows it
    assert runs_of(found)["dr_failback"]["schema_registry"]["one_leader"]["via"] == "dc2"  # dc1 leads again
    # The probe's records, written in dc1, then dc2, then dc1: each once in each cluster, a copy one hop away (in dc1
    # those that never left it are there twice: the original and its republished copy).
    expected = {(tally["run"], seq) for seq in tally["acknowledged"]}
    for dc, twice in (("dc1", len(never_left)), ("dc2", 0)):
        eventually(lambda d=dc: probe_records(deployment.stack, d)[0] >= expected, f"every probe record in {dc}", 60)
        assert probe_records(deployment.stack, dc, {tally["run"]}) == (expected, 1, twice), dc


def test_a_drill_stopped_half_way_makes_the_next_one_refuse(
    deployment: Deployment, capsys: pytest.CaptureFixture[str]
) -> None:
    topology = deployment.topology("drill", rto_seconds=300)
    api = deployment.api
    conf = {"topology": str(topology), "scenario": "planned_round_trip", "approval": "as_topology", "rate": RATE}
    run_id = api.trigger("dr_drill", conf)["dag_run_id"]

    answered: set[tuple[str, str, str]] = set()

    def approve(dag_id: str, awaiting_run: str, task_id: str) -> None:
        if (dag_id, awaiting_run, task_id) not in answered:
            answered.add((dag_id, awaiting_run, task_id))
            deployment.approver.answer(dag_id, awaiting_run, task_id, "Approve")

    failover = inner_run_id(run_id, "failover")
    deadline = time.monotonic() + 300
    while not _succeeded(api, "dr_failover", failover):
        assert time.monotonic() < deadline, "the drill's failover did not succeed within 300 s"
        # One look: as_topology, the failover itself asks (the topology requires approval), and it is answered.
        api.wait("dr_drill", run_id, 0, None, approve, related=[("dr_failover", failover)])
        time.sleep(POLL_S)
    assert ("dr_failover", failover, "approve") in answered
    report = json.loads(report_path("dr_failover", failover).read_text())
    assert report["approved_by"] == APPROVER, report["approved_by"]  # its own approval, not the drill's
    assert (report["rpo"]["records"], report["rpo"]["exact"]) == (0, True), report["rpo"]  # planned: nothing lost
    assert report["schema_registry"]["one_leader"]["via"] == "dc1", report["schema_registry"]  # dc2 led, dc1 followed
    # The operator stops the drill between its failover and its failback: the clients are on dc2.
    api.call("PATCH", f"/api/v2/dags/dr_drill/dagRuns/{urllib.parse.quote(run_id, safe='')}", {"state": "failed"})
    assert ledger.open_record()["run_id"] == run_id
    probe = subdir("drill-runs") / safe_name(run_id) / "probe"
    assert probe_process.running(probe)  # its last task never ran to stop it

    refused_id, state = deployment.drill(topology, "planned_round_trip", "skip")
    assert state == "failed"
    states = task_states(api, "dr_drill", refused_id)
    assert states["open_ledger"] == "failed" and states["health_before"] == "upstream_failed", states
    failure = evidence(refused_id)["failure"]
    assert failure.startswith(f"open_ledger: drill {run_id} (started "), failure
    assert "left production changed: client alias orders-producer on dc2 (was dc1)" in failure, failure
    assert "kafka-dr drill resolve --accept" in failure
    assert not probe_process.running(probe)  # the refused drill stopped the earlier drill's probe
    dc1, dc2 = (deployment.stack.registry(dc) for dc in ("dc1", "dc2"))
    assert one_leader(dc1, dc2, "after-planned-failover")  # the clients' registry moved with them
    assert ledger.open_record()["run_id"] == run_id  # still open: nothing was put back
    # The operator's view: `kafka-dr drill status` names what is left; `resolve --accept` takes the state as it is.
    assert main(["drill", "status", "--topology", str(topology)]) == 1
    assert "left: client alias orders-producer on dc2 (was dc1)" in capsys.readouterr().out
    assert main(["drill", "resolve", "--topology", str(topology)]) == 1 and ledger.open_record() is not None
    assert main(["drill", "resolve", "--accept", "--topology", str(topology)]) == 0
    assert "closed: the state now accepted" in capsys.readouterr().out and ledger.open_record() is None


def runs_of(evidence: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The evidence's inner runs by DAG, each with its report."""
    return {run["dag_id"]: json.loads(Path(run["report_file"]).read_text()) for run in evidence["runs"]}


def probe_messages(stack: Stack, dc: str) -> Iterator[tuple[dict[str, Any], list[tuple[str, bytes]]]]:
    """Each probe record in the cluster's `_kdr.drill`, decoded, with its headers."""
    config = {"bootstrap.servers": stack.bootstrap(dc)}
    ends = {tp: (0, end) for tp, end in high_watermarks(stack.bootstrap(dc)).items() if tp[0] == DRILL_TOPIC}
    decode = AvroDeserializer(SchemaRegistryClient({"url": stack.registry(dc)}))
    context = SerializationContext(DRILL_TOPIC, MessageField.VALUE)
    for message in read_committed(config, ends, 30):
        yield decode(message.value(), context), message.headers() or []


def probe_records(stack: Stack, dc: str, runs: set[str] | None = None) -> tuple[set[tuple[str, int]], int, int]:
    """The probe records in the cluster ((run, seq), of `runs` when given), the longest provenance chain among them,
    and how many were there more than once."""
    seen: list[tuple[str, int]] = []
    longest = 0
    for record, headers in probe_messages(stack, dc):
        if runs is None or record["run"] in runs:
            seen.append((record["run"], record["seq"]))
            longest = max(longest, len(hops(headers)))
    return set(seen), longest, len(seen) - len(set(seen))


def republished(stack: Stack, dc: str, run: str) -> list[int]:
    """The seqs of the probe run's records that the failback republished in the cluster (REPUBLISHED_HEADER): those
    the disaster left in it alone."""
    return sorted(
        record["seq"]
        for record, headers in probe_messages(stack, dc)
        if record["run"] == run and any(key == REPUBLISHED_HEADER for key, _ in headers)
    )


def _succeeded(api: AirflowRest, dag_id: str, run_id: str) -> bool:
    runs = {run["dag_run_id"]: run["state"] for run in api.runs(dag_id)}
    return runs.get(run_id) == "success"
