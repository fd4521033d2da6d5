"""Verify one flow: every source record the flow must copy is in the destination exactly once.

    spark-submit spark_jobs/verify.py --topology FILE --flow NAME [--report FILE]

One Spark task per source partition. The JSON summary is the last line of standard output and
goes to --report. Exit codes: 0 verified, 1 missing/duplicated/mismatched records or failure, 2 bad input.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from confluent_kafka import TopicPartition
from confluent_kafka.admin import OffsetSpec

from kafka_dr.job_summary import emit_summary
from kafka_dr.replication.planner import FlowContext, UnreachableError
from kafka_dr.replication.verify import VerifyTask, verify_partition
from kafka_dr.topology import TopologyError, load_topology


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="verify.py", description=__doc__.splitlines()[0])
    parser.add_argument("--topology")
    parser.add_argument("--flow", required=True)
    parser.add_argument("--report", type=Path)
    args = parser.parse_args(argv)
    try:
        topology = load_topology(args.topology)
        flow = topology.flow(args.flow)
    except TopologyError as exc:
        emit_summary("verify", {"flow": args.flow, "status": "failed", "error": str(exc)}, args.report)
        return 2
    from pyspark.sql import SparkSession

    spark = SparkSession.builder.appName(f"kafka-dr verify {args.flow}").getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    try:
        context = FlowContext(topology, flow)
        counts = context.source_partitions()
        tps = [TopicPartition(t, p) for t, n in sorted(counts.items()) for p in range(n)]
        ends = context.offsets(tps, OffsetSpec.latest()) if tps else {}
        tasks = [VerifyTask(context.source_config, context.target_config, context.source_cluster_id,
                            context.target_cluster_id, tp.topic, tp.partition, context.dest_topic(tp.topic),
                            ends[(tp.topic, tp.partition)]) for tp in tps]
        context.close()
        results = spark.sparkContext.parallelize(tasks, max(len(tasks), 1)).map(verify_partition).collect()
        ok = all(r.ok for r in results)
        summary = {
            "flow": flow.name, "status": "verified" if ok else "failed",
            **{k: sum(getattr(r, k) for r in results)
               for k in ("expected", "copied", "filtered", "missing", "duplicated", "mismatched")},
            "partitions": [r.to_dict() for r in results]}
        status = 0 if ok else 1
    except UnreachableError as exc:
        summary, status = {"flow": args.flow, "status": "failed", "error": str(exc)}, 1
    emit_summary("verify", summary, args.report)
    spark.stop()
    return status


if __name__ == "__main__":
    sys.exit(main())
