"""Health check cost: one `kafka-dr health` run over one flow of --topics topics x --partitions partitions,
against a baseline measured in the same run on the same brokers: one bare ListOffsets sweep of the same
partitions (log end, read_committed) with confluent-kafka plus one produce of as many sample records.

A run reads the newest records of a destination partition for the cycle check only when the partition moved since
the flow's last sample; `--moving` appends a record to every destination partition before each run, so every run
reads them all (the cost under steady traffic).

    make bench-health
    PYTHONPATH=tests .venv/bin/python tests/benchmarks/health_benchmark.py [--topics 20] [--partitions 10] [--moving]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

from confluent_kafka import IsolationLevel, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec
from support.kafka import create_topic, first_round
from support.servers import temporary_brokers
from support.topology import write_topology

from kafka_dr.access import ClusterAccess
from kafka_dr.health.check import check_flow
from kafka_dr.replication.copier import close_clients, copy_ranges
from kafka_dr.topology import load_topology

RUNS = 9


def bare_sweep(config: dict[str, str], partitions: list[TopicPartition]) -> float:
    """One ListOffsets request for every partition's read_committed end, answered, from a new client (a health
    run starts from nothing too)."""
    started = time.perf_counter()
    admin = AdminClient(config)
    # Connect first, as the health run does: a cold client's ListOffsets for 200 partitions often took 3 s here.
    admin.describe_cluster(request_timeout=10).result()
    futures = admin.list_offsets(
        {tp: OffsetSpec.latest() for tp in partitions}, isolation_level=IsolationLevel.READ_COMMITTED
    )
    for future in futures.values():
        future.result(10)
    return time.perf_counter() - started


def produce_samples(config: dict[str, str], count: int) -> float:
    """One produce of `count` sample-sized records (acks=all) from a new producer, as a health run writes its
    samples."""
    value = json.dumps({"time_ms": 0, "topic": "t" * 12, "partition": 0, "lag_records": 0} | {"x": "y" * 150})
    started = time.perf_counter()
    producer = Producer({**config, "acks": "all", "linger.ms": 5})
    for i in range(count):
        producer.produce("bench-samples", key=str(i).encode(), value=value.encode())
    assert producer.flush(30) == 0
    return time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--topics", type=int, default=20)
    parser.add_argument("--partitions", type=int, default=10)
    parser.add_argument("--moving", action="store_true", help="new records in every destination partition per run")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with temporary_brokers("dc1", "dc2") as (root, brokers):
        dc1, dc2 = brokers["dc1"], brokers["dc2"]
        topics = [f"bench-{i:02d}" for i in range(args.topics)]
        producer = Producer({**dc1.config, "linger.ms": 5})
        for topic in topics:
            create_topic(dc1.config, topic, args.partitions)
            for i in range(20 * args.partitions):
                producer.produce(topic, key=str(i).encode(), value=b"x" * 100, partition=i % args.partitions)
        assert producer.flush(60) == 0
        create_topic(dc2.config, "bench-samples", 1)
        path = write_topology(
            root / "topology.yaml",
            {"dc1": dc1.bootstrap, "dc2": dc2.bootstrap},
            "  - {name: bench-flow, source: dc1, target: dc2, topics: {include: ['bench-.*']}}",
        )
        topology = load_topology(path)
        copy_ranges(first_round(topology, "bench-flow").tasks)  # healthy: every record copied, progress recorded
        close_clients()
        partitions = [TopicPartition(t, p) for t in topics for p in range(args.partitions)]
        health_s, baseline_s = [], []
        mover = Producer({**dc2.config, "linger.ms": 5})
        for _ in range(RUNS):  # alternated, so both see the same machine
            if args.moving:  # untimed: every destination partition gets a record the next run has not seen
                for tp in partitions:
                    mover.produce(tp.topic, value=b"new", partition=tp.partition)
                assert mover.flush(10) == 0
            started = time.perf_counter()
            health = check_flow(ClusterAccess.from_environ(topology), "bench-flow")
            health_s.append(time.perf_counter() - started)
            assert health.status == "OK", health.problems
            baseline_s.append(bare_sweep(dc1.config, partitions) + produce_samples(dc2.config, len(partitions)))
    health_median, baseline_median = statistics.median(health_s), statistics.median(baseline_s)
    result = {
        "partitions": len(partitions),
        "moving": args.moving,
        "health_run_s": round(health_median, 3),
        "baseline_s": round(baseline_median, 3),
        "ratio_health_over_baseline": round(health_median / baseline_median, 2),
        "runs": RUNS,
        "health_runs_s": [round(x, 3) for x in health_s],
        "baseline_runs_s": [round(x, 3) for x in baseline_s],
    }
    moving = ", every destination partition moved" if args.moving else ""
    print(
        f"health: one run over {len(partitions)} partitions{moving} {health_median:.3f} s (median of {RUNS}); baseline "
        f"(one ListOffsets sweep + one produce of {len(partitions)} samples) {baseline_median:.3f} s -> "
        f"ratio {result['ratio_health_over_baseline']} (limit 2)"
    )
    if args.json:
        print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
