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
from support.drills import FLEET_FLOW, FLEET_PARTITIONS, FLEET_TOPIC
from support.kafka import first_round
from support.stack import Stack

from kafka_dr.access import ClusterAccess
from kafka_dr.health.check import check_flow
from kafka_dr.replication.copier import close_clients
from kafka_dr.replication.internal import CHECKPOINTS, PROGRESS
from kafka_dr.topology import load_topology

COMPACTED_WAIT_S = 300.0
CLEANER_PERIOD_S = 15  # the embedded broker's log.cleaner.backoff.ms


def median_seconds(runs: int, work: Callable[[], object]) -> float:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        work()
        times.append(time.perf_counter() - started)
    return round(statistics.median(times), 3)


def plan_once(topology_path: Path) -> None:
    try:
        first_round(load_topology(topology_path), FLEET_FLOW)
    finally:
        close_clients()


def topic_bytes(stack: Stack, topic: str) -> int:
    """Bytes of the topic's segments in dc2's broker."""
    return sum(path.stat().st_size for path in (stack.root / "data").glob(f"dc2/**/{topic}-0/*.log"))


def topic_segments(stack: Stack, topic: str) -> int:
    return sum(1 for _ in (stack.root / "data").glob(f"dc2/**/{topic}-0/*.log"))


def wait_compacted(stack: Stack, history: dict[str, int]) -> dict[str, Any]:
    """Until the broker's cleaner has made its passes (the topics' bytes unchanged for two cleaner periods, and below
    what the history alone wrote), or COMPACTED_WAIT_S."""
    started = time.monotonic()
    last, steady_since = None, started
    while time.monotonic() - started < COMPACTED_WAIT_S:
        now = {topic: topic_bytes(stack, topic) for topic in (PROGRESS, CHECKPOINTS)}
        if now != last:
            last, steady_since = now, time.monotonic()
        elif all(now[t] < history[t] for t in now) and time.monotonic() - steady_since >= 2 * CLEANER_PERIOD_S:
            break
        time.sleep(5)
    waited = round(time.monotonic() - started)
    return {"bytes_history": history, "bytes_after": last, "compaction_wait_s": waited}


class Aging:
    """The aged flow's setup: a month of its history in dc2, written before the fleet (support/aged_state.py), and
    the bytes it took."""

    def __init__(self, settings: dict[str, Any], groups: int) -> None:
        self.settings, self.groups = settings, groups
        self.history: dict[str, int] = {}

    def setup(self, stack: Stack) -> dict[str, Any]:
        dc2 = {"bootstrap.servers": stack.local.config.dc("dc2").broker_address}
        names = [f"fleet-{i:04d}" for i in range(self.groups)]  # commit_random_groups' names
        made = age_flow(dc2, FLEET_FLOW, FLEET_TOPIC, FLEET_PARTITIONS, names, **self.settings)
        generated = {"progress_records": made.progress_records, "checkpoint_records": made.checkpoint_records}
        self.history = {topic: topic_bytes(stack, topic) for topic in (PROGRESS, CHECKPOINTS)}
        print(f"aged state written in {made.seconds} s: {generated}, {self.history} bytes", flush=True)
        return {"generated": generated, "generation_s": made.seconds}


def measured(runs: int, aging: Aging | None) -> Callable[[Stack, Path], dict[str, Any]]:
    """The drill's preparation once the fleet is checkpointed: (aged) the broker's compaction awaited, then the
    planner's and the health run's times."""

    def prepare(stack: Stack, topology_path: Path) -> dict[str, Any]:
        found: dict[str, Any] = {}
        if aging is not None:
            found |= wait_compacted(stack, aging.history)
            print(f"compaction: {aging.history} -> {found['bytes_after']} bytes", flush=True)
        found["bytes"] = {topic: topic_bytes(stack, topic) for topic in (PROGRESS, CHECKPOINTS)}
        found["segments"] = {topic: topic_segments(stack, topic) for topic in (PROGRESS, CHECKPOINTS)}
        topology = load_topology(topology_path)
        found["planner_start_s"] = median_seconds(runs, lambda: plan_once(topology_path))
        found["health_run_s"] = median_seconds(
            runs, lambda: check_flow(ClusterAccess.from_environ(topology), FLEET_FLOW)
        )
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
    settings = {"epochs": args.epochs, "passes": args.passes, "moving": args.moving}
    results = {}
    for age in ("fresh", "aged"):
        aging = Aging(settings, args.groups) if age == "aged" else None
        prepare = measured(args.runs, aging)
        result = drill(session / age, "disaster", args.groups, args.records, dag, aging and aging.setup, prepare)
        results[age] = result
        print(
            f"{age}: disaster RTO {result['rto_s']} s (kafka-dr {result['kafka_dr_s']} s), planner start "
            f"{result['planner_start_s']} s, health run {result['health_run_s']} s, internal topics "
            f"{result['bytes']} bytes in {result['segments']} segments, exact {result['groups_exact']}/"
            f"{result['groups']} groups",
            flush=True,
        )
    compared = (("disaster_rto", "rto_s"), ("planner_start", "planner_start_s"), ("health_run", "health_run_s"))
    ratios = {name: round(results["aged"][key] / results["fresh"][key], 2) for name, key in compared}
    print("aged / fresh: " + ", ".join(f"{name} {ratio}x" for name, ratio in ratios.items()), flush=True)
    print(json.dumps({"at": datetime.now().isoformat(timespec="seconds"), "ratios": ratios, "results": results}))
    return 0 if all(r["groups_exact"] == r["groups"] for r in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
