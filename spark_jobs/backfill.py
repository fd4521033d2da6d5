"""Backfill a window of one flow: copy exactly the source records of the window the target topic lacks, then verify.

    spark-submit spark_jobs/backfill.py --topology FILE --flow NAME (--window-start T --window-end T | --offsets JSON)
        [--topics REGEX] [--target-topic FORMAT] [--dry-run] [--report FILE]

The driver resolves the window per source partition (offsetsForTimes, or the offsets given) and refuses targets that
would take the copies out of order (kafka_dr.backfill.window); one Spark task per partition reads what the target
holds of the window; copy tasks (the copier, under the flow `<flow>.backfill`) copy the runs it lacks, at most one task
per core; one verify task per partition then checks every source record of the window is there exactly once
(kafka_dr.backfill.run schedules them; this file gives it Spark).
--dry-run plans only and changes nothing. The JSON summary (`window`, `copied`, `already_present`, `unavailable`,
`verify`) is the last line of standard output and goes to --report. Exit codes: 0 done, 1 failed, 2 bad input.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kafka_dr.access import ClusterAccess
from kafka_dr.backfill.run import BackfillRun, RunTasks
from kafka_dr.backfill.window import BackfillError, Window, parse_window
from kafka_dr.spark.job import BadInput, job_main
from kafka_dr.spark.session import start_spark
from kafka_dr.topology import Flow

if TYPE_CHECKING:
    from pyspark import SparkContext

TASK_ERRORS = ("FencedError", "CopyError", "ProvenanceError", "KafkaException", "RuntimeError")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="backfill.py", description=__doc__.splitlines()[0])
    parser.add_argument("--topology", help="topology file (default $KDR_TOPOLOGY, else include/topology.yaml)")
    parser.add_argument("--flow", required=True)
    parser.add_argument("--topics", help="regex (full match) of the flow's source topics to backfill (default all)")
    parser.add_argument("--window-start", metavar="TIME", help="ISO-8601, inclusive")
    parser.add_argument("--window-end", metavar="TIME", help="ISO-8601, exclusive")
    parser.add_argument("--offsets", metavar="JSON", help='{"topic:partition": [first, last]}, inclusive')
    parser.add_argument("--target-topic", metavar="FORMAT", help="e.g. {topic}.backfill (default the flow's rename)")
    parser.add_argument("--dry-run", action="store_true", help="plan and report only; change nothing")
    parser.add_argument("--report", type=Path, help="also write the JSON summary here")
    return parser.parse_args(argv)


def run(
    spark_context: SparkContext, access: ClusterAccess, flow: Flow, window: Window, args: argparse.Namespace
) -> dict[str, Any]:
    try:
        backfill = BackfillRun.check(access, flow, window, args.topics, args.target_topic)
    except BackfillError as exc:
        raise BadInput(str(exc).replace("target_topic '", "--target-topic '")) from None
    return backfill.run(_on_spark(spark_context), spark_context.defaultParallelism, args.dry_run)


def _on_spark(spark_context: SparkContext) -> RunTasks:
    """Each item a Spark task of its own."""

    def run_tasks(function: Callable[[Any], Any], items: Sequence[Any]) -> list[Any]:
        return spark_context.parallelize(items, len(items)).map(function).collect() if items else []

    return run_tasks


def main(argv: list[str] | None = None) -> int:
    return job_main("backfill", parse_args(argv), _start, raised_in_tasks=TASK_ERRORS)


def _start(args: argparse.Namespace, access: ClusterAccess, flow: Flow) -> dict[str, Any]:
    try:
        window = parse_window(args.window_start, args.window_end, args.offsets)  # before Spark starts
    except BackfillError as exc:
        raise BadInput(str(exc)) from None
    return run(start_spark(f"kafka-dr backfill {flow.name}"), access, flow, window, args)


if __name__ == "__main__":
    sys.exit(main())
