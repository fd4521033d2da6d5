"""The skeleton of every Spark job of kafka-dr (spark_jobs/*.py) and its DESIGN.md command-line contract.

Each job keeps its logic in a `run(...)` that takes a built Spark context and returns the JSON summary (so
that tests can call it in-process with a shared Spark session); its `main` hands `job_main` what builds the
context and calls `run`. `job_main` is the one place that maps errors to exit codes (bad input 2, failure 1),
always prints the summary as the last line of standard output (and writes it to --report), and stops Spark,
so that the three jobs cannot drift apart in how they end.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import re
import sys
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

from confluent_kafka import KafkaException

from .clients import ClientConfigError, error_text
from .replication.copier import CopyError
from .replication.planner import UnreachableError
from .replication.provenance import ForceCopy
from .replication.topic_sync import TopicSyncError
from .spark_env import is_local, prefer_installed_pyspark
from .times import epoch_ms
from .topology import Flow, Topology, TopologyError, load_topology

if TYPE_CHECKING:
    from pyspark import SparkContext

log = logging.getLogger(__name__)


class BadInput(ValueError):
    """A bad argument; exit 2 before anything changes."""


# Exit 2, with the exception's text (which names a secret-holding variable, never its value).
BAD_INPUT = (TopologyError, ClientConfigError, TopicSyncError, BadInput)
# Exit 1, with error_text's line (CopyError includes FencedError).
FAILURES = (UnreachableError, CopyError, KafkaException, TimeoutError)


def job_main(
    job: str,
    args: argparse.Namespace,
    start: Callable[[argparse.Namespace, Topology, Flow], dict[str, Any]],
    *,
    raised_in_tasks: tuple[str, ...],
    failed_keys: tuple[str, ...] = ("flow",),
) -> int:
    """Run one job to its exit code: load --topology and --flow, call `start` (which builds Spark when it needs
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
        summary = start(args, topology, topology.flow(args.flow))
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


_started_here: list[SparkContext] = []  # contexts start_spark created, which stop_spark ends


def start_spark(app_name: str) -> SparkContext:
    """The context of the active Spark session when there is one (a test's shared session, kept running), else
    a new plain context that stop_spark ends. The jobs only use RDDs: a SparkSession would add its SQL start-up
    (about 4 s of a 10 s spark-submit on 2 cores) to every job. Warnings only in the log."""
    active = _active_context()
    if active is not None:
        return active
    prefer_installed_pyspark()
    from pyspark import SparkConf, SparkContext

    # No web UI unless asked for (--conf spark.ui.enabled=true): a replicator runs for days, and its UI would be
    # one more listening port per job.
    SparkContext._ensure_initialized()  # the JVM gateway first: then SparkConf() holds spark-submit's settings
    conf = SparkConf().setAppName(app_name).setIfMissing("spark.ui.enabled", "false")
    if is_local(conf.get("spark.master", "local[*]")):
        # Workers of a cluster may not have kafka_dr installed (it reaches them as --py-files, after the daemon).
        conf.setIfMissing("spark.python.daemon.module", "kafka_dr.spark_daemon")
    context = SparkContext(conf=conf)
    context.setLogLevel("WARN")
    _started_here.append(context)
    return context


def _active_context() -> SparkContext | None:
    """The context of this thread's active Spark session (a test's shared one). Asked only once pyspark.sql is
    loaded, since no session exists before; and in the job's main thread, since a session is active per thread."""
    if "pyspark.sql" not in sys.modules:
        return None
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    return None if active is None else active.sparkContext


class SparkStart:
    """The job's Spark context, started in a thread as the job begins, then a warm-up job on it: `warm_up` as one
    task per core, which starts the Python workers (~2 s on 2 cores) and can load code or open clients there.
    Under spark-submit the JVM is up before Python runs, but the context and the workers cost another 2-4 s:
    meanwhile the driver connects and plans, so the job waits only for what planning did not hide. A failed
    warm-up is reported with the message of the first of `raised_in_tasks` (see task_error)."""

    def __init__(
        self,
        app_name: str,
        warm_up: Callable[[int], None] | None = None,
        raised_in_tasks: tuple[str, ...] = (),
    ) -> None:
        pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="kdr-spark-start")
        self.requested_at = time.time()
        self.up_at: dict[str, float] = {}  # "context", "workers": when each was up (epoch seconds)
        self._raised_in_tasks = raised_in_tasks

        def start() -> SparkContext:
            context = start_spark(app_name)
            self.up_at["context"] = time.time()  # before the future resolves: whoever waits on it sees this
            return context

        def warm() -> None:
            context = self._context.result()
            slots = context.defaultParallelism
            context.parallelize(range(slots), slots).foreach(warm_up)
            self.up_at["workers"] = time.time()

        active = _active_context()
        self._context: Future[SparkContext] = Future()
        if active is None:
            self._context = pool.submit(start)
        else:
            self.up_at["context"] = self.requested_at
            self._context.set_result(active)
        self._warm_up = pool.submit(warm) if warm_up else None
        pool.shutdown(wait=False)
        _starting.append(self._context)

    def context(self) -> SparkContext:
        """The context, once it is up (its creation's error is raised here)."""
        return self._context.result()

    def ready(self) -> bool:
        """Whether the context is up and the warm-up ended (without waiting)."""
        return self._context.done() and (self._warm_up is None or self._warm_up.done())

    def startup_seconds(self) -> dict[str, float]:
        """Seconds from the request to the context being up and to the warm-up's end, for the job's summary: the
        part of Spark's start-up the driver's own work did not hide shows against the job's time."""
        return {what: round(at - self.requested_at, 3) for what, at in self.up_at.items()}

    def warmed(self) -> None:
        """Wait for the warm-up job; its failure only warns (the real tasks start the workers themselves)."""
        if self._warm_up is None:
            return
        try:
            self._warm_up.result()
        except Exception as exc:  # noqa: BLE001 - a Py4J or task error: the job goes on without the warm-up
            log.warning("warm-up of the Spark workers failed: %s", task_error(exc, self._raised_in_tasks))


_starting: list[Future[SparkContext]] = []  # contexts SparkStart is creating, which stop_spark waits for


def stop_spark() -> None:
    """Stop the Spark context the job started, if it started one: once a context still starting in the
    background is up (a job that failed while planning does not leave it running)."""
    while _starting:
        with contextlib.suppress(Exception):
            _starting.pop().result()
    while _started_here:
        _started_here.pop().stop()


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


def task_error(exc: BaseException, raised_in_tasks: tuple[str, ...]) -> str:
    """The one line that matters from a Spark job failure: the message of the first of the Python exceptions
    the tasks raise (`raised_in_tasks`, class names) found in the Java-wrapped text, else its first line."""
    text = str(exc)
    for name in raised_in_tasks:
        marker = f"{name}: "
        if marker in text:
            return text.split(marker, 1)[1].splitlines()[0]
    return text.splitlines()[0] if text else type(exc).__name__


def add_force_args(parser: argparse.ArgumentParser) -> None:
    """DESIGN.md's filter overrides, for failback restores (replicate.py and verify.py take the same ones)."""
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
