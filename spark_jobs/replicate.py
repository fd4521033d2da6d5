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
import logging
import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from kafka_dr.access import ClusterAccess
from kafka_dr.clients import answers, client_config
from kafka_dr.replication.control import StopRequest, StopRequests
from kafka_dr.replication.copier import CopyResult, CopyTask, copy_ranges, open_clients
from kafka_dr.replication.epoch_end import EpochEnds, EpochTicket
from kafka_dr.replication.epochs import CopyEpochs, Discovery, Epoch
from kafka_dr.replication.fencing import ClaimRenewal, FlowClaim
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


QUIET_CAP_S = 60.0  # --until-quiet: the longest the copying goes on while records keep arriving
QUIET_POLL_S = 0.5  # --until-quiet: how often the source's ends are read again
PROGRESS_INTERVAL_S = 1.0  # continuous: durable progress (and the source group's commit) about once a second
SOURCE_PROBE_S = 2.0  # continuous, stopped: how long the source may take to answer before it counts as lost
DISCOVERY_CLOSE_S = 1.0  # a stopped run leaves a planning round that waits on a lost cluster after this long
COMMIT_INTERVAL_S = 0.05  # continuous: longest a copy waits for its transaction to commit (read_committed readers)


def run(
    spark: SparkStart,
    args: argparse.Namespace,
    topology: Topology,
    flow: Flow,
    stop: threading.Event | None = None,
) -> dict[str, Any]:
    """Replicate `flow` and return the summary: one bounded run, or continuous until `stop` is set (which ends
    the epoch under way at once). As MirrorMaker 2 splits its source, checkpoint and heartbeat tasks: the copy epochs
    (replication.epochs), group-offset checkpoints (translation.checkpoints) and heartbeats (replication.heartbeat);
    this orchestrates them."""
    summary = Summary(flow.name, args.mode)
    continuous = args.mode == "continuous"
    force = force_copy(args)  # before anything connects: a bad override is bad input
    stop = stop or threading.Event()
    obeyed: list[StopRequest] = []  # the stop request obeyed, if one was
    context = FlowContext(topology, flow, retries=args.retries)
    heartbeats = HeartbeatTask(context.source_config, flow.name, args.heartbeat_interval, stop)
    interval = flow.checkpoint_seconds if args.checkpoint_interval is None else args.checkpoint_interval
    checkpoints = CheckpointTask(ClusterAccess.from_environ(topology), flow, interval, stop)
    plan_flow = functools.partial(context.plan, force=force)  # from positions copied so far, if given
    ends: EpochEnds | None = None  # continuous: how the driver ends an epoch before its deadline
    probe = SourceProbe(context.source_config)
    discovery = (
        Discovery(
            plan_flow,
            args.discover_interval,
            found_new=lambda: ends.end_current() if ends is not None else None,
        )
        if continuous
        else None
    )
    copy = functools.partial(
        _copy_groups,
        run_for=(args.epoch or flow.epoch_seconds) if continuous else None,
        progress_interval=PROGRESS_INTERVAL_S if continuous else None,
        **({"commit_interval": COMMIT_INTERVAL_S} if continuous else {}),
    )
    claim: FlowClaim | None = None
    requests: StopRequests | None = None
    renewing = threading.Event()  # set once the claim is released: owner records go on until then
    ended = "done"  # what the last owner record says
    try:
        if continuous:  # before the claim, so that a stop request made once it is claimed is always read
            clusters = [context.target_config, context.source_config]  # the source: a stop while the target is lost
            requests = StopRequests(flow.name, clusters, stop, obey=lambda r: _obey(r, stop, obeyed))
        # Fences the driver of any older replicator of this flow, wherever it runs (fencing.py).
        claim = FlowClaim(
            flow.name,
            context.target_config,
            {"host": socket.gethostname(), "pid": os.getpid(), "started_at": summary.started},
        )
        plan = plan_flow()
        summary.add_plan(plan)
        spark.warmed()  # the context and its workers came up while the driver planned
        spark_context = spark.context()
        summary.spark_startup = spark.startup_seconds()

        def run_job(groups: list[list[CopyTask]]) -> list[CopyResult]:
            open_ranges = any(t.end is None for group in groups for t in group)
            ticket = ends.ticket() if ends is not None and open_ranges else None
            job = functools.partial(copy, ticket=ticket)
            return spark_context.parallelize(groups, len(groups)).mapPartitions(job).collect()

        epochs = CopyEpochs(flow.name, flow.target, plan, claim, run_job, spark_context.defaultParallelism, discovery)
        if continuous:
            # Where the executors reach the driver (127.0.0.1 in local mode, SPARK_LOCAL_IP).
            ends = EpochEnds(spark_context.getConf().get("spark.driver.host", "127.0.0.1"))
            log.info("flow %s: its tasks hear of an epoch's early end on %s:%d", flow.name, ends.host, ends.port)
            threading.Thread(target=_end_epochs_on, args=(stop, ends, probe), name="kdr-stop", daemon=True).start()
            # An owner record every second whatever the epoch's length, until the last one; a claim lost to a newer
            # replicator ends the epoch, and the next epoch's check stops this run.
            ClaimRenewal(claim, renewing, lost=ends.end_all).start()
            if requests is not None:
                requests.start()
            heartbeats.start()
            checkpoints.start()
        context.commit_copied(plan)  # where a run killed after its last copy left the source group behind
        while True:
            epoch = epochs.next()
            summary.add_epoch(epoch)
            if not continuous and args.until_quiet > 0:
                _copy_until_quiet(epochs, plan_flow, args.until_quiet, summary)
            if not continuous or stop.is_set():
                if continuous:
                    lost = bool(obeyed) and obeyed[0].lost == flow.source
                    _last_duties(flow, lost or not probe.answers(), heartbeats, checkpoints, epochs, summary)
                    ended = f"stop request from {obeyed[0].by}" if obeyed else "stopped"
                return summary.to_dict("done")
            if not epoch.ranges:
                stop.wait(1.0)
    except BaseException as exc:
        ended = f"failed: {exc}"
        raise
    finally:
        stop.set()
        renewing.set()
        if claim is not None:
            claim.release(ended, request=obeyed[0].id if obeyed else None)
        if ends is not None:
            ends.close()
        # A planning round still waiting on a lost cluster keeps its clients open until the process ends.
        if discovery is None or discovery.close(DISCOVERY_CLOSE_S):
            context.close()


def _copy_until_quiet(epochs: CopyEpochs, plan: Callable[[], Plan], quiet: float, summary: Summary) -> None:
    """Bounded epochs from fresh plans (each resumes from what the destination holds) while the source's ends keep
    moving, until `quiet` seconds pass with nothing to copy, or QUIET_CAP_S."""
    started = last_copy = time.monotonic()
    while time.monotonic() - last_copy < quiet and time.monotonic() - started < QUIET_CAP_S:
        time.sleep(QUIET_POLL_S)
        epochs.plan = plan()
        epoch = epochs.next()
        if epoch.ranges:
            log.info("flow %s: %d more records arrived; copied", epochs.flow, sum(r.records for r in epoch.results))
            summary.add_epoch(epoch)
            last_copy = time.monotonic()


class SourceProbe:
    """Whether the flow's source still answers (a stop by SIGTERM does not say whether a disaster lost it): asked
    once, as the stop comes, beside the end of the epoch under way rather than after it."""

    def __init__(self, config: dict[str, Any]) -> None:
        self._config = config
        self._lock = threading.Lock()
        self._answer: Future[bool] | None = None

    def start(self) -> Future[bool]:
        with self._lock:
            if self._answer is None:
                self._answer = Future()
                threading.Thread(target=self._ask, name="kdr-source-probe", daemon=True).start()
            return self._answer

    def answers(self) -> bool:
        return self.start().result()

    def _ask(self) -> None:
        assert self._answer is not None
        try:
            self._answer.set_result(answers(self._config, SOURCE_PROBE_S))
        except Exception:  # noqa: BLE001 - a failure to ask means it does not answer
            self._answer.set_result(False)


def _last_duties(
    flow: Flow,
    source_lost: bool,
    heartbeats: HeartbeatTask,
    checkpoints: CheckpointTask,
    epochs: CopyEpochs,
    summary: Summary,
) -> None:
    """A stopped continuous run copies a heartbeat written as its last epoch ended and makes a last checkpoint pass;
    not when its source is lost (a disaster's stop request says so, or the source did not answer a probe): both would
    wait out their timeouts on it, and a disaster's stop of a replicator started here kills it after 5 s."""
    if source_lost:
        log.info("flow %s: its source %s is lost: no last heartbeat copy or checkpoint pass", flow.name, flow.source)
        return
    last_heartbeat = heartbeats.uncopied(epochs.positions.next)
    if last_heartbeat:
        log.info("flow %s: its last heartbeat came as the epoch ended; copying it", flow.name)
        summary.add_epoch(epochs.finish(last_heartbeat))
    checkpoints.last_pass()


def _obey(request: StopRequest, stop: threading.Event, obeyed: list[StopRequest]) -> None:
    """A stop request read in the target ends the run as SIGTERM does; the last owner record names it."""
    obeyed[:] = [request]
    stop.set()


def _end_epochs_on(stop: threading.Event, ends: EpochEnds, probe: SourceProbe) -> None:
    """A stop ends the epoch under way (and any other but the bounded one that copies the last heartbeat), and asks
    whether the source still answers meanwhile."""
    stop.wait()
    log.info("stopping: the epoch under way ends at each task's next batch")
    ends.end_all()
    probe.start()


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


def _start(args: argparse.Namespace, topology: Topology, flow: Flow) -> dict[str, Any]:
    stop = threading.Event()
    previous = signal.signal(signal.SIGTERM, lambda *_: stop.set())  # a continuous run ends at its next batch
    try:
        source, target = (client_config(topology.cluster(name)) for name in (flow.source, flow.target))
        warm_up = functools.partial(open_clients, flow.name, source, target)  # each worker's clients, connected
        spark = SparkStart(f"kafka-dr replicate {flow.name}", warm_up, COPY_ERRORS)
        return run(spark, args, topology, flow, stop)
    finally:
        signal.signal(signal.SIGTERM, previous)


if __name__ == "__main__":
    sys.exit(main())
