"""The local two-datacenter stack: one broker and one schema registry process per DC.

The broker is Apache Kafka (`local.apache`: one KRaft node per DC, from the jars Maven fetched), or with
`up --kafka embedded` the project's own wire-compatible Python broker; the registry is the project's own (Confluent's
is not published where these machines can fetch it). All run as detached background processes. They must
outlive the CLI that started them, so their identity lives on disk: DATA_DIR/stack.json holds the
settings of `up` (later commands reuse them, see `local.config`), DATA_DIR/<dc>/<kind>.pid each
process's pid and start time (`kafka_dr.processes`), so a recycled pid is never mistaken for ours.

With `up --security` the brokers' ports speak SASL and/or TLS (`broker.security`): the stack generates the
certificate into DATA_DIR/tls (one CA for both DCs, kept across `wipe`), and its own clients (readiness probes,
the registries' store connections) authenticate as the first user of the users file or $KDR_BROKER_USERS.
With `up --registry-auth` both registries require HTTP Basic credentials of those same users (`registry.auth`); the
stack's probes of its registries send the first user's.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from contextlib import AbstractContextManager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from kafka_dr import processes
from kafka_dr.paths import LOCAL_DATA_DIR, state_dir

from . import apache
from .broker.security import PLAIN, SASL_MECHANISMS, USERS_ENV, SecurityError, TlsFiles, ensure_certificates, load_users
from .config import APACHE, HOST, DcConfig, StackConfig, StackInputError, check_bootstrap_servers
from .ports import free_port
from .registry import auth as registry_auth

BROKER = "broker"
REGISTRY = "registry"
KINDS = (BROKER, REGISTRY)
# A group's first member gets its assignment at once instead of after Kafka's 3 s wait for more members: a local
# stack's consumers come one at a time (Confluent's single-broker compose files set the same).
BROKER_CONFIGS = ("--config", "group.initial.rebalance.delay.ms=0")
META_PROPERTIES = apache.META_PROPERTIES  # the broker's cluster id, as Kafka keeps it (the embedded broker too)
# A JVM node answers in about 5 s on an idle machine and took 30 s on the test suite's loaded two cores: the limit
# only bounds how long a start that failed takes to say so.
STARTUP_TIMEOUT = 90.0
STOP_GRACE = 5.0

_START_MARK = "--- kafka-dr starts at "


class StackError(RuntimeError):
    """The stack failed to do what was asked (a process did not start, stop or answer)."""


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

    def __init__(self, data_dir: str | Path = LOCAL_DATA_DIR, config: StackConfig | None = None) -> None:
        # Absolute, because children get this path on their command line and we match it later.
        self.data_dir = Path(data_dir).absolute()
        self._explicit_config = config is not None
        if config is not None:
            config.validate("stack config")
        self.config = config or self._saved_config() or StackConfig.default()
        self._spawned: dict[tuple[str, str], subprocess.Popen[bytes]] = {}
        self._spawn_times: dict[tuple[str, str], float] = {}
        self.startup_seconds: dict[str, float] = {}  # "dc1 broker" -> seconds from its spawn until it answered

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

    def broker_properties(self, dc: str) -> Path:
        """An Apache Kafka node's server.properties (beside its log dir, not in it)."""
        return self.data_dir / dc / "server.properties"

    @property
    def apache(self) -> bool:
        return self.config.kafka == APACHE

    def broker_version(self) -> str:
        """What the brokers are, as `status` names them."""
        return apache.version() if self.apache else "embedded broker"

    @property
    def tls_dir(self) -> Path:
        """Both brokers' certificate and its CA (ssl.ca.location): one trust anchor for the whole stack."""
        return self.data_dir / "tls"

    @property
    def ca_file(self) -> Path:
        return self.tls_dir / "ca.pem"

    # --- security -------------------------------------------------------------------------------

    def _users(self) -> dict[str, str]:
        """The users (SASL, registry auth), from the users file or $KDR_BROKER_USERS; a StackInputError naming the
        source if unusable, or, with registry auth, if Basic authentication cannot carry a user name."""
        security = self.config.security
        users_file = security.users_file
        if not security.sasl and users_file is None and not os.environ.get(USERS_ENV, "").strip():
            raise StackInputError(
                f'--registry-auth: no users: give --users-file or set {USERS_ENV} to JSON {{"user": "password"}}'
            )
        try:
            users = load_users(Path(users_file) if users_file else None)
            if security.registry_auth:
                registry_auth.check_users(users, users_file or f"${USERS_ENV}")
        except SecurityError as exc:
            raise StackInputError(f"{security.protocol if security.sasl else '--registry-auth'}: {exc}") from None
        except registry_auth.AuthConfigError as exc:
            raise StackInputError(f"--registry-auth: {exc}") from None
        return users

    def client_user(self) -> str | None:
        """The user the stack's own clients (probes, registries) authenticate as: the first one listed."""
        return next(iter(self._users())) if self.config.security.sasl else None

    def registry_credentials(self) -> tuple[str, str] | None:
        """(user, password) the stack's probes send to its registries (the first user), None without registry auth."""
        return next(iter(self._users().items())) if self.config.security.registry_auth else None

    def registry_client_settings(self, secrets: bool = True) -> dict[str, str]:
        """confluent-kafka SchemaRegistryClient settings that pass the registries' Basic authentication (none when
        it is off); without `secrets`, the password is a placeholder (what `status` prints)."""
        credentials = self.registry_credentials()
        if credentials is None:
            return {}
        user, password = credentials
        return {"basic.auth.user.info": f"{user}:{password if secrets else f'<password of {user}>'}"}

    def registry_authorization(self) -> str | None:
        """The Authorization header of the stack's own registry requests, None without registry auth."""
        credentials = self.registry_credentials()
        return None if credentials is None else registry_auth.authorization_header(*credentials)

    def client_settings(self, secrets: bool = True, mechanism: str | None = None) -> dict[str, Any]:
        """librdkafka security settings that reach this stack's brokers (over `mechanism`, by default the stack's);
        without `secrets`, the password is a placeholder (what `status` prints for a user to copy)."""
        security = self.config.security
        settings: dict[str, Any] = {}
        if security.protocol != "PLAINTEXT":
            settings["security.protocol"] = security.protocol
        if security.sasl:
            user = self.client_user()
            assert user is not None
            settings["sasl.mechanism"] = mechanism or security.sasl_mechanism
            settings["sasl.username"] = user
            settings["sasl.password"] = self._users()[user] if secrets else f"<password of {user}>"
        if security.tls:
            settings["ssl.ca.location"] = str(self.ca_file)
        return settings

    def _prepare_security(self) -> None:
        """Before any process starts: the credentials load and the certificate exists (generated once here, so the
        two brokers sharing it do not race and the probes find the CA at once)."""
        if self.config.security.needs_users:
            self._users()
        if self.config.security.tls:
            try:
                ensure_certificates(self.tls_dir, [HOST, "localhost"])
            except (SecurityError, OSError) as exc:
                raise StackError(f"cannot make the TLS certificate in {self.tls_dir}: {exc}") from None

    # --- commands -------------------------------------------------------------------------------

    def up(self, timeout: float = STARTUP_TIMEOUT) -> list[str]:
        """Start whatever is not running (brokers first) and wait until all answer; returns what started."""
        with self._locked():
            self._sync_settings(adopt=True)
            self._prepare_security()
            record_data_dir(self.data_dir, [dc.registry_url for dc in self.config.dcs])
            started: list[str] = []
            for kind in KINDS:
                procs = [(dc.name, kind) for dc in self.config.dcs]
                started += self._start(procs)
                self._wait_healthy(procs, timeout)
            self._wait_for_leader(timeout)
            return started

    def _wait_for_leader(self, timeout: float) -> None:
        """Until every registry knows the leader, when one may lead: a registry serves reads as it starts, but takes
        a write only once its election (its own heartbeat read back, a second or more) names a leader, so a write
        right after `up` failed with "Leader not known" on a loaded machine."""
        if not any(dc.registry_leader_eligible for dc in self.config.dcs):
            return
        deadline = time.monotonic() + timeout
        authorization = self.registry_authorization()
        for dc in self.config.dcs:
            while _registry_leader(dc.registry_url, 1.0, authorization) is None:
                if time.monotonic() >= deadline:
                    log_file = self.log_file(dc.name, REGISTRY)
                    raise StackError(f"{dc.name} registry names no leader within {timeout:g} s; see {log_file}")
                time.sleep(0.1)

    def down(self) -> list[str]:
        """Stop every process (registries before brokers, clients before servers); data is kept."""
        with self._locked():
            self._sync_settings(adopt=False)
            return self._stop([(dc.name, kind) for kind in reversed(KINDS) for dc in self.config.dcs])

    def stop(self, dc: str) -> list[str]:
        """A disaster: SIGKILL the DC's registry and broker (no shutdown hook runs, as when a DC loses power); returns
        what was running."""
        self.config.dc(dc)
        with self._locked():
            self._sync_settings(adopt=False)
            return self._stop([(dc, REGISTRY), (dc, BROKER)], kill=True)

    def start(self, dc: str, timeout: float = STARTUP_TIMEOUT) -> list[str]:
        """Bring a stopped DC back (broker, then registry) with the data it had."""
        self.config.dc(dc)
        with self._locked():
            self._sync_settings(adopt=True)
            self._prepare_security()
            started: list[str] = []
            for kind in KINDS:
                started += self._start([(dc, kind)])
                self._wait_healthy([(dc, kind)], timeout)
            return started

    def wipe(self, dc: str, keep_cluster_id: bool = False) -> list[str]:
        """Total loss: stop the DC and delete its data, so `start` brings it back empty with a new cluster id, or
        with its old one (`keep_cluster_id`: a cluster rebuilt on empty disks and formatted with its old id, as
        `kafka-storage format --cluster-id` does)."""
        self.config.dc(dc)
        with self._locked():
            self._sync_settings(adopt=False)
            stopped = self._stop([(dc, REGISTRY), (dc, BROKER)], kill=True)
            meta = self.server_dir(dc, BROKER) / META_PROPERTIES
            kept = meta.read_bytes() if keep_cluster_id and meta.exists() else None
            for kind in KINDS:
                shutil.rmtree(self.server_dir(dc, kind), ignore_errors=True)
            if kept is not None:
                meta.parent.mkdir(parents=True)
                meta.write_bytes(kept)
            return stopped

    def restart_registry(
        self,
        dc: str,
        kafkastore_bootstrap_servers: str | None = None,
        leader_eligibility: bool | None = None,
        timeout: float = STARTUP_TIMEOUT,
    ) -> DcConfig:
        """Restart one registry, optionally on another store or eligibility (the schema redirect).

        stack.json takes the new settings only once the registry answers with them: after a refused
        restart a later `up` must not start the registry the refused way, so the old settings stay
        saved and the registry is brought back with them (best effort; the error says how it went).
        """
        self.config.dc(dc)
        if kafkastore_bootstrap_servers is not None:
            check_bootstrap_servers(kafkastore_bootstrap_servers, "kafkastore")
        with self._locked():
            self._sync_settings(adopt=False)
            if self.config.security.needs_users:
                self._users()  # unusable credentials: one line, before the running registry is touched
            old = self.config
            current = old.dc(dc)
            new = replace(
                current,
                registry_kafkastore=kafkastore_bootstrap_servers or current.registry_kafkastore,
                registry_leader_eligible=current.registry_leader_eligible
                if leader_eligibility is None
                else leader_eligibility,
            )
            self.config = old.with_dc(new)
            was_running = self.pid(dc, REGISTRY) is not None
            try:
                self._restart_registry_process(dc, timeout)
            except BaseException as exc:
                self.config = old
                outcome = self._bring_registry_back(dc, was_running, max(timeout, STARTUP_TIMEOUT))
                if not isinstance(exc, Exception):  # Ctrl-C: rolled back, still an interrupt
                    raise
                raise StackError(f"{' '.join(str(exc).split())}; {outcome}") from exc
            self._save_config()
        return new

    def _restart_registry_process(self, dc: str, timeout: float, start: bool = True) -> None:
        self._stop([(dc, REGISTRY)])
        if start:
            self._start([(dc, REGISTRY)])
            self._wait_healthy([(dc, REGISTRY)], timeout)

    def _bring_registry_back(self, dc: str, was_running: bool, timeout: float) -> str:
        """After a refused restart, put the registry back as it was, on the saved settings; says how it went."""
        cfg = self.config.dc(dc)
        eligible = "leader-eligible" if cfg.registry_leader_eligible else "follower"
        settings = f"previous settings (store {cfg.registry_kafkastore}, {eligible})"
        try:
            self._restart_registry_process(dc, timeout, start=was_running)
        except Exception as exc:  # the caller raises the first error, and this one with it
            return f"{self.config_file} keeps the {settings} but the registry did not come back: {exc}"
        return f"{dc} registry {'runs again' if was_running else 'is stopped, as it was,'} with its {settings}"

    def status(self, timeout: float = 2.0) -> list[ProcessStatus]:
        """Every process, whether it runs and whether it answers its protocol."""
        self._sync_settings(adopt=False)
        settings = self.client_settings()
        authorization = self.registry_authorization()
        protocol = self.config.security.protocol
        result = []
        for dc in self.config.dcs:
            for kind in KINDS:
                pid = self.pid(dc.name, kind)
                port = dc.broker_port if kind == BROKER else dc.registry_port
                healthy, cluster_id = self._probe(dc, kind, timeout, settings, authorization) if pid else (False, None)
                if kind == BROKER:
                    address = dc.broker_address
                    detail = f"{self.broker_version()}, cluster id {cluster_id}, {protocol}"
                    if not cluster_id:
                        detail = f"{self.broker_version()}, {protocol}"
                else:
                    eligible = "leader-eligible" if dc.registry_leader_eligible else "follower"
                    address, detail = dc.registry_url, f"store {dc.registry_kafkastore}, {eligible}"
                    if settings.get("sasl.username"):
                        detail += f", as {settings['sasl.username']}"
                    if authorization is not None:
                        detail += ", basic auth"
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
        running = self._running(dc, kind)
        return None if running is None else running[0]

    # --- internals ------------------------------------------------------------------------------

    def command(self, dc: str, kind: str) -> list[str]:
        """The server command line; DESIGN's contract with the broker and registry modules."""
        cfg = self.config.dc(dc)
        data = str(self.server_dir(dc, kind))
        if kind == BROKER and self.apache:
            return apache.server_command(self.broker_properties(dc), self.data_dir / "log4j2.yaml")
        if kind == BROKER:
            args = ["--port", str(cfg.broker_port), "--data-dir", data, "--node-id", "1", *BROKER_CONFIGS]
            args += self._broker_security_args()
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
                *self._registry_security_args(),
            ]
        return [sys.executable, "-m", f"kafka_dr_dev.local.{kind}", "--host", HOST, *args]

    def _broker_security_args(self) -> list[str]:
        """Nothing for PLAINTEXT (the command stays what it always was); never a password (a command line is
        public), only where the users are."""
        security = self.config.security
        if security.protocol == "PLAINTEXT":
            return []
        args = ["--security-protocol", security.protocol]
        if security.sasl:
            args += ["--sasl-mechanisms", ",".join(SASL_MECHANISMS)]
            if security.users_file:
                args += ["--users-file", security.users_file]
        if security.tls:
            args += ["--tls-dir", str(self.tls_dir)]
        return args

    def _registry_security_args(self) -> list[str]:
        """The registry reads its user's password from the same users file or $KDR_BROKER_USERS (for its REST users,
        `_registry_env` passes the latter on as $KDR_REGISTRY_USERS)."""
        security = self.config.security
        args: list[str] = []
        if security.registry_auth:
            args += ["--authentication-method", "BASIC"]
            if security.users_file:
                args += ["--basic-auth-users-file", security.users_file]
        if security.protocol == "PLAINTEXT":
            return args
        args += ["--kafkastore-security-protocol", security.protocol]
        if security.sasl:
            user = self.client_user()
            assert user is not None
            args += ["--kafkastore-sasl-mechanism", security.sasl_mechanism, "--kafkastore-sasl-username", user]
            if security.users_file:
                args += ["--kafkastore-users-file", security.users_file]
        if security.tls:
            args += ["--kafkastore-ssl-ca-location", str(self.ca_file)]
        return args

    def _running(self, dc: str, kind: str) -> tuple[int, int] | None:
        """(pid, start ticks) of this stack's live server, from its pid file; None when none runs.

        The pid file holds "<pid> <ticks>". One with a pid alone (written by an older kafka-dr, whose servers
        may still run) names our server only if that process's command line runs the module on this data dir.
        """
        try:
            pid, *recorded = map(int, self.pid_file(dc, kind).read_text().split())
        except (FileNotFoundError, ValueError):
            return None
        if recorded:
            ticks = recorded[0]
        elif self._runs_server(pid, dc, kind):
            ticks = processes.start_ticks(pid)
        else:
            return None
        return (pid, ticks) if processes.is_alive(pid, ticks) else None

    def _runs_server(self, pid: int, dc: str, kind: str) -> bool:
        """Same module and same data dir (an Apache Kafka node: its server.properties): the process `pid` is this
        stack's server."""
        args = processes.cmdline(pid)
        if kind == BROKER and self.apache:
            return apache.SERVER_CLASS in args and str(self.broker_properties(dc)) in args
        if f"kafka_dr_dev.local.{kind}" not in args or "--data-dir" not in args:
            return False
        i = args.index("--data-dir")
        return i + 1 < len(args) and args[i + 1] == str(self.server_dir(dc, kind))

    def _saved_config(self) -> StackConfig | None:
        return StackConfig.load(self.config_file)

    def _save_config(self) -> None:
        self.config.save(self.config_file)

    def _sync_settings(self, adopt: bool) -> None:
        """stack.json is the truth every CLI call shares; explicit settings replace it only when
        `adopt`ing them (up, start) and only while none of the old processes runs, and another kind of broker only
        on empty broker data (neither kind reads the other's)."""
        saved = self._saved_config()
        if saved is not None and saved != self.config:
            if not (adopt and self._explicit_config):
                self.config = saved
            elif running := [f"{dc.name} {k}" for dc in saved.dcs for k in KINDS if self.pid(dc.name, k)]:
                raise StackInputError(
                    f"the stack in {self.data_dir} runs with other settings ({self.config_file}; running: "
                    f"{', '.join(running)}); stop it with `kafka-dr-dev local down --data-dir {self.data_dir}` first"
                )
            elif saved.kafka != self.config.kafka and (
                kept := [dc.name for dc in saved.dcs if any(self.server_dir(dc.name, BROKER).glob("*"))]
            ):
                raise StackInputError(
                    f"the stack in {self.data_dir} holds {saved.kafka} brokers' data ({', '.join(kept)}), which "
                    f"{self.config.kafka} brokers cannot read: `kafka-dr-dev local wipe DC` each, or use another "
                    "--data-dir"
                )
        if adopt:
            if self.config.security.needs_users:
                self._users()  # unusable credentials: refused before the settings are saved or anything starts
            self._save_config()
            self._explicit_config = False

    def _locked(self) -> AbstractContextManager[None]:
        """Serialise state-changing commands, e.g. two terminals running `up` at once (DATA_DIR/stack.lock,
        beside the settings it guards with the pid files)."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        return processes.locked(self.config_file)

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
            if kind == BROKER and self.apache:
                self._prepare_apache(dc)
            cmd, log = self.command(dc, kind), self.log_file(dc, kind)
            env = {"PYTHONUNBUFFERED": "1", **(self._registry_env() if kind == REGISTRY else {})}
            proc = processes.spawn(cmd, log, _START_MARK, env, cwd=self.data_dir / dc)
            self._spawn_times[(dc, kind)] = time.monotonic()
            self._spawned[(dc, kind)] = proc
            ticks = processes.start_ticks(proc.pid)
            if ticks is None:  # already ended: no server to record; _check_running reports its exit code
                self.pid_file(dc, kind).unlink(missing_ok=True)
            else:
                processes.write_atomic(self.pid_file(dc, kind), f"{proc.pid} {ticks}\n")
            started.append(f"{dc} {kind}")
        return started

    def _prepare_apache(self, dc: str) -> None:
        """An Apache Kafka node's files before each start: server.properties from the stack's settings (a controller
        port free now), the PEM keystore with TLS, the log configuration, and the log dir formatted once."""
        cfg = self.config.dc(dc)
        security = self.config.security
        tls = TlsFiles(self.tls_dir)
        node = apache.KafkaNode(
            log_dir=self.server_dir(dc, BROKER),
            host=HOST,
            port=cfg.broker_port,
            controller_port=free_port(HOST),  # a static voter: the configuration names it, so it may move
            protocol=security.protocol,
            users=self._users() if security.sasl else {},
            tls_pem=apache.write_keystore(tls.cert, tls.key, self.data_dir / dc / "keystore.pem")
            if security.tls
            else None,
            ca_file=tls.ca if security.tls else None,
        )
        try:
            apache.write_log_config(self.data_dir / "log4j2.yaml")
            apache.ensure_formatted(node.write(self.broker_properties(dc)), node.log_dir)
        except RuntimeError as exc:  # KafkaJarsMissing among them
            raise StackError(f"cannot start {dc} broker: {exc}") from None

    def _registry_env(self) -> dict[str, str]:
        """Registry auth with users from $KDR_BROKER_USERS: the registry's REST users are the same, handed over in its
        environment (a command line is public)."""
        security = self.config.security
        if not security.registry_auth or security.users_file:
            return {}
        return {registry_auth.USERS_ENV: json.dumps(self._users())}

    def _probe(
        self,
        dc: DcConfig,
        kind: str,
        timeout: float,
        settings: dict[str, Any] | None = None,
        authorization: str | None = None,
    ) -> tuple[bool, str | None]:
        """(answers its protocol, cluster id for brokers); `authorization` is what the registries need, if any."""
        if kind == REGISTRY:
            return _registry_status(dc.registry_url, timeout, authorization) == 200, None
        return _broker_cluster_id(dc.broker_address, timeout, self.client_settings() if settings is None else settings)

    def _wait_healthy(self, procs: list[tuple[str, str]], timeout: float) -> None:
        """Poll until every process answers; a crash or the deadline is one line pointing at the log."""
        deadline = time.monotonic() + timeout
        pending = list(procs)
        # An Apache Kafka node knows no SCRAM user until told (`apache.ensure_scram_users`): it is probed over PLAIN.
        scram_later = self.apache and self.config.security.sasl
        settings = self.client_settings(mechanism=PLAIN if scram_later else None)
        authorization = self.registry_authorization() if any(kind == REGISTRY for _, kind in procs) else None
        while pending:
            for dc, kind in list(pending):
                self._check_running(dc, kind)
                probe_timeout = min(2.0, max(0.5, deadline - time.monotonic()))
                if self._probe(self.config.dc(dc), kind, probe_timeout, settings, authorization)[0]:
                    if kind == BROKER and scram_later:
                        bootstrap = {"bootstrap.servers": self.config.dc(dc).broker_address, **settings}
                        try:
                            apache.ensure_scram_users(bootstrap, self._users())
                        except RuntimeError as exc:
                            raise StackError(f"{dc} broker: {exc}; see {self.log_file(dc, kind)}") from None
                    pending.remove((dc, kind))
                    self._answered(dc, kind)
            if not pending:
                return
            if time.monotonic() >= deadline:
                dc, kind = pending[0]
                cfg = self.config.dc(dc)
                address = cfg.broker_address if kind == BROKER else cfg.registry_url
                hint = ""
                if kind == REGISTRY and _registry_status(cfg.registry_url, 1.0, authorization) == 401:
                    user = (self.registry_credentials() or ("",))[0]
                    whose = f"the credentials of {user}" if authorization else "a request without credentials"
                    hint = f" (it refused {whose}: HTTP 401)"
                elif kind == REGISTRY and not _broker_cluster_id(cfg.registry_kafkastore, 1.0, settings)[0]:
                    hint = f" (its store {cfg.registry_kafkastore} does not answer)"
                raise StackError(
                    f"{dc} {kind} did not answer on {address} within {timeout:g} s{hint}; see {self.log_file(dc, kind)}"
                )
            time.sleep(0.1)  # a restarted registry is waited for by the schema redirect

    def _answered(self, dc: str, kind: str) -> None:
        """Note how long a process this stack spawned took to answer (`startup_seconds`)."""
        started = self._spawn_times.pop((dc, kind), None)
        if started is not None:
            self.startup_seconds[f"{dc} {kind}"] = time.monotonic() - started

    def _check_running(self, dc: str, kind: str) -> None:
        """A server that ended during startup is one line: its exit code (known to the Popen of the process
        that spawned it) and the last line of its log, usually the exception that killed it."""
        proc = self._spawned.get((dc, kind))
        if (proc is not None and proc.poll() is None) or self.pid(dc, kind) is not None:
            return
        why = "process gone" if proc is None else f"exit code {proc.returncode}"
        log = self.log_file(dc, kind)
        output = processes.latest_run(log, _START_MARK)
        last = "no log written" if output is None else output[-1] if output else "no output"
        raise StackError(f"{dc} {kind} exited during startup ({why}: {last}); see {log}")

    def _stop(self, procs: list[tuple[str, str]], kill: bool = False) -> list[str]:
        """SIGTERM, then SIGKILL after STOP_GRACE seconds (with `kill`, SIGKILL at once); the pid files go once the
        processes are gone.

        Servers run in their own session (pgid == pid), so the whole group gets each signal."""
        running = {(dc, kind): found for dc, kind in procs if (found := self._running(dc, kind)) is not None}
        end = processes.kill_groups if kill else processes.end_groups
        left = end(dict(running.values()), STOP_GRACE)
        if left:
            names = ", ".join(f"{dc} {kind} (pid {pid})" for (dc, kind), (pid, _) in running.items() if pid in left)
            raise StackError(f"could not stop {names}")
        for dc, kind in procs:
            self.pid_file(dc, kind).unlink(missing_ok=True)
            proc = self._spawned.pop((dc, kind), None)
            if proc is not None:
                proc.wait()  # our own child: reap it rather than leave a zombie
        return [f"{dc} {kind}" for dc, kind in running]


def record_data_dir(data_dir: Path, registry_urls: list[str]) -> None:
    """Which stack serves each registry URL, for commands started elsewhere: the local topology's schema redirect
    restart (`kafka-dr-dev local restart-registry --registry-url`) runs in an Airflow task whose working directory is
    not the terminal's (STATE_DIR/local-stacks.json)."""
    path = state_dir() / "local-stacks.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    with processes.locked(path):
        try:
            known = json.loads(path.read_text())
        except (FileNotFoundError, ValueError):
            known = {}
        known.update({url: str(data_dir.absolute()) for url in registry_urls})
        processes.write_json(path, known)


def recorded_data_dir(registry_url: str) -> Path:
    """The data dir of the stack last brought up with a registry at `registry_url`, else the default one."""
    try:
        return Path(json.loads((state_dir() / "local-stacks.json").read_text())[registry_url])
    except (FileNotFoundError, ValueError, KeyError, TypeError):
        return LOCAL_DATA_DIR.absolute()


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


def _broker_cluster_id(
    bootstrap_servers: str, timeout: float, settings: dict[str, Any] | None = None
) -> tuple[bool, str | None]:
    """A Metadata round trip, not just a TCP accept, proves the broker serves Kafka (and, secured, that the
    stack's credentials and CA are accepted)."""
    host, _, port = bootstrap_servers.split(",")[0].rpartition(":")
    if not _port_open(host.strip("[]"), int(port), timeout):
        return False, None
    # log_level 0: a broker still starting up is expected here, not worth librdkafka's stderr noise.
    try:
        admin = AdminClient({"bootstrap.servers": bootstrap_servers, "log_level": 0, **(settings or {})})
        metadata = admin.list_topics(timeout=timeout)
    except KafkaException:
        return False, None
    return True, metadata.cluster_id


def _registry_get(url: str, timeout: float, authorization: str | None) -> tuple[int | None, bytes]:
    """GET `url` of a registry: (HTTP status, body), (None, b"") when nothing answers HTTP."""
    headers = {"Authorization": authorization} if authorization else {}
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=timeout) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as exc:
        exc.close()
        return exc.code, b""
    except (urllib.error.URLError, OSError, ValueError):
        return None, b""


def _registry_leader(url: str, timeout: float, authorization: str | None) -> str | None:
    """The leader a registry of the local stack names (GET /kdr/leader), None while it names none or does not answer."""
    status, body = _registry_get(f"{url}/kdr/leader", timeout, authorization)
    try:
        return json.loads(body).get("leader") if status == 200 else None
    except ValueError:
        return None


def _registry_status(url: str, timeout: float, authorization: str | None = None) -> int | None:
    """The HTTP status of GET /subjects (200: the registry serves its store; 401: it refused `authorization`), None
    when nothing answers HTTP."""
    return _registry_get(f"{url}/subjects", timeout, authorization)[0]
