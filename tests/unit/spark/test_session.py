"""kafka_dr.spark.session.SparkStart with a fake context factory: the context comes up in a thread while the caller
goes on, the warm-up runs on it, a failed warm-up only warns, and stop_spark waits for a start still under way."""

from __future__ import annotations

import logging
import threading
import time

import pytest

from kafka_dr.spark import session


class FakeContext:
    """Two cores; a job runs its tasks in this process, one after the other."""

    defaultParallelism = 2

    def __init__(self) -> None:
        self.stopped = False

    def parallelize(self, items: range, _slices: int) -> FakeContext.Job:
        return FakeContext.Job(list(items))

    def stop(self) -> None:
        self.stopped = True

    class Job:
        def __init__(self, items: list[int]) -> None:
            self.items = items

        def foreach(self, task) -> None:
            for item in self.items:
                task(item)


@pytest.fixture
def slow_start(monkeypatch: pytest.MonkeyPatch) -> tuple[threading.Event, list[FakeContext]]:
    """start_spark replaced by one that waits for the returned event, then records its context as started here."""
    release, made = threading.Event(), []

    def start(app_name: str) -> FakeContext:
        release.wait(5)
        context = FakeContext()
        made.append(context)
        session._started_here.append(context)
        return context

    monkeypatch.setattr(session, "start_spark", start)
    monkeypatch.setattr(session, "_active_context", lambda: None)  # not the shared session of an earlier test
    return release, made


def test_the_caller_goes_on_while_the_context_starts_then_gets_it_warmed(slow_start) -> None:
    release, made = slow_start
    warmed_on: list[int] = []
    started = time.monotonic()
    spark = session.SparkStart("job", warmed_on.append)
    assert time.monotonic() - started < 0.5 and made == []  # the driver plans meanwhile
    release.set()
    spark.warmed()
    assert spark.context() is made[0] and warmed_on == [0, 1]  # one warm-up task per core
    startup = spark.startup_seconds()
    assert set(startup) == {"context", "workers"} and 0 <= startup["context"] <= startup["workers"]
    session.stop_spark()
    assert made[0].stopped


def test_a_failed_warm_up_only_warns(slow_start, caplog: pytest.LogCaptureFixture) -> None:
    release, made = slow_start
    release.set()

    def fail(_task: int) -> None:
        raise RuntimeError("An error occurred while calling o42.collect.\nCopyError: worker start failed\nat ...")

    spark = session.SparkStart("job", fail, raised_in_tasks=("CopyError",))
    with caplog.at_level(logging.WARNING, logger="kafka_dr.spark.session"):
        spark.warmed()
    assert "warm-up of the Spark workers failed: worker start failed\n" in caplog.text  # the task's own message
    assert spark.context() is made[0]
    session.stop_spark()


def test_stop_spark_waits_for_a_context_still_starting(slow_start) -> None:
    """A job that fails while planning must not leave the context it was starting running."""
    release, made = slow_start
    session.SparkStart("job")
    threading.Timer(0.2, release.set).start()
    session.stop_spark()
    assert len(made) == 1 and made[0].stopped
