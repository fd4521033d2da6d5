"""A backfill run (kafka_dr/backfill/run.py) without Spark or a cluster: its tasks run in a list, over fake presence,
copy and verify results; what it copies in which round, what it sums up, and when it closes its clients."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from types import SimpleNamespace
from typing import Any

import pytest

from kafka_dr.backfill import run as backfill_run
from kafka_dr.backfill.run import BackfillRun, copy_rounds, planned_summary
from kafka_dr.backfill.window import PartitionWindow, Prepared, Presence, Window, missing_ranges
from kafka_dr.replication.copier import CopyResult, copy_ranges
from kafka_dr.replication.verify import VerifyResult, verify_partition

ORDERS_0 = PartitionWindow("orders", 0, "orders.backfill", 10, 20)
ORDERS_1 = PartitionWindow("orders", 1, "orders.backfill", 0, 5, unavailable=(None, 3))
PAYMENTS_0 = PartitionWindow("payments", 0, "payments.backfill", 7, 9)
FOUND = [
    Presence(ORDERS_0, [(10, 12), (14, 15), (18, 20)], 5),
    Presence(ORDERS_1, [], 5),
    Presence(PAYMENTS_0, [(7, 9)], 0),
]


def test_the_runs_of_one_partition_go_to_successive_rounds() -> None:
    """A copy task holds one range per partition: a partition's second run waits for the next round."""
    rounds = copy_rounds(FOUND, lambda w, first, end: (w.topic, w.partition, first, end))
    assert rounds == [
        [("orders", 0, 10, 12), ("payments", 0, 7, 9)],
        [("orders", 0, 14, 15)],
        [("orders", 0, 18, 20)],
    ]
    assert copy_rounds([Presence(ORDERS_1, [], 5)], lambda *_: pytest.fail("nothing to copy")) == []


def test_the_planned_summary_names_what_the_target_lacks_and_what_retention_deleted() -> None:
    summary = planned_summary("orders-flow", Window(0, 1000), FOUND, dry_run=True)
    assert (summary["flow"], summary["status"], summary["dry_run"]) == ("orders-flow", "planned", True)
    assert summary["window"] == {"start_ms": 0, "end_ms": 1000}
    assert summary["target_topics"] == ["orders.backfill", "payments.backfill"]
    assert (summary["copied"], summary["to_copy"], summary["already_present"]) == (0, 7, 10)
    assert summary["unavailable"] == [{"topic": "orders", "partition": 1, "from_offset": None, "to_offset": 3}]
    assert summary["partitions"][0] == {
        "topic": "orders",
        "partition": 0,
        "dest_topic": "orders.backfill",
        "first": 10,
        "end": 20,
        "missing": [[10, 12], [14, 15], [18, 20]],
        "already_present": 5,
    }
    assert planned_summary("orders-flow", Window(0, 1000), FOUND, dry_run=False)["status"] == "done"


class Context:
    """The backfill flow's open FlowClients, as a run uses them."""

    source, target = SimpleNamespace(name="dc1"), SimpleNamespace(name="dc2")
    source_config, target_config = {"bootstrap.servers": "dc1:9092"}, {"bootstrap.servers": "dc2:9092"}
    source_cluster_id, target_cluster_id = "dc1-id", "dc2-id"
    target_admin = "admin"

    def __init__(self) -> None:
        self.calls: list[str] = []

    def close(self) -> None:
        self.calls.append("close")


class Rounds:
    """CopyRounds over the backfill's clients: the target prepared (internal topics, topic state), then its topics
    synced."""

    def __init__(self, clients: Context) -> None:
        self.clients = clients

    def prepare_target(self) -> None:
        self.clients.calls.append("internal_topics")

    def sync_topics(self) -> None:
        self.clients.calls.append("sync_topics")


class Tasks:
    """RunTasks in a list: the presence tasks find FOUND, copy tasks copy their ranges whole, verify tasks find what
    `verified` says."""

    def __init__(self, context: Context, verified: dict[tuple[str, int], VerifyResult]) -> None:
        self.context = context
        self.verified = verified
        self.copy_rounds: list[list[tuple[str, int, int, int | None]]] = []

    def __call__(self, function: Callable[[Any], Any], items: Sequence[Any]) -> list[Any]:
        self.context.calls.append(function.__name__)
        if function is missing_ranges:
            return [next(p for p in FOUND if p.window == task.window) for task in items]
        if function is copy_ranges:
            self.copy_rounds.append(sorted((t.topic, t.partition, t.start, t.end) for group in items for t in group))
            return [
                [CopyResult(t.topic, t.partition, t.dest_topic, t.start, t.end, t.end - t.start)]
                for g in items
                for t in g
            ]
        assert function is verify_partition
        return [self.verified[(task.topic, task.partition)] for task in items]


def started_run(monkeypatch: pytest.MonkeyPatch) -> tuple[BackfillRun, Context]:
    context = Context()
    monkeypatch.setattr(backfill_run, "CopyRounds", lambda clients: Rounds(clients))
    monkeypatch.setattr(backfill_run, "end_offsets", lambda admin, partitions, isolation: {("orders.backfill", 0): 40})
    prepared = Prepared(SimpleNamespace(name="orders-flow.backfill"), context, [ORDERS_0, ORDERS_1, PAYMENTS_0])
    return BackfillRun("orders-flow", Window(0, 1000), prepared, started=0.0), context


def verify_results(missing: int = 0) -> dict[tuple[str, int], VerifyResult]:
    return {
        ("orders", 0): VerifyResult("orders", 0, "orders.backfill", expected=10, copied=10 - missing, missing=missing),
        ("orders", 1): VerifyResult("orders", 1, "orders.backfill", expected=2, copied=2),
        ("payments", 0): VerifyResult("payments", 0, "payments.backfill", expected=2, copied=2),
    }


def test_a_run_copies_round_after_round_then_verifies_the_window(monkeypatch: pytest.MonkeyPatch) -> None:
    backfill, context = started_run(monkeypatch)
    tasks = Tasks(context, verify_results())
    summary = backfill.run(tasks, parallelism=2, dry_run=False)
    assert tasks.copy_rounds == [
        [("orders", 0, 10, 12), ("payments", 0, 7, 9)],
        [("orders", 0, 14, 15)],
        [("orders", 0, 18, 20)],
    ]
    assert context.calls == [
        "missing_ranges",
        "internal_topics",
        "sync_topics",
        *["copy_ranges"] * 3,
        "close",  # before the verify tasks, which read with clients of their own
        "verify_partition",
    ]
    assert (summary["status"], summary["copied"], summary["to_copy"]) == ("done", 7, 7)
    assert summary["verify"]["status"] == "verified" and "error" not in summary
    assert {"copy_seconds", "verify_seconds", "seconds"} <= set(summary)


def test_copies_into_a_topic_holding_copies_lie_past_its_stable_end(monkeypatch: pytest.MonkeyPatch) -> None:
    backfill, context = started_run(monkeypatch)
    made: list[Any] = []

    def rounds(found: Sequence[Presence], copy_task: Callable[..., Any]) -> list[list[Any]]:
        made.extend(copy_task(w, 0, 1) for w, *_ in found)
        return []

    monkeypatch.setattr(backfill_run, "copy_rounds", rounds)
    backfill.run(Tasks(context, verify_results()), parallelism=2, dry_run=False)
    assert [(t.flow, t.topic, t.partition, t.dest_from, t.provenance) for t in made] == [
        ("orders-flow.backfill", "orders", 0, 40, True),
        ("orders-flow.backfill", "orders", 1, 0, True),
        ("orders-flow.backfill", "payments", 0, 0, True),
    ]


def test_a_dry_run_plans_only_and_closes_its_clients(monkeypatch: pytest.MonkeyPatch) -> None:
    backfill, context = started_run(monkeypatch)
    summary = backfill.run(Tasks(context, {}), parallelism=2, dry_run=True)
    assert context.calls == ["missing_ranges", "close"]
    assert (summary["status"], summary["copied"], summary["to_copy"]) == ("planned", 0, 7)
    assert "verify" not in summary and "seconds" not in summary


def test_a_window_not_verified_fails_the_run_with_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    backfill, context = started_run(monkeypatch)
    summary = backfill.run(Tasks(context, verify_results(missing=2)), parallelism=2, dry_run=False)
    assert summary["status"] == "failed"
    assert summary["error"].startswith("window not verified: 2 missing of 14 records, in 1 of 3 partitions")
    assert "error" not in summary["verify"]


def test_a_failed_copy_still_closes_the_clients(monkeypatch: pytest.MonkeyPatch) -> None:
    backfill, context = started_run(monkeypatch)

    def down(function: Callable[[Any], Any], items: Sequence[Any]) -> list[Any]:
        if function is copy_ranges:
            raise RuntimeError("copy task failed")
        return Tasks(context, {})(function, items)

    with pytest.raises(RuntimeError, match="copy task failed"):
        backfill.run(down, parallelism=2, dry_run=False)
    assert context.calls[-1] == "close"
