"""Translate the consumer-group offsets of one flow from its source cluster to its target.

    spark-submit spark_jobs/translate_offsets.py --topology FILE --flow NAME [--groups REGEX] [--apply]
        [--from-checkpoints] [--reset-to-datetime ISO-8601] [--report FILE]

From the source (default): the committed offsets of the flow's groups (its `groups` filter, and
--groups when given) are translated exactly from provenance, one Spark task per group of source
partitions, then written to the target's `_kdr.checkpoints` together with a lag snapshot of the
flow (the RPO estimate if the source is lost later).
--from-checkpoints: the source is gone; use the last checkpoints kept in the target.
--reset-to-datetime: commit, for the same groups, the target offsets of that time in every
partition of their topics (`kafka-consumer-groups --reset-offsets --to-datetime`).
--apply: commit the result to the target's groups that have no active member; others are reported.
The JSON summary is the last line of standard output and goes to --report. Exit codes: 0 done,
1 failed, 2 bad input.
"""

from __future__ import annotations

import argparse
import json
import logging
import re
import sys
import time
from collections import deque
from pathlib import Path
from typing import Any

from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient

from kafka_dr.access import ClusterAccess
from kafka_dr.spark.job import BadInput, job_main
from kafka_dr.spark.session import SparkStart
from kafka_dr.topology import Flow
from kafka_dr.translation.checkpoints import checkpoint_groups, checkpointed_groups
from kafka_dr.translation.groups import apply_offsets
from kafka_dr.translation.offsets import (
    PartitionRequest,
    Translated,
    offsets_at_time,
    parse_reset_time,
    translate_partition,
)

log = logging.getLogger("kafka_dr.translate_offsets")
TIMEOUT_S = 30.0
TASK_ERRORS = ("KafkaException", "TimeoutError", "RuntimeError")  # what translation tasks raise


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="translate_offsets.py", description=__doc__.splitlines()[0])
    parser.add_argument("--topology", help="topology file (default $KDR_TOPOLOGY, else include/topology.yaml)")
    parser.add_argument("--flow", required=True)
    parser.add_argument("--groups", help="only groups that fully match this regex (within the flow's groups filter)")
    parser.add_argument("--apply", action="store_true", help="commit the offsets to inactive groups in the target")
    parser.add_argument(
        "--from-checkpoints",
        action="store_true",
        help="the source is unreachable: use the last checkpoints kept in the target",
    )
    parser.add_argument(
        "--reset-to-datetime", metavar="ISO-8601", help="commit the offsets of this time instead (no time zone: UTC)"
    )
    parser.add_argument(
        "--unseen-from",
        metavar="JSON",
        type=_unseen_from,
        help='{"topic:partition": offset} of the target: from there, records that are not copies were never seen by '
        "the source's groups (a failback's restored cluster once producers moved back); groups resume no later",
    )
    parser.add_argument("--report", type=Path, help="also write the JSON summary here")
    parser.add_argument("--retries", type=int, default=3, help="attempts to reach the source before failing")
    return parser.parse_args(argv)


def _unseen_from(text: str) -> dict[tuple[str, int], int]:
    """--unseen-from: {"topic:partition": offset}; anything else is bad input (exit code 2)."""
    try:
        parsed = json.loads(text)
        return {(key.rpartition(":")[0], int(key.rpartition(":")[2])): int(v) for key, v in parsed.items()}
    except (ValueError, AttributeError, TypeError):
        raise argparse.ArgumentTypeError(f'expected {{"topic:partition": offset}}, got {text!r}') from None


def run(
    spark: SparkStart | None,
    args: argparse.Namespace,
    access: ClusterAccess,
    flow: Flow,
    pattern: re.Pattern[str] | None,
    reset_ms: int | None,
) -> dict[str, Any]:
    """The translation summary of `flow`. `spark` is the Spark context on its way up (None for a run from
    checkpoints, which needs none)."""
    started = time.time()
    target_config = access.config(flow.target)
    target_admin = AdminClient(target_config)
    summary: dict[str, Any] = {"flow": flow.name, "status": "done", "error": None}
    if args.from_checkpoints:
        groups, at_ms = checkpointed_groups(access, flow, pattern)
        summary.update(origin="checkpoints", checkpoint_at_ms=at_ms)
    else:
        assert spark is not None, "_start gives a Spark context whenever the source is read"
        translated_by = {"driver": 0, "spark_tasks": 0}
        groups = translate_from_source(spark, args, access, flow, pattern, translated_by)
        summary.update(origin="source", checkpoint_at_ms=int(started * 1000), partitions_translated_by=translated_by)
    log.info(
        "flow %s: %d groups, %d group-partitions translated (%s)",
        flow.name,
        len(groups),
        sum(len(ts) for ts in groups.values()),
        summary["origin"],
    )
    if reset_ms is not None:
        groups = offsets_at_time(target_config, target_admin, groups, reset_ms)
        summary["reset_to_ms"] = reset_ms
    summary["groups"] = {g: [t.to_dict() for t in ts] for g, ts in groups.items()}
    summary["group_count"] = len(groups)
    summary["partition_count"] = sum(len(ts) for ts in groups.values())
    if args.apply:
        applied = apply_offsets(
            target_admin,
            {g: [TopicPartition(t.dest_topic, t.partition, t.dest_offset) for t in ts] for g, ts in groups.items()},
            TIMEOUT_S,
        )
        summary["applied"] = [a.group for a in applied if a.applied]
        summary["skipped"] = [{"group": a.group, "reason": a.reason} for a in applied if not a.applied]
        for skipped in summary["skipped"]:
            log.warning("group %s not applied: %s", skipped["group"], skipped["reason"])
    summary["seconds"] = round(time.time() - started, 3)
    return summary


def translate_from_source(
    spark: SparkStart,
    args: argparse.Namespace,
    access: ClusterAccess,
    flow: Flow,
    pattern: re.Pattern[str] | None,
    translated_by: dict[str, int],
) -> dict[str, list[Translated]]:
    def beside_spark(requests: list[PartitionRequest]) -> list[Translated]:
        return translate_beside_spark(spark, requests, translated_by)

    return checkpoint_groups(access, flow, pattern, beside_spark, retries=args.retries, unseen_from=args.unseen_from)


def translate_beside_spark(
    spark: SparkStart, requests: list[PartitionRequest], translated_by: dict[str, int]
) -> list[Translated]:
    """The driver translates partition after partition while Spark's context and workers start (2-4 s); what is
    left once they are up goes to Spark tasks. A few partitions are done before Spark could run a task, so Spark's
    start-up costs them nothing; many partitions mostly run in Spark. `translated_by` counts the partitions each
    side translated (the job's summary shows them). Both sides run the same read-only translate_partition."""
    pending = deque(requests)
    translated: list[Translated] = []
    while pending and not spark.ready():
        translated += translate_partition(pending.popleft())
        translated_by["driver"] += 1
    if pending:
        spark_context = spark.context()
        slices = min(len(pending), spark_context.defaultParallelism * 4)  # small tasks even out uneven partitions
        translated += spark_context.parallelize(list(pending), slices).flatMap(translate_partition).collect()
        translated_by["spark_tasks"] += len(pending)
    return translated


def main(argv: list[str] | None = None) -> int:
    return job_main("translate_offsets", parse_args(argv), _start, raised_in_tasks=TASK_ERRORS)


def _start(args: argparse.Namespace, access: ClusterAccess, flow: Flow) -> dict[str, Any]:
    try:
        pattern = None if args.groups is None else re.compile(args.groups)
    except re.error as exc:
        raise BadInput(f"--groups: bad regex {args.groups!r}: {exc}") from None
    try:
        reset_ms = None if args.reset_to_datetime is None else parse_reset_time(args.reset_to_datetime)
    except ValueError as exc:
        raise BadInput(str(exc)) from None
    if args.from_checkpoints:  # translated already: no Spark at all (the operator runs this with plain Python)
        return run(None, args, access, flow, pattern, reset_ms)
    # The workers start, with the translation code loaded, while the driver lists the groups and their offsets.
    spark = SparkStart(f"kafka-dr translate {flow.name}", _load_translation, TASK_ERRORS)
    return run(spark, args, access, flow, pattern, reset_ms)


def _load_translation(_task: int) -> None:
    import kafka_dr.translation.offsets  # noqa: F401 - loaded once per worker, reused by the real tasks


if __name__ == "__main__":
    sys.exit(main())
