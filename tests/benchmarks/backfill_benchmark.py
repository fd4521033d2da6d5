"""Backfill benchmark: a window of --window records out of --records (--partitions partitions) backfilled into a
separate topic by the backfill job (spark-submit spark_jobs/backfill.py, the dr_backfill DAG's task), against a plain
confluent-kafka read of the same window from the same broker in the same run (median of three reads: one read takes
well under a second, so one alone is noise), and, for scale, a plain consume-then-produce copy of as many records from
the window's first offsets.

    make bench-backfill
    PYTHONPATH=tests .venv/bin/python tests/benchmarks/backfill_benchmark.py [--records 1000000] [--window 200000]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

from benchmarks.replication_benchmark import create, fill, plain_copy
from confluent_kafka import Consumer, KafkaError, TopicPartition
from support.servers import BrokerProcess, temporary_brokers
from support.spark import submit
from support.topology import write_topology

from kafka_dr.clients import next_batch


def plain_read(broker: BrokerProcess, topic: str, window: dict[int, tuple[int, int]]) -> float:
    """Seconds one consumer takes to read the window's offsets [first, last] of every partition."""
    consumer = Consumer(
        {
            **broker.config,
            "group.id": "plain-read",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
            "fetch.max.bytes": 52_428_800,
        }
    )
    started = time.perf_counter()
    consumer.assign([TopicPartition(topic, p, first) for p, (first, _) in window.items()])
    left = {p: last for p, (_, last) in window.items()}
    while left:
        for message in next_batch(consumer):
            if message.error() is not None:
                if message.error().code() != KafkaError._PARTITION_EOF:
                    raise RuntimeError(message.error().str())
                continue
            p = message.partition()
            if p in left and message.offset() >= left[p]:
                del left[p]
                consumer.pause([TopicPartition(topic, p)])
    seconds = time.perf_counter() - started
    consumer.close()
    return seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--window", type=int, default=200_000)
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--size", type=int, default=200, help="value bytes")
    args = parser.parse_args()
    per_partition = args.records // args.partitions
    width = args.window // args.partitions
    first = (per_partition - width) // 2  # the middle of each partition
    window = {p: (first, first + width - 1) for p in range(args.partitions)}
    with temporary_brokers("dc1", "dc2") as (root, brokers):
        path = write_topology(
            root / "topology.yaml",
            {name: broker.bootstrap for name, broker in brokers.items()},
            "  - {name: bench, source: dc1, target: dc2, topics: {include: ['orders']}}",
        )
        create(brokers["dc1"], "orders", args.partitions)
        fill(brokers["dc1"], "orders", per_partition * args.partitions, args.size, args.partitions)
        plain_s = statistics.median(plain_read(brokers["dc1"], "orders", window) for _ in range(3))
        create(brokers["dc2"], "orders.plain", args.partitions)
        starts = {p: first for p, (first, _) in window.items()}
        copy_s = plain_copy(
            brokers["dc1"], brokers["dc2"], "orders", "orders.plain", args.window, args.partitions, starts
        )
        offsets = json.dumps({f"orders:{p}": list(r) for p, r in window.items()})
        code, summary, err = submit(
            "backfill", "--topology", str(path), "--flow", "bench", "--offsets", offsets,
            "--target-topic", "{topic}.backfill", timeout=900,
        )  # fmt: skip
        copied = width * args.partitions
        assert code == 0 and summary["copied"] == copied, (summary, err[-3000:])
        assert summary["verify"]["status"] == "verified", summary
    result = {
        "records": per_partition * args.partitions,
        "window": copied,
        "partitions": args.partitions,
        "plain_read_records_per_s": round(copied / plain_s),
        "plain_copy_records_per_s": round(copied / copy_s),
        "backfill_copy_records_per_s": round(copied / summary["copy_seconds"]),
        "backfill_job_records_per_s": round(copied / summary["seconds"]),
        "ratio_copy_phase": round(plain_s / summary["copy_seconds"], 3),
        "ratio_job": round(plain_s / summary["seconds"], 3),
        "ratio_copy_phase_to_plain_copy": round(copy_s / summary["copy_seconds"], 3),
        "job_seconds": summary["seconds"],
        "copy_seconds": summary["copy_seconds"],
        "verify_seconds": summary["verify_seconds"],
    }
    print(
        f"backfill of {copied:,} of {result['records']:,} records ({args.partitions} partitions): copy phase "
        f"{result['backfill_copy_records_per_s']:,} rec/s, whole job (window resolved, presence read, copy, window "
        f"verified) {result['backfill_job_records_per_s']:,} rec/s vs plain read {result['plain_read_records_per_s']:,}"
        f" rec/s -> ratio {result['ratio_copy_phase']} (copy phase), {result['ratio_job']} (job); a plain copy "
        f"{result['plain_copy_records_per_s']:,} rec/s -> copy phase {result['ratio_copy_phase_to_plain_copy']} x it"
    )
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
