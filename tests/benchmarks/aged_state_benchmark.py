"""A month-old flow against a fresh one, side by side in one run: the disaster failover's RTO (dag.test(), 1,000
groups x 6 partitions, as failover_benchmark.py), the replication planner's start (what a replicator does before its
first copy: `_kdr.progress` read for where each partition resumes) and a health run (`kafka-dr health` of the flow).

The aged flow's target first gets what a month of running writes (support/aged_state.py: 20,000 progress epochs with
their claims, 2,000 checkpoint passes over the 1,000 groups, a share of them moving per pass), dated over 30 days;
then the run waits for the embedded broker to compact `_kdr.progress` and `_kdr.checkpoints` (their segment.ms and
min.cleanable.dirty.ratio, internal.py) as Kafka would, and prints the bytes and records before and after. Each figure
is the median of --runs measurements on the same stack; the ratios are aged / fresh (the issue asks <= 1.2).

    make bench-aged
    PYTHONPATH=tests .venv/bin/python tests/benchmarks/aged_state_benchmark.py [--groups N] [--epochs N] [--passes N]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

from benchmarks.failover_benchmark import drill, warm_up
from support.aged_state import age_flow
from support.airflow import configure_environment, load_dag, migrate_db
from support.drills import FLEET_FLOW
from support.stack import Stack

from kafka_dr.health.check import check_flow
from kafka_dr.replication.copier import close_clients
from kafka_dr.replication.internal import CHECKPOINTS, PROGRESS
from kafka_dr.replication.planner import FlowContext
from kafka_dr.topology import load_topology

COMPACTED_WAIT_S = 300.0


def median_seconds(runs: int, work: Callable[[], object]) -> float:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        work()
        times.append(time.perf_counter() - started)
    return round(statistics.median(times), 3)


def plan_once(topology_path: Path) -> None:
    topology = load_topology(topology_path)
    context = FlowContext(topology, topology.flow(FLEET_FLOW))
    try:
        context.plan()
    finally:
        context.close()
        close_clients()


def topic_bytes(stack: Stack, topic: str) -> int:
    """Bytes of the topic's segments in dc2's broker."""
    return sum(path.stat().st_size for path in (stack.root / "data").glob(f"**/dc2/**/{topic}-0/*.log"))


def wait_compacted(stack: Stack) -> dict[str, Any]:
    """Until the broker's cleaner has made a pass over both topics since they were filled (their bytes stop going
    down for two cleaner periods), or COMPACTED_WAIT_S."""
    before = {topic: topic_bytes(stack, topic) for topic in (PROGRESS, CHECKPOINTS)}
    started, last, steady_since = time.monotonic(), before, time.monotonic()
    while time.monotonic() - started < COMPACTED_WAIT_S:
        time.sleep(5)
        now = {topic: topic_bytes(stack, topic) for topic in (PROGRESS, CHECKPOINTS)}
        if now != last:
            last, steady_since = now, time.monotonic()
        elif all(now[t] < before[t] for t in now) and time.monotonic() - steady_since >= 35:
            break
    waited = round(time.monotonic() - started)
    return {"bytes_before_compaction": before, "bytes_after": last, "compaction_wait_s": waited}


def measured(runs: int, aging: dict[str, int] | None) -> Callable[[Stack, Path], dict[str, Any]]:
    """The drill's preparation: the history written (aged) and compacted, then the planner's and the health run's
    times."""

    def prepare(stack: Stack, topology_path: Path) -> dict[str, Any]:
        found: dict[str, Any] = {}
        if aging is not None:
            dc2 = {"bootstrap.servers": stack.local.config.dc("dc2").broker_address}
            aged = age_flow(dc2, FLEET_FLOW, **aging)
            found["generated"] = {
                "progress_records": aged.progress_records,
                "checkpoint_records": aged.checkpoint_records,
                "seconds": aged.seconds,
            }
            print(f"aged state written: {found['generated']}", flush=True)
            found |= wait_compacted(stack)
            print(f"compaction: {found['bytes_before_compaction']} -> {found['bytes_after']} bytes", flush=True)
        found["bytes"] = {topic: topic_bytes(stack, topic) for topic in (PROGRESS, CHECKPOINTS)}
        topology = load_topology(topology_path)
        found["planner_start_s"] = median_seconds(runs, lambda: plan_once(topology_path))
        found["health_run_s"] = median_seconds(runs, lambda: check_flow(topology, FLEET_FLOW))
        return found

    return prepare


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--groups", type=int, default=1000)
    parser.add_argument("--records", type=int, default=2000, help="records per partition replicated before")
    parser.add_argument("--epochs", type=int, default=20_000)
    parser.add_argument("--passes", type=int, default=2_000)
    parser.add_argument("--moving", type=float, default=0.05, help="share of the groups that move per pass")
    parser.add_argument("--runs", type=int, default=5, help="planner and health measurements per flow")
    args = parser.parse_args()
    session = Path(tempfile.mkdtemp(prefix="kdr-aged-bench-"))
    configure_environment(session)
    migrate_db(session)
    dag = load_dag("dr_failover")
    warm_up(None, dag, session)
    aging = {"epochs": args.epochs, "passes": args.passes, "moving": args.moving}
    results = {}
    for age in ("fresh", "aged"):
        prepare = measured(args.runs, aging if age == "aged" else None)
        result = drill(session / age, "disaster", args.groups, args.records, dag, prepare)
        results[age] = result
        print(
            f"{age}: disaster RTO {result['rto_s']} s (kafka-dr {result['kafka_dr_s']} s), planner start "
            f"{result['planner_start_s']} s, health run {result['health_run_s']} s, internal topics "
            f"{result['bytes']} bytes, exact {result['groups_exact']}/{result['groups']} groups",
            flush=True,
        )
    compared = (("disaster_rto", "rto_s"), ("planner_start", "planner_start_s"), ("health_run", "health_run_s"))
    ratios = {name: round(results["aged"][key] / results["fresh"][key], 2) for name, key in compared}
    print("aged / fresh: " + ", ".join(f"{name} {ratio}x" for name, ratio in ratios.items()), flush=True)
    print(json.dumps({"at": datetime.now().isoformat(timespec="seconds"), "ratios": ratios, "results": results}))
    return 0 if all(r["groups_exact"] == r["groups"] for r in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
