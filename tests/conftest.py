"""What the whole test session shares: the JVM settings of every Spark driver the tests start, the one Spark session
for jobs run in process, and how `make test`'s four pytest-xdist workers share the suite. Four on two cores: many
tests wait for servers and start-ups; with two workers the cores were busy 78% of the time, with three 92% (16m44s ->
15m08s of pytest on a fresh clone, 2026-11-26), and once the suite's CPU fell, three left them 76% busy and four 90%
(15m01s -> 14m14s, 2026-11-29; docs/development.md).

The unit of work is a test file, run whole on one worker in file order with module fixtures of its own; each worker
builds the session fixtures it needs (brokers, stack, Spark session, Airflow DB) itself. Files are handed out one at
a time to whichever worker is free, the longest first (tests/durations.json: seconds per file in a recent run,
written by `make durations`): the longest work starts early and the many short files fill the gaps at the end. A
file not listed yet counts as long as the median file; a stale figure only changes the order. (xdist's own
`--dist loadgroup` does not group with pytest 9: it renames node ids through an attribute pytest 9 no longer
reads.)"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from support.stack import Stack

# The shared Spark session's driver (pyspark launches it, not kafka-dr's spark-submit command, which sets C1 itself:
# kafka_dr.spark.driver_jvm) lives for the tests and only schedules Python tasks: C1 alone starts it on less CPU.
os.environ.setdefault("SPARK_SUBMIT_OPTS", "-XX:TieredStopAtLevel=1")
# The stacks' Kafka nodes too (kafka_dr_dev.local.apache takes $KAFKA_OPTS as Kafka's scripts do): the suite starts
# about fifty, each living minutes at a few requests a second, where C2's compiling is a third of a young node's CPU.
# C1 alone cut the nodes' CPU by a third over tests/integration/test_replication.py and test_dr_failover.py (122 -> 80
# CPU-s).
os.environ.setdefault("KAFKA_OPTS", "-XX:TieredStopAtLevel=1")


def file_of(nodeid: str) -> str:
    return nodeid.split("::")[0]


DURATIONS = Path(__file__).with_name("durations.json")
WRITE_DURATIONS = "KDR_WRITE_DURATIONS"  # a path: where `make durations` has this run's seconds per file written


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The longest files first, each file's tests in their order (a stable sort, the same on every worker, so xdist
    sees identical collections); and whether the tests that need servers are marked so (check_tiers)."""
    check_tiers(items)
    seconds: dict[str, float] = json.loads(DURATIONS.read_text()) if DURATIONS.exists() else {}
    unknown = statistics.median(seconds.values()) if seconds else 0.0
    items.sort(key=lambda item: -seconds.get(file_of(item.nodeid), unknown))


SPENT: Counter[str] = Counter()  # seconds per file in this run, for `make durations`


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Setup, call and teardown of every test, summed per file (the xdist controller gets every worker's reports)."""
    SPENT[file_of(report.nodeid)] += report.duration


def pytest_sessionfinish(session: pytest.Session) -> None:
    path = os.environ.get(WRITE_DURATIONS)
    if path and not hasattr(session.config, "workerinput"):  # the controller, or a run without xdist
        Path(path).write_text(json.dumps({f: round(s, 1) for f, s in SPENT.most_common()}, indent=0) + "\n")


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

# The tiers (`make check` runs the tests not marked integration, `make test` all): a test that starts a broker, a
# schema registry, a Spark JVM or Airflow (its database, dag.test(), its servers) is marked integration. Checked, not
# trusted: a test that uses one of these fixtures (every fixture that starts one is built on them) or starts one of
# these programs or modules without the marker fails.
PROCESS_FIXTURES = frozenset({"spark", "stack", "own_stack", "airflow_db", "broker_factory"})
PROCESS_PROGRAMS = frozenset({"java", "spark-submit", "spark-class", "airflow", "redis-server", "prometheus"})
PROCESS_MODULES = ("kafka_dr_dev.local.", "kafka_dr.spark.")


def check_tiers(items: list[pytest.Item]) -> None:
    """Refuse the run when a test not marked integration uses a fixture that starts a server."""
    misfiled = [
        f"{item.nodeid} (uses {', '.join(sorted(used))})"
        for item in items
        if item.get_closest_marker("integration") is None
        and (used := PROCESS_FIXTURES & set(getattr(item, "fixturenames", ())))
    ]
    if misfiled:
        raise pytest.UsageError("tests that start servers but are not marked integration:\n" + "\n".join(misfiled))


@pytest.fixture(autouse=True)
def starts_no_server_unless_integration(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """In a test not marked integration, starting a broker, a registry, Spark or Airflow fails the test (a stand-in
    script the test wrote under pytest's temporary folder is not one)."""
    if request.node.get_closest_marker("integration") is not None:
        return
    popen, stand_ins = subprocess.Popen, tmp_path_factory.getbasetemp()

    class Refusing(popen):  # type: ignore[misc,valid-type]
        def __init__(self, args: Any, *rest: Any, **kwargs: Any) -> None:
            argv = [str(a) for a in ([args] if isinstance(args, str | bytes | os.PathLike) else args)]
            module = argv[argv.index("-m") + 1] if "-m" in argv[:-1] else ""
            program = Path(shutil.which(argv[0], path=(kwargs.get("env") or os.environ).get("PATH")) or argv[0])
            real = program.name in PROCESS_PROGRAMS and not program.is_relative_to(stand_ins)
            if real or module.startswith(PROCESS_MODULES):
                pytest.fail(f"{request.node.nodeid} starts {' '.join(argv[:3])} but is not marked integration")
            super().__init__(args, *rest, **kwargs)

    monkeypatch.setattr(subprocess, "Popen", Refusing)


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


@pytest.fixture(scope="session")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """The worker's two-DC stack (dc1 and dc2: a Kafka node and a schema registry each) on free ports, for every test
    file that needs no stack of its own: two nodes idle between files cost 2.6 CPU-s a minute, and a worker used to
    keep a second pair for the tests that need only brokers."""
    from support.stack import running_stack

    with running_stack(tmp_path_factory.mktemp("stack")) as running:
        yield running


@pytest.fixture(scope="module", autouse=True)
def clients_closed_after_each_file(request: pytest.FixtureRequest) -> Iterator[None]:
    """After a test file, and after the brokers of its own fixtures stopped (this one is set up first), the Kafka
    clients its jobs cached are closed, in this process and in the session Spark's Python workers."""
    yield
    from support.spark import close_cached_clients, close_worker_clients

    close_cached_clients()
    if SPARK in request.config.stash:
        close_worker_clients(request.config.stash[SPARK])
