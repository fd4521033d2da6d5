"""Verify one flow: every source record the flow must copy is in the destination exactly once.

    spark-submit spark_jobs/verify.py --topology FILE --flow NAME [--report FILE]

One Spark task per source partition. The JSON summary is the last line of standard output and
goes to --report. Exit codes: 0 verified, 1 missing/duplicated/mismatched records or failure, 2 bad input.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from confluent_kafka import TopicPartition
from confluent_kafka.admin import OffsetSpec

from kafka_dr.jobs import job_main, start_spark
from kafka_dr.replication.planner import FlowContext
from kafka_dr.replication.verify import VerifyTask, verify_partition
from kafka_dr.topology import Flow, Topology

if TYPE_CHECKING:
    from pyspark import SparkContext

TASK_ERRORS = ("KafkaException", "TimeoutError", "RuntimeError")  # what verify tasks raise


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="verify.py", description=__doc__.splitlines()[0])
    parser.add_argument("--topology", help="topology file (default $KDR_TOPOLOGY, else include/topology.yaml)")
    parser.add_argument("--flow", required=True)
    parser.add_argument("--report", type=Path, help="also write the JSON summary here")
    return parser.parse_args(argv)


def run(spark_context: SparkContext, topology: Topology, flow: Flow) -> dict[str, Any]:
    """The verification summary of `flow`: status "verified", or "failed" with what is wrong."""
    context = FlowContext(topology, flow)
    counts = context.source_partitions()
    tps = [TopicPartition(t, p) for t, n in sorted(counts.items()) for p in range(n)]
    ends = context.offsets(tps, OffsetSpec.latest()) if tps else {}
    tasks = [
        VerifyTask(
            context.source_config,
            context.target_config,
            context.source_cluster_id,
            context.target_cluster_id,
            tp.topic,
            tp.partition,
            context.dest_topic(tp.topic),
            ends[(tp.topic, tp.partition)],
        )
        for tp in tps
    ]
    context.close()
    results = spark_context.parallelize(tasks, max(len(tasks), 1)).map(verify_partition).collect()
    ok = all(r.ok for r in results)
    return {
        "flow": flow.name,
        "status": "verified" if ok else "failed",
        **{
            k: sum(getattr(r, k) for r in results)
            for k in ("expected", "copied", "filtered", "missing", "duplicated", "mismatched")
        },
        "partitions": [r.to_dict() for r in results],
    }


def main(argv: list[str] | None = None) -> int:
    return job_main("verify", parse_args(argv), _start, raised_in_tasks=TASK_ERRORS)


def _start(args: argparse.Namespace, topology: Topology, flow: Flow) -> dict[str, Any]:
    return run(start_spark(f"kafka-dr verify {flow.name}"), topology, flow)


if __name__ == "__main__":
    sys.exit(main())
