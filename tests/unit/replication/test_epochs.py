"""A replicator run's copy epochs (replication/epochs.py) without Spark: which ranges each epoch copies, what
discovery adds between epochs, and how the driver's claim and fenced jobs end or repeat an epoch."""

from __future__ import annotations

import time

import pytest

from kafka_dr.replication import epochs
from kafka_dr.replication.copier import CopyResult, CopyTask, FencedError
from kafka_dr.replication.epochs import FENCED_RETRIES, CopyEpochs, Discovery, Positions
from kafka_dr.replication.rounds import CopyRound, Lost


def task(partition: int, start: int, end: int | None, topic: str = "orders", dest_from: int = 0) -> CopyTask:
    return CopyTask(
        "flow", {}, {}, "dc1", "dc2", "src", "dst", topic, partition, f"dc1.{topic}", start, end, dest_from=dest_from
    )


class Claim:
    """A driver's claim that holds `holds` times, then is lost."""

    def __init__(self, holds: int = 1_000) -> None:
        self.left = holds

    def holds(self) -> bool:
        self.left -= 1
        return self.left >= 0


class Job:
    """Runs copy tasks as a Spark job would: each range copied `copied` records further; `fenced` jobs first fail
    the way a fenced task fails the Spark job."""

    def __init__(self, copied: int = 10, fenced: int = 0) -> None:
        self.copied, self.fenced = copied, fenced
        self.runs: list[list[CopyTask]] = []

    def __call__(self, groups: list[list[CopyTask]]) -> list[CopyResult]:
        tasks = [t for group in groups for t in group]
        self.runs.append(tasks)
        if self.fenced:
            self.fenced -= 1
            raise RuntimeError("Job aborted: FencedError: flow flow: fenced out of dc2 by a newer replicator")
        results = []
        for t in tasks:
            end = t.start + self.copied if t.end is None else t.end
            result = CopyResult(t.topic, t.partition, t.dest_topic, t.start, end, records=end - t.start)
            result.dest_end = 100 + end
            results.append(result)
        return results


def ranges(tasks: list[CopyTask]) -> list[tuple[int, int, int | None, int]]:
    """(partition, start, end, dest_from) of each task, by partition (writer groups order them by slot)."""
    return sorted((t.partition, t.start, t.end, t.dest_from) for t in tasks)


def test_bounded_epoch_copies_only_the_ranges_with_records_to_their_planned_ends() -> None:
    copy_round = CopyRound([task(0, 5, 9), task(1, 7, 7), task(2, 0, 3)])
    job = Job()
    epoch = CopyEpochs("flow", "dc2", copy_round, Claim(), job, parallelism=4).next()
    assert ranges(job.runs[0]) == [(0, 5, 9, 0), (2, 0, 3, 0)]
    assert (epoch.ranges, sorted(r.records for r in epoch.results), epoch.rounds) == (2, [3, 4], [])


def test_nothing_to_copy_runs_no_job_but_is_still_an_epoch() -> None:
    job = Job()
    copier = CopyEpochs("flow", "dc2", CopyRound([task(0, 7, 7)]), Claim(), job, parallelism=2)
    epoch = copier.next()
    assert (job.runs, epoch.results, epoch.ranges, copier.count) == ([], [], 0, 1)


def test_continuous_epochs_reopen_each_range_where_the_last_one_stopped() -> None:
    copy_round = CopyRound([task(0, 5, 50, dest_from=3), task(1, 0, 0)])
    job = Job(copied=10)
    copier = CopyEpochs(
        "flow", "dc2", copy_round, Claim(), job, 2, Discovery(lambda positions: copy_round, interval=3600)
    )
    copier.next()
    copier.next()
    assert ranges(job.runs[0]) == [(0, 5, None, 3), (1, 0, None, 0)]  # open ranges, from the planned starts
    assert ranges(job.runs[1]) == [(0, 15, None, 115), (1, 10, None, 110)]  # from the last epoch's ends


def test_discovery_adds_new_partitions_and_keeps_the_positions_copied_meanwhile() -> None:
    first = CopyRound([task(0, 0, 0)])
    found = CopyRound([task(0, 0, 0), task(1, 4, 4, dest_from=2)], lost=[Lost("orders", 1, 0, 4)])
    asked: list[dict] = []

    def next_round(positions: dict) -> CopyRound:
        asked.append(positions)
        return found

    discovery = Discovery(next_round, interval=0)
    job = Job(copied=10)
    copier = CopyEpochs("flow", "dc2", first, Claim(), job, 2, discovery)
    deadline = time.monotonic() + 5
    try:
        assert copier.next().rounds == []  # the first round starts beside this epoch
        while not (epoch := copier.next()).rounds:
            assert time.monotonic() < deadline, "no discovery round finished"
            time.sleep(0.01)
    finally:
        discovery.close()
    assert asked[0] == {("orders", 0): 0}  # what the driver knew when the round started
    assert epoch.rounds == [found]
    assert ranges(job.runs[1]) == [(0, 10, None, 110), (1, 4, None, 2)]  # partition 0 kept, partition 1 added


def test_a_round_that_finds_new_partitions_ends_the_epoch_under_way_and_one_that_finds_none_does_not() -> None:
    known = CopyRound([task(0, 0, 0)])
    grown = CopyRound([task(0, 0, 0), task(1, 0, 0)])
    for found, ends in ((known, 0), (grown, 1)):
        ended: list[None] = []
        discovery = Discovery(
            lambda positions, found=found: found, interval=0, found_new=lambda ended=ended: ended.append(None)
        )
        deadline = time.monotonic() + 5
        try:
            while discovery.poll({("orders", 0): 7}) is None:
                assert time.monotonic() < deadline, "no discovery round finished"
                time.sleep(0.01)
        finally:
            discovery.close()
        assert len(ended) == ends, found


def test_finish_copies_only_the_given_partitions_up_to_the_given_offsets() -> None:
    copy_round = CopyRound(
        [task(0, 5, 50, topic="_kdr.heartbeats"), task(1, 0, 0, topic="_kdr.heartbeats"), task(0, 0, 9)]
    )
    job = Job(copied=10)
    copier = CopyEpochs(
        "flow", "dc2", copy_round, Claim(), job, 2, Discovery(lambda positions: copy_round, interval=3600)
    )
    copier.next()  # every range 10 further: heartbeats-0 at 15, heartbeats-1 at 10, orders-0 at 10
    until = {("_kdr.heartbeats", 0): 18, ("_kdr.heartbeats", 1): 10}  # partition 1 is copied up to there already
    epoch = copier.finish(until)
    assert [(t.topic, t.partition, t.start, t.end) for t in job.runs[1]] == [("_kdr.heartbeats", 0, 15, 18)]
    assert (epoch.ranges, copier.positions.next[("_kdr.heartbeats", 0)]) == (1, 18)


def test_a_failed_discovery_round_fails_the_run() -> None:
    def next_round(positions: dict) -> CopyRound:
        raise RuntimeError("source cluster dc1 unreachable after 5 attempts")

    discovery = Discovery(next_round, interval=0)
    deadline = time.monotonic() + 5
    try:
        with pytest.raises(RuntimeError, match="unreachable"):
            while discovery.poll({}) is None:
                assert time.monotonic() < deadline, "no discovery round finished"
                time.sleep(0.01)
    finally:
        discovery.close()


def test_discovery_is_due_an_interval_after_the_first_poll() -> None:
    discovery = Discovery(lambda positions: CopyRound([]), interval=3600)
    try:
        assert discovery.poll({}) is None
        time.sleep(0.05)
        assert discovery.poll({}) is None  # no round was started, so none can have finished
    finally:
        discovery.close()


def test_a_lost_claim_stops_the_run_before_any_copy() -> None:
    job = Job()
    copier = CopyEpochs("flow", "dc2", CopyRound([task(0, 0, 5)]), Claim(holds=0), job, 1)
    with pytest.raises(FencedError, match="^flow flow: fenced out of dc2 by a newer replicator of this flow"):
        copier.next()
    assert job.runs == []


def test_a_fenced_job_is_copied_again_while_the_claim_holds(caplog: pytest.LogCaptureFixture) -> None:
    job = Job(fenced=2)
    epoch = CopyEpochs("flow", "dc2", CopyRound([task(0, 0, 5)]), Claim(), job, 1).next()
    assert len(job.runs) == 3 and [r.next for r in epoch.results] == [5]
    assert caplog.text.count("an older replicator of this flow was still writing; fencing it out") == 2


def test_fenced_jobs_give_up_after_the_retries() -> None:
    job = Job(fenced=FENCED_RETRIES + 1)
    with pytest.raises(RuntimeError, match="FencedError: "):
        CopyEpochs("flow", "dc2", CopyRound([task(0, 0, 5)]), Claim(), job, 1).next()
    assert len(job.runs) == FENCED_RETRIES + 1


def test_a_fenced_job_is_not_copied_again_once_the_claim_is_lost() -> None:
    job = Job(fenced=1)
    with pytest.raises(RuntimeError, match="FencedError: "):
        CopyEpochs("flow", "dc2", CopyRound([task(0, 0, 5)]), Claim(holds=1), job, 1).next()
    assert len(job.runs) == 1


def test_other_job_failures_are_not_retried() -> None:
    def job(groups):
        raise RuntimeError("CopyError: writing to dc2: broker down")

    with pytest.raises(RuntimeError, match="broker down"):
        CopyEpochs("flow", "dc2", CopyRound([task(0, 0, 5)]), Claim(), job, 1).next()


def test_writer_groups_follow_the_parallelism() -> None:
    copy_round = CopyRound([task(p, 0, 1) for p in range(6)])
    seen: list[int] = []

    def job(groups):
        seen.append(len(groups))
        return Job()(groups)

    CopyEpochs("flow", "dc2", copy_round, Claim(), job, parallelism=2).next()
    assert seen == [2]


def test_each_epoch_logs_its_counts(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level("INFO", logger=epochs.__name__)
    CopyEpochs("flow", "dc2", CopyRound([task(0, 0, 4), task(1, 0, 3)]), Claim(), Job(), 2).next()
    assert "flow flow: batch 1 copied 7 records (0 filtered) across 2 partitions in " in caplog.text


def test_positions_update_from_results() -> None:
    positions = Positions(CopyRound([task(0, 5, 9, dest_from=1)]))
    result = CopyResult("orders", 0, "dc1.orders", 5, 9)
    result.dest_end = 12
    positions.update([result])
    assert (positions.next, positions.dest_from) == ({("orders", 0): 9}, {("orders", 0): 12})
