"""Backfill a window of one flow: copy exactly the source records of the window the target topic lacks, then verify.

    spark-submit spark_jobs/backfill.py --topology FILE --flow NAME (--window-start T --window-end T | --offsets JSON)
        [--topics REGEX] [--target-topic FORMAT] [--dry-run] [--report FILE]

The driver resolves the window per source partition (offsetsForTimes, or the offsets given) and refuses targets that
would take the copies out of order (kafka_dr.backfill.window); one Spark task per partition reads what the target
holds of the window; copy tasks (the copier, under the flow `<flow>.backfill`) copy the runs it lacks, at most one task
per core; one verify task per partition then checks every source record of the window is there exactly once.
--dry-run plans only and changes nothing. The JSON summary (`window`, `copied`, `already_present`, `unavailable`,
`verify`) is the last line of standard output and goes to --report. Exit codes: 0 done, 1 failed, 2 bad input.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from confluent_kafka import IsolationLevel

from kafka_dr.backfill.window import (
    BackfillError,
    PresenceTask,
    Window,
    missing_ranges,
    parse_window,
    prepare,
)
from kafka_dr.clients import end_offsets
from kafka_dr.replication.copier import CopyTask, copy_ranges
from kafka_dr.replication.fencing import writer_groups
from kafka_dr.replication.rounds import CopyRounds
from kafka_dr.replication.verify import VerifyTask, summarize, verify_partition
from kafka_dr.spark.job import BadInput, job_main
from kafka_dr.spark.session import start_spark
from kafka_dr.topology import Flow, Topology

if TYPE_CHECKING:
    from pyspark import SparkContext

log = logging.getLogger("kafka_dr.backfill")
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
    spark_context: SparkContext, topology: Topology, flow: Flow, window: Window, args: argparse.Namespace
) -> dict[str, Any]:
    started = time.monotonic()
    try:
        prepared = prepare(topology, flow, window, args.topics, args.target_topic)
    except BackfillError as exc:
        raise BadInput(str(exc).replace("target_topic '", "--target-topic '")) from None
    backfill, context, windows = prepared.flow, prepared.context, prepared.windows
    presence = [PresenceTask(context.target_config, context.source_cluster_id, w) for w in windows]
    found = spark_context.parallelize(presence, max(len(presence), 1)).map(missing_ranges).collect() if presence else []
    summary: dict[str, Any] = {
        "flow": flow.name,
        "status": "planned" if args.dry_run else "done",
        "dry_run": args.dry_run,
        "window": window.to_dict(),
        "target_topics": sorted({w.dest_topic for w in windows}),
        "copied": 0,
        "to_copy": sum(b - a for _, runs, _ in found for a, b in runs),
        "already_present": sum(present for _, _, present in found),
        "unavailable": [
            {"topic": w.topic, "partition": w.partition, "from_offset": w.unavailable[0], "to_offset": w.unavailable[1]}
            for w in windows
            if w.unavailable is not None
        ],
        "partitions": [
            {
                "topic": w.topic,
                "partition": w.partition,
                "dest_topic": w.dest_topic,
                "first": w.first,
                "end": w.end,
                "missing": [list(r) for r in runs],
                "already_present": present,
            }
            for w, runs, present in found
        ],
    }
    log.info(
        "backfill of %s: %d offsets to copy into %s, %d already present, %d partitions with deleted records",
        flow.name,
        summary["to_copy"],
        ", ".join(summary["target_topics"]),
        summary["already_present"],
        len(summary["unavailable"]),
    )
    if args.dry_run:
        context.close()
        return summary
    rounds = CopyRounds(context)
    rounds.prepare_target()  # the copier's progress records, and the flow's topic state
    rounds.sync_topics()  # the target topics, with the source's partitions and configs
    stable = end_offsets(
        context.target_admin, [(w.dest_topic, w.partition) for w in windows], IsolationLevel.READ_COMMITTED
    )
    # Runs of one partition go to successive rounds (the i-th run in round i): a copy task holds one range per
    # partition.
    rounds: list[list[CopyTask]] = []
    for w, runs, _ in found:
        for index, (a, b) in enumerate(runs):
            if index == len(rounds):
                rounds.append([])
            rounds[index].append(
                CopyTask(
                    backfill.name,
                    context.source_config,
                    context.target_config,
                    context.source.name,
                    context.target.name,
                    context.source_cluster_id,
                    context.target_cluster_id,
                    w.topic,
                    w.partition,
                    w.dest_topic,
                    a,
                    b,
                    provenance=True,
                    dest_from=stable.get((w.dest_topic, w.partition), 0),
                )
            )
    copy_started = time.monotonic()
    for work in rounds:
        groups = writer_groups(work, spark_context.defaultParallelism)
        results = spark_context.parallelize(groups, len(groups)).mapPartitions(_copy_groups).collect()
        summary["copied"] += sum(r.records for r in results)
        log.info("backfill of %s: %d records copied so far", flow.name, summary["copied"])
    summary["copy_seconds"] = round(time.monotonic() - copy_started, 3)
    verify_tasks = [
        VerifyTask(
            context.source_config,
            context.target_config,
            context.source_cluster_id,
            context.target_cluster_id,
            w.topic,
            w.partition,
            w.dest_topic,
            w.end,
            start=w.first,
        )
        for w in windows
    ]
    context.close()
    verify_started = time.monotonic()
    checked = spark_context.parallelize(verify_tasks, max(len(verify_tasks), 1)).map(verify_partition).collect()
    summary["verify_seconds"] = round(time.monotonic() - verify_started, 3)
    summary["verify"] = summarize(checked)
    if summary["verify"]["status"] == "failed":
        summary["status"] = "failed"
        summary["error"] = f"window not verified: {summary['verify'].pop('error')}"
    summary["seconds"] = round(time.monotonic() - started, 3)
    return summary


def _copy_groups(groups) -> list:
    return copy_ranges([task for group in groups for task in group])


def main(argv: list[str] | None = None) -> int:
    return job_main("backfill", parse_args(argv), _start, raised_in_tasks=TASK_ERRORS)


def _start(args: argparse.Namespace, topology: Topology, flow: Flow) -> dict[str, Any]:
    try:
        window = parse_window(args.window_start, args.window_end, args.offsets)  # before Spark starts
    except BackfillError as exc:
        raise BadInput(str(exc)) from None
    return run(start_spark(f"kafka-dr backfill {flow.name}"), topology, flow, window, args)


if __name__ == "__main__":
    sys.exit(main())
