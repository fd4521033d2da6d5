"""Airflow for real, locally: `kafka-dr-dev airflow up|down|status` runs Airflow's own components for the local stack.

api-server (the UI and the execution API, http://127.0.0.1:8080, user admin / admin), scheduler (LocalExecutor: a
process per task), dag-processor and triggerer, each a detached background process recorded like the stack's
servers (`kafka_dr.processes`), with AIRFLOW_HOME under `.kafka-dr/airflow/`, the project's dags/ and plugins/, no
examples, kafka-dr's DAGs unpaused and the connections `kafka_dr_<cluster>` and `spark_default` for the local stack.
This module runs the `airflow` command of this virtual environment and imports nothing of Airflow.

With `executor="celery"` the tasks run as users scale Airflow out: CeleryExecutor, Debian's redis-server on
127.0.0.1 as the broker and result backend, and two Celery workers. As root, each worker runs in PID and UTS
namespaces of its own (`unshare`, hostnames worker-1 and worker-2), as two hosts or containers would: neither sees
the other's processes (nor the scheduler's), so what one task started another finds through the target cluster
(kafka_dr.replication.liveness). Processes a worker started end with it, as a container's do.

Secrets (the JWT secret that the components share, the Fernet key of the connections) are made once, kept in
AIRFLOW_HOME/secrets.json (mode 600) and handed to the components through their environment, never a command line;
so is the bearer token of /kafka-dr/metrics, kept in AIRFLOW_HOME/metrics-token (mode 600) for Prometheus to read.
"""

from __future__ import annotations

import json
import os
import secrets
import shlex
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from base64 import urlsafe_b64encode
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kafka_dr import processes
from kafka_dr.paths import PROJECT_ROOT, TOPOLOGY_ENV, state_dir
from kafka_dr.spark.submit import spark_env
from kafka_dr.topology import Topology

from ..airflow_rest import AirflowRest, AirflowRestError
from .config import HOST
from .ports import free_port
from .stack import StackError

PORT = 8080
USER = "admin"
PASSWORD = "admin"  # local only: the api-server listens on 127.0.0.1
# A second user, so that a failover triggered by USER can be approved under the topology's dr.four_eyes rule.
APPROVER = "approver"
APPROVER_PASSWORD = "approver"
COMPONENTS = ("api-server", "scheduler", "dag-processor", "triggerer")
EXECUTORS = ("local", "celery")
CELERY_COMPONENTS = ("redis", "worker-1", "worker-2")  # started before the scheduler sends them anything
HEALTH_KEYS = {"scheduler": "scheduler", "dag-processor": "dag_processor", "triggerer": "triggerer"}
SCHEDULER_IDLE_SLEEP_S = "0.25"  # seconds between scheduler passes with nothing to do (environment())
STARTUP_TIMEOUT = 180.0  # the api-server's first start migrates nothing, but imports most of Airflow
STOP_GRACE = 20.0
_START_MARK = "--- kafka-dr starts at "


@dataclass(frozen=True)
class ComponentStatus:
    name: str
    pid: int | None
    healthy: bool
    detail: str
    log: Path


class LocalAirflow:
    """Starts, checks and stops the local Airflow; its state under `home` (default STATE_DIR/airflow, that is
    <project>/.kafka-dr/airflow)."""

    def __init__(self, home: str | Path | None = None, port: int | None = None, executor: str | None = None) -> None:
        """`port`: the api-server's (default: the one `up` last used here, else PORT); `executor`: "local" or
        "celery" (default: the one `up` last used here, else local)."""
        self.home = Path(home).absolute() if home is not None else state_dir() / "airflow"
        self.port = port or self._recorded_port() or PORT
        self.executor = executor or self._recorded("executor") or "local"
        if self.executor not in EXECUTORS:
            raise StackError(f"executor {self.executor!r}: one of {', '.join(EXECUTORS)}")

    def _recorded_port(self) -> int | None:
        try:
            return int(self._recorded("port") or "")
        except ValueError:
            return None

    def _recorded(self, name: str) -> str | None:
        try:
            return (self.home / "run" / name).read_text().strip() or None
        except FileNotFoundError:
            return None

    @property
    def components(self) -> tuple[str, ...]:
        """What runs, in starting order."""
        return (*CELERY_COMPONENTS, *COMPONENTS) if self.executor == "celery" else COMPONENTS

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}"

    def pid_file(self, component: str) -> Path:
        return self.home / "run" / f"{component}.pid"

    def log_file(self, component: str) -> Path:
        return self.home / "run" / f"{component}.log"

    # --- commands -------------------------------------------------------------------------------

    def up(self, topology: Topology, topology_file: Path, timeout: float = STARTUP_TIMEOUT) -> list[str]:
        """Migrate the metadata DB, set the login and the connections, start what is not running (its DAGs and
        tasks on `topology_file`) and wait until the api-server reports every component healthy; returns the
        components it started."""
        (self.home / "run").mkdir(parents=True, exist_ok=True)
        with processes.locked(self.home / "run" / "airflow"):
            if self.pid("api-server") is None:
                processes.write_atomic(self.home / "run" / "port", f"{self.port}\n")
                processes.write_atomic(self.home / "run" / "executor", f"{self.executor}\n")
                if self.executor == "celery" and self.pid("redis") is None:
                    processes.write_atomic(self.home / "run" / "redis-port", f"{free_port(HOST)}\n")
            else:
                port, executor = self._recorded_port(), self._recorded("executor") or "local"
                if (port, executor) != (self.port, self.executor):
                    raise StackError(
                        f"Airflow runs on port {port} with the {executor} executor; stop it with "
                        "`kafka-dr-dev airflow down` first"
                    )
            env = {**self.environment(), TOPOLOGY_ENV: str(topology_file.absolute())}
            self._airflow(["db", "migrate"], env)
            self._write_connections(topology)
            self._airflow(["connections", "import", "--overwrite", str(self.home / "connections.json")], env)
            started = []
            for component in self.components:
                if self.pid(component) is None:
                    self._start(component, env)
                    started.append(component)
            self._wait_healthy(timeout)
            self._wait_parsed()
            return started

    def down(self) -> list[str]:
        """SIGTERM to each component's process group, SIGKILL after STOP_GRACE seconds."""
        running = {c: found for c in self.components if (found := self._running(c)) is not None}
        left = processes.end_groups(dict(running.values()), STOP_GRACE)
        if left:
            raise StackError(f"could not stop Airflow's {', '.join(c for c, (p, _) in running.items() if p in left)}")
        for component in self.components:
            self.pid_file(component).unlink(missing_ok=True)
        return list(running)

    def status(self, timeout: float = 5.0) -> list[ComponentStatus]:
        """Each component: its process, and its health as the api-server reports it (the api-server: it answers)."""
        health = self.health(timeout) if self.pid("api-server") else None
        result = []
        for component in self.components:
            pid = self.pid(component)
            if pid is None:
                healthy, detail = False, "not running"
            elif component in CELERY_COMPONENTS:
                healthy, detail = self._celery_health(component)
            elif health is None:
                healthy, detail = False, "the api-server does not answer" if component != "api-server" else "no answer"
            elif component == "api-server":
                healthy, detail = True, f"{self.url} answers"
            else:
                report = health.get(HEALTH_KEYS[component]) or {}
                healthy = report.get("status") == "healthy"
                beat = next((v for k, v in report.items() if k.endswith("heartbeat")), None)
                detail = f"{report.get('status', 'unknown')}, last heartbeat {beat}"
            result.append(ComponentStatus(component, pid, healthy, detail, self.log_file(component)))
        return result

    def health(self, timeout: float = 5.0) -> dict[str, Any] | None:
        """The api-server's /api/v2/monitor/health (heartbeats of scheduler, dag-processor, triggerer); None when
        it does not answer."""
        try:
            with urllib.request.urlopen(f"{self.url}/api/v2/monitor/health", timeout=timeout) as response:
                return json.loads(response.read())
        except (urllib.error.URLError, OSError, ValueError):
            return None

    def _celery_health(self, component: str) -> tuple[bool, str]:
        """redis answers PING; a worker is ready once Celery said so in its log (it connected to the broker)."""
        if component == "redis":
            try:
                with socket.create_connection((HOST, int(self._recorded("redis-port") or 0)), timeout=2) as conn:
                    conn.sendall(b"PING\r\n")
                    answered = conn.recv(16).startswith(b"+PONG")
            except (OSError, ValueError):
                answered = False
            return answered, "answers PING" if answered else "does not answer PING"
        ready = any(" ready." in line for line in processes.latest_run(self.log_file(component), _START_MARK) or [])
        return ready, "ready" if ready else "starting"

    def pid(self, component: str) -> int | None:
        running = self._running(component)
        return None if running is None else running[0]

    # --- environment ----------------------------------------------------------------------------

    def environment(self) -> dict[str, str]:
        """What every component (and the `airflow` commands of `up`) runs with, on top of this process's."""
        keys = self._secrets()
        return {
            **spark_env(),  # spark-submit, SPARK_HOME and the Python of this venv, for the tasks' Spark jobs
            "AIRFLOW_HOME": str(self.home),
            "AIRFLOW__CORE__DAGS_FOLDER": str(PROJECT_ROOT / "dags"),
            "AIRFLOW__CORE__PLUGINS_FOLDER": str(PROJECT_ROOT / "plugins"),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            # SQLite takes one writer at a time: the components and the api-server's requests wait up to 30 s for
            # the lock instead of failing after 5 s (seen as "Database error" on a trigger during a scheduled run).
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{self.home / 'airflow.db'}?timeout=30",
            **self._executor_settings(),
            "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "False",
            "AIRFLOW__CORE__FERNET_KEY": keys["fernet_key"],
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": f"{USER}:admin,{APPROVER}:admin",
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(self._passwords_file()),
            "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"{self.url}/execution/",
            "AIRFLOW__API__BASE_URL": self.url,
            "AIRFLOW__API_AUTH__JWT_SECRET": keys["jwt_secret"],
            # Task processes report heartbeats; a finished task is noticed within a second rather than five.
            "AIRFLOW__WORKERS__MIN_HEARTBEAT_INTERVAL": "1",
            # A failover is a chain of tasks, each queued by a scheduler pass after the one before ends: Airflow's 1 s
            # idle sleep between passes made a chain of 10 empty tasks take 9.3-11.8 s here, 0.25 s 3.8-3.9 s, for
            # 12% of a core while idle instead of 3.4% (docs/design.md). Set in the environment, it wins.
            "AIRFLOW__SCHEDULER__SCHEDULER_IDLE_SLEEP_TIME": os.environ.get(
                "AIRFLOW__SCHEDULER__SCHEDULER_IDLE_SLEEP_TIME", SCHEDULER_IDLE_SLEEP_S
            ),
            "KDR_STATE_DIR": str(state_dir()),  # reports and aliases where the CLI and the dashboard read them
            "KDR_METRICS_TOKEN_FILE": str(self.metrics_token_file()),  # /kafka-dr/metrics's bearer token
        }

    def metrics_token_file(self) -> Path:
        """The bearer token of /kafka-dr/metrics, made once (mode 600): a Prometheus scrape config's
        `credentials_file` can name it as it is. $KDR_METRICS_TOKEN, when set, is the token instead."""
        path = self.home / "metrics-token"
        if not path.exists():
            self.home.mkdir(parents=True, exist_ok=True)
            descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(descriptor, "w") as out:
                out.write(secrets.token_urlsafe(32))
        return path

    def _executor_settings(self) -> dict[str, str]:
        tasks = {"AIRFLOW__CORE__PARALLELISM": "4"}  # tasks at once: 2 cores, Spark jobs in the tasks
        if self.executor == "local":
            return {"AIRFLOW__CORE__EXECUTOR": "LocalExecutor", **tasks}
        redis = f"redis://{HOST}:{self._recorded('redis-port')}"
        return {
            "AIRFLOW__CORE__EXECUTOR": "CeleryExecutor",
            **tasks,
            "AIRFLOW__CELERY__BROKER_URL": f"{redis}/0",
            "AIRFLOW__CELERY__RESULT_BACKEND": f"{redis}/1",  # not SQLite: one writer at a time
            "AIRFLOW__CELERY__WORKER_CONCURRENCY": "2",  # per worker: both share 2 cores with Spark
        }

    def _secrets(self) -> dict[str, str]:
        path = self.home / "secrets.json"
        try:
            return json.loads(path.read_text())
        except FileNotFoundError:
            pass
        self.home.mkdir(parents=True, exist_ok=True)
        made = {"jwt_secret": secrets.token_hex(32), "fernet_key": urlsafe_b64encode(os.urandom(32)).decode()}
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "w") as out:
            json.dump(made, out)
        return made

    def _passwords_file(self) -> Path:
        """SimpleAuthManager's users file: admin / admin and approver / approver (it would make up a random password
        for a user missing, so a home made before the approver existed gets it added)."""
        path = self.home / "passwords.json"
        users = json.loads(path.read_text()) if path.exists() else {}
        if not {USER, APPROVER} <= set(users):
            processes.write_json(path, {USER: PASSWORD, APPROVER: APPROVER_PASSWORD, **users})
            path.chmod(0o600)
        return path

    def _write_connections(self, topology: Topology) -> None:
        """`kafka_dr_<cluster>` (plaintext: the local stack has no security settings) and `spark_default` (local
        mode, the venv's pyspark), as `airflow connections import` reads them."""
        connections: dict[str, Any] = {
            f"kafka_dr_{cluster.name}": {
                "conn_type": "generic",
                "description": f"kafka-dr cluster {cluster.name}: {cluster.bootstrap_servers} (local stack)",
                "extra": json.dumps({"security.protocol": "PLAINTEXT"}),
            }
            for cluster in topology.clusters.values()
        }
        connections["spark_default"] = {
            "conn_type": "spark",
            "host": "local[2]",
            "description": "kafka-dr's Spark jobs in local mode",
            "extra": json.dumps({"deploy-mode": "client"}),
        }
        processes.write_json(self.home / "connections.json", connections)

    # --- internals ------------------------------------------------------------------------------

    def _airflow(self, args: list[str], env: dict[str, str]) -> None:
        """One `airflow` command to its end; a failure is one line with the command's last output line."""
        result = subprocess.run(
            [str(Path(sys.executable).parent / "airflow"), *args],
            capture_output=True,
            text=True,
            env={**os.environ, **env},
            timeout=300,
        )
        if result.returncode != 0:
            last = (result.stderr.strip() or result.stdout.strip() or "no output").splitlines()[-1]
            raise StackError(f"airflow {' '.join(args[:2])} failed (exit code {result.returncode}): {last}")

    def _command(self, component: str) -> list[str]:
        airflow = str(Path(sys.executable).parent / "airflow")
        if component == "redis":
            port = self._recorded("redis-port") or ""
            # A broker only: nothing kept on disk, reachable from this machine alone.
            return [_redis_server(), "--bind", HOST, "--port", port, "--save", "", "--appendonly", "no"]
        if component.startswith("worker-"):
            worker = [airflow, "celery", "worker", "--skip-serve-logs", "--celery-hostname", f"{component}@%h"]
            if os.geteuid() != 0:  # unshare needs root: the workers then share this host's processes
                return worker
            # PID and UTS namespaces of its own, as a host of its own: `hostname` names the worker in task logs.
            inner = f"hostname {component} && exec {shlex.join(worker)}"
            return ["unshare", "--pid", "--fork", "--kill-child", "--mount-proc", "--uts", "sh", "-c", inner]
        if component == "api-server":
            return [airflow, "api-server", "-H", HOST, "-p", str(self.port), "-w", "1"]
        # No log server of their own (it would listen on every interface): the api-server reads the task logs
        # from AIRFLOW_HOME/logs on this machine.
        return [airflow, component, *(["--skip-serve-logs"] if component != "dag-processor" else [])]

    def _start(self, component: str, env: dict[str, str]) -> None:
        proc = processes.spawn(self._command(component), self.log_file(component), _START_MARK, env, cwd=self.home)
        ticks = processes.start_ticks(proc.pid)
        if ticks is None:
            raise StackError(f"Airflow's {component} exited at once; see {self.log_file(component)}")
        processes.write_atomic(self.pid_file(component), f"{proc.pid} {ticks}\n")

    def _running(self, component: str) -> tuple[int, int] | None:
        try:
            pid, ticks = map(int, self.pid_file(component).read_text().split())
        except (FileNotFoundError, ValueError):
            return None
        return (pid, ticks) if processes.is_alive(pid, ticks) else None

    def _wait_healthy(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while True:
            statuses = self.status()
            if all(s.healthy for s in statuses):
                return
            for s in statuses:
                if s.pid is None:
                    output = processes.latest_run(s.log, _START_MARK) or ["no output"]
                    raise StackError(f"Airflow's {s.name} is not running ({output[-1]}); see {s.log}")
            if time.monotonic() >= deadline:
                waiting = "; ".join(f"{s.name}: {s.detail}" for s in statuses if not s.healthy)
                raise StackError(f"Airflow not healthy after {timeout:.0f} s ({waiting})")
            time.sleep(1.0)

    def _wait_parsed(self) -> None:
        """Until the dag-processor has parsed every DAG of dags/ (at most two minutes), so that the UI lists them
        all when `up` returns. They are unpaused at creation (DAGS_ARE_PAUSED_AT_CREATION off): a runbook starts when
        triggered. Asked of the api-server, up by now: an `airflow dags list` would cost
        about 10 s of CPU each time."""
        expected = {p.stem for p in (PROJECT_ROOT / "dags").glob("dr_*.py")}
        api = AirflowRest(self.url, USER, PASSWORD)
        deadline = time.monotonic() + 120
        while True:
            try:
                found = {d["dag_id"] for d in api.call("GET", "/api/v2/dags?limit=100")["dags"]}
            except (AirflowRestError, KeyError, TypeError):
                found = set()
            if expected <= found or time.monotonic() >= deadline:
                return
            time.sleep(1.0)


def _redis_server() -> str:
    """Debian's redis-server (`make venv` installs it when missing)."""
    found = shutil.which("redis-server")
    if found is None:
        raise StackError("the celery executor needs redis-server (Debian: apt-get install redis-server)")
    return found
