"""Failover at scale: dr_failover on the embedded two-DC stack, with --groups consumer groups (default 1,000) x 6
partitions, in both modes, run by dag.test() and, with --scheduler real (or both), by the real Airflow.

Both modes start with a continuous replicator of the flow running (dr_bringup's), so stop_replication has one to stop:
disaster: the groups are checkpointed into dc2 as a running replicator does, then dc1 (broker and registry) is
  stopped under the running replicator; dr_failover stops it, applies the checkpoints, makes dc2's registry lead on
  its own store and moves the clients.
planned: dc1 stays up and the replicator copies while records keep arriving; dr_failover moves the producers, waits
  for replication lag 0 (the lag gate), stops the replicator, translates from the source (a Spark job) and applies,
  then moves the consumers.

On the real scheduler the topology asks for approval (`dr: {approval: required}`): the script approves as the second
user 5 s after the request, and the JSON keeps the trigger to the request (`trigger_to_approval_asked_s`, the preview
made) and the wait (`approval_wait_s`, outside the RTO).

Printed per mode: the RTO (the run's start to clients switched) split into kafka-dr's own steps (the time inside
each task's work, as the report records it), the lag-gate wait (planned) and Airflow's task overhead (the rest:
starting each task instance, params, XComs); each step's seconds; and exactness: every group's committed offsets
in dc2 against the ground truth read from dc2's provenance headers (not from kafka-dr's translation). What the RTO
leaves out is kept in the JSON too: dag.test()'s one-off warm-up of Airflow's in-process API (`warm_up_s`) and, on
the real scheduler, the wait from the trigger to the run's first task (`scheduler_delay_s`) and the trigger to
clients switched as the operator sees it (`trigger_to_switched_s`).

    make bench-failover
    PYTHONPATH=tests .venv/bin/python tests/benchmarks/failover_benchmark.py [disaster|planned|both] [--groups N]
        [--scheduler dag-test|real|both]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from support.airflow import configure_environment, load_dag, migrate_db
from support.drills import (
    FLEET_FLOW,
    FLEET_PARTITIONS,
    FLEET_TOPIC,
    checkpointed_fleet,
    fail_over,
    resumed_offsets,
)
from support.fleet import fill, ground_truth
from support.ports import free_port
from support.stack import Stack, running_stack
from support.topology import NO_APPROVAL

from kafka_dr.replication import activity, replicators
from kafka_dr.reports import step_seconds
from kafka_dr.spark.submit import spark_env, spark_submit_command
from kafka_dr.topology import load_topology
from kafka_dr_dev.airflow_rest import AirflowRest
from kafka_dr_dev.demo import trigger_and_wait
from kafka_dr_dev.local.airflow import APPROVER, APPROVER_PASSWORD, PASSWORD, USER
from kafka_dr_dev.local.config import APACHE, BROKER_KINDS
from kafka_dr_dev.local.stack import LocalStack

# On the way to the clients' switch, in run order; the lag gate is the planned mode's wait, counted apart. The
# registry redirect runs beside the translation and the switch: off the way.
OWN_STEPS = (
    "validate",
    "preview",
    "switch_producers",
    "stop_replication",
    "translate_offsets",
    "switch_consumers",
)
# The report's step of each task (the mapped translation's: "translate_offsets <flow>").
STEP_OF_TASK = {
    "validate_failover": "validate",
    "redirect_schema_registry": "schema_registry",
    "verify_failover": "verify",
}
KAFKA_DR_DEV = Path(sys.executable).parent / "kafka-dr-dev"


def drill(
    root: Path,
    mode: str,
    groups: int,
    records: int,
    dag: Any | None,
    setup: Callable[[Stack], dict[str, Any]] | None = None,
    prepare: Callable[[Stack, Path], dict[str, Any]] | None = None,
    kafka: str = APACHE,
) -> dict[str, Any]:
    """One failover of `mode` on a stack of its own under `root`: by `dag` (dag.test()) or, without one, by the
    real Airflow (`kafka-dr-dev airflow up`, started beside the stack, triggered through its REST API). `setup`: run on
    the stack before the fleet is made; `prepare`: on the stack and its topology file once the fleet is checkpointed,
    before the replicator starts. What they return goes into the result."""
    os.environ["KDR_STATE_DIR"] = str(root / "state")
    with running_stack(root, kafka) as stack:
        local = stack.local
        topology = root / "topology.yaml"
        prepared = setup(stack) if setup is not None else {}
        fleet = checkpointed_fleet(local, topology, groups, records)
        prepared |= prepare(stack, topology) if prepare is not None else {}
        if dag is None:  # the real scheduler: a person's approval, asked with the preview, as dr.approval requires
            topology.write_text(topology.read_text().replace(NO_APPROVAL, "dr: {approval: required}"))
        with real_airflow(root, topology) if dag is None else contextlib.nullcontext() as api:
            warm_up_s = warm_up(api, dag, root) if api is not None else None
            with replicator_running(topology):
                run = run_failover(local, topology, mode, dag, api)
        if run.state != "success":
            raise SystemExit(f"{mode} failover failed: {run.tasks}")
        report = json.loads(max((root / "state" / "reports").glob("dr_failover-*.json")).read_text())
        dc2 = local.config.dc("dc2")
        truth = ground_truth(
            {"bootstrap.servers": dc2.broker_address}, FLEET_TOPIC, FLEET_PARTITIONS, fleet.source_cluster_id
        )
        resumed = resumed_offsets(dc2.broker_address, sorted(fleet.commits), FLEET_TOPIC)
        exact = truth.score(fleet.commits, resumed)
    return drill_result(mode, dag is not None, groups, report, run, warm_up_s, exact) | prepared


@dataclass(frozen=True)
class DrillRun:
    """How a drill's dr_failover run ended and its times: each task's (id, start, end), the scheduler's delay (the
    real Airflow's only) and when it was triggered."""

    state: str
    tasks: list[tuple[str, float, float]]
    scheduler_delay: float | None
    triggered: datetime


def run_failover(local: LocalStack, topology: Path, mode: str, dag: Any | None, api: AirflowRest | None) -> DrillRun:
    """dr_failover of `mode` while the replicator runs: dc1 stopped under it (disaster), or records still arriving
    (planned: the lag gate has something to wait for); by dag.test() or through the real Airflow's REST API."""
    arriving: threading.Thread | None = None
    if mode == "disaster":
        local.stop("dc1")  # under the running replicator
    else:
        config = {"bootstrap.servers": local.config.dc("dc1").broker_address}
        arriving = threading.Thread(target=fill, args=(config, FLEET_TOPIC, FLEET_PARTITIONS, 200, "new"))
        arriving.start()
    conf = {"topology": str(topology), "failed_cluster": "dc1", "target_cluster": "dc2", "mode": mode}
    conf |= {"groups": "fleet-.*", "reset_to_datetime": None}
    triggered = datetime.now(UTC)
    if api is None:
        run = dag.test(run_conf=conf)
        ran = DrillRun(str(run.state), _task_times(run), None, triggered)
    else:
        approver = AirflowRest(api.url, APPROVER, APPROVER_PASSWORD)
        step = trigger_and_wait(api, "dr_failover", conf, lambda line: None, approver)
        ran = DrillRun(step.state, _rest_task_times(api, step.run_id), step.scheduler_delay, triggered)
    if arriving is not None:
        arriving.join()
    return ran


def drill_result(
    mode: str,
    dag_test: bool,
    groups: int,
    report: dict[str, Any],
    run: DrillRun,
    warm_up_s: float | None,
    exact: tuple[int, int],
) -> dict[str, Any]:
    """The drill's JSON: the RTO split into kafka-dr's steps, the lag gate and Airflow's share, the waits the RTO
    leaves out, and exactness (groups, group-partitions)."""
    steps = {name: step_seconds(step) for name, step in report["steps"].items()}
    own = round(sum(seconds for name, seconds in steps.items() if name.startswith(OWN_STEPS) and seconds), 3)
    rto = report["rto_seconds"]
    lag_gate = next((end - begin for task, begin, end in run.tasks if task == "lag_zero"), None)
    started = datetime.fromisoformat(report["run_started"])
    asked = report["steps"].get("approve", {}).get("started")
    return {
        "mode": mode,
        "scheduler": "dag.test" if dag_test else "real (LocalExecutor)",
        "groups": groups,
        "group_partitions": groups * FLEET_PARTITIONS,
        "groups_exact": exact[0],
        "group_partitions_exact": exact[1],
        "groups_applied": len(report["groups"]["applied"]),
        "rpo_records": report["rpo"]["records"],
        "rto_s": rto,
        "kafka_dr_s": round(own, 3),
        "lag_gate_s": None if lag_gate is None else round(lag_gate, 3),
        "airflow_s": round(rto - own - (lag_gate or 0), 3),
        "warm_up_s": warm_up_s,
        "scheduler_delay_s": run.scheduler_delay,
        "trigger_to_switched_s": round((started - run.triggered).total_seconds() + rto, 3),
        # what the approver waits for: the trigger to the request in Required Actions, the preview made
        "trigger_to_approval_asked_s": None
        if asked is None
        else round((datetime.fromisoformat(asked) - run.triggered).total_seconds(), 3),
        "approval_wait_s": report["approval_wait_seconds"],
        "preview_s": steps.get("preview"),
        "steps_s": steps,
        "tasks": run.tasks,
        "per_task": per_task(run.tasks, steps, started.timestamp() + rto),
    }


def per_task(
    tasks: list[tuple[str, float, float]], steps: dict[str, float | None], switched: float
) -> list[dict[str, Any]]:
    """Each task instance that began before the clients switched, in start order: how long after the tasks before it
    ended it began (the scheduler's and the executor's share; None for the first and for one that ran beside
    another), how long it ran, and of that kafka-dr's step (the rest is Airflow's inside the task: process start, DAG
    file, context, XComs)."""
    rows, previous_end = [], None
    for task, begin, end in sorted(tasks, key=lambda t: t[1]):
        if begin > switched:
            continue
        step = STEP_OF_TASK.get(task, task)
        own = next((v for k, v in steps.items() if k == step or k.startswith(f"{step} ")), None)
        after = None if previous_end is None or begin < previous_end else round(begin - previous_end, 3)
        rows.append(
            {
                "task": task,
                "after_previous_s": after,
                "ran_s": round(end - begin, 3),
                "kafka_dr_s": own,
            }
        )
        previous_end = end if previous_end is None else max(previous_end, end)
    return rows


@contextlib.contextmanager
def replicator_running(topology: Path) -> Iterator[None]:
    """The flow's continuous replicator, as dr_bringup leaves it, running from its first epoch on; stopped after
    (a failover that got far has stopped it already)."""
    command = spark_submit_command(
        "replicate", ["--topology", str(topology), "--flow", FLEET_FLOW, "--mode", "continuous"]
    )
    target = _target_config(topology)
    from_offset = activity.progress_end(target)
    replicators.start(FLEET_FLOW, command, env=spark_env())
    try:
        if not activity.wait_for_claim(
            target, FLEET_FLOW, from_offset, lambda: replicators.is_running(FLEET_FLOW), 180
        ):
            raise SystemExit(
                f"the replicator of {FLEET_FLOW} exited during its start: {replicators.last_error(FLEET_FLOW)}"
            )
        yield
    finally:
        with contextlib.suppress(replicators.ReplicatorError):
            replicators.stop(FLEET_FLOW)


def _target_config(topology: Path) -> dict[str, Any]:
    from kafka_dr.access import ClusterAccess

    return ClusterAccess.from_environ(load_topology(topology)).config("dc2")


@contextlib.contextmanager
def real_airflow(root: Path, topology: Path) -> Iterator[AirflowRest]:
    """`kafka-dr-dev airflow up` for this stack (its own home and port, none of this process's Airflow settings), down
    after."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "KDR_"))}
    env["KDR_STATE_DIR"] = str(root / "state")
    started = time.perf_counter()
    up = [str(KAFKA_DR_DEV), "airflow", "up", "--topology", str(topology), "--port", str(port)]
    done = subprocess.run(up, env=env, capture_output=True, text=True, timeout=600, check=False)
    try:
        if done.returncode != 0:
            raise SystemExit(f"kafka-dr-dev airflow up failed: {done.stderr[-2000:]}")
        print(f"Airflow up ({time.perf_counter() - started:.0f} s)", flush=True)
        yield AirflowRest(f"http://127.0.0.1:{port}", USER, PASSWORD)
    finally:
        subprocess.run([str(KAFKA_DR_DEV), "airflow", "down"], env=env, capture_output=True, timeout=120, check=False)


def _task_times(run: Any) -> list[tuple[str, float, float]]:
    """Each task instance's start and end (epoch seconds) as Airflow recorded them, in order."""
    return sorted(
        (ti.task_id, ti.start_date.timestamp(), ti.end_date.timestamp())
        for ti in run.get_task_instances()
        if ti.start_date and ti.end_date and ti.state == "success"
    )


def _rest_task_times(api: AirflowRest, run_id: str) -> list[tuple[str, float, float]]:
    return sorted(
        (
            ti["task_id"],
            datetime.fromisoformat(ti["start_date"]).timestamp(),
            datetime.fromisoformat(ti["end_date"]).timestamp(),
        )
        for ti in api.task_instances("dr_failover", run_id)
        if ti.get("start_date") and ti.get("end_date") and ti.get("state") == "success"
    )


def warm_up(api: AirflowRest | None, dag: Any | None, root: Path) -> float:
    """A dr_failover run that fails its validation (a topology file that does not exist), changing nothing; its
    seconds. In dag.test() the first task of a process builds Airflow's in-process execution API (about 3 s, once per
    process); the real Airflow's first run parses and serializes afresh. A deployed Airflow has done both before any
    failover, so the drills run after this, and the JSON keeps it."""
    conf = {"topology": str(root / "no-such-topology.yaml"), "failed_cluster": "dc1", "target_cluster": "dc2"}
    conf |= {"mode": "disaster", "groups": ".*", "reset_to_datetime": None}
    started = time.perf_counter()
    if api is not None:
        state = trigger_and_wait(api, "dr_failover", conf, lambda line: None).state
    else:
        state = str(fail_over({"dr_failover": dag}, Path(conf["topology"]), "disaster", groups=".*").state)
    seconds = round(time.perf_counter() - started, 3)
    print(f"Airflow warm-up run ({state}, expected failed): {seconds:.1f} s", flush=True)
    return seconds


def describe(r: dict[str, Any]) -> str:
    gate = f", lag gate {r['lag_gate_s']} s" if r["lag_gate_s"] is not None else ""
    delay = "" if r["scheduler_delay_s"] is None else f"; scheduler delay {r['scheduler_delay_s']:.1f} s"
    steps = ", ".join(f"{name} {seconds}" for name, seconds in r["steps_s"].items() if seconds is not None)
    approval = (
        ""
        if r["trigger_to_approval_asked_s"] is None
        else f"; approval asked {r['trigger_to_approval_asked_s']} s after the trigger, "
        f"answered {r['approval_wait_s']} s later"
    )
    return (
        f"{r['mode']} failover ({r['scheduler']}), {r['groups']} groups x {FLEET_PARTITIONS} partitions: RTO "
        f"{r['rto_s']} s = kafka-dr {r['kafka_dr_s']} s{gate} + Airflow task overhead {r['airflow_s']} s; trigger to "
        f"clients switched {r['trigger_to_switched_s']} s{delay}; warm-up run {r['warm_up_s']} s; exact "
        f"{r['groups_exact']}/{r['groups']} groups ({r['group_partitions_exact']}/{r['group_partitions']} "
        f"group-partitions), RPO {r['rpo_records']} records; preview {r['preview_s']} s{approval}\n  steps (s): {steps}"
        + "".join(
            f"\n  {t['task']}: "
            + (
                "began beside another or first, "
                if t["after_previous_s"] is None
                else f"began {t['after_previous_s']} s after those before it ended, "
            )
            + f"ran {t['ran_s']} s"
            + ("" if t["kafka_dr_s"] is None else f" (kafka-dr {t['kafka_dr_s']} s, Airflow the rest)")
            for t in r["per_task"]
        )
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", choices=["disaster", "planned", "both"], nargs="?", default="both")
    parser.add_argument("--groups", type=int, default=1000)
    parser.add_argument("--records", type=int, default=2000, help="records per partition replicated before")
    parser.add_argument("--scheduler", choices=["dag-test", "real", "both"], default="both")
    parser.add_argument("--kafka", choices=BROKER_KINDS, default=APACHE, help="the brokers (default apache)")
    args = parser.parse_args()
    session = Path(tempfile.mkdtemp(prefix="kdr-failover-bench-"))
    configure_environment(session)
    migrate_db(session)
    dag = load_dag("dr_failover")
    dag_test_warm_up = warm_up(None, dag, session)
    results = []
    schedulers = ("dag-test", "real") if args.scheduler == "both" else (args.scheduler,)
    for scheduler in schedulers:
        for mode in ("disaster", "planned") if args.mode == "both" else (args.mode,):
            started = time.perf_counter()
            root = session / f"{scheduler}-{mode}"
            result = drill(
                root, mode, args.groups, args.records, dag if scheduler == "dag-test" else None, kafka=args.kafka
            )
            result["kafka"] = args.kafka
            if scheduler == "dag-test":
                result["warm_up_s"] = dag_test_warm_up  # once per process: the first drill's
            result["drill_wall_s"] = round(time.perf_counter() - started, 1)
            print(describe(result), flush=True)
            results.append(result)
    print(json.dumps({"at": datetime.now().isoformat(timespec="seconds"), "results": results}))
    return 0 if all(r["groups_exact"] == r["groups"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
