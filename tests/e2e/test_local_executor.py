"""One Airflow deployment as an operator runs it, `kafka-dr-dev airflow up` (LocalExecutor: the real scheduler, a
process per task, the triggerer, the api-server and its UI) on one two-DC stack, carrying three scenarios in file
order: a disaster drill that passes and leaves its evidence; a planned drill stopped half-way, after its failover,
whose successor refuses to start, naming what it left; then a failover triggered and approved from a real browser,
with Prometheus scraping the deployment and a health run's proposal. Each scenario has flows of its own; the drills'
are stopped before the browser's start (the Celery deployment is tests/e2e/test_celery_failover.py's).

The drills. Each drill's inner dr_failover and dr_failback are real runs the drill triggers; its probe application
produces and consumes through the topology's client aliases; its evidence is read back from .kafka-dr/drills/ as an
auditor would. The interrupted drill comes after the disaster drill, as it leaves production changed (its ledger is then
closed with `kafka-dr drill resolve --accept`, as an operator would).

The two drills cover both approval modes: the disaster drill asks once for the whole drill (`skip`: its inner runs name
the drill's approval), the planned one lets each switch ask (`as_topology`). The disaster round trip is active-active
(the probe topic flows both ways, written in dc1, then dc2, then dc1 again): after it every probe record is once in each
cluster, a copy one hop from its origin, and the schema registries have changed roles with the data each time, one
leader (after the failover dc2's, after the failback dc1's again), shown by a registration through the follower that the
leader serves under a new id. A drill that misses an objective fails naming the figure:
tests/unit/drill/test_plan_and_checks.py (the verdict is pure logic on the reports' figures).

The browser. A real browser (Debian's headless Chromium) logs in to Airflow's UI, fills dr_failover's trigger form and
triggers it, another user approves it in the UI; the Kafka DR page then shows the run's RPO, RTO and approval.
dr_bringup starts the browser topology's replication first, through the REST API. A dr_replication_health run follows,
and a real Prometheus (Debian's binary, the repository's scrape config and rules) scrapes its evaluation from the
api-server's /kafka-dr/metrics with the token `kafka-dr-dev airflow up` made. Then dc2 is lost: a health run proposes a
disaster failover of dc2, which waits for approval and ends by itself when dc2 comes back. dc2 is lost again, and a
disaster failover, dc2 -> dc1, is triggered from the form as admin: first refused with no cluster and no mode chosen
(they have no defaults), then with each select chosen; approver rejects it on the task's Required Action tab, and
nothing changes. A second, triggered the same way, approver approves. A planned failover's lag gate deferring to a real
triggerer is shown by tests/airflow/test_dags_across_processes.py, with every task in its own process; its steps by the
dag.test() drills. The screenshots are in the test's tmp_path/screenshots (the path is printed; pytest keeps the
tmp_path of its last three runs)."""

from __future__ import annotations

import contextlib
import hashlib
import json
import time
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
import yaml
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer
from confluent_kafka.serialization import MessageField, SerializationContext
from selenium.common.exceptions import TimeoutException
from selenium.webdriver.common.by import By
from support.airflow import airflow_up
from support.browser import AirflowApi, AirflowUi, chromium
from support.drills import high_watermarks, observable, one_leader, produce
from support.fleet import ground_truth
from support.kafka import commit_offsets, committed_offsets, create_topic
from support.prometheus import MONITORING, prometheus
from support.retry import eventually
from support.stack import Stack, running_stack
from support.topology import cut_off_commands

from kafka_dr import client_switch, roles
from kafka_dr.cli import main
from kafka_dr.clients import read_committed
from kafka_dr.drill import ledger, probe_process
from kafka_dr.drill.evidence import evidence_path
from kafka_dr.drill.plan import inner_run_id
from kafka_dr.replication import replicators
from kafka_dr.replication.lag import load_snapshot
from kafka_dr.replication.provenance import hops
from kafka_dr.state import report_path, safe_name, subdir
from kafka_dr.topology import DRILL_TOPIC, load_topology
from kafka_dr.translation.checkpoints import load_checkpoints
from kafka_dr.wire import REPUBLISHED_HEADER
from kafka_dr_dev.airflow_rest import ANSWER_SETTLE_S, AirflowRestError
from kafka_dr_dev.demo import trigger_and_wait
from kafka_dr_dev.local.airflow import APPROVER, APPROVER_PASSWORD, PASSWORD, USER, LocalAirflow

# In the suite, on the loaded 2-core machine: the set-up about 2.5 minutes, the disaster drill 4-5.5, the browser
# scenario 4.5 (pytest-timeout counts the first test with the module's set-up).
pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(1200)]

# 30 s epochs: the drills' two continuous replicators run through both drills, and each epoch is a Spark job to
# launch (a stop or a new topic ends one early, so the drills wait no longer).
DRILL_FLOWS = ("drill-dc1-to-dc2", "drill-dc2-to-dc1")
DRILL_TOPOLOGY_FLOWS = """
  - {name: drill-dc1-to-dc2, source: dc1, target: dc2, topics: {include: ["orders", "_schemas"]}, epoch_seconds: 30}
  - {name: drill-dc2-to-dc1, source: dc2, target: dc1, topics: {include: ["orders"]}, epoch_seconds: 30}
"""
# The deployment's own topology file (`kafka-dr-dev airflow up --topology`: its metrics, DR page and scheduled health
# runs read it): the drills' flows, then the browser's, written over it once the drills are over, as an operator edits
# it.
DEPLOYED = "deployed"
RATE = 10  # probe records a second: enough to cross every switch with records in flight, light on the suite's cores
POLL_S = 5.0  # between two looks at a drill's runs: the api-server answers each look for three runs
DRILL_CLIENTS = """clients:
  orders-producer: {cluster: dc1, role: producer}
  orders-consumer: {cluster: dc1, role: consumer}
"""


@dataclass
class Deployment:
    stack: Stack
    airflow: LocalAirflow
    state: Path
    api: AirflowApi
    approver: AirflowApi

    @property
    def url(self) -> str:
        return self.airflow.url

    def topology(self, name: str, rto_seconds: float) -> Path:
        # Only approver may answer (dr.approvers): its answers through the REST API are an assigned user's.
        dr = f"dr: {{approval: required, approvers: [{APPROVER}], rpo_records: 1000, rto_seconds: {rto_seconds}, "
        return self.stack.write_topology(
            name, DRILL_TOPOLOGY_FLOWS, extra=DRILL_CLIENTS + dr + cut_off_commands(self.stack.local.data_dir) + "}\n"
        )

    def drill(self, topology: Path, scenario: str, approval: str) -> tuple[str, str]:
        """A drill through the REST API as admin, its approvals given by approver; (run id, state)."""
        conf = {"topology": str(topology), "scenario": scenario, "approval": approval, "rate": RATE}
        step = trigger_and_wait(self.api, "dr_drill", conf, print, self.approver, POLL_S)
        return step.run_id, step.state


@pytest.fixture(scope="module")
def deployment(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    """The stack and Airflow every scenario of the module runs on, the drills' flows started by dr_bringup."""
    root = tmp_path_factory.mktemp("local-executor")
    state = root / "state"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("KDR_STATE_DIR", str(state))  # where this process reads the evidence, ledger, reports and aliases
        with running_stack(root / "stack") as stack:
            first = stack.write_topology(DEPLOYED, DRILL_TOPOLOGY_FLOWS, extra=DRILL_CLIENTS)
            with airflow_up(first, state, root / "airflow-up.log") as airflow:
                try:
                    deployment = Deployment(
                        stack,
                        airflow,
                        state,
                        AirflowApi(airflow.url, USER, PASSWORD),
                        AirflowApi(airflow.url, APPROVER, APPROVER_PASSWORD),
                    )
                    bringup = deployment.api.trigger("dr_bringup", {"topology": str(first)})["dag_run_id"]
                    assert deployment.api.wait("dr_bringup", bringup, 300)["state"] == "success"
                    yield deployment
                finally:
                    for folder in subdir("drill-runs").glob("*/probe"):
                        probe_process.kill(folder)
                    stop_replicators(*DRILL_FLOWS, *BROWSER_FLOWS)


def stop_replicators(*flows: str) -> None:
    """Each flow's replicator stopped if it runs; one that cannot be stopped does not keep the others running."""
    for flow in flows:
        with contextlib.suppress(replicators.ReplicatorError):
            replicators.stop(flow, timeout=15)


def evidence(run_id: str) -> dict[str, Any]:
    return json.loads(evidence_path(run_id, ".json").read_text())


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
    assert ledger.open_record() is None and roles.pending() == {}  # failed back: no failback pending
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
    assert [(f.away, f.serving, f.run_id) for f in roles.pending().values()] == [("dc1", "dc2", failover)]
    probe = subdir("drill-runs") / safe_name(run_id) / "probe"
    assert probe_process.running(probe)  # its last task never ran to stop it

    refused_id, state = deployment.drill(topology, "planned_round_trip", "skip")
    assert state == "failed"
    states = api.task_states("dr_drill", refused_id)
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
    assert roles.pending() == {}  # accepted as it is: no failback pending


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


def _succeeded(api: AirflowApi, dag_id: str, run_id: str) -> bool:
    runs = {run["dag_run_id"]: run["state"] for run in api.runs(dag_id)}
    return runs.get(run_id) == "success"


# The browser's flows, topics, groups and aliases: its own beside the drills'. Its flows leave the probe topic alone
# (copied again into the same cluster by a second flow, each record would be there twice). `_schemas` flows from dc2,
# whose registry leads since the interrupted drill: without its registrations in dc1's store, the failover to dc1
# refuses to promote dc1's registry. Nor are the drills' replication groups (a flow keeps its progress in its source
# under its name, and the drill's failback flow read dc2's `_schemas`) the browser's applications: left out, as an
# operator leaves out what an earlier topology's flows left behind.
BROWSER_FLOWS = ("e2e-dc1-to-dc2", "e2e-dc2-to-dc1")
TOPICS = {"dc1": "e2e-orders", "dc2": "e2e-returns"}
BROWSER_TOPOLOGY_FLOWS = "flows:\n" + "".join(
    f"  - {{name: {flow}, source: {source}, target: {target}, "
    f'topics: {{include: {json.dumps(topics)}, exclude: ["{DRILL_TOPIC}"]}}, groups: {{exclude: ["drill-.*"]}}}}\n'
    for flow, source, target, topics in (
        (BROWSER_FLOWS[0], "dc1", "dc2", [TOPICS["dc1"]]),
        (BROWSER_FLOWS[1], "dc2", "dc1", [TOPICS["dc2"], "_schemas"]),
    )
)
BROWSER_CLIENTS = """clients:
  e2e-producer: {cluster: dc1, role: producer}
  billing: {cluster: dc1, role: consumer}
  returns-app: {cluster: dc2, role: consumer}
"""
RECORDS = 50
# Committed offsets of a group on each side: the disaster failover translates returns-app's from the checkpoints that
# e2e-dc2-to-dc1's replicator kept in dc1, and leaves billing's, a group of the cluster that survives, as it was.
GROUPS = {"dc1": ("billing", 30), "dc2": ("returns-app", 20)}
LOCAL = 7  # records of dc1's own in e2e-returns before the copies: translated offsets differ from dc2's
CHECKPOINT_WAIT = 180.0  # a continuous replicator checkpoints its groups every 30 s; slower with the suite beside it
RUN_TIMEOUT = 240.0  # a DAG run, queued to finished (about a minute each here)


def test_a_disaster_failover_triggered_from_the_browser(deployment: Deployment, tmp_path: Path) -> None:
    stack, airflow, api = deployment.stack, deployment.airflow, deployment.api
    shots = tmp_path / "screenshots"
    print(f"\nscreenshots: {shots}")
    timings: dict[str, float] = {}
    started = time.monotonic()
    stop_replicators(*DRILL_FLOWS)  # the drills are over: from here on only the browser topology's flows copy
    topology = prepare(stack)
    mark = time.monotonic()
    bringup = api.trigger("dr_bringup", {"topology": str(topology), "max_lag_records": 0, "max_lag_seconds": None})
    assert_succeeded(api, airflow, "dr_bringup", bringup["dag_run_id"])
    assert bringup["triggered_by"] == "rest_api"  # what a run not triggered from the UI says
    timings["dr_bringup"] = time.monotonic() - mark
    # The health run and the scrape first: the replicator's next checkpoint pass (every 30 s) comes meanwhile.
    mark = time.monotonic()
    assert_prometheus_scrapes(api, airflow, topology, deployment.state, tmp_path)
    timings["health run, prometheus"] = time.monotonic() - mark
    mark = time.monotonic()
    wait_for_checkpoint(stack, BROWSER_FLOWS[1], "dc2", "dc1")
    timings["first checkpoint"] = time.monotonic() - mark
    with chromium() as driver:
        ui = AirflowUi(driver, airflow.url, shots)
        operate(ui, api, airflow, stack, topology, timings, started)


def operate(
    ui: AirflowUi,
    api: AirflowApi,
    airflow: LocalAirflow,
    stack: Stack,
    topology: Path,
    timings: dict[str, float],
    started: float,
) -> None:
    """What the operators do in the browser once replication runs: dc2 lost (and a proposal that ends as it comes
    back), a disaster failover triggered from the form and rejected in the UI, a second approved there, the run's
    success and the Kafka DR page with its RPO, RTO and approval."""
    try:
        # A health run that found a cluster unanswering before this outage proposed a failover of its own (under the
        # suite's load, a scheduled run while the stack started): this outage's proposal is a new one.
        earlier = {run["dag_run_id"] for run in api.runs("dr_failover")}
        stack.local.stop("dc2")  # the disaster
        mark = time.monotonic()
        assert_proposed_then_withdrawn(api, airflow, stack, topology, earlier)
        timings["proposal"] = time.monotonic() - mark
        stack.local.stop("dc2")  # lost again, for good
        ui.log_in(USER, PASSWORD)  # only now: the UI's pages poll the api-server, and Chromium renders each answer
        mark = time.monotonic()
        reject_a_failover(ui, api, airflow, stack, topology)
        timings["rejected failover"] = time.monotonic() - mark
        # The second, from the form again as admin, approved in the UI by approver.
        ui.switch_user(USER, PASSWORD)
        mark = time.monotonic()
        disaster = trigger_failover(ui, api, topology, failed="dc2", target="dc1", mode="disaster", empty_first=False)
        answer_in_ui(ui, api, disaster, "Approve", "approved")
        # Meanwhile the browser shows a blank page, as after each trigger and answer: left on the DAG's page, whose
        # grid re-renders at every auto-refresh, Chromium spent about 14 s more CPU over the run. The run's state
        # comes from the REST API.
        ui.driver.get("about:blank")
        tasks = assert_succeeded(api, airflow, "dr_failover", disaster)
        timings["disaster failover"] = time.monotonic() - mark
        # No producer moves first and no lag gate: the failed side is gone (the branch skips them).
        assert tasks["switch_producers"] == tasks["lag_zero"] == "skipped", tasks
        assert tasks["translate_offsets[0]"] == "success", tasks
        report = assert_failed_over_to_dc1(stack, disaster)
        show_run(ui, disaster, "disaster-run")

        assert_dashboard_shows(ui, disaster, report)
    except BaseException:
        with contextlib.suppress(Exception):
            ui.screenshot("failure")
        raise
    finally:
        timings["total"] = time.monotonic() - started
        print("timings: " + ", ".join(f"{what} {seconds:.0f} s" for what, seconds in timings.items()))
        print(f"screenshots: {', '.join(p.name for p in ui.taken)}")


def reject_a_failover(ui: AirflowUi, api: AirflowApi, airflow: LocalAirflow, stack: Stack, topology: Path) -> None:
    """A first failover from the form, rejected in the UI by approver: it fails at `approve`, nothing changed."""
    before = observable(stack.local, topology, ("dc1",), live=True)
    rejected = trigger_failover(ui, api, topology, failed="dc2", target="dc1", mode="disaster")
    # admin is not among dr.approvers: Airflow's REST API refuses its answer (HTTP 403), and the run still waits.
    eventually(lambda: api.task_states("dr_failover", rejected).get("approve") == "awaiting_input", "asked", 60)
    with pytest.raises(AirflowRestError, match="HTTP 403"):
        api.answer("dr_failover", rejected, "approve", "Approve")
    answer_in_ui(ui, api, rejected, "Reject", "rejected")
    ui.driver.get("about:blank")
    ended = api.wait_finished("dr_failover", rejected, RUN_TIMEOUT)
    tasks = api.task_states("dr_failover", rejected)
    assert ended["state"] == "failed" and tasks["approve"] == "failed", tasks
    assert "rejected by approver: nothing changed" in task_log(airflow, rejected, "approve")
    assert observable(stack.local, topology, ("dc1",), live=True) == before


def assert_failed_over_to_dc1(stack: Stack, run_id: str) -> dict[str, Any]:
    """dc2's group resumes in dc1, billing (dc1's own) is as it was, and the run's report; returned."""
    assert_group_moved(stack, "dc2", "dc1")
    billing, offset = GROUPS["dc1"]
    assert committed_offsets({"bootstrap.servers": stack.bootstrap("dc1")}, billing) == {(TOPICS["dc1"], 0): offset}
    report = json.loads(report_path("dr_failover", run_id).read_text())
    # The RPO is an estimate now: the lag snapshot of the last checkpoint, kept in dc1.
    assert report["rpo"]["records"] == 0 and report["rpo"]["exact"] is False, report["rpo"]
    assert report["rto_seconds"] > 0 and report["groups"]["applied"] == [GROUPS["dc2"][0]], report
    # Triggered in the browser by admin, approved by approver: both named; the RTO leaves the wait out.
    assert (report["triggered_by"], report["approved_by"]) == (USER, APPROVER), report
    assert report["rto_seconds"] < report["rto_with_approval_seconds"], report
    return report


def prepare(stack: Stack) -> Path:
    """Records in a topic of each DC (and LOCAL of dc1's own where dc2's are copied to), each group's offset on its
    side, and the topology over this stack (flows both ways, client aliases, dc2's registry the primary: the
    interrupted drill left it leading, and its state was accepted as it is)."""
    for dc, topic in TOPICS.items():
        create_topic({"bootstrap.servers": stack.bootstrap(dc)}, topic)
        produce(stack.bootstrap(dc), topic, 0, RECORDS)
    create_topic({"bootstrap.servers": stack.bootstrap("dc1")}, TOPICS["dc2"])
    produce(stack.bootstrap("dc1"), TOPICS["dc2"], 0, LOCAL)
    for dc, (group, offset) in GROUPS.items():
        commit_offsets({"bootstrap.servers": stack.bootstrap(dc)}, group, {(TOPICS[dc], 0): offset})
    # Approval by another user than the one who triggers (the default four eyes): approver approves what admin triggers,
    # and only approver may (dr.approvers). A health run that cannot reach a cluster proposes its failover
    # (propose_failover_after: 1).
    dr = f"dr: {{approval: required, approvers: [{APPROVER}], propose_failover_after: 1}}\n"
    return stack.write_topology(DEPLOYED, BROWSER_TOPOLOGY_FLOWS, extra=BROWSER_CLIENTS + dr, primary="dc2")


def wait_for_checkpoint(stack: Stack, flow: str, failed: str, target: str) -> None:
    """Until the flow's replicator has kept a lag snapshot and the failed side's group commit translated to where it
    resumes in the target (`resumes_at`): what a disaster failover later starts from.
    A pass made before the records were copied checkpoints the group too, at the end of what was copied then. On
    failure the message shows what the target holds and the replicator's own lines about its passes."""
    config, group = {"bootstrap.servers": stack.bootstrap(target)}, GROUPS[failed][0]
    deadline = time.monotonic() + CHECKPOINT_WAIT
    while True:
        snapshot = load_snapshot(config, flow)
        found = [t.dest_offset for t in load_checkpoints(config, flow)[0].get(group, [])]
        offset = resumes_at(stack, failed, target)
        if snapshot is not None and offset is not None and found == [offset]:
            return
        if time.monotonic() > deadline:
            replicator = replicators.status(flow)
            lines = Path(replicator.log).read_text(errors="replace").splitlines() if replicator else []
            passes = [line for line in lines if "checkpoint" in line or "lag snapshot" in line][-8:]
            pytest.fail(
                f"{flow}: no checkpoint of {group} at {offset} within {CHECKPOINT_WAIT:g} s (checkpointed {found}, "
                f"snapshot {'kept' if snapshot else 'none'}, replicator {replicator}); its passes:\n"
                + "\n".join(passes)
            )
        time.sleep(2)


def assert_prometheus_scrapes(api: AirflowApi, airflow: LocalAirflow, topology: Path, state: Path, root: Path) -> None:
    """A real Prometheus, with the repository's scrape config and rules, scrapes the api-server's /kafka-dr/metrics
    with the token `kafka-dr-dev airflow up` made, after a dr_replication_health run: `up` is 1, the same job with
    another token is refused (`up` 0), every partition's lag is the one the run evaluated, and the rules load. The
    run's readiness, with dr_schema_redirect paused by hand: that check alone NOT READY, in its task's log and in the
    metrics (the approvers, read from this Airflow's auth manager, are known)."""
    redirect = "/api/v2/dags/dr_schema_redirect"
    api.call("PATCH", redirect, {"is_paused": True})
    try:
        run = api.trigger("dr_replication_health", {"topology": str(topology)})
        assert_succeeded(api, airflow, "dr_replication_health", run["dag_run_id"])
    finally:
        api.call("PATCH", redirect, {"is_paused": False})
    found = {f["check"]: f for f in json.loads((state / "readiness.json").read_text())["findings"]}
    assert [check for check, f in found.items() if f["ready"] is False] == ["dags_unpaused"], found
    assert found["dags_unpaused"]["reason"].startswith("paused: dr_schema_redirect:"), found
    assert found["approvers"] == {**found["approvers"], "ready": True, "reason": f"approvers Airflow knows: {APPROVER}"}
    assert "dags_unpaused: NOT READY: paused: dr_schema_redirect" in task_log(
        airflow, run["dag_run_id"], "readiness", "dr_replication_health"
    )
    evaluated = {
        (flow, p["topic"], str(p["partition"])): p["lag_records"]
        for flow in BROWSER_FLOWS
        for p in json.loads((state / "health" / f"{flow}.json").read_text())["partitions"]
    }
    assert len(evaluated) == 3, evaluated  # e2e-orders one way, e2e-returns and _schemas the other
    wrong = root / "wrong-token"
    wrong.write_text("not-" + airflow.metrics_token_file().read_text())
    target = f"127.0.0.1:{airflow.port}"
    with prometheus(root / "prometheus", target, airflow.metrics_token_file(), wrong) as server:

        def scraped() -> tuple[dict[str, str], dict[tuple[str, str, str], int], dict[str, str]]:
            up = {s["metric"]["job"]: s["value"][1] for s in server.query("up")}
            lag = {
                (s["metric"]["flow"], s["metric"]["topic"], s["metric"]["partition"]): int(float(s["value"][1]))
                for s in server.query("kafka_dr_partition_lag_records")
            }
            ready = {s["metric"]["check"]: s["value"][1] for s in server.query('kafka_dr_readiness{job="kafka-dr"}')}
            return up, lag, ready

        readiness = {check: "0" if f["ready"] is False else "1" for check, f in found.items() if f["ready"] is not None}
        expected = ({"kafka-dr": "1", "kafka-dr-wrong-token": "0"}, evaluated, readiness)
        eventually(lambda: scraped() == expected, "scraped", 30)
        [group] = server.rule_groups()
        [rules] = yaml.safe_load((MONITORING / "rules.yml").read_text())["groups"]  # every rule of the file loaded
        assert group["name"] == "kafka-dr" and len(group["rules"]) == len(rules["rules"]), group
        assert all(rule["health"] == "ok" for rule in group["rules"]), group["rules"]


def assert_proposed_then_withdrawn(
    api: AirflowApi, airflow: LocalAirflow, stack: Stack, topology: Path, earlier: set[str]
) -> None:
    """dc2 lost: a dr_replication_health run proposes a disaster failover dc2 -> dc1, which waits at `approve` with
    its preview as the request's body; a second health run proposes nothing more (one proposal per outage). dc2
    comes back before anyone approved: the proposal ends by itself, failed with "dc2 reachable again", and nothing
    changed in dc1 (its topics' ends, its groups' offsets, the aliases, the registries, the replicators)."""
    before = observable(stack.local, topology, ("dc1",), live=True)
    health_runs = []
    for _ in range(2):
        run = api.trigger("dr_replication_health", {"topology": str(topology)})
        ended = api.wait_finished("dr_replication_health", run["dag_run_id"], RUN_TIMEOUT)
        assert ended["state"] == "failed", ended  # its flows are ERR: dc2 does not answer
        health_runs.append(api.task_states("dr_replication_health", run["dag_run_id"]))
    # The first run proposes, unless a scheduled run (every 5 minutes) did since dc2 was lost; the second never does.
    assert health_runs[1]["propose_failover[0]"] == "skipped", health_runs
    [proposal] = [
        run
        for run in api.runs("dr_failover")
        if run["dag_run_id"].startswith("proposed__dc2__") and run["dag_run_id"] not in earlier
    ]
    run_id = proposal["dag_run_id"]
    assert {k: proposal["conf"][k] for k in ("failed_cluster", "target_cluster", "mode", "proposed_by")} == {
        "failed_cluster": "dc2",
        "target_cluster": "dc1",
        "mode": "disaster",
        "proposed_by": "dr_replication_health",
    }, proposal["conf"]
    eventually(lambda: api.task_states("dr_failover", run_id).get("approve") == "deferred", "proposal waits", 60)
    quoted = quote(run_id, safe="")
    asked = api.call("GET", f"/api/v2/dags/dr_failover/dagRuns/{quoted}/taskInstances/approve/-1/hitlDetails")
    assert asked["subject"] == "kafka-dr: approve the failover dc2 -> dc1 (disaster)", asked
    assert asked["body"].startswith("# Failover dc2 -> dc1 (disaster)"), asked["body"][:200]
    stack.local.start("dc2")  # back before anyone approved
    ended = api.wait_finished("dr_failover", run_id, RUN_TIMEOUT)
    tasks = api.task_states("dr_failover", run_id)
    assert ended["state"] == "failed" and tasks["approve"] == "failed", tasks
    assert tasks["stop_replication"] == tasks["translate_offsets"] == "upstream_failed", tasks
    lines = task_log(airflow, run_id, "approve")
    assert "dc2 reachable again: the proposed failover ends, nothing changed" in lines, lines[-2000:]
    assert observable(stack.local, topology, ("dc1",), live=True) == before


def assert_group_moved(stack: Stack, failed: str, target: str) -> None:
    """The group of the failed side resumes in the target where it stopped: its offset there is past the target's
    own LOCAL records, as the copies' provenance says."""
    group = GROUPS[failed][0]
    moved = committed_offsets({"bootstrap.servers": stack.bootstrap(target)}, group)
    assert moved == {(TOPICS[failed], 0): resumes_at(stack, failed, target)}


def resumes_at(stack: Stack, failed: str, target: str) -> int | None:
    """Where the failed side's group resumes in the target: at the copy of its committed offset, found by provenance
    (past the target's LOCAL records, and each committed copy transaction's marker takes an offset); None until every
    record is copied."""
    topic, (_, offset) = TOPICS[failed], GROUPS[failed]
    truth = ground_truth({"bootstrap.servers": stack.bootstrap(target)}, topic, 1, None)
    return truth.resume_at(0, offset) if len(truth.copies.get(0, [])) == RECORDS else None


def trigger_failover(
    ui: AirflowUi, api: AirflowApi, topology: Path, failed: str, target: str, mode: str, empty_first: bool = True
) -> str:
    """dr_failover's trigger form filled and submitted in the browser; returns the new run's id, read back from
    the REST API, after checking that Airflow records it as triggered from the UI by the logged-in user. With
    `empty_first`, Trigger is pressed first with nothing chosen: refused."""
    known = {run["dag_run_id"] for run in api.runs("dr_failover")}
    ui.open_trigger_form("dr_failover")
    ui.fill_text("topology", str(topology))
    if empty_first:  # no cluster and no mode chosen: the form refuses to trigger (a DR switch has no defaults)
        assert ui.trigger_refused("empty-form-refused"), "the form triggered a failover with nothing chosen"
        assert {run["dag_run_id"] for run in api.runs("dr_failover")} == known
    ui.choose("failed_cluster", "Failed cluster", failed)
    ui.choose("target_cluster", "Target cluster", target)
    ui.choose("mode", "Mode", mode)
    ui.fill_text("groups", ".*")
    filled = {"topology": str(topology), "failed_cluster": failed, "target_cluster": target, "mode": mode}
    assert ui.form_values() == {**filled, "groups": ".*", "reset_to_datetime": "", "dry_run": "false"}  # as chosen
    ui.submit_trigger(f"trigger-form-{mode}")
    run = api.new_run("dr_failover", known)
    assert run["triggered_by"] == "ui", run  # Airflow's DagRunTriggeredByType.UI: a trigger with a Referer
    assert run["triggering_user_name"] == USER, run
    assert {k: run["conf"].get(k) for k in filled} == filled, run["conf"]
    ui.screenshot(f"triggered-{mode}")
    ui.driver.get("about:blank")  # until the approval is asked: the DAG's grid re-renders at every auto-refresh
    return run["dag_run_id"]


def show_run(ui: AirflowUi, run_id: str, name: str) -> None:
    """The run's page in the UI, once its heading's state badge says the run succeeded; loaded once more, as a person
    would, when it has not within UI_WAIT (under the suite's load a page once took longer: CI, 2026-11-27)."""
    page = f"{ui.url}/dags/dr_failover/runs/{quote(run_id, safe='')}"
    heading = f"//h2[normalize-space()='{run_id}']"
    badge = f"{heading}/following-sibling::*[@data-testid='state-badge'][normalize-space()='Success']"
    ui.driver.get(page)
    try:
        ui.wait_for(By.XPATH, badge)
    except TimeoutException:
        ui.driver.get(page)
        ui.wait_for(By.XPATH, badge)
    ui.screenshot(name)


def answer_in_ui(ui: AirflowUi, api: AirflowApi, run_id: str, option: str, name: str) -> None:
    """Once the run waits at `approve`, approver logs in to the browser and presses `option` on the task's
    Required Action tab, where the preview is the request's body. The answer waits ANSWER_SETTLE_S after the
    request, as AirflowRest.answer does (an answer within a second of it races Airflow 3.3's scheduler)."""
    eventually(lambda: api.task_states("dr_failover", run_id).get("approve") == "awaiting_input", "approval asked", 60)
    time.sleep(ANSWER_SETTLE_S)
    ui.switch_user(APPROVER, APPROVER_PASSWORD)
    ui.answer("dr_failover", run_id, "approve", option, name)


def task_log(airflow: LocalAirflow, run_id: str, task_id: str, dag_id: str = "dr_failover") -> str:
    """The task's log files of a run (of dr_failover unless told), every try, as one text."""
    logs = airflow.home / "logs" / f"dag_id={dag_id}" / f"run_id={run_id}"
    return "".join(path.read_text(errors="replace") for path in sorted(logs.glob(f"task_id={task_id}/**/*.log")))


def assert_succeeded(api: AirflowApi, airflow: LocalAirflow, dag_id: str, run_id: str) -> dict[str, str | None]:
    """The run succeeds within RUN_TIMEOUT; its task states. A failure shows the failed tasks' log tails."""
    run = api.wait_finished(dag_id, run_id, RUN_TIMEOUT)
    tasks = api.task_states(dag_id, run_id)
    if run["state"] != "success":
        logs = airflow.home / "logs" / f"dag_id={dag_id}" / f"run_id={run_id}"
        tails = [
            f"--- {path}:\n{path.read_text(errors='replace')[-2500:]}"
            for path in sorted(logs.glob("task_id=*/**/*.log"))
            if any(f"task_id={t.split('[')[0]}" in str(path) for t, s in tasks.items() if s == "failed")
        ]
        pytest.fail(f"{dag_id} {run_id}: {run['state']}; {tasks}\n" + "\n".join(tails))
    return tasks


def assert_dashboard_shows(ui: AirflowUi, run_id: str, report: dict[str, Any]) -> None:
    """The Kafka DR page, in the logged-in browser: dr_failover's latest report is this run's, with its RPO
    and RTO as the page words them."""
    ui.driver.get(f"{ui.url}/kafka-dr/")
    card = ui.wait_for(By.XPATH, "//h3[normalize-space()='dr_failover']/..")
    ui.driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", card)
    ui.screenshot("kafka-dr-page")
    assert run_id in card.text, card.text
    records = report["rpo"]["records"]
    rpo = card.find_element(By.XPATH, ".//dt[normalize-space()='RPO']/following-sibling::dd[1]").text
    rto = card.find_element(By.XPATH, ".//dt[normalize-space()='RTO']/following-sibling::dd[1]").text
    assert rpo.startswith("unknown" if records is None else f"{records:,} records"), (rpo, report["rpo"])
    assert rto == f"{report['rto_seconds']:,.1f} s", (rto, report["rto_seconds"])
    approved = card.find_element(By.XPATH, ".//dt[normalize-space()='Approved']/following-sibling::dd[1]").text
    assert approved.startswith(f"by {APPROVER} after ") and approved.endswith(f"; triggered by {USER}"), approved
