"""The skeleton of every Spark job of kafka-dr (spark_jobs/*.py) and its docs/design.md command-line contract.

Each job keeps its logic in a `run(...)` that takes a built Spark context and returns the JSON summary (so
that tests can call it in-process with a shared Spark session); its `main` hands `job_main` what builds the
context and calls `run`. `job_main` is the one place that maps errors to exit codes (bad input 2, failure 1),
always prints the summary as the last line of standard output (and writes it to --report), and stops Spark
(session.py), so that the three jobs cannot drift apart in how they end.
"""

from __future__ import annotations

import argparse
import json
import logging
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from confluent_kafka import KafkaException

from ..access import ClusterAccess
from ..clients import ClientConfigError, error_text
from ..replication.copier import CopyError
from ..replication.flow_clients import UnreachableError
from ..replication.provenance import ForceCopy
from ..replication.topic_sync import TopicSyncError
from ..times import epoch_ms
from ..topology import Flow, TopologyError, load_topology
from .session import stop_spark, task_error


class BadInput(ValueError):
    """A bad argument; exit 2 before anything changes."""


# Exit 2, with the exception's text (which names a secret-holding variable, never its value).
BAD_INPUT = (TopologyError, ClientConfigError, TopicSyncError, BadInput)
# Exit 1, with error_text's line (CopyError includes FencedError).
FAILURES = (UnreachableError, CopyError, KafkaException, TimeoutError)


def job_main(
    job: str,
    args: argparse.Namespace,
    start: Callable[[argparse.Namespace, ClusterAccess, Flow], dict[str, Any]],
    *,
    raised_in_tasks: tuple[str, ...],
    failed_keys: tuple[str, ...] = ("flow",),
) -> int:
    """Run one job to its exit code: load --topology and --flow, reach the clusters with the settings of the job's
    environment (its process boundary: ClusterAccess.from_environ), call `start` (which builds Spark when it needs
    it and calls the job's `run`), then stop Spark and emit the summary. A summary whose status is "failed"
    exits 1. On an error the summary is `failed_keys` of `args` with status "failed" and the error's one line:
    BAD_INPUT exits 2, FAILURES and anything else 1 (a Spark job failure yields the message of the first of
    `raised_in_tasks` found in its text, see task_error)."""
    # INFO for kafka-dr only: py4j logs its shutdown at INFO after the summary, and spark-submit prints the
    # driver's standard error on its standard output.
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("kafka_dr").setLevel(logging.INFO)
    error: str | None = None
    try:
        topology = load_topology(args.topology)
        summary = start(args, ClusterAccess.from_environ(topology), topology.flow(args.flow))
        status = 1 if summary.get("status") == "failed" else 0
    except BAD_INPUT as exc:
        status, error = 2, str(exc)
    except FAILURES as exc:
        status, error = 1, error_text(exc)
    except Exception as exc:  # noqa: BLE001 - a Spark task failure carries the task's Python error inside
        status, error = 1, task_error(exc, raised_in_tasks)
    finally:
        stop_spark()
    if error is not None:
        summary = {**{key: getattr(args, key) for key in failed_keys}, "status": "failed", "error": error}
    emit_summary(job, summary, args.report)
    return status


def emit_summary(job: str, summary: dict[str, Any], report: Path | None) -> None:
    """The error, if any, as one line on standard error; the JSON summary as the last line of standard output
    and, with --report, in that file."""
    if summary.get("error"):
        print(f"{job}: error: {summary['error']}", file=sys.stderr, flush=True)
    line = json.dumps(summary)
    if report:
        report.parent.mkdir(parents=True, exist_ok=True)
        report.write_text(line + "\n")
    print(line, flush=True)


def add_force_args(parser: argparse.ArgumentParser) -> None:
    """docs/design.md's filter overrides, for failback restores (replicate.py and verify.py take the same ones)."""
    group = parser.add_argument_group(
        "filter overrides",
        "copy records the cycle rule refuses when the provenance entry that blocks them names a cluster id and a "
        "topic matching these regexes (full match) and the record time is in [--force-from, --force-to)",
    )
    group.add_argument("--force-cluster", metavar="REGEX", help="cluster ids the override applies to")
    group.add_argument("--force-topic", metavar="REGEX", help="topics the override applies to (default every one)")
    group.add_argument("--force-from", metavar="TIME", help="ISO-8601: records from this time on (inclusive)")
    group.add_argument("--force-to", metavar="TIME", help="ISO-8601: records before this time")


def force_copy(args: argparse.Namespace) -> ForceCopy | None:
    """The override the --force-* arguments ask for; None without them. A bad value raises BadInput."""
    given = {k: getattr(args, k) for k in ("force_cluster", "force_topic", "force_from", "force_to")}
    if all(v is None for v in given.values()):
        return None
    if given["force_cluster"] is None:
        raise BadInput("--force-topic, --force-from and --force-to need --force-cluster")
    for option in ("force_cluster", "force_topic"):
        if given[option] is not None:
            try:
                re.compile(given[option])
            except re.error as exc:
                raise BadInput(f"--{option.replace('_', '-')}: bad regex {given[option]!r}: {exc}") from None
    try:
        bounds = [
            None if given[k] is None else epoch_ms(given[k], f"--{k.replace('_', '-')}")
            for k in ("force_from", "force_to")
        ]
    except ValueError as exc:
        raise BadInput(str(exc)) from None
    if None not in bounds and bounds[0] >= bounds[1]:
        raise BadInput(f"--force-from {given['force_from']} is not before --force-to {given['force_to']}")
    return ForceCopy(given["force_cluster"], given["force_topic"] or ".*", bounds[0], bounds[1])
