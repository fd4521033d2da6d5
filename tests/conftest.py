"""What the whole test session shares: the JVM settings of every Spark driver the tests start, the one Spark session
for jobs run in process, and how `make test`'s three pytest-xdist workers share the suite. Three on two cores: many
tests wait for servers and start-ups, and with two workers the cores were busy 78% of the time, with three 92%
(16m44s -> 15m08s of pytest on a fresh clone, 2026-11-26).

The unit of work is a test file, run whole on one worker in file order with module fixtures of its own; each worker
builds the session fixtures it needs (brokers, stack, Spark session, Airflow DB) itself. Files are handed out one at
a time to whichever worker is free, those with the most `slow` tests first: the longest work starts early and the
many short files fill the gaps at the end, without a hand-kept list of files. (xdist's own `--dist loadgroup` does
not group with pytest 9: it renames node ids through an attribute pytest 9 no longer reads.)"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

# The shared Spark session's driver (pyspark launches it, not kafka-dr's spark-submit command, which sets C1 itself:
# kafka_dr.spark.driver_jvm) lives for the tests and only schedules Python tasks: C1 alone starts it on less CPU.
os.environ.setdefault("SPARK_SUBMIT_OPTS", "-XX:TieredStopAtLevel=1")


def file_of(nodeid: str) -> str:
    return nodeid.split("::")[0]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Files with more `slow` tests first, each file's tests in their order (a stable sort, the same on every worker,
    so xdist sees identical collections)."""
    slow = Counter(file_of(item.nodeid) for item in items if item.get_closest_marker("slow"))
    items.sort(key=lambda item: -slow[file_of(item.nodeid)])


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    from xdist.scheduler import LoadScopeScheduling

    class ByFile(LoadScopeScheduling):
        """xdist's scope scheduling with a file as the scope, handed out in collection order (xdist would otherwise
        reorder scopes by their number of tests, which says nothing about their time)."""

        def __init__(self, config: pytest.Config, log: Any = None) -> None:
            super().__init__(config, log)
            config.option.loadscopereorder = False

        def _split_scope(self, nodeid: str) -> str:
            return file_of(nodeid)

    return ByFile(config, log)


SPARK = pytest.StashKey[Any]()


@pytest.fixture(scope="session")
def spark(request: pytest.FixtureRequest) -> Iterator[object]:
    """One local[2] Spark session for every job a test runs in process (support.spark)."""
    from support.spark import local_session

    session = local_session()
    request.config.stash[SPARK] = session
    try:
        yield session
    finally:
        del request.config.stash[SPARK]
        session.stop()


@pytest.fixture(scope="module", autouse=True)
def clients_closed_after_each_file(request: pytest.FixtureRequest) -> Iterator[None]:
    """After a test file, and after the brokers of its own fixtures stopped (this one is set up first), the Kafka
    clients its jobs cached are closed, in this process and in the session Spark's Python workers."""
    yield
    from support.spark import close_cached_clients, close_worker_clients

    close_cached_clients()
    if SPARK in request.config.stash:
        close_worker_clients(request.config.stash[SPARK])
