"""Verify one flow: every source record the flow must copy is in the destination exactly once.

    spark-submit spark_jobs/verify.py --topology FILE --flow NAME [--skip TOPIC:PARTITION:FIRST-LAST ...]
        [--settle SECONDS] [--force-cluster REGEX ...] [--report FILE]

One Spark task per source partition; reads only. --skip: source ranges (inclusive) the flow was moved past on
purpose (a failback's discarded or republished originals), counted as skipped. --settle: with a replicator
running, how long records it has not copied yet may take before they count as missing. --force-*: the filter
override the flow was copied with (replicate.py's). The JSON summary is the last line of standard output and
goes to --report. Exit codes: 0 verified, 1 missing/duplicated/mismatched records or failure, 2 bad input.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from confluent_kafka import TopicPartition
from confluent_kafka.admin import OffsetSpec

from kafka_dr.access import ClusterAccess
from kafka_dr.replication.flow_clients import FlowClients
from kafka_dr.replication.provenance import ForceCopy
from kafka_dr.replication.verify import VerifyTask, summarize, verify_partition
from kafka_dr.spark.job import BadInput, add_force_args, force_copy, job_main
from kafka_dr.spark.session import start_spark
from kafka_dr.topology import Flow

if TYPE_CHECKING:
    from pyspark import SparkContext

TASK_ERRORS = ("KafkaException", "TimeoutError", "RuntimeError")  # what verify tasks raise


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="verify.py", description=__doc__.splitlines()[0])
    parser.add_argument("--topology", help="topology file (default $KDR_TOPOLOGY, else include/topology.yaml)")
    parser.add_argument("--flow", required=True)
    parser.add_argument("--report", type=Path, help="also write the JSON summary here")
    parser.add_argument(
        "--skip",
        action="append",
        default=[],
        metavar="TOPIC:PARTITION:FIRST-LAST",
        help="source offsets (inclusive) the flow was moved past on purpose; repeatable",
    )
    parser.add_argument("--settle", type=float, default=0.0, help="seconds a running replicator has to catch up")
    add_force_args(parser)
    return parser.parse_args(argv)


SKIP_RE = re.compile(r"(?P<topic>[A-Za-z0-9._-]+):(?P<partition>\d+):(?P<first>\d+)-(?P<last>\d+)")


def parse_skips(values: list[str]) -> dict[tuple[str, int], tuple[tuple[int, int], ...]]:
    """--skip values by source partition; a malformed one raises BadInput naming it."""
    skips: dict[tuple[str, int], tuple[tuple[int, int], ...]] = {}
    for value in values:
        match = SKIP_RE.fullmatch(value)
        if match is None or int(match["first"]) > int(match["last"]):
            raise BadInput(f"--skip {value!r}: expected TOPIC:PARTITION:FIRST-LAST with FIRST <= LAST")
        key = (match["topic"], int(match["partition"]))
        skips[key] = (*skips.get(key, ()), (int(match["first"]), int(match["last"])))
    return skips


def run(
    spark_context: SparkContext,
    access: ClusterAccess,
    flow: Flow,
    skips: dict[tuple[str, int], tuple[tuple[int, int], ...]] | None = None,
    settle_s: float = 0.0,
    force: ForceCopy | None = None,
) -> dict[str, Any]:
    """The verification summary of `flow`: status "verified", or "failed" with what is wrong."""
    skips = skips or {}
    with FlowClients(access, flow) as clients:
        counts = clients.source_partitions()
        tps = [TopicPartition(t, p) for t, n in sorted(counts.items()) for p in range(n)]
        ends = clients.offsets(tps, OffsetSpec.latest()) if tps else {}
        tasks = [
            VerifyTask(
                clients.source_config,
                clients.target_config,
                clients.source_cluster_id,
                clients.target_cluster_id,
                tp.topic,
                tp.partition,
                clients.dest_topic(tp.topic),
                ends[(tp.topic, tp.partition)],
                force,
                skips.get((tp.topic, tp.partition), ()),
                settle_s,
            )
            for tp in tps
        ]
    results = spark_context.parallelize(tasks, max(len(tasks), 1)).map(verify_partition).collect()
    verdict = summarize(results)
    return {"flow": flow.name, "status": verdict.pop("status"), **verdict, "partitions": [r.to_dict() for r in results]}


def main(argv: list[str] | None = None) -> int:
    return job_main("verify", parse_args(argv), _start, raised_in_tasks=TASK_ERRORS)


def _start(args: argparse.Namespace, access: ClusterAccess, flow: Flow) -> dict[str, Any]:
    skips, force = parse_skips(args.skip), force_copy(args)  # bad input before Spark starts
    if args.settle < 0:
        raise BadInput(f"--settle {args.settle}: must be 0 or more seconds")
    return run(start_spark(f"kafka-dr verify {flow.name}"), access, flow, skips, args.settle, force)


if __name__ == "__main__":
    sys.exit(main())
