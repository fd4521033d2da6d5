"""dr_bringup then a planned dr_failover with every task in its own process, as Airflow's executors run them
(`run_dag_in_processes` in conftest.py), on an embedded stack whose brokers require SCRAM-SHA-512 over TLS (SASL_SSL)
and whose schema registries require HTTP Basic credentials.

Across processes: dag.test() runs all tasks in the test's process, where anything a task keeps in memory reaches the
next task. Here nothing does: the continuous replicators that dr_bringup's `replicators_started` launches must be
found and stopped by dr_failover's `stop_replication`, another process of another run, through what the tracker
keeps on disk; afterwards no process of theirs may run, and a process that took no part says so too. The planned
failover's lag gate defers to the triggerer that runs beside the run.

Secrets: the credentials exist only in Airflow connections (`kafka_dr_<cluster>`, `kafka_dr_<cluster>_registry`)
for the DAGs and in the environment (KDR_CLUSTER_<NAME>_CONFIG) for the CLI; `kafka-dr lag` and `kafka-dr health`
answer; a wrong password fails the run's first Kafka task with one line naming the cluster and the mechanism. Then
every task log, job log, report and state file of those runs is read: neither password is in any of them.

One pair of runs shows both; they were two drills of the same two DAGs (the process checks on a plaintext stack).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from support.airflow import DagRunResult
from support.drills import produce
from support.kafka import commit_offsets, committed_offsets, create_topic, high_watermarks
from support.stack import Stack, free_stack_config, tear_down

from kafka_dr import processes
from kafka_dr.access import config_env_var, user_info_env_var
from kafka_dr.clients import read_committed
from kafka_dr.replication import replicators
from kafka_dr.replication.provenance import hops
from kafka_dr_dev.local.config import SecurityConfig
from kafka_dr_dev.local.stack import LocalStack

pytestmark = [
    pytest.mark.integration,
    pytest.mark.slow,
    pytest.mark.timeout(900),
]

USER, PASSWORD, WRONG = "kdr-ops", "Scram-pass-5e1f9a", "Wrong-pass-77c2d0"
MECHANISM = "SCRAM-SHA-512"
FLOWS = ("sec-dc1-to-dc2", "sec-dc2-to-dc1")
TOPIC, GROUP = "sec-orders", "sec-billing"
KAFKA_DR = Path(sys.executable).parent / "kafka-dr"
JOBS: dict[str, dict[int, int]] = {}  # flow -> its job's processes once started, {pid: start ticks}


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """A stack whose brokers speak SASL_SSL only; the users file is the brokers' (and the registries' store
    connections'), nothing of kafka-dr reads it."""
    root = tmp_path_factory.mktemp("secured-stack")
    users = root / "users.json"
    users.write_text(json.dumps({USER: PASSWORD}))
    users.chmod(0o600)
    security = SecurityConfig(protocol="SASL_SSL", sasl_mechanism=MECHANISM, users_file=str(users), registry_auth=True)
    local = LocalStack(root / "data", dataclasses.replace(free_stack_config(), security=security))
    try:
        local.up()
        yield Stack(local, root)
    finally:
        tear_down(local)


def settings(stack: Stack, password: str) -> dict[str, str]:
    return {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": MECHANISM,
        "sasl.username": USER,
        "sasl.password": password,
        "ssl.ca.location": str(stack.local.ca_file),
    }


def use_connections(monkeypatch: pytest.MonkeyPatch, stack: Stack, password: str) -> None:
    """`kafka_dr_dc1` and `kafka_dr_dc2` as Airflow connections in the environment (what AIRFLOW_CONN_* gives every
    component): login and password, and the librdkafka settings as extras."""
    extra = {
        k: v for k, v in settings(stack, password).items() if not k.startswith("sasl.user") and k != "sasl.password"
    }
    for dc in ("dc1", "dc2"):
        connection = {"conn_type": "generic", "login": USER, "password": password, "extra": extra}
        monkeypatch.setenv(f"AIRFLOW_CONN_KAFKA_DR_{dc.upper()}", json.dumps(connection))
        registry = {"conn_type": "http", "login": USER, "password": password}
        monkeypatch.setenv(f"AIRFLOW_CONN_KAFKA_DR_{dc.upper()}_REGISTRY", json.dumps(registry))
        monkeypatch.delenv(config_env_var(dc), raising=False)
        monkeypatch.delenv(user_info_env_var(dc), raising=False)


@pytest.fixture
def no_replicator_left() -> Iterator[None]:
    """Afterwards no replicator of FLOWS runs: the tracker stops them, and what it could not stop (every process
    these runs started for them) is killed."""
    yield
    for flow in FLOWS:
        with contextlib.suppress(replicators.ReplicatorError):
            replicators.stop(flow, timeout=15)
        left = {**JOBS.pop(flow, {}), **descendants(replicate_processes(flow))}
        for pid, ticks in left.items():
            if processes.is_alive(pid, ticks):
                os.kill(pid, signal.SIGKILL)


def test_bringup_then_planned_failover_each_task_in_its_own_process_with_credentials_only_in_connections(
    secured: Stack,
    state: Path,
    monkeypatch: pytest.MonkeyPatch,
    run_dag_in_processes: Callable[..., DagRunResult],
    no_replicator_left: None,
) -> None:
    config = settings(secured, PASSWORD)
    dc1, dc2 = ({"bootstrap.servers": secured.bootstrap(dc), **config} for dc in ("dc1", "dc2"))
    create_topic(dc1, TOPIC)
    produce(dc1["bootstrap.servers"], TOPIC, 0, 40, settings=dc1)
    commit_offsets(dc1, GROUP, {(TOPIC, 0): 25})
    topology = secured.write_topology(
        "secured",
        f"""flows:
  - {{name: {FLOWS[0]}, source: dc1, target: dc2, topics: {{include: ["{TOPIC}"]}}}}
  - {{name: {FLOWS[1]}, source: dc2, target: dc1, topics: {{include: ["{TOPIC}"]}}}}
""",
    )  # with the registries: dc1's the primary, so the failover redirects dc2's (a restart, then a registration)
    use_connections(monkeypatch, secured, PASSWORD)
    try:
        bringup = run_dag_in_processes("dr_bringup", {"topology": str(topology), "max_lag_records": 0})
        assert bringup.state == "success", bringup.describe()
        assert_lag_gate_deferred(bringup, "lag_gate")
        replicators_running_after(bringup)
        failover = run_dag_in_processes(
            "dr_failover",
            {"topology": str(topology), "failed_cluster": "dc1", "target_cluster": "dc2", "mode": "planned"},
        )
        replicators_stopped_by(failover, bringup)
        assert failover.state == "success", failover.describe()
        redirected = failover.xcom("redirect_schema_registry")
        # Through basic auth: dc1's registry demoted first (planned: it answers), dc2's the one leader.
        assert redirected["primary"]["registry"] == "dc2" and redirected["primary"]["probe_id"] > 0, redirected
        assert redirected["follower"]["registry"] == "dc1" and redirected["follower"]["store"] == "dc2", redirected
        assert redirected["one_leader"]["via"] == "dc1", redirected
        # Translated over SASL_SSL: the group resumes in dc2 at the copy of dc1's offset 25 (not offset 25 itself: a
        # transaction marker of each epoch takes an offset, so a copy split over two epochs shifts by one).
        assert committed_offsets(dc2, GROUP) == {(TOPIC, 0): copy_of(dc2, 25)}
        # The report measured the RPO in dc1 itself, with the credentials of the connection (not an estimate).
        report = json.loads(sorted((state / "reports").glob("dr_failover-*.json"))[-1].read_text())
        assert (report["rpo"]["records"], report["rpo"]["exact"]) == (0, True), report["rpo"]
        outputs = cli_outputs(topology, config)
        logs = [bringup.log, failover.log]
    finally:
        for flow in FLOWS:
            replicators.stop(flow, timeout=30)  # before the files are read: a running job may still write its log
    leaked = files_holding(PASSWORD, [*logs, Path(os.environ["AIRFLOW_HOME"]) / "logs", state], outputs)
    assert not leaked, f"the password is in {leaked}"


def cli_outputs(topology: Path, config: dict[str, str]) -> list[str]:
    """`kafka-dr lag` and `kafka-dr health` with the same credentials from the environment, as a deployment's shell
    sets them: each succeeds; what they wrote."""
    cli_env = {**os.environ, **{config_env_var(dc): json.dumps(config) for dc in ("dc1", "dc2")}}
    outputs = []
    for command in (["lag", "--json"], ["health", "--json"]):
        done = subprocess.run(
            [str(KAFKA_DR), *command, "--topology", str(topology)],
            env=cli_env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        outputs.append(done.stdout + done.stderr)
        assert done.returncode == 0, f"kafka-dr {' '.join(command)}: {done.stdout[-2000:]}{done.stderr[-2000:]}"
    return outputs


def test_a_wrong_password_fails_the_first_kafka_task_in_one_line(
    secured: Stack,
    state: Path,
    monkeypatch: pytest.MonkeyPatch,
    run_dag_in_processes: Callable[..., DagRunResult],
) -> None:
    topology = secured.write_topology(
        "secured-wrong",
        f"flows:\n  - {{name: {FLOWS[0]}, source: dc1, target: dc2, topics: {{include: [{TOPIC}]}}}}\n",
        schema_registry=False,
    )
    use_connections(monkeypatch, secured, WRONG)
    run = run_dag_in_processes("dr_bringup", {"topology": str(topology)})
    assert run.state == "failed", run.describe()
    assert run.tasks[("validate_topology", -1)] == "success" and run.tasks[("clusters_reachable", -1)] == "failed"
    failures = [line for line in run.log.read_text(errors="replace").splitlines() if "is not reachable" in line]
    assert failures, run.describe()
    assert any("cluster dc1" in line and MECHANISM in line and "uthenticat" in line for line in failures), failures
    leaked = files_holding(WRONG, [run.log, Path(os.environ["AIRFLOW_HOME"]) / "logs", state], [])
    assert not leaked, f"the wrong password is in {leaked}"


def files_holding(secret: str, paths: list[Path], texts: list[str]) -> list[str]:
    """Every file under `paths` (and every text) that holds `secret`."""
    found = [f"CLI output {i}" for i, text in enumerate(texts) if secret in text]
    for root in paths:
        for path in [root] if root.is_file() else (p for p in root.rglob("*") if p.is_file()):
            if secret.encode() in path.read_bytes():
                found.append(str(path))
    return found


def replicators_running_after(bringup: DagRunResult) -> None:
    """Each task of dr_bringup ran in a process of its own, one `replicators_started` per flow, and each flow's job
    runs, as a fresh process sees the tracker; its processes are kept in JOBS."""
    assert_each_task_in_its_own_process(bringup)
    assert {key for key in bringup.tasks if key[0] == "replicators_started"} == {
        ("replicators_started", i) for i in range(len(FLOWS))
    }, bringup.describe()
    seen = tracker_status()
    for flow in FLOWS:
        assert replicate_processes(flow), f"{flow}: no replicate.py process after dr_bringup\n{bringup.describe()}"
        assert seen[flow]["running"] is True, f"{flow}, seen from a new process: {seen[flow]}"
        JOBS[flow] = descendants(replicate_processes(flow))  # replicate.py's and its descendants (PySpark's daemon...)


def replicators_stopped_by(failover: DagRunResult, bringup: DagRunResult) -> None:
    """dr_failover's `stop_replication`, in a process of its own that took no part in dr_bringup, claimed and stopped
    every flow's job: no process of them is left, and a fresh process sees them stopped."""
    assert failover.tasks.get(("stop_replication", -1)) == "success", failover.describe()
    assert_each_task_in_its_own_process(failover)
    assert failover.pids[("stop_replication", -1)] not in bringup.pids.values()
    claimed = failover.xcom("stop_replication")["replicators"]
    assert set(claimed) == set(FLOWS), claimed
    alive = {flow: pids for flow in FLOWS if (pids := replicate_processes(flow))}
    assert not alive, (
        f"replicate.py processes still alive after stop_replication reported {claimed}: "
        + "; ".join(
            f"{flow}: " + ", ".join(f"{pid} ({cmd})" for pid, cmd in pids.items()) for flow, pids in alive.items()
        )
        + f"\n{failover.describe()}"
    )
    left = {
        flow: [" ".join(processes.cmdline(pid)) for pid in processes.wait_gone(procs, 0)]
        for flow, procs in JOBS.items()
    }
    assert not any(left.values()), f"processes of the stopped jobs still alive: {left}"
    seen = tracker_status()
    for flow in FLOWS:
        assert seen[flow]["running"] is False and seen[flow]["stopped_at"], f"{flow}, from a new process: {seen[flow]}"


def copy_of(target: dict[str, str], origin_offset: int) -> int:
    """The offset in `target`'s TOPIC of the copy of the record at `origin_offset` of its source (provenance)."""
    end = high_watermarks(target)[(TOPIC, 0)]
    for message in read_committed(target, {(TOPIC, 0): (0, end)}, 30):
        if hops(message.headers())[-1].offset == origin_offset:
            return message.offset()
    raise AssertionError(f"no copy of offset {origin_offset} in {TOPIC}")


def assert_lag_gate_deferred(run: DagRunResult, task_id: str) -> None:
    """The bring-up's lag gate (it defers at once, as the replicators just started) waited in the triggerer, not in a
    worker: the trigger's log, which the triggerer writes beside the task's, has it fire a success."""
    assert run.tasks.get((task_id, 0)) == "success", run.describe()
    logs = Path(os.environ["AIRFLOW_HOME"]) / "logs" / f"dag_id={run.dag_id}" / f"run_id={run.run_id}"
    text = "".join(path.read_text(errors="replace") for path in logs.glob(f"task_id={task_id}/**/*.log.trigger.*.log"))
    assert "Trigger fired event" in text and "'status': 'success'" in text, f"{task_id}'s trigger log:\n{text[-3000:]}"


def assert_each_task_in_its_own_process(run) -> None:
    ran = {key: pid for key, pid in run.pids.items() if run.tasks[key] not in ("skipped", "upstream_failed")}
    assert all(ran.values()), f"task instances without a process: {ran}"
    assert len(set(ran.values())) == len(ran), f"task instances sharing a process: {ran}"
    assert os.getpid() not in ran.values()


def replicate_processes(flow: str) -> dict[int, str]:
    """Live processes (not zombies) whose command line runs replicate.py for `flow`: {pid: command line}."""
    found = {}
    for entry in Path("/proc").iterdir():
        args = processes.cmdline(int(entry.name)) if entry.name.isdigit() else []
        if any(arg.endswith("replicate.py") for arg in args) and any(
            a == "--flow" and b == flow for a, b in zip(args, args[1:], strict=False)
        ):
            found[int(entry.name)] = " ".join(args)
    return found


def descendants(pids) -> dict[int, int]:
    """`pids` and all their live descendants, {pid: start time in clock ticks} (a pid is not reused unnoticed)."""
    return {pid: ticks for root in pids for pid, ticks in processes.tree(root).items()}


def tracker_status() -> dict[str, dict]:
    """`replicators.status(flow)` of every flow, as a fresh Python process sees it."""
    code = (
        "import dataclasses, json, sys; from kafka_dr.replication import replicators; "
        "print(json.dumps({f: (s := replicators.status(f)) and dataclasses.asdict(s) for f in sys.argv[1:]}))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, *FLOWS], capture_output=True, text=True, env=os.environ, timeout=60
    )
    assert done.returncode == 0, done.stderr[-2000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert all(seen.values()), f"the tracker never heard of some flows: {seen}"
    return seen
