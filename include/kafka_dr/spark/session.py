"""The Spark context of a kafka-dr job: the one it starts (or a test's shared session it finds), started beside the
driver's planning (SparkStart) and stopped when the job ends, and the one line that matters from a Spark failure.
"""

from __future__ import annotations

import contextlib
import logging
import sys
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING

from .installed_pyspark import prefer_installed_pyspark
from .submit import is_local

if TYPE_CHECKING:
    from pyspark import SparkContext

log = logging.getLogger(__name__)


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

    _without_numpy_converters()

    # No web UI unless asked for (--conf spark.ui.enabled=true): a replicator runs for days, and its UI would be
    # one more listening port per job.
    SparkContext._ensure_initialized()  # the JVM gateway first: then SparkConf() holds spark-submit's settings
    conf = SparkConf().setAppName(app_name).setIfMissing("spark.ui.enabled", "false")
    if is_local(conf.get("spark.master", "local[*]")):
        # Workers of a cluster may not have kafka_dr installed (it reaches them as --py-files, after the daemon).
        conf.setIfMissing("spark.python.daemon.module", "kafka_dr.spark.daemon")
    context = SparkContext(conf=conf)
    context.setLogLevel("WARN")
    _started_here.append(context)
    return context


def _without_numpy_converters() -> None:
    """Drop pyspark's numpy converters from Py4J's input converters. Py4J asks each of them about every argument
    of every JVM call, and the numpy array one imports pyspark.testing, which imports pandas, to answer the first:
    0.5-0.8 s of the driver's CPU on the way to the context (SparkConf's is that first call). kafka-dr's jobs hand
    the JVM no numpy value."""

    from py4j.protocol import INPUT_CONVERTER

    INPUT_CONVERTER[:] = [c for c in INPUT_CONVERTER if not type(c).__name__.startswith("Numpy")]


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


def task_error(exc: BaseException, raised_in_tasks: tuple[str, ...]) -> str:
    """The one line that matters from a Spark job failure: the message of the first of the Python exceptions
    the tasks raise (`raised_in_tasks`, class names) found in the Java-wrapped text, else its first line."""
    text = str(exc)
    for name in raised_in_tasks:
        marker = f"{name}: "
        if marker in text:
            return text.split(marker, 1)[1].splitlines()[0]
    return text.splitlines()[0] if text else type(exc).__name__
