"""Replicate one flow of the topology with PySpark.

    spark-submit spark_jobs/replicate.py --topology FILE --flow NAME --mode bounded|continuous [--report FILE]

bounded: copy up to the source end offsets taken at start, then exit.
continuous: epochs (the flow's epoch_seconds, 5 s by default, or --epoch) until SIGTERM. In an
epoch each Spark task keeps its partitions assigned and copies records as they arrive (no job
launch between a record and its copy); between epochs the driver applies what the last discovery
round found (new topics and partitions, every --discover-interval seconds). SIGTERM ends the run
at the end of the epoch (one more if the last heartbeat is not copied yet). Beside the copies, the
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
import logging
import os
import signal
import socket
import sys
import threading
import time
from pathlib import Path
from typing import Any

from kafka_dr.clients import client_config
from kafka_dr.replication.copier import CopyResult, CopyTask, copy_ranges, open_clients
from kafka_dr.replication.epochs import CopyEpochs, Discovery, Epoch
from kafka_dr.replication.fencing import FlowClaim
from kafka_dr.replication.heartbeat import HeartbeatTask
from kafka_dr.replication.planner import FlowContext, Plan
from kafka_dr.spark.job import add_force_args, force_copy, job_main
from kafka_dr.spark.session import SparkStart
from kafka_dr.topology import Flow, Topology
from kafka_dr.translation.checkpoints import CheckpointTask

log = logging.getLogger("kafka_dr.replicate")
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
        "--discover-interval",
        type=float,
        default=10.0,
        help="continuous: seconds between topic discovery / destination sync rounds",
    )
    parser.add_argument("--heartbeat-interval", type=float, default=1.0, help="continuous: seconds between heartbeats")
    parser.add_argument(
        "--checkpoint-interval",
        type=float,
        default=30.0,
        help="continuous: seconds between group-offset checkpoints in the target (0: none)",
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
        for plan in epoch.plans:
            self.add_plan(plan)
        self.copy_seconds += epoch.seconds
        self.add(epoch.results)

    def add_plan(self, plan: Plan) -> None:
        """What a planning round found: records lost before they were copied, topics created."""
        self.lost += [
            {
                "topic": lost.topic,
                "partition": lost.partition,
                "from_offset": lost.from_offset,
                "to_offset": lost.to_offset,
                "records": lost.records,
            }
            for lost in plan.lost
        ]
        if plan.sync is not None:
            self.created_topics += list(plan.sync.created)

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
    topology: Topology,
    flow: Flow,
    stop: threading.Event | None = None,
) -> dict[str, Any]:
    """Replicate `flow` and return the summary: one bounded run, or continuous until `stop` is set (after the
    epoch under way). As MirrorMaker 2 splits its source, checkpoint and heartbeat tasks: the copy epochs
    (replication.epochs), group-offset checkpoints (translation.checkpoints) and heartbeats (replication.heartbeat);
    this orchestrates them."""
    summary = Summary(flow.name, args.mode)
    continuous = args.mode == "continuous"
    force = force_copy(args)  # before anything connects: a bad override is bad input
    stop = stop or threading.Event()
    context = FlowContext(topology, flow, retries=args.retries)
    heartbeats = HeartbeatTask(context.source_config, flow.name, args.heartbeat_interval, stop)
    checkpoints = CheckpointTask(topology, flow, args.checkpoint_interval, stop)
    discovery = Discovery(functools.partial(context.plan, force=force), args.discover_interval) if continuous else None
    copy = functools.partial(
        _copy_groups,
        run_for=(args.epoch or flow.epoch_seconds) if continuous else None,
        progress_interval=PROGRESS_INTERVAL_S if continuous else None,
        **({"commit_interval": COMMIT_INTERVAL_S} if continuous else {}),
    )
    try:
        # Fences the driver of any older replicator of this flow, wherever it runs (fencing.py).
        claim = FlowClaim(
            flow.name,
            context.target_config,
            {"host": socket.gethostname(), "pid": os.getpid(), "started_at": summary.started},
        )
        plan = context.plan(force=force)
        summary.add_plan(plan)
        spark.warmed()  # the context and its workers came up while the driver planned
        spark_context = spark.context()
        summary.spark_startup = spark.startup_seconds()

        def run_job(groups: list[list[CopyTask]]) -> list[CopyResult]:
            return spark_context.parallelize(groups, len(groups)).mapPartitions(copy).collect()

        epochs = CopyEpochs(flow.name, flow.target, plan, claim, run_job, spark_context.defaultParallelism, discovery)
        if continuous:
            heartbeats.start()
            checkpoints.start()
        while True:
            epoch = epochs.next()
            summary.add_epoch(epoch)
            if not continuous or stop.is_set():
                if continuous:
                    if heartbeats.uncopied(epochs.positions.next):
                        log.info("flow %s: its last heartbeat came as the epoch ended; one more epoch", flow.name)
                        summary.add_epoch(epochs.next())
                    checkpoints.last_pass()
                return summary.to_dict("done")
            if not epoch.ranges:
                stop.wait(1.0)
    finally:
        stop.set()
        if discovery is not None:
            discovery.close()
        context.close()


def _copy_groups(groups, **kwargs) -> list[CopyResult]:
    """One Spark task: the ranges of its writer group (mapPartitions hands over a one-group iterator)."""
    tasks: list[CopyTask] = [task for group in groups for task in group]
    return copy_ranges(tasks, **kwargs)


def main(argv: list[str] | None = None) -> int:
    return job_main("replicate", parse_args(argv), _start, raised_in_tasks=COPY_ERRORS, failed_keys=("flow", "mode"))


def _start(args: argparse.Namespace, topology: Topology, flow: Flow) -> dict[str, Any]:
    stop = threading.Event()
    previous = signal.signal(signal.SIGTERM, lambda *_: stop.set())  # a continuous run ends after its epoch
    try:
        source, target = (client_config(topology.cluster(name)) for name in (flow.source, flow.target))
        warm_up = functools.partial(open_clients, flow.name, source, target)  # each worker's clients, connected
        spark = SparkStart(f"kafka-dr replicate {flow.name}", warm_up, COPY_ERRORS)
        return run(spark, args, topology, flow, stop)
    finally:
        signal.signal(signal.SIGTERM, previous)


if __name__ == "__main__":
    sys.exit(main())
