"""Replicate one flow of the topology with PySpark.

    spark-submit spark_jobs/replicate.py --topology FILE --flow NAME --mode bounded|continuous [--report FILE]

bounded: copy up to the source end offsets taken at start, then exit.
continuous: micro-batches until SIGTERM; new topics are picked up at the next planning round
(every --discover-interval seconds, default 10). Ranges are planned on the driver and copied in
Spark tasks, one per partition, so the job scales out with --master. The JSON summary is the last
line of standard output and goes to --report. Exit codes: 0 done, 1 failed, 2 bad input.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import signal
import sys
import time
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

from confluent_kafka import TopicPartition
from confluent_kafka.admin import OffsetSpec

from kafka_dr.clients import ClientConfigError
from kafka_dr.replication.copier import CopyError, CopyResult, copy_range
from kafka_dr.replication.heartbeat import send_heartbeat
from kafka_dr.replication.planner import FlowContext, Plan, UnreachableError
from kafka_dr.replication.topic_sync import TopicSyncError
from kafka_dr.topology import Topology, TopologyError, load_topology

log = logging.getLogger("kafka_dr.replicate")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="replicate.py", description=__doc__.splitlines()[0])
    parser.add_argument("--topology", help="topology file (default $KDR_TOPOLOGY, else include/topology.yaml)")
    parser.add_argument("--flow", required=True)
    parser.add_argument("--mode", choices=["bounded", "continuous"], default="bounded")
    parser.add_argument("--report", type=Path, help="also write the JSON summary here")
    parser.add_argument("--interval", type=float, default=0.05, help="continuous: idle wait between batches (s)")
    parser.add_argument("--discover-interval", type=float, default=10.0,
                        help="continuous: seconds between topic discovery / destination sync rounds")
    parser.add_argument("--heartbeat-interval", type=float, default=1.0, help="continuous: seconds between heartbeats")
    parser.add_argument("--retries", type=int, default=5,
                        help="attempts to reach a cluster (exponential back-off from 1 s) before failing")
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

    def add(self, results: list[CopyResult]) -> None:
        """One micro-batch (or the one bounded batch) of copy results."""
        self.batches += 1
        for r in results:
            key = f"{r.topic}-{r.partition}"
            entry = self.partitions.setdefault(key, {"topic": r.topic, "partition": r.partition,
                                                     "dest_topic": r.dest_topic, "records": 0, "bytes": 0,
                                                     "filtered": 0, "first_offset": None, "last_offset": None})
            entry["records"] += r.records
            entry["bytes"] += r.bytes
            entry["filtered"] += r.filtered
            entry["next_offset"] = r.next
            if r.first_offset is not None and entry["first_offset"] is None:
                entry["first_offset"] = r.first_offset
            if r.last_offset is not None:
                entry["last_offset"] = r.last_offset

    def add_plan(self, plan: Plan) -> None:
        """What a planning round found: records lost before they were copied, topics created."""
        self.lost += [{"topic": lost.topic, "partition": lost.partition, "from_offset": lost.from_offset,
                       "to_offset": lost.to_offset, "records": lost.records} for lost in plan.lost]
        if plan.sync is not None:
            self.created_topics += list(plan.sync.created)

    def to_json(self, status: str, error: str | None = None) -> str:
        parts = list(self.partitions.values())
        return json.dumps({
            "flow": self.flow, "mode": self.mode, "status": status, "error": error,
            "records": sum(p["records"] for p in parts), "bytes": sum(p["bytes"] for p in parts),
            "filtered": sum(p["filtered"] for p in parts), "lost": sum(x["records"] for x in self.lost),
            "lost_ranges": self.lost, "batches": self.batches, "created_topics": self.created_topics,
            "seconds": round(time.time() - self.started, 3), "copy_seconds": round(self.copy_seconds, 3),
            "partitions": parts,
        })


def run(args: argparse.Namespace, topology: Topology, spark_context) -> tuple[int, str]:
    flow = topology.flow(args.flow)
    summary = Summary(flow.name, args.mode)
    stop = {"requested": False}
    signal.signal(signal.SIGTERM, lambda *_: stop.update(requested=True))
    context = FlowContext(topology, flow, retries=args.retries)
    # Discovery (topic sync, new partitions) and heartbeats run beside the micro-batches, so that
    # neither adds its round trips to the replication latency.
    background = ThreadPoolExecutor(max_workers=2, thread_name_prefix="kdr-driver")
    try:
        plan = context.plan()
        summary.add_plan(plan)
        positions = {(t.topic, t.partition): t.start for t in plan.tasks}
        discovery: Future | None = None
        heartbeat: Future | None = None
        next_discovery = time.monotonic() + args.discover_interval
        next_heartbeat = 0.0
        last_progress: dict[tuple[str, int], float] = {}  # when each partition last recorded progress
        while True:
            now = time.monotonic()
            if args.mode == "continuous":
                if now >= next_heartbeat and (heartbeat is None or heartbeat.done()):
                    _report_heartbeat(heartbeat)
                    heartbeat = background.submit(send_heartbeat, context.source_config, flow.name)
                    next_heartbeat = now + args.heartbeat_interval
                if discovery is None and now >= next_discovery:
                    discovery = background.submit(context.plan, dict(positions))
                elif discovery is not None and discovery.done():
                    plan = _merge(discovery.result(), positions)
                    summary.add_plan(plan)
                    discovery, next_discovery = None, now + args.discover_interval
                plan = _advance(context, plan, positions, last_progress)
            work = [t for t in plan.tasks if t.end > t.start]
            copy_started = time.monotonic()
            # Bounded: one task per range. Continuous: at most one task per core (a task copies its ranges
            # one after the other), so a small micro-batch is one scheduling wave.
            slices = max(1, len(work) if args.mode == "bounded" else min(len(work), spark_context.defaultParallelism))
            results = spark_context.parallelize(work, slices).map(copy_range).collect() if work else []
            summary.copy_seconds += time.monotonic() - copy_started
            summary.add(results)
            positions.update({(r.topic, r.partition): r.next for r in results})
            if work:
                log.info("flow %s: batch %d copied %d records (%d filtered) across %d partitions", flow.name,
                         summary.batches, sum(r.records for r in results), sum(r.filtered for r in results),
                         len(work))
            if args.mode == "bounded" or stop["requested"]:
                return 0, summary.to_json("done")
            if not work:
                time.sleep(args.interval)
    finally:
        background.shutdown(wait=True, cancel_futures=True)
        context.close()


def _report_heartbeat(previous: Future | None) -> None:
    if previous is not None and previous.exception() is not None:
        # A brief source outage must not stop replication; the lag sensor sees missing heartbeats.
        log.warning("heartbeat not sent: %s", previous.exception())


def _merge(discovered: Plan, positions: dict[tuple[str, int], int]) -> Plan:
    """A discovery round's plan, keeping the positions copied meanwhile for partitions already known."""
    for task in discovered.tasks:
        positions.setdefault((task.topic, task.partition), task.start)
    return discovered


PROGRESS_INTERVAL_S = 1.0


def _advance(context: FlowContext, plan: Plan, positions: dict[tuple[str, int], int],
             last_progress: dict[tuple[str, int], float]) -> Plan:
    """Next micro-batch over the partitions already known: from each position to the current end.
    Each partition records durable progress (progress topic, source group) about once a second."""
    tps = [TopicPartition(t.topic, t.partition) for t in plan.tasks]
    ends = context.offsets(tps, OffsetSpec.latest()) if tps else {}
    now = time.monotonic()
    tasks = []
    for t in plan.tasks:
        key = (t.topic, t.partition)
        record = now - last_progress.get(key, 0.0) >= PROGRESS_INTERVAL_S
        if record and ends[key] > positions[key]:
            last_progress[key] = now
        tasks.append(dataclasses.replace(t, start=positions[key], end=ends[key], record_progress=record))
    return Plan(tasks)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        topology = load_topology(args.topology)
        topology.flow(args.flow)
    except TopologyError as exc:
        return _finish(args, 2, str(exc), None)
    from pyspark.sql import SparkSession

    spark = SparkSession.builder.appName(f"kafka-dr replicate {args.flow}").getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    status, error = 1, None
    try:
        status, line = run(args, topology, spark.sparkContext)
    except (TopologyError, ClientConfigError, TopicSyncError) as exc:
        status, error = 2, str(exc)
    except (UnreachableError, CopyError) as exc:
        error = str(exc)
    except Exception as exc:  # noqa: BLE001 - a Spark task failure carries the CopyError text inside
        error = _task_error(exc)
    spark.stop()
    return _finish(args, status, error, None if error else line)


def _finish(args: argparse.Namespace, status: int, error: str | None, line: str | None) -> int:
    """Print the error (if any) and the JSON summary as the last line; write --report."""
    if error is not None:
        print(f"replicate: error: {error}", file=sys.stderr, flush=True)
        line = json.dumps({"flow": args.flow, "mode": args.mode, "status": "failed", "error": error})
    if args.report:
        args.report.parent.mkdir(parents=True, exist_ok=True)
        args.report.write_text(line + "\n")
    print(line, flush=True)
    return status


def _task_error(exc: BaseException) -> str:
    """The one line that matters from a Spark task failure (the Python exception raised in the task)."""
    text = str(exc)
    for marker in ("CopyError: ", "ProvenanceError: ", "KafkaException: "):
        if marker in text:
            return text.split(marker, 1)[1].splitlines()[0]
    return text.splitlines()[0] if text else type(exc).__name__


if __name__ == "__main__":
    sys.exit(main())
