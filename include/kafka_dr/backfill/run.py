"""A backfill run over a checked window (window.prepare): what the target lacks (one presence task per partition),
the copies in rounds, then the window verified, summed up in the job's JSON summary (spark_jobs/backfill.py's
docstring). The tasks run wherever `RunTasks` runs them: the job runs each as a Spark task, the tests in a list.
Nothing here imports Spark."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from typing import Any

from confluent_kafka import IsolationLevel

from ..access import ClusterAccess
from ..clients import end_offsets
from ..replication.copier import CopyTask, copy_ranges
from ..replication.fencing import writer_groups
from ..replication.rounds import CopyRounds
from ..replication.verify import VerifyTask, summarize, verify_partition
from ..topology import Flow
from .window import PartitionWindow, Prepared, Presence, PresenceTask, Window, missing_ranges, prepare

log = logging.getLogger("kafka_dr.backfill")

RunTasks = Callable[[Callable[[Any], Any], Sequence[Any]], list[Any]]
"""Runs a function over items, one task per item, and returns the results in the items' order."""


def copy_rounds(
    found: Sequence[Presence], copy_task: Callable[[PartitionWindow, int, int], CopyTask]
) -> list[list[CopyTask]]:
    """The copy tasks of the runs the target lacks (`copy_task(window, first, end)`), in rounds: a copy task holds one
    range per partition, so the i-th run of a partition goes to round i."""
    rounds: list[list[CopyTask]] = []
    for window, runs, _ in found:
        for index, (first, end) in enumerate(runs):
            if index == len(rounds):
                rounds.append([])
            rounds[index].append(copy_task(window, first, end))
    return rounds


def planned_summary(flow: str, window: Window, found: Sequence[Presence], dry_run: bool) -> dict[str, Any]:
    """The job's summary before it copies: what the target lacks and holds of the window, per partition."""
    windows = [presence.window for presence in found]
    return {
        "flow": flow,
        "status": "planned" if dry_run else "done",
        "dry_run": dry_run,
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


class BackfillRun:
    """One backfill of `flow`'s window: `check` it (nothing changes), then `run` it."""

    def __init__(self, flow: str, window: Window, prepared: Prepared, started: float) -> None:
        self.flow = flow
        self.window = window
        self.prepared = prepared
        self.started = started  # the job's own clock: `seconds` counts the checks too

    @classmethod
    def check(
        cls, access: ClusterAccess, flow: Flow, window: Window, topics: str | None, target_topic: str | None
    ) -> BackfillRun:
        """The backfill checked against both clusters (window.prepare); BackfillError with one line when refused."""
        started = time.monotonic()
        return cls(flow.name, window, prepare(access, flow, window, topics, target_topic), started)

    def run(self, run_tasks: RunTasks, parallelism: int, dry_run: bool) -> dict[str, Any]:
        """Plan (and unless `dry_run`, copy and verify) the window; the job's summary. `parallelism`: how many copy
        tasks may run at once (the Spark cores). Closes the clients."""
        context = self.prepared.context
        try:
            presence = [
                PresenceTask(context.target_config, context.source_cluster_id, w) for w in self.prepared.windows
            ]
            found = run_tasks(missing_ranges, presence)
            summary = planned_summary(self.flow, self.window, found, dry_run)
            log.info(
                "backfill of %s: %d offsets to copy into %s, %d already present, %d partitions with deleted records",
                self.flow,
                summary["to_copy"],
                ", ".join(summary["target_topics"]),
                summary["already_present"],
                len(summary["unavailable"]),
            )
            if dry_run:
                return summary
            summary.update(self._copy(found, run_tasks, parallelism))
            checks = self._verify_tasks()
        finally:
            context.close()  # before the verify tasks: they read with clients of their own
        summary.update(_verified(checks, run_tasks))
        summary["seconds"] = round(time.monotonic() - self.started, 3)
        return summary

    def _copy(self, found: Sequence[Presence], run_tasks: RunTasks, parallelism: int) -> dict[str, Any]:
        """The runs the target lacks copied, round after round: `copied` and `copy_seconds`."""
        context, windows = self.prepared.context, self.prepared.windows
        rounds = CopyRounds(context)
        rounds.prepare_target()  # the copier's progress records, and the flow's topic state
        rounds.sync_topics()  # the target topics, with the source's partitions and configs
        stable = end_offsets(
            context.target_admin, [(w.dest_topic, w.partition) for w in windows], IsolationLevel.READ_COMMITTED
        )
        started, copied = time.monotonic(), 0
        for work in copy_rounds(found, lambda w, first, end: self._copy_task(w, first, end, stable)):
            results = run_tasks(copy_ranges, writer_groups(work, parallelism))
            copied += sum(result.records for group in results for result in group)
            log.info("backfill of %s: %d records copied so far", self.flow, copied)
        return {"copied": copied, "copy_seconds": round(time.monotonic() - started, 3)}

    def _copy_task(self, w: PartitionWindow, first: int, end: int, stable: dict[tuple[str, int], int]) -> CopyTask:
        context = self.prepared.context
        return CopyTask(
            self.prepared.flow.name,
            context.source_config,
            context.target_config,
            context.source.name,
            context.target.name,
            context.source_cluster_id,
            context.target_cluster_id,
            w.topic,
            w.partition,
            w.dest_topic,
            first,
            end,
            provenance=True,
            dest_from=stable.get((w.dest_topic, w.partition), 0),
        )

    def _verify_tasks(self) -> list[VerifyTask]:
        context = self.prepared.context
        return [
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
            for w in self.prepared.windows
        ]


def _verified(checks: list[VerifyTask], run_tasks: RunTasks) -> dict[str, Any]:
    """Every source record of the window in the target once: `verify_seconds`, `verify`, and a failed `status` with
    its `error` when not."""
    started = time.monotonic()
    verify = summarize(run_tasks(verify_partition, checks))
    result: dict[str, Any] = {"verify_seconds": round(time.monotonic() - started, 3), "verify": verify}
    if verify["status"] == "failed":
        result.update(status="failed", error=f"window not verified: {verify.pop('error')}")
    return result
