"""The Airflow harness of the tests: a throw-away AIRFLOW_HOME with the project's dags/ and plugins/, Spark in
local mode, and DAG runs with every task in a process of its own.

Airflow reads its configuration when first imported, so `configure_environment` runs before any test module
imports airflow (tests/airflow/conftest.py calls it at import; kafka_dr_dev.local and kafka_dr.spark.submit do not
import airflow).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from kafka_dr import processes
from kafka_dr.paths import PROJECT_ROOT
from kafka_dr.spark.submit import spark_env

from .ports import free_port

VENV_BIN = Path(sys.executable).parent


def configure_environment(session_dir: Path) -> None:
    """AIRFLOW_HOME and kafka-dr's state under `session_dir`, DAGS_FOLDER the project's dags/, no examples, and
    spark-submit from this venv with a spark_default connection for local[2]."""
    os.environ.update(
        {
            "AIRFLOW_HOME": str(session_dir / "airflow-home"),
            "AIRFLOW__CORE__DAGS_FOLDER": str(PROJECT_ROOT / "dags"),
            "AIRFLOW__CORE__PLUGINS_FOLDER": str(PROJECT_ROOT / "plugins"),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__CORE__UNIT_TEST_MODE": "False",
            # The Spark provider's hook builds `--master local[2] --deploy-mode client` from this: a "spark"
            # connection whose host holds the whole master URL and no port.
            "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps(
                {"conn_type": "spark", "host": "local[2]", "extra": {"deploy-mode": "client"}}
            ),
            "KDR_STATE_DIR": str(session_dir / "state"),
        }
    )
    os.environ.update(spark_env())  # spark-submit on PATH, SPARK_HOME and PYSPARK_PYTHON from this venv
    os.environ.pop("KDR_TOPOLOGY", None)  # tests name their topology files explicitly


def load_dag(dag_id: str) -> Any:
    """The DAG as the project's dags/ folder defines it (importing every DAG file, as the scheduler does)."""
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=os.environ["AIRFLOW__CORE__DAGS_FOLDER"])
    assert not bag.import_errors, bag.import_errors
    return bag.dags[dag_id]


def migrate_db(shared: Path) -> Path:
    """A migrated metadata DB in AIRFLOW_HOME. `airflow db migrate` (about 5 s of CPU) runs once for the pytest-xdist
    workers that share the folder `shared`: the first one migrates and leaves a copy there, the others copy it."""
    home = Path(os.environ["AIRFLOW_HOME"])
    home.mkdir(parents=True, exist_ok=True)
    template = shared / "airflow.db"
    with open(shared / "airflow.db.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if not template.exists():
            command = [str(VENV_BIN / "airflow"), "db", "migrate"]
            done = subprocess.run(command, capture_output=True, text=True, env=os.environ, timeout=180)
            assert done.returncode == 0, f"airflow db migrate failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
            shutil.copyfile(home / "airflow.db", template)
        else:
            shutil.copyfile(template, home / "airflow.db")
    return home


# --- DAG runs with every task in its own process -------------------------------------------------------------
#
# dag.test() runs every task inside the calling process, so state that only lives in memory passes from one task
# to the next there and nowhere else. `run_dag` runs a DAG as Airflow's LocalExecutor does: it is
# `airflow dags test --use-executor` in a subprocess (Airflow's own scheduling loop of dag.test) whose LocalExecutor
# workers hand each task instance to a task supervisor, which forks a fresh task process; that process talks to an
# execution API server (`airflow api-server --apps execution`, once per session on a free port) for its state,
# XComs, params and connections. Deferred tasks wait in an `airflow triggerer` started beside each run with the
# environment of the moment (a test's KDR_STATE_DIR reaches its triggers). SQLite is fine: no task process opens
# the metadata DB, only the api-server, the triggerer and the scheduling loop do.

DAG_RUN_TIMEOUT = 300.0
PARKED_S = 0.5  # a dag.test() task awaiting input this long has parked itself: it is answered (answer_approval)
ANSWER_AGAIN_S = 3.0  # still awaiting input this long after its answer: the parking overwrote it, answered again


@dataclass(frozen=True)
class DagRunResult:
    """What a DAG run run by `run_dag` left in the metadata DB."""

    dag_id: str
    run_id: str
    state: str
    tasks: dict[tuple[str, int], str]  # (task_id, map_index) -> final state
    pids: dict[tuple[str, int], int | None]  # the process that ran each task instance's last try
    seconds: float
    log: Path  # everything the scheduling loop, its executor and the task processes printed

    def xcom(self, task_id: str, map_index: int = -1) -> Any:
        """The return value a task instance pushed, read from the metadata DB."""
        from airflow.models.xcom import XComModel
        from airflow.utils.session import create_session

        with create_session() as session:
            row = session.scalars(
                XComModel.get_many(
                    run_id=self.run_id, dag_ids=self.dag_id, task_ids=task_id, map_indexes=map_index, key="return_value"
                )
            ).first()
            return None if row is None else XComModel.deserialize_value(row)

    def describe(self) -> str:
        """Task states, then the tail of the run's output: for assertion messages."""
        states = ", ".join(f"{t}{'' if i < 0 else f'[{i}]'}={s}" for (t, i), s in sorted(self.tasks.items()))
        tail = self.log.read_text(errors="replace")[-4000:] if self.log.exists() else ""
        return f"{self.dag_id} {self.run_id}: {self.state} in {self.seconds:.1f}s; {states}\n--- {self.log}:\n{tail}"


@contextlib.contextmanager
def execution_api(log: Path, attempts: int = 3) -> Iterator[dict[str, str]]:
    """An execution API server for task processes on a free port (about 6 s): yields the environment that
    points an executor's workers at it. A port free when chosen can be taken before the server binds it (another
    process's client socket, on a loaded machine: seen once in CI); the server then exits, and another port is
    tried."""
    for attempt in range(1, attempts + 1):
        port = free_port()
        env = {
            "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"http://127.0.0.1:{port}/execution/",
            # The executor signs each task's token and the api-server checks it: one secret for both.
            "AIRFLOW__API_AUTH__JWT_SECRET": os.urandom(48).hex(),
        }
        start = log.stat().st_size if log.exists() else 0
        with open(log, "ab") as out:
            server = start_airflow(
                ["api-server", "--apps", "execution", "-H", "127.0.0.1", "-p", str(port), "-w", "1"],
                out,
                {**os.environ, **env},
            )
        try:
            wait_healthy(server, f"http://127.0.0.1:{port}/execution/health", log, timeout=90)
        except RuntimeError:
            end_process(server)
            if attempt < attempts and b"address already in use" in log.read_bytes()[start:]:
                continue
            raise
        break
    try:
        yield env
    finally:
        end_process(server)


def run_dag(
    dag_id: str, conf: dict[str, Any] | None, api_env: dict[str, str], runs: Path, timeout: float = DAG_RUN_TIMEOUT
) -> DagRunResult:
    """One DAG run with every task instance in a process of its own (see above); its output in `runs/`."""
    from airflow.sdk import timezone

    env = {
        **os.environ,
        **api_env,
        "AIRFLOW__CORE__PARALLELISM": "8",  # LocalExecutor workers forked up front (32 by default)
        # A task supervisor notices its task process has exited within this many seconds.
        "AIRFLOW__WORKERS__MIN_HEARTBEAT_INTERVAL": "1",
    }
    runs.mkdir(parents=True, exist_ok=True)
    logical_date = timezone.utcnow()
    log = runs / f"{dag_id}-{logical_date:%Y%m%dT%H%M%S%f}.log"
    started = time.monotonic()
    with open(log, "ab") as out:
        triggerer = start_airflow(["triggerer", "--skip-serve-logs"], out, env)
        try:
            test_args = ["dags", "test", dag_id, logical_date.isoformat(), "--use-executor"]
            loop = start_airflow([*test_args, "--conf", json.dumps(conf or {})], out, env)
            try:
                loop.wait(timeout)
            except subprocess.TimeoutExpired:
                pass
            finally:
                end_process(loop)  # its LocalExecutor workers are in its process group
        finally:
            # Its trigger runner may wait up to 10 s for a trigger's worker thread at exit; nothing it still
            # holds matters once the run is over.
            end_process(triggerer, grace=3)
    return dag_run_result(dag_id, logical_date, time.monotonic() - started, log)


# --- Airflow's own backfill, executed by a scheduler -----------------------------------------------------------

BACKFILL_DONE = b"marking 1 backfills as complete"  # the scheduler's line once a backfill has no run left to run


def backfill_with_scheduler(
    dag_id: str,
    from_date: str,
    to_date: str,
    conf: dict[str, Any],
    api_env: dict[str, str],
    log: Path,
    timeout: float = DAG_RUN_TIMEOUT,
) -> list[tuple[str, str]]:
    """`airflow backfill create` over [from_date, to_date], executed by a scheduler (LocalExecutor: a process per
    task) until the scheduler marks the backfill complete; returns (logical date, state) of the runs it made, read
    from the metadata DB once the scheduler has stopped (SQLite takes one writer, and a running scheduler is one:
    the backfill is made before it starts). The DAGs are serialized first; this one is unpaused at creation, or
    the scheduler would start none of the backfill's runs. It is paused at the end, so that the schedulers of later
    tests start no hourly run of it."""
    env = {**os.environ, **api_env, "AIRFLOW__CORE__PARALLELISM": "4", "AIRFLOW__WORKERS__MIN_HEARTBEAT_INTERVAL": "1"}
    env["AIRFLOW__SCHEDULER__SCHEDULER_HEARTBEAT_SEC"] = "1"
    serialize_dags()
    with open(log, "ab") as out:
        start = log.stat().st_size
        created = subprocess.run(
            [str(VENV_BIN / "airflow"), "backfill", "create", "--dag-id", dag_id, "--from-date", from_date,
             "--to-date", to_date, "--dag-run-conf", json.dumps(conf)],
            stdout=out, stderr=subprocess.STDOUT, env=env, check=False,
        )  # fmt: skip
        assert created.returncode == 0, log.read_text(errors="replace")[-3000:]
        scheduler = start_airflow(["scheduler", "--skip-serve-logs"], out, env)
        try:
            deadline = time.monotonic() + timeout
            while BACKFILL_DONE not in log.read_bytes()[start:]:
                assert scheduler.poll() is None, f"the scheduler exited:\n{log.read_text(errors='replace')[-4000:]}"
                assert time.monotonic() < deadline, f"backfill not done:\n{log.read_text(errors='replace')[-4000:]}"
                time.sleep(2)
        finally:
            end_process(scheduler)
            set_paused(dag_id, True)
    return _last_backfill_runs(dag_id)


# Setup done in this process, as the `airflow dags reserialize` and `airflow dags pause/unpause` commands do it: each
# command is a fresh interpreter importing Airflow, about 6 s of CPU here.


def serialize_dags() -> None:
    """Every DAG of the configured bundles (the project's dags/) serialized into the metadata DB: a scheduler runs
    serialized DAGs only."""
    from airflow.dag_processing.bundles.manager import DagBundlesManager
    from airflow.dag_processing.dagbag import BundleDagBag, sync_bag_to_db
    from airflow.utils.session import create_session

    manager = DagBundlesManager()
    with create_session() as session:
        manager.sync_bundles_to_db(session=session)
    for bundle in manager.get_all_dag_bundles():
        bundle.initialize()
        bag = BundleDagBag(bundle.path, bundle_path=bundle.path, bundle_name=bundle.name)
        assert not bag.import_errors, bag.import_errors
        sync_bag_to_db(bag, bundle.name, bundle.version)


def set_paused(dag_id: str, paused: bool) -> None:
    from airflow.models.dag import DagModel
    from airflow.utils.session import create_session

    with create_session() as session:
        dag = session.get(DagModel, dag_id)
        assert dag is not None, f"{dag_id} is not in the metadata DB: serialize_dags() first"
        dag.is_paused = paused


def scheduled_runs(dag_id: str) -> list[tuple[str, dict[str, str]]]:
    """(state, {task_id: state}) of each scheduled run of `dag_id` in the metadata DB (read once no scheduler runs)."""
    from airflow.models.dagrun import DagRun
    from airflow.models.taskinstance import TaskInstance
    from airflow.utils.session import create_session
    from airflow.utils.types import DagRunType
    from sqlalchemy import select

    with create_session() as session:
        runs = session.scalars(
            select(DagRun).where(DagRun.dag_id == dag_id, DagRun.run_type == DagRunType.SCHEDULED)
        ).all()
        return [
            (
                str(run.state),
                {
                    ti.task_id: str(ti.state)
                    for ti in session.scalars(
                        select(TaskInstance).where(TaskInstance.dag_id == dag_id, TaskInstance.run_id == run.run_id)
                    )
                },
            )
            for run in runs
        ]


def _last_backfill_runs(dag_id: str) -> list[tuple[str, str]]:
    from airflow.models.backfill import Backfill
    from airflow.models.dagrun import DagRun
    from airflow.utils.session import create_session
    from sqlalchemy import func, select

    with create_session() as session:
        last = session.scalar(select(func.max(Backfill.id)).where(Backfill.dag_id == dag_id))
        runs = session.execute(select(DagRun.logical_date, DagRun.state).where(DagRun.backfill_id == last)).all()
        return sorted((logical_date.isoformat(), str(state)) for logical_date, state in runs)


def dag_run_result(dag_id: str, logical_date: Any, seconds: float, log: Path) -> DagRunResult:
    from airflow.models.dagrun import DagRun
    from airflow.models.taskinstance import TaskInstance
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        dag_run = session.scalars(
            select(DagRun).where(DagRun.dag_id == dag_id, DagRun.logical_date == logical_date)
        ).one_or_none()
        assert dag_run is not None, f"no {dag_id} run at {logical_date}:\n{log.read_text(errors='replace')[-4000:]}"
        tis = session.scalars(
            select(TaskInstance).where(TaskInstance.dag_id == dag_id, TaskInstance.run_id == dag_run.run_id)
        ).all()
        return DagRunResult(
            dag_id,
            dag_run.run_id,
            str(dag_run.state),
            {(ti.task_id, ti.map_index): str(ti.state) for ti in tis},
            {(ti.task_id, ti.map_index): ti.pid for ti in tis},
            seconds,
            log,
        )


def start_airflow(args: list[str], out: IO[bytes], env: dict[str, str]) -> subprocess.Popen[bytes]:
    """`airflow ARGS` in a session of its own (so end_process reaches all it starts), output to `out`."""
    return subprocess.Popen(
        [str(VENV_BIN / "airflow"), *args],
        stdin=subprocess.DEVNULL,
        stdout=out,
        stderr=subprocess.STDOUT,
        env=env,
        start_new_session=True,
    )


def wait_healthy(proc: subprocess.Popen[bytes], url: str, log: Path, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(url, timeout=5) as response:
                if response.status == 200:
                    return
        except OSError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"{url} never answered:\n{log.read_text(errors='replace')[-3000:]}")
        time.sleep(0.2)


def end_process(proc: subprocess.Popen[bytes], grace: float = 30.0) -> None:
    """Stop a process this harness started, and what is left of its own process group."""
    if proc.poll() is None:
        proc.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(grace)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)  # its session, made by start_new_session: only what it started
    proc.wait()


@contextlib.contextmanager
def airflow_up(
    topology: Path, state: Path, log: Path, executor: str | None = None, health_schedule: str | None = None
) -> Iterator[Any]:
    """`kafka-dr-dev airflow up [--executor EXECUTOR]` with an Airflow home in `state` and a free port, whatever the
    test session's own Airflow settings (other test directories set AIRFLOW_* for in-process Airflow);
    `LocalAirflow.down` after; `health_schedule`: dr_replication_health's ($KDR_HEALTH_SCHEDULE; default every 5
    minutes). Yields the LocalAirflow."""
    from kafka_dr_dev.local.airflow import LocalAirflow

    airflow = LocalAirflow(home=state / "airflow", port=free_port(), executor=executor)
    try:
        _kafka_dr_airflow_up(airflow, topology, state, log, {"KDR_HEALTH_SCHEDULE": health_schedule or ""})
        yield airflow
    finally:
        airflow.down()


# Airflow's own 1 s between idle scheduler passes, not kafka-dr's 0.25 s: on two cores busy with the whole suite the
# quicker passes cost the schedulers about 60 CPU-seconds more (CI, 2026-11-27: 145 against 87) and made no drill
# shorter, the cores being the limit. The failover benchmark measures kafka-dr's setting.
# And DAG files parsed once, not every 30 s: no test edits them while its Airflow runs, and a dag-processor re-parsing
# the seven files of a test's Airflow for 15 minutes spent 70 CPU-seconds (CI, 2026-11-27).
SUITE_SCHEDULER = {
    "AIRFLOW__SCHEDULER__SCHEDULER_IDLE_SLEEP_TIME": "1",
    "AIRFLOW__DAG_PROCESSOR__MIN_FILE_PROCESS_INTERVAL": "3600",
}


def _kafka_dr_airflow_up(
    airflow: Any, topology: Path, state: Path, log: Path, settings: dict[str, str] | None = None
) -> None:
    """`kafka-dr-dev airflow up` for `airflow` (a LocalAirflow), its output appended to `log`, with `settings` in its
    environment: it starts whatever component is not running and waits until all are healthy."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "KDR_"))}
    env.update({"KDR_STATE_DIR": str(state), **SUITE_SCHEDULER, **(settings or {})})
    command = [
        str(VENV_BIN / "kafka-dr-dev"),
        "airflow",
        "up",
        "--topology",
        str(topology),
        "--port",
        str(airflow.port),
    ]
    command += ["--executor", airflow.executor]
    with open(log, "ab") as out:
        done = subprocess.run(command, stdout=out, stderr=subprocess.STDOUT, env=env, timeout=480, check=False)
    assert done.returncode == 0, f"{' '.join(command)}:\n{log.read_text(errors='replace')[-3000:]}"


def restart_scheduler(airflow: Any, topology: Path, state: Path, log: Path) -> None:
    """The scheduler lost (SIGKILL to its process alone: running tasks go on) and started again by `kafka-dr-dev airflow
    up`, as an operator would after a host restart."""
    pid = airflow.pid("scheduler")
    assert pid is not None, "the scheduler is not running"
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 30
    while airflow.pid("scheduler") is not None:
        assert time.monotonic() < deadline, f"the scheduler {pid} outlived SIGKILL"
        time.sleep(0.1)
    _kafka_dr_airflow_up(airflow, topology, state, log)


def task_runner_pid(ti_id: str) -> int | None:
    """The process running task instance `ti_id` on this machine: Airflow's task runner titles itself
    `airflow worker -- <task instance id>` (this process sees every PID namespace's processes)."""
    title = f"airflow worker -- {ti_id}"
    for pid in processes.tree(1):
        if " ".join(processes.cmdline(pid)) == title:
            return pid
    return None


def kill_task_process(
    api: Any, dag_id: str, run_id: str, task: str, when: Callable[[], bool] | None = None, timeout: float = 180.0
) -> dict[int, int]:
    """A worker lost mid-task: SIGKILL to the process of a run's task instance (`task_id` or `task_id[map_index]`;
    `api` an AirflowRest to ask) and to everything it started, once it runs, has started a child (a Spark job's
    spark-submit) and `when()` holds. Returns the processes killed, {pid: start ticks}."""
    task_id, _, index = task.rstrip("]").partition("[")
    map_index = int(index) if index else -1
    deadline = time.monotonic() + timeout
    runner: int | None = None
    while runner is None:
        assert time.monotonic() < deadline, f"{dag_id} {run_id}: {task} did not run within {timeout:g} s"
        ti = next(
            (t for t in api.task_instances(dag_id, run_id) if (t["task_id"], t["map_index"]) == (task_id, map_index)),
            None,
        )
        state = None if ti is None else ti.get("state")
        assert state in (None, "scheduled", "queued", "running"), f"{dag_id} {run_id}: {task} is {state} already"
        runner = task_runner_pid(ti["id"]) if ti is not None and state == "running" else None
        if runner is None:
            time.sleep(0.5)
    while len(processes.tree(runner)) < 2 or (when is not None and not when()):
        assert processes.cmdline(runner), f"{dag_id} {run_id}: {task} ended before it was killed"
        assert time.monotonic() < deadline, f"{dag_id} {run_id}: {task} not killed within {timeout:g} s"
        time.sleep(0.1)
    killed = processes.tree(runner)
    for pid in killed:
        processes.send(pid, signal.SIGKILL)
    return killed


def answered(dag_id: str, option: str, user: str, run: Callable[[], Any]) -> Any:
    """`run()` (a dag.test() of `dag_id`, which waits at its approval) while `user` answers `option` from a thread
    (`answer_approval`); the run, once the answer is known to have reached it. The ORM's mappers are configured here
    first: a test that runs alone would otherwise have the answering thread's first query configure them while
    dag.test() does the same, and the two threads deadlock (seen with `-k`, the test first in its process)."""
    from airflow.models import hitl, taskinstance, trigger  # noqa: F401 - their mappers, configured below
    from sqlalchemy.orm import configure_mappers

    configure_mappers()
    ended = threading.Event()
    with ThreadPoolExecutor(1) as answering:
        answer = answering.submit(answer_approval, dag_id, option, user, ended)
        try:
            result = run()
        finally:
            ended.set()
        assert answer.result() == result.run_id, (
            f"the run ended without waiting at its approval, or {user} answered another"
        )
    return result


def answer_approval(
    dag_id: str, option: str, user: str, ended: threading.Event, task_id: str = "approve"
) -> str | None:
    """What the REST API's answer to a human-in-the-loop task (PATCH .../hitlDetails) does, for a dag.test() run of
    this process, which waits for it: once `task_id` of a run of `dag_id` awaits input, record `user`'s `option`
    and resume the task. Returns the run's id, or None once `ended` is set with no run waiting. It waits as long as the
    run goes on, however loaded the machine: a dag.test() waiting for an answer that never comes would wait forever
    (Airflow's task timeouts take over SIGALRM, so pytest-timeout's alarm does not end it). (On a real Airflow the
    tests answer through the REST API or the browser.)"""
    from airflow._shared.timezones import timezone
    from airflow.models.hitl import HITLDetail
    from airflow.models.taskinstance import TaskInstance
    from airflow.models.trigger import handle_event_submit
    from airflow.triggers.base import TriggerEvent
    from airflow.utils.session import create_session
    from airflow.utils.state import TaskInstanceState
    from sqlalchemy import select

    # An answer given while the task is still parking itself can be overwritten by the parking (the task stays
    # awaiting input with its answer recorded, and the run waits forever: seen once in a suite on Apache Kafka): the
    # task is answered once it has waited a moment, and answered again while it still waits a while later.
    seen: dict[str, float] = {}  # task instance id -> when first seen waiting, then when last answered
    answered_run: str | None = None
    while not ended.is_set():
        with create_session() as session:
            waiting = session.scalar(
                select(TaskInstance).where(
                    TaskInstance.dag_id == dag_id,
                    TaskInstance.task_id == task_id,
                    TaskInstance.state == TaskInstanceState.AWAITING_INPUT,
                )
            )
            if waiting is None and answered_run is not None:
                return answered_run
            if waiting is not None and time.monotonic() - seen.setdefault(str(waiting.id), time.monotonic()) >= (
                ANSWER_AGAIN_S if waiting.run_id == answered_run else PARKED_S
            ):
                detail = session.get(HITLDetail, waiting.id)
                detail.responded_by = {"id": user, "name": user}
                detail.responded_at = timezone.utcnow()
                detail.chosen_options = [option]
                detail.params_input = {}
                handle_event_submit(
                    TriggerEvent(detail.as_resume_event_payload()), task_instance=waiting, session=session
                )
                answered_run, seen[str(waiting.id)] = waiting.run_id, time.monotonic()
        time.sleep(0.2)
    return answered_run
