"""Replicate one flow of the topology with PySpark.

    spark-submit spark_jobs/replicate.py --topology FILE --flow NAME --mode bounded|continuous [--report FILE]

bounded: copy up to the source end offsets taken at start, then exit; with --until-quiet S, then copy again
what arrived meanwhile until S seconds pass with nothing new (at most QUIET_CAP_S): a catch-up after the
producers moved away also copies what they wrote in their last moments on the source.
continuous: epochs (the flow's epoch_seconds, 5 s by default, or --epoch) until SIGTERM. In an
epoch each Spark task keeps its partitions assigned and copies records as they arrive (no job
launch between a record and its copy); between epochs the driver applies what the last discovery
round found (new topics and partitions, every --discover-interval seconds; a round that finds new
partitions ends the epoch under way early). SIGTERM ends the epoch under way at each task's next
committed batch, not at the epoch's deadline (replication/epoch_end.py), then copies the last
heartbeat if it is not copied yet, and the run ends. Beside the copies, the
driver sends heartbeats and keeps the flow's translated group offsets as checkpoints in the target
(at start, every --checkpoint-interval seconds, and after the last epoch of a clean stop), ready for
a disaster failover.
Ranges are planned on the driver and grouped into at most one Spark task per core, so the job
scales out with --master. The JSON summary is the last line of standard output and goes to
--report. Exit codes: 0 done, 1 failed, 2 bad input.
"""

from __future__ import annotations

import argparse
import functools
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

from kafka_dr.access import ClusterAccess
from kafka_dr.replication.copier import CopyResult, CopyTask, copy_ranges, open_clients
from kafka_dr.replication.epoch_end import EpochTicket
from kafka_dr.replication.epochs import Epoch
from kafka_dr.replication.lifecycle import Replicator, ReplicatorSettings
from kafka_dr.replication.rounds import CopyRound
from kafka_dr.spark.job import add_force_args, force_copy, job_main
from kafka_dr.spark.session import SparkStart
from kafka_dr.topology import Flow
from kafka_dr.translation.checkpoints import CheckpointTask

COPY_ERRORS = ("FencedError", "CopyError", "ProvenanceError", "KafkaException")  # what copy tasks raise


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="replicate.py", description=__doc__.splitlines()[0])
    parser.add_argument("--topology", help="topology file (default $KDR_TOPOLOGY, else include/topology.yaml)")
    parser.add_argument("--flow", required=True)
    parser.add_argument("--mode", choices=["bounded", "continuous"], default="bounded")
    parser.add_argument("--report", type=Path, help="also write the JSON summary here")
    parser.add_argument(
        "--epoch", type=float, help="continuous: seconds each Spark job copies for (default: the flow's epoch_seconds)"
    )
    parser.add_argument(
        "--until-quiet",
        type=float,
        default=0.0,
        help="bounded: then copy what keeps arriving until this many seconds pass with nothing new",
    )
    parser.add_argument(
        "--discover-interval",
        type=float,
        default=10.0,
        help="continuous: seconds between topic discovery / destination sync rounds",
    )
    parser.add_argument("--heartbeat-interval", type=float, default=1.0, help="continuous: seconds between heartbeats")
    parser.add_argument(
        "--checkpoint-interval",
        type=float,
        help="continuous: seconds between group-offset checkpoints in the target (default: the flow's "
        "checkpoint_seconds; 0: none)",
    )
    parser.add_argument(
        "--retries",
        type=int,
        default=5,
        help="attempts to reach a cluster (exponential back-off from 1 s) before failing",
    )
    add_force_args(parser)
    return parser.parse_args(argv)


class Summary:
    def __init__(self, flow: str, mode: str) -> None:
        self.flow, self.mode = flow, mode
        self.started = time.time()
        self.partitions: dict[str, dict] = {}
        self.lost: list[dict] = []
        self.batches = 0
        self.copy_seconds = 0.0  # inside Spark jobs (tasks copying), planning excluded
        self.created_topics: list[str] = []
        self.spark_startup: dict[str, float] = {}  # SparkStart.startup_seconds

    def add(self, results: list[CopyResult]) -> None:
        """One Spark job's copy results (the bounded batch, or one continuous epoch)."""
        self.batches += 1
        for r in results:
            key = f"{r.topic}-{r.partition}"
            entry = self.partitions.setdefault(
                key,
                {
                    "topic": r.topic,
                    "partition": r.partition,
                    "dest_topic": r.dest_topic,
                    "records": 0,
                    "bytes": 0,
                    "filtered": 0,
                    "first_offset": None,
                    "last_offset": None,
                },
            )
            entry["records"] += r.records
            entry["bytes"] += r.bytes
            entry["filtered"] += r.filtered
            entry["next_offset"] = r.next
            if r.first_offset is not None and entry["first_offset"] is None:
                entry["first_offset"] = r.first_offset
            if r.last_offset is not None:
                entry["last_offset"] = r.last_offset

    def add_epoch(self, epoch: Epoch) -> None:
        """One copy job: the discovery rounds applied before it, then its results."""
        for found in epoch.rounds:
            self.add_round(found)
        self.copy_seconds += epoch.seconds
        self.add(epoch.results)

    def add_round(self, copy_round: CopyRound) -> None:
        """What a copy round found: records lost before they were copied, topics created."""
        self.lost += [
            {
                "topic": lost.topic,
                "partition": lost.partition,
                "from_offset": lost.from_offset,
                "to_offset": lost.to_offset,
                "records": lost.records,
            }
            for lost in copy_round.lost
        ]
        if copy_round.sync is not None:
            self.created_topics += list(copy_round.sync.created)

    def to_dict(self, status: str, error: str | None = None) -> dict:
        parts = list(self.partitions.values())
        return {
            "flow": self.flow,
            "mode": self.mode,
            "status": status,
            "error": error,
            "records": sum(p["records"] for p in parts),
            "bytes": sum(p["bytes"] for p in parts),
            "filtered": sum(p["filtered"] for p in parts),
            "lost": sum(x["records"] for x in self.lost),
            "lost_ranges": self.lost,
            "batches": self.batches,
            "created_topics": self.created_topics,
            "seconds": round(time.time() - self.started, 3),
            "copy_seconds": round(self.copy_seconds, 3),
            "spark_startup_seconds": self.spark_startup,
            "partitions": parts,
        }


PROGRESS_INTERVAL_S = 1.0  # continuous: durable progress (and the source group's commit) about once a second
COMMIT_INTERVAL_S = 0.05  # continuous: longest a copy waits for its transaction to commit (read_committed readers)


def run(
    spark: SparkStart,
    args: argparse.Namespace,
    access: ClusterAccess,
    flow: Flow,
    stop: threading.Event | None = None,
) -> dict[str, Any]:
    """Replicate `flow` and return the summary: one bounded run, or continuous until `stop` is set (which ends
    the epoch under way at once). As MirrorMaker 2 splits its source, checkpoint and heartbeat tasks: the
    replicator (replication.lifecycle) copies and sends heartbeats, the checkpoints (translation.checkpoints) go
    beside it; this wires them to Spark and the summary."""
    summary = Summary(flow.name, args.mode)
    continuous = args.mode == "continuous"
    settings = ReplicatorSettings(
        continuous,
        retries=args.retries,
        force=force_copy(args),  # before anything connects: a bad override is bad input
        discover_interval=args.discover_interval,
        heartbeat_interval=args.heartbeat_interval,
    )
    stop = stop or threading.Event()
    interval = flow.checkpoint_seconds if args.checkpoint_interval is None else args.checkpoint_interval
    runner = SparkCopies(spark, (args.epoch or flow.epoch_seconds) if continuous else None)
    checkpoints = CheckpointTask(access, flow, interval, stop)
    replicator = Replicator(access, flow, settings, runner, checkpoints, stop)
    try:
        summary.add_round(replicator.start())
        summary.spark_startup = spark.startup_seconds()
        summary.add_epoch(replicator.epoch())
        if not continuous:
            for epoch in replicator.until_quiet(args.until_quiet):
                summary.add_epoch(epoch)
        while continuous and not replicator.stopping:
            summary.add_epoch(replicator.epoch())
    except BaseException as exc:
        replicator.stop(exc)
        raise
    last = replicator.stop()
    if last is not None:
        summary.add_epoch(last)
    return summary.to_dict("done")


class SparkCopies:
    """The replicator's copy tasks as Spark jobs on the job's context, which comes up while the driver starts: an
    epoch's writer groups, one Spark task each. `run_for`: continuous, how long each epoch copies."""

    def __init__(self, spark: SparkStart, run_for: float | None) -> None:
        self._spark = spark
        self._copy = functools.partial(
            _copy_groups,
            run_for=run_for,
            progress_interval=None if run_for is None else PROGRESS_INTERVAL_S,
            **({} if run_for is None else {"commit_interval": COMMIT_INTERVAL_S}),
        )
        self._context: Any = None

    def ready(self) -> None:
        self._spark.warmed()  # the context and its workers came up while the driver planned
        self._context = self._spark.context()

    @property
    def parallelism(self) -> int:
        return self._context.defaultParallelism

    @property
    def driver_host(self) -> str:
        """Where the executors reach the driver (127.0.0.1 in local mode, SPARK_LOCAL_IP)."""
        return self._context.getConf().get("spark.driver.host", "127.0.0.1")

    def run(self, groups: list[list[CopyTask]], ticket: EpochTicket | None) -> list[CopyResult]:
        job = functools.partial(self._copy, ticket=ticket)
        return self._context.parallelize(groups, len(groups)).mapPartitions(job).collect()


def _copy_groups(groups, ticket: EpochTicket | None = None, **kwargs) -> list[CopyResult]:
    """One Spark task: the ranges of its writer group (mapPartitions hands over a one-group iterator), until they
    end or, with a ticket, the driver ends the epoch."""
    tasks: list[CopyTask] = [task for group in groups for task in group]
    if ticket is None:
        return copy_ranges(tasks, **kwargs)
    watch = ticket.watch()
    try:
        return copy_ranges(tasks, ended=watch.ended, **kwargs)
    finally:
        watch.close()


def main(argv: list[str] | None = None) -> int:
    return job_main("replicate", parse_args(argv), _start, raised_in_tasks=COPY_ERRORS, failed_keys=("flow", "mode"))


def _start(args: argparse.Namespace, access: ClusterAccess, flow: Flow) -> dict[str, Any]:
    stop = threading.Event()
    previous = signal.signal(signal.SIGTERM, lambda *_: stop.set())  # a continuous run ends at its next batch
    try:
        source, target = access.config(flow.source), access.config(flow.target)
        warm_up = functools.partial(open_clients, flow.name, source, target)  # each worker's clients, connected
        spark = SparkStart(f"kafka-dr replicate {flow.name}", warm_up, COPY_ERRORS)
        return run(spark, args, access, flow, stop)
    finally:
        signal.signal(signal.SIGTERM, previous)


if __name__ == "__main__":
    sys.exit(main())
