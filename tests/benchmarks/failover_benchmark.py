"""Failover at scale: dr_failover through dag.test() on the embedded two-DC stack, with --groups consumer groups
(default 1,000) x 6 partitions, in both modes.

disaster: the groups are checkpointed into dc2 as a running replicator does, then dc1 (broker and registry) is
  stopped; dr_failover applies the checkpoints, makes dc2's registry lead on its own store and moves the clients.
planned: dc1 stays up and a continuous replicator copies while records keep arriving; dr_failover moves the
  producers, waits for replication lag 0 (the lag gate), stops the replicator, translates from the source (a Spark
  job) and applies, then moves the consumers.

Printed per mode: the RTO (the run's start to clients switched) split into kafka-dr's own steps (the time inside
each task's work, as the report records it), the lag-gate wait (planned) and Airflow's task overhead (the rest:
starting each task instance, params, XComs); each step's seconds; and exactness: every group's committed offsets
in dc2 against the ground truth read from dc2's provenance headers (not from kafka-dr's translation).

    make bench-failover
    PYTHONPATH=tests .venv/bin/python tests/benchmarks/failover_benchmark.py [disaster|planned|both] [--groups N]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import threading
import time
from datetime import datetime
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
    states_of,
)
from support.fleet import fill, ground_truth
from support.stack import running_stack

from kafka_dr.replication import replicators
from kafka_dr.reports import step_seconds
from kafka_dr.spark.submit import spark_env, spark_submit_command

# On the way to the clients' switch, in run order; the lag gate is the planned mode's wait, counted apart.
OWN_STEPS = (
    "validate",
    "switch_producers",
    "stop_replication",
    "translate_offsets",
    "schema_registry",
    "switch_consumers",
)


def drill(dag: Any, root: Path, mode: str, groups: int, records: int) -> dict[str, Any]:
    os.environ["KDR_STATE_DIR"] = str(root / "state")
    with running_stack(root) as stack:
        local = stack.local
        dc1, dc2 = (local.config.dc(dc) for dc in ("dc1", "dc2"))
        topology = root / "topology.yaml"
        fleet = checkpointed_fleet(local, topology, groups, records, epoch_seconds=None)
        arriving: threading.Thread | None = None
        if mode == "disaster":
            local.stop("dc1")
        else:
            command = spark_submit_command(
                "replicate",
                ["--topology", str(topology), "--flow", FLEET_FLOW, "--mode", "continuous"],
            )
            replicators.start(FLEET_FLOW, command, env=spark_env())
            # Records still arriving when the failover starts: the lag gate has something to wait for.
            arriving = threading.Thread(
                target=fill, args=({"bootstrap.servers": dc1.broker_address}, FLEET_TOPIC, FLEET_PARTITIONS, 200, "new")
            )
            arriving.start()
        run = fail_over({"dr_failover": dag}, topology, mode, groups="fleet-.*")
        if arriving is not None:
            arriving.join()
        states = states_of(run)
        if str(run.state) != "success":
            raise SystemExit(f"{mode} failover failed: {states}")
        report = json.loads(next((root / "state" / "reports").glob("dr_failover-*.json")).read_text())
        lag_gate = _task_seconds(run, "lag_zero")
        dc2_config = {"bootstrap.servers": dc2.broker_address}
        truth = ground_truth(dc2_config, FLEET_TOPIC, FLEET_PARTITIONS, fleet.source_cluster_id)
        resumed = resumed_offsets(dc2.broker_address, sorted(fleet.commits), FLEET_TOPIC)
        exact_groups, exact_partitions = truth.score(fleet.commits, resumed)
    steps = {name: step_seconds(step) for name, step in report["steps"].items()}
    own = round(sum(seconds for name, seconds in steps.items() if name.startswith(OWN_STEPS) and seconds), 3)
    rto = report["rto_seconds"]
    return {
        "mode": mode,
        "groups": groups,
        "group_partitions": groups * FLEET_PARTITIONS,
        "groups_exact": exact_groups,
        "group_partitions_exact": exact_partitions,
        "groups_applied": len(report["groups"]["applied"]),
        "rpo_records": report["rpo"]["records"],
        "rto_s": rto,
        "kafka_dr_s": round(own, 3),
        "lag_gate_s": lag_gate,
        "airflow_s": round(rto - own - (lag_gate or 0), 3),
        "steps_s": steps,
        "tasks": _task_times(run, report),
    }


def _task_seconds(run: Any, task_id: str) -> float | None:
    """How long Airflow says a task instance ran (None: it did not run)."""
    for ti in run.get_task_instances():
        if ti.task_id == task_id and ti.state == "success" and ti.start_date and ti.end_date:
            return round((ti.end_date - ti.start_date).total_seconds(), 3)
    return None


def _task_times(run: Any, report: dict[str, Any]) -> list[tuple[str, float, float]]:
    """Each task instance's start and end in seconds after the run's start, as Airflow recorded them."""
    start = datetime.fromisoformat(report["run_started"])
    return sorted(
        (ti.task_id, round((ti.start_date - start).total_seconds(), 3), round((ti.end_date - start).total_seconds(), 3))
        for ti in run.get_task_instances()
        if ti.start_date and ti.end_date
    )


def warm_up(dag: Any, session: Path) -> None:
    """A dr_failover run that fails its validation (a topology file that does not exist), changing nothing. The
    first task dag.test() runs in a process builds Airflow's in-process execution API (about 3 s here, once per
    process); a deployed Airflow has its API server up before any failover, so the drills run after this."""
    started = time.perf_counter()
    run = fail_over({"dr_failover": dag}, session / "no-such-topology.yaml", "disaster", groups=".*")
    print(f"Airflow warm-up run ({run.state}, expected failed): {time.perf_counter() - started:.1f} s", flush=True)


def describe(r: dict[str, Any]) -> str:
    gate = f", lag gate {r['lag_gate_s']} s" if r["lag_gate_s"] is not None else ""
    steps = ", ".join(f"{name} {seconds}" for name, seconds in r["steps_s"].items() if seconds is not None)
    return (
        f"{r['mode']} failover, {r['groups']} groups x {FLEET_PARTITIONS} partitions: RTO {r['rto_s']} s = "
        f"kafka-dr {r['kafka_dr_s']} s{gate} + Airflow task overhead {r['airflow_s']} s; exact "
        f"{r['groups_exact']}/{r['groups']} groups ({r['group_partitions_exact']}/{r['group_partitions']} "
        f"group-partitions), RPO {r['rpo_records']} records\n  steps (s): {steps}"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", choices=["disaster", "planned", "both"], nargs="?", default="both")
    parser.add_argument("--groups", type=int, default=1000)
    parser.add_argument("--records", type=int, default=2000, help="records per partition replicated before")
    args = parser.parse_args()
    session = Path(tempfile.mkdtemp(prefix="kdr-failover-bench-"))
    configure_environment(session)
    migrate_db()
    dag = load_dag("dr_failover")
    warm_up(dag, session)
    results = []
    for mode in ("disaster", "planned") if args.mode == "both" else (args.mode,):
        started = time.perf_counter()
        result = drill(dag, session / mode, mode, args.groups, args.records)
        result["drill_wall_s"] = round(time.perf_counter() - started, 1)
        print(describe(result), flush=True)
        results.append(result)
    print(json.dumps({"at": datetime.now().isoformat(timespec="seconds"), "results": results}))
    return 0 if all(r["groups_exact"] == r["groups"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
