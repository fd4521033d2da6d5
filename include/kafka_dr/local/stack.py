"""Embedded two-datacenter stack: one broker and one schema registry process per DC.

No Kafka binary installs on the machines this project targets, so `kafka-dr local` runs the
project's own wire-compatible broker and registry as detached background processes. They must
outlive the CLI that started them, so their identity lives on disk: DATA_DIR/stack.json holds the
settings of `up` (later commands reuse them), DATA_DIR/<dc>/<kind>.pid the process ids, checked
against the real command line so a recycled pid is never mistaken for ours.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

HOST = "127.0.0.1"
DEFAULT_DATA_DIR = Path(".kafka-dr")
BROKER = "broker"
REGISTRY = "registry"
KINDS = (BROKER, REGISTRY)
STARTUP_TIMEOUT = 30.0
STOP_GRACE = 5.0

_DC_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]*")
_CONFIG_VERSION = 1
_START_MARK = "--- kafka-dr starts at "


class StackError(RuntimeError):
    """The stack failed to do what was asked (a process did not start, stop or answer)."""


class StackInputError(ValueError):
    """The request itself is wrong (unknown DC, bad port, bad stack.json); nothing was changed."""


@dataclass(frozen=True)
class DcConfig:
    """Ports and registry settings of one local datacenter."""

    name: str
    broker_port: int
    registry_port: int
    registry_kafkastore: str
    registry_leader_eligible: bool

    @property
    def broker_address(self) -> str:
        return f"{HOST}:{self.broker_port}"

    @property
    def registry_url(self) -> str:
        return f"http://{HOST}:{self.registry_port}"


@dataclass(frozen=True)
class StackConfig:
    """All local datacenters; persisted as DATA_DIR/stack.json so every command agrees on it."""

    dcs: tuple[DcConfig, ...]

    @classmethod
    def default(
        cls, broker_ports: Sequence[int] = (9091, 9092), registry_ports: Sequence[int] = (8081, 8082)
    ) -> StackConfig:
        """DESIGN.md's layout: dc2's registry follows the store of dc1, which alone is leader-eligible."""
        if len(broker_ports) != 2 or len(registry_ports) != 2:
            raise StackInputError("the local stack has two DCs: give exactly two broker and two registry ports")
        primary_store = f"{HOST}:{broker_ports[0]}"
        config = cls(
            dcs=(
                DcConfig("dc1", broker_ports[0], registry_ports[0], primary_store, True),
                DcConfig("dc2", broker_ports[1], registry_ports[1], primary_store, False),
            )
        )
        config.validate("ports")
        return config

    def dc(self, name: str) -> DcConfig:
        for dc in self.dcs:
            if dc.name == name:
                return dc
        raise StackInputError(f"unknown DC {name!r} (known: {', '.join(d.name for d in self.dcs)})")

    def with_dc(self, new: DcConfig) -> StackConfig:
        return replace(self, dcs=tuple(new if dc.name == new.name else dc for dc in self.dcs))

    def validate(self, source: str) -> None:
        """Refuse unusable settings with one line, before any process is touched."""
        if not self.dcs:
            raise StackInputError(f"{source}: no DCs defined")
        seen_names: set[str] = set()
        seen_ports: dict[int, str] = {}
        for i, dc in enumerate(self.dcs):
            where = f"{source}: dcs[{i}]"
            if not isinstance(dc.name, str) or not _DC_NAME_RE.fullmatch(dc.name):
                raise StackInputError(f"{where}.name: bad DC name {dc.name!r} (letters, digits, '_', '-')")
            if dc.name in seen_names:
                raise StackInputError(f"{where}.name: duplicate DC {dc.name!r}")
            seen_names.add(dc.name)
            for key in ("broker_port", "registry_port"):
                port = getattr(dc, key)
                if isinstance(port, bool) or not isinstance(port, int) or not 0 < port < 65536:
                    raise StackInputError(f"{where}.{key}: must be a port number 1-65535, got {port!r}")
                if port in seen_ports:
                    raise StackInputError(f"{where}.{key}: port {port} is also {seen_ports[port]}")
                seen_ports[port] = f"{dc.name} {key}"
            if not isinstance(dc.registry_leader_eligible, bool):
                raise StackInputError(f"{where}.registry_leader_eligible: must be true or false")
            check_bootstrap_servers(dc.registry_kafkastore, f"{where}.registry_kafkastore")

    def to_json(self) -> str:
        return json.dumps({"version": _CONFIG_VERSION, "dcs": [asdict(dc) for dc in self.dcs]}, indent=2) + "\n"

    @classmethod
    def from_json(cls, text: str, source: str) -> StackConfig:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise StackInputError(f"{source}: not valid JSON: {exc}") from None
        if not isinstance(data, dict) or data.get("version") != _CONFIG_VERSION:
            raise StackInputError(f"{source}: not a version {_CONFIG_VERSION} stack file")
        raw_dcs = data.get("dcs")
        if not isinstance(raw_dcs, list):
            raise StackInputError(f"{source}: dcs: must be a list")
        fields = list(DcConfig.__dataclass_fields__)
        dcs = []
        for i, raw in enumerate(raw_dcs):
            if not isinstance(raw, dict) or sorted(raw) != sorted(fields):
                raise StackInputError(f"{source}: dcs[{i}]: must be a mapping with keys {', '.join(fields)}")
            dcs.append(DcConfig(**raw))
        config = cls(dcs=tuple(dcs))
        config.validate(source)
        return config


def check_bootstrap_servers(value: Any, what: str) -> str:
    """Validate a "host:port[,host:port]" list, the form the registry's kafkastore option takes."""
    items = value.split(",") if isinstance(value, str) else [None]
    for item in items:
        host, _, port = (item or "").strip().rpartition(":")
        if not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise StackInputError(f"{what}: bad address list {value!r} (expected host:port[,host:port])")
    return value


@dataclass(frozen=True)
class ProcessStatus:
    """What `status` knows about one server process."""

    dc: str
    kind: str
    pid: int | None
    alive: bool
    healthy: bool
    address: str
    cluster_id: str | None
    detail: str
    log: Path


class LocalStack:
    """Starts, checks and stops the local DCs' processes; safe to use from many CLI invocations."""

    def __init__(self, data_dir: str | Path = DEFAULT_DATA_DIR, config: StackConfig | None = None) -> None:
        # Absolute, because children get this path on their command line and we match it later.
        self.data_dir = Path(data_dir).absolute()
        self._explicit_config = config is not None
        if config is not None:
            config.validate("stack config")
        self.config = config or self._saved_config() or StackConfig.default()
        self._spawned: dict[tuple[str, str], subprocess.Popen[bytes]] = {}

    # --- paths ----------------------------------------------------------------------------------

    @property
    def config_file(self) -> Path:
        return self.data_dir / "stack.json"

    def pid_file(self, dc: str, kind: str) -> Path:
        return self.data_dir / dc / f"{kind}.pid"

    def log_file(self, dc: str, kind: str) -> Path:
        return self.data_dir / dc / f"{kind}.log"

    def server_dir(self, dc: str, kind: str) -> Path:
        return self.data_dir / dc / kind

    # --- commands -------------------------------------------------------------------------------

    def up(self, timeout: float = STARTUP_TIMEOUT) -> list[str]:
        """Start whatever is not running (brokers first) and wait until all answer; returns what started."""
        with self._locked():
            self._sync_settings(adopt=True)
            started: list[str] = []
            for kind in KINDS:
                procs = [(dc.name, kind) for dc in self.config.dcs]
                started += self._start(procs)
                self._wait_healthy(procs, timeout)
            return started

    def down(self) -> list[str]:
        """Stop every process (registries before brokers, clients before servers); data is kept."""
        with self._locked():
            self._sync_settings(adopt=False)
            return self._stop([(dc.name, kind) for kind in reversed(KINDS) for dc in self.config.dcs])

    def stop(self, dc: str) -> list[str]:
        """A disaster: kill the DC's registry and broker; returns what was running."""
        self.config.dc(dc)
        with self._locked():
            self._sync_settings(adopt=False)
            return self._stop([(dc, REGISTRY), (dc, BROKER)])

    def start(self, dc: str, timeout: float = STARTUP_TIMEOUT) -> list[str]:
        """Bring a stopped DC back (broker, then registry) with the data it had."""
        self.config.dc(dc)
        with self._locked():
            self._sync_settings(adopt=True)
            started: list[str] = []
            for kind in KINDS:
                started += self._start([(dc, kind)])
                self._wait_healthy([(dc, kind)], timeout)
            return started

    def wipe(self, dc: str) -> list[str]:
        """Total loss: stop the DC and delete its data, so `start` brings it back empty (new cluster id)."""
        self.config.dc(dc)
        with self._locked():
            self._sync_settings(adopt=False)
            stopped = self._stop([(dc, REGISTRY), (dc, BROKER)])
            for kind in KINDS:
                shutil.rmtree(self.server_dir(dc, kind), ignore_errors=True)
            return stopped

    def restart_registry(
        self,
        dc: str,
        kafkastore_bootstrap_servers: str | None = None,
        leader_eligibility: bool | None = None,
        timeout: float = STARTUP_TIMEOUT,
    ) -> DcConfig:
        """Restart one registry, optionally on another store or eligibility (the schema redirect)."""
        self.config.dc(dc)
        if kafkastore_bootstrap_servers is not None:
            check_bootstrap_servers(kafkastore_bootstrap_servers, "kafkastore")
        with self._locked():
            self._sync_settings(adopt=False)
            current = self.config.dc(dc)
            new = replace(
                current,
                registry_kafkastore=kafkastore_bootstrap_servers or current.registry_kafkastore,
                registry_leader_eligible=current.registry_leader_eligible
                if leader_eligibility is None
                else leader_eligibility,
            )
            self.config = self.config.with_dc(new)
            self._save_config()
            self._stop([(dc, REGISTRY)])
            self._start([(dc, REGISTRY)])
            self._wait_healthy([(dc, REGISTRY)], timeout)
        return new

    def status(self, timeout: float = 2.0) -> list[ProcessStatus]:
        """Every process, whether it runs and whether it answers its protocol."""
        self._sync_settings(adopt=False)
        result = []
        for dc in self.config.dcs:
            for kind in KINDS:
                pid = self.pid(dc.name, kind)
                port = dc.broker_port if kind == BROKER else dc.registry_port
                healthy, cluster_id = self._probe(dc, kind, timeout) if pid else (False, None)
                if kind == BROKER:
                    address, detail = dc.broker_address, f"cluster id {cluster_id}" if cluster_id else ""
                else:
                    eligible = "leader-eligible" if dc.registry_leader_eligible else "follower"
                    address, detail = dc.registry_url, f"store {dc.registry_kafkastore}, {eligible}"
                if pid is None and _port_open(HOST, port, timeout):
                    detail = f"port {port} is used by another process"
                result.append(
                    ProcessStatus(
                        dc=dc.name,
                        kind=kind,
                        pid=pid,
                        alive=pid is not None,
                        healthy=healthy,
                        address=address,
                        cluster_id=cluster_id,
                        detail=detail,
                        log=self.log_file(dc.name, kind),
                    )
                )
        return result

    def pid(self, dc: str, kind: str) -> int | None:
        """The pid of our running process, or None (no pid file, process gone, or pid reused)."""
        try:
            pid = int(self.pid_file(dc, kind).read_text().strip())
        except (FileNotFoundError, ValueError):
            return None
        return pid if self._is_ours(pid, dc, kind) else None

    # --- internals ------------------------------------------------------------------------------

    def command(self, dc: str, kind: str) -> list[str]:
        """The server command line; DESIGN's contract with the broker and registry modules."""
        cfg = self.config.dc(dc)
        data = str(self.server_dir(dc, kind))
        if kind == BROKER:
            args = ["--port", str(cfg.broker_port), "--data-dir", data, "--node-id", "1"]
        else:
            args = [
                "--port",
                str(cfg.registry_port),
                "--kafkastore-bootstrap-servers",
                cfg.registry_kafkastore,
                "--leader-eligibility",
                "true" if cfg.registry_leader_eligible else "false",
                "--data-dir",
                data,
            ]
        return [sys.executable, "-m", f"kafka_dr.local.{kind}", "--host", HOST, *args]

    def _is_ours(self, pid: int, dc: str, kind: str) -> bool:
        """Same module and same data dir: a live process that is this stack's server."""
        args = _cmdline(pid)
        if not args or f"kafka_dr.local.{kind}" not in args or "--data-dir" not in args:
            return False
        i = args.index("--data-dir")
        return i + 1 < len(args) and args[i + 1] == str(self.server_dir(dc, kind))

    def _saved_config(self) -> StackConfig | None:
        try:
            text = self.config_file.read_text(encoding="utf-8")
        except FileNotFoundError:
            return None
        return StackConfig.from_json(text, str(self.config_file))

    def _save_config(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        tmp = self.config_file.with_suffix(".tmp")
        tmp.write_text(self.config.to_json(), encoding="utf-8")
        tmp.replace(self.config_file)

    def _sync_settings(self, adopt: bool) -> None:
        """stack.json is the truth every CLI call shares; explicit settings replace it only when
        `adopt`ing them (up, start) and only while none of the old processes runs."""
        saved = self._saved_config()
        if saved is not None and saved != self.config:
            if not (adopt and self._explicit_config):
                self.config = saved
            elif running := [f"{dc.name} {k}" for dc in saved.dcs for k in KINDS if self.pid(dc.name, k)]:
                raise StackInputError(
                    f"the stack in {self.data_dir} runs with other settings ({self.config_file}; running: "
                    f"{', '.join(running)}); stop it with `kafka-dr local down --data-dir {self.data_dir}` first"
                )
        if adopt:
            self._save_config()
            self._explicit_config = False

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        """Serialise state-changing commands, e.g. two terminals running `up` at once."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        with open(self.data_dir / ".lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            yield

    def _start(self, procs: list[tuple[str, str]]) -> list[str]:
        started = []
        for dc, kind in procs:
            if self.pid(dc, kind) is not None:
                continue
            cfg = self.config.dc(dc)
            port = cfg.broker_port if kind == BROKER else cfg.registry_port
            if not _port_freed(port):
                raise StackError(f"cannot start {dc} {kind}: {HOST}:{port} is already used by another process")
            self.server_dir(dc, kind).mkdir(parents=True, exist_ok=True)
            cmd = self.command(dc, kind)
            with open(self.log_file(dc, kind), "ab") as log:
                now = datetime.now(UTC).isoformat(timespec="seconds")
                log.write(f"{_START_MARK}{now}: {shlex.join(cmd)}\n".encode())
                log.flush()
                proc = subprocess.Popen(
                    cmd,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    cwd=self.data_dir / dc,
                    env={**os.environ, "PYTHONUNBUFFERED": "1"},
                    start_new_session=True,  # detached: survives the CLI and its terminal's signals
                )
            self.pid_file(dc, kind).write_text(f"{proc.pid}\n")
            self._spawned[(dc, kind)] = proc
            started.append(f"{dc} {kind}")
        return started

    def _probe(self, dc: DcConfig, kind: str, timeout: float) -> tuple[bool, str | None]:
        """(answers its protocol, cluster id for brokers)."""
        if kind == REGISTRY:
            return _registry_answers(dc.registry_url, timeout), None
        return _broker_cluster_id(dc.broker_address, timeout)

    def _wait_healthy(self, procs: list[tuple[str, str]], timeout: float) -> None:
        """Poll until every process answers; a crash or the deadline is one line pointing at the log."""
        deadline = time.monotonic() + timeout
        pending = list(procs)
        while pending:
            for dc, kind in list(pending):
                self._check_running(dc, kind)
                if self._probe(self.config.dc(dc), kind, min(2.0, max(0.5, deadline - time.monotonic())))[0]:
                    pending.remove((dc, kind))
            if not pending:
                return
            if time.monotonic() >= deadline:
                dc, kind = pending[0]
                cfg = self.config.dc(dc)
                address = cfg.broker_address if kind == BROKER else cfg.registry_url
                hint = ""
                if kind == REGISTRY and not _broker_cluster_id(cfg.registry_kafkastore, 1.0)[0]:
                    hint = f" (its store {cfg.registry_kafkastore} does not answer)"
                raise StackError(
                    f"{dc} {kind} did not answer on {address} within {timeout:g} s{hint}; see {self.log_file(dc, kind)}"
                )
            time.sleep(0.2)

    def _check_running(self, dc: str, kind: str) -> None:
        """Judge a just-spawned process by its Popen: until it execs, /proc shows our command line."""
        proc = self._spawned.get((dc, kind))
        if (proc is not None and proc.poll() is None) or self.pid(dc, kind) is not None:
            return
        why = "process gone" if proc is None else f"exit code {proc.returncode}"
        log = self.log_file(dc, kind)
        raise StackError(f"{dc} {kind} exited during startup ({why}: {_last_line(log)}); see {log}")

    def _stop(self, procs: list[tuple[str, str]]) -> list[str]:
        """SIGTERM, then SIGKILL after STOP_GRACE seconds; the pid files go once the processes are gone."""
        running = {(dc, kind): pid for dc, kind in procs if (pid := self.pid(dc, kind)) is not None}
        for pid in running.values():
            _signal_group(pid, signal.SIGTERM)
        left = self._wait_gone(running)
        for pid in left.values():
            _signal_group(pid, signal.SIGKILL)
        left = self._wait_gone(left)
        if left:
            names = ", ".join(f"{dc} {kind} (pid {pid})" for (dc, kind), pid in left.items())
            raise StackError(f"could not stop {names}")
        for dc, kind in procs:
            self.pid_file(dc, kind).unlink(missing_ok=True)
            proc = self._spawned.pop((dc, kind), None)
            if proc is not None:
                proc.wait()  # our own child: reap it rather than leave a zombie
        return [f"{dc} {kind}" for dc, kind in running]

    def _wait_gone(self, procs: dict[tuple[str, str], int]) -> dict[tuple[str, str], int]:
        """Wait up to STOP_GRACE seconds; returns the processes still running."""
        deadline = time.monotonic() + STOP_GRACE
        while True:
            procs = {key: pid for key, pid in procs.items() if self._is_ours(pid, *key)}
            if not procs or time.monotonic() >= deadline:
                return procs
            time.sleep(0.1)


def _cmdline(pid: int) -> list[str] | None:
    """The argv of a live process, None if it is gone or a zombie (empty /proc cmdline)."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except (FileNotFoundError, ProcessLookupError):
        if Path("/proc/self").exists():
            return None
        # No /proc (macOS): ask ps, which loses argument boundaries but keeps the words we match.
        ps = subprocess.run(["ps", "-o", "args=", "-p", str(pid)], capture_output=True, text=True, check=False)
        return ps.stdout.split() if ps.returncode == 0 and ps.stdout.strip() else None
    except PermissionError:
        return None
    return raw.rstrip(b"\0").decode(errors="replace").split("\0") if raw else None


def _signal_group(pid: int, sig: signal.Signals) -> None:
    """Servers run in their own session (pgid == pid), so the whole group gets the signal."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, sig)


def _port_open(host: str, port: int, timeout: float) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def _port_freed(port: int, timeout: float = 3.0) -> bool:
    """Wait for a port to close: a killed process's sockets outlive its /proc cmdline for a moment."""
    deadline = time.monotonic() + timeout
    while _port_open(HOST, port, 1.0):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.1)
    return True


def _broker_cluster_id(bootstrap_servers: str, timeout: float) -> tuple[bool, str | None]:
    """A Metadata round trip, not just a TCP accept, proves the broker serves Kafka."""
    host, _, port = bootstrap_servers.split(",")[0].rpartition(":")
    if not _port_open(host.strip("[]"), int(port), timeout):
        return False, None
    # log_level 0: a broker still starting up is expected here, not worth librdkafka's stderr noise.
    admin = AdminClient({"bootstrap.servers": bootstrap_servers, "log_level": 0})
    try:
        metadata = admin.list_topics(timeout=timeout)
    except KafkaException:
        return False, None
    return True, metadata.cluster_id


def _registry_answers(url: str, timeout: float) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/subjects", timeout=timeout) as response:
            return response.status == 200
    except (urllib.error.URLError, OSError, ValueError):
        return False


def _last_line(log: Path) -> str:
    """Last line the latest start wrote, usually the exception that killed the server."""
    try:
        _, mark, output = log.read_text(errors="replace").rpartition(_START_MARK)
    except FileNotFoundError:
        return "no log written"
    lines = [line.strip() for line in output.splitlines()[1 if mark else 0 :] if line.strip()]
    return lines[-1] if lines else "no output"
