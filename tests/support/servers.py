"""Brokers and the embedded schema registry as single processes the tests start, stop, kill and restart.

`BrokerProcess` is a one-broker cluster on a free port: `ApacheBroker`, one Apache Kafka KRaft node (the jars `make
venv` fetched, `kafka_dr_dev.local.apache`), which every test of the product runs on; `EmbeddedBroker` (`python -m
kafka_dr_dev.local.broker`) for the tests of the embedded broker itself; `SecuredBrokerProcess` an embedded one whose
port speaks SASL and/or TLS; `RegistryProcess` is a schema registry (`python -m kafka_dr_dev.local.registry`)
over a broker's `_schemas` store (`BasicAuthRegistryProcess` one requiring HTTP Basic credentials). Tests that
need the whole two-DC stack as `kafka-dr-dev local` runs it use support.stack instead.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from confluent_kafka.schema_registry import SchemaRegistryClient

from kafka_dr.paths import PROJECT_ROOT
from kafka_dr_dev.local import apache
from kafka_dr_dev.local.config import APACHE, EMBEDDED
from kafka_dr_dev.local.stack import STARTUP_TIMEOUT as START_TIMEOUT  # the stack's reason holds for these nodes

from .kafka import ClusterEndpoint
from .ports import free_port

FAST_GROUPS = {"group.initial.rebalance.delay.ms": "0"}  # broker configs for tests whose consumers join alone


class ServerProcess:
    """A server subprocess with its own log file; `ready()` says when it serves."""

    def __init__(self, name: str, log_dir: Path) -> None:
        self.name = name
        self.log_path = log_dir / f"{name}.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0

    def command(self) -> list[str]:
        raise NotImplementedError

    def ready(self) -> bool:
        raise NotImplementedError

    def start(self, wait: bool = True) -> ServerProcess:
        assert not self.running(), f"{self.name} is already running"
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        command = self.command()
        with open(self.log_path, "ab") as log:
            log.write(f"\n===== start #{self.starts + 1}: {' '.join(command)}\n".encode())
            log.flush()
            self.proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, cwd=PROJECT_ROOT)
        self.starts += 1
        if wait:
            self.wait_until(self.ready, "to serve")
        return self

    def wait_until(self, probe: Callable[[], bool], what: str, timeout: float = START_TIMEOUT) -> None:
        """Poll `probe` until it is true; fail with the log's tail if the process exits or time runs out."""
        deadline = time.monotonic() + timeout
        while True:
            self.check_alive()
            try:
                if probe():
                    return
            except Exception:  # noqa: BLE001 - any failure of the probe means "not yet"
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"{self.name}: not {what} after {timeout:.0f}s:\n{self.log_tail()}")
            time.sleep(0.05)

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def check_alive(self) -> bool:
        if self.proc is not None and self.proc.poll() is not None:
            raise RuntimeError(f"{self.name} exited with {self.proc.returncode}:\n{self.log_tail()}")
        return True

    def stop(self, timeout: float = 20.0) -> None:
        """SIGTERM and wait; a server that does not exit in `timeout` is killed and the test told so."""
        if not self.running():
            return
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise RuntimeError(f"{self.name} did not exit within {timeout}s of SIGTERM:\n{self.log_tail()}") from None

    def kill(self) -> None:
        """SIGKILL: a crash, nothing cleans up."""
        if self.running():
            assert self.proc is not None
            self.proc.kill()
            self.proc.wait(10)

    def restart(self) -> ServerProcess:
        self.stop()
        return self.start()

    def log_tail(self, lines: int = 60) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"


class BrokerProcess(ServerProcess, ClusterEndpoint):
    """A single-broker cluster with its own data dir (and so its own cluster id); a kind of broker says how it runs."""

    def __init__(
        self,
        name: str,
        data_dir: Path,
        port: int | None = None,
        node_id: int = 1,
        configs: dict[str, str] | None = None,
        log_dir: Path | None = None,
    ) -> None:
        super().__init__(name, log_dir or data_dir.parent)
        self.data_dir = data_dir
        self.port = port or free_port()
        self.node_id = node_id
        self.configs = dict(configs or {})

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def cluster_id_on_disk(self) -> str:
        cluster_id = apache.cluster_id_of(self.data_dir)  # both kinds keep it in meta.properties, as Kafka does
        assert cluster_id, f"{self.data_dir}/meta.properties has no cluster.id"
        return cluster_id

    def ready(self) -> bool:
        return api_versions_ok("127.0.0.1", self.port)

    def start(self, wait: bool = True) -> BrokerProcess:
        super().start(wait)
        return self


class EmbeddedBroker(BrokerProcess):
    """kafka-dr's embedded Python broker (`python -m kafka_dr_dev.local.broker`)."""

    def command(self) -> list[str]:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        options = f"--host 127.0.0.1 --port {self.port} --node-id {self.node_id}".split()
        command = [sys.executable, "-m", "kafka_dr_dev.local.broker", *options, "--data-dir", str(self.data_dir)]
        for key, value in self.configs.items():
            command += ["--config", f"{key}={value}"]
        return command


class ApacheBroker(BrokerProcess):
    """One Apache Kafka node (broker and controller in one JVM), as `kafka-dr-dev local up` runs it: its
    server.properties beside the data dir, the data dir formatted at the first start, a controller port free at each
    start."""

    def command(self) -> list[str]:
        node = apache.KafkaNode(
            log_dir=self.data_dir,
            host="127.0.0.1",
            port=self.port,
            controller_port=free_port(),
            configs=self.configs,
        )
        properties = node.write(self.data_dir.with_name(f"{self.data_dir.name}.properties"))
        apache.ensure_formatted(properties, self.data_dir)
        log_config = apache.write_log_config(self.data_dir.with_name(f"{self.data_dir.name}-log4j2.yaml"))
        return apache.server_command(properties, log_config)


class SecuredBrokerProcess(EmbeddedBroker):
    """A broker started with `--security-protocol` (SASL_PLAINTEXT, SSL or SASL_SSL): SASL users from `users_file`,
    the certificate generated into DATA_DIR/tls, whose CA the clients trust (`ca_file`)."""

    def __init__(
        self,
        name: str,
        data_dir: Path,
        protocol: str,
        users_file: Path | None = None,
        mechanisms: str = "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        log_level: str = "INFO",
        log_dir: Path | None = None,
    ) -> None:
        super().__init__(name, data_dir, log_dir=log_dir)
        self.protocol, self.users_file, self.mechanisms, self.log_level = protocol, users_file, mechanisms, log_level

    @property
    def tls(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    @property
    def ca_file(self) -> Path:
        return self.data_dir / "tls" / "ca.pem"

    def command(self) -> list[str]:
        command = [*super().command(), "--security-protocol", self.protocol, "--log-level", self.log_level]
        if self.protocol in ("SASL_PLAINTEXT", "SASL_SSL"):
            command += ["--sasl-mechanisms", self.mechanisms]
        if self.users_file is not None:
            command += ["--users-file", str(self.users_file)]
        return command

    def ready(self) -> bool:
        return api_versions_ok("127.0.0.1", self.port, self.ca_file if self.tls else None)

    def start(self, wait: bool = True) -> SecuredBrokerProcess:
        super().start(wait)
        return self


class RegistryProcess(ServerProcess):
    """One embedded schema registry over the `_schemas` topic of `kafkastore` (a bootstrap address)."""

    def __init__(self, name: str, log_dir: Path, kafkastore: str, eligible: bool, port: int | None = None) -> None:
        super().__init__(name, log_dir)
        self.data_dir = log_dir / name
        self.port = port or free_port()
        self.configure(kafkastore, eligible)

    def configure(self, kafkastore: str, eligible: bool) -> None:
        """The registry's settings; they take effect at the next start, as for a real one."""
        self.kafkastore, self.eligible = kafkastore, eligible

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def command(self) -> list[str]:
        options = (
            f"--host 127.0.0.1 --port {self.port} --kafkastore-bootstrap-servers {self.kafkastore} "
            f"--leader-eligibility {str(self.eligible).lower()}"
        ).split()
        return [sys.executable, "-m", "kafka_dr_dev.local.registry", *options, "--data-dir", str(self.data_dir)]

    def ready(self) -> bool:
        with urllib.request.urlopen(f"{self.url}/subjects", timeout=2) as response:
            return response.status == 200

    def leader(self) -> dict[str, object]:
        """The registry's view of the leader election (`GET /kdr/leader`)."""
        with urllib.request.urlopen(f"{self.url}/kdr/leader", timeout=5) as response:
            return json.load(response)

    def client(self) -> SchemaRegistryClient:
        return SchemaRegistryClient({"url": self.url, "max.retries": 0})

    def start(self, wait: bool = True) -> RegistryProcess:
        super().start(wait)
        return self


class BasicAuthRegistryProcess(RegistryProcess):
    """A registry started with `--authentication-method BASIC`: its REST users from `users_file` (JSON {user:
    password}); its own probes and `client()` authenticate as `user` with that user's password."""

    def __init__(
        self,
        name: str,
        log_dir: Path,
        kafkastore: str,
        eligible: bool,
        users_file: Path,
        user: str,
        port: int | None = None,
    ) -> None:
        super().__init__(name, log_dir, kafkastore, eligible, port)
        self.users_file, self.user = users_file, user

    @property
    def user_info(self) -> str:
        """confluent-kafka's `basic.auth.user.info` for `user`."""
        return f"{self.user}:{json.loads(self.users_file.read_text())[self.user]}"

    def _get(self, path: str, timeout: float) -> dict[str, object] | list[object]:
        token = base64.b64encode(self.user_info.encode()).decode()
        request = urllib.request.Request(f"{self.url}{path}", headers={"Authorization": f"Basic {token}"})
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return json.load(response)

    def command(self) -> list[str]:
        auth = ["--authentication-method", "BASIC", "--basic-auth-users-file", str(self.users_file)]
        return [*super().command(), *auth]

    def ready(self) -> bool:
        return isinstance(self._get("/subjects", 2), list)

    def leader(self) -> dict[str, object]:
        answer = self._get("/kdr/leader", 5)
        assert isinstance(answer, dict)
        return answer

    def client(self) -> SchemaRegistryClient:
        return SchemaRegistryClient({"url": self.url, "max.retries": 0, "basic.auth.user.info": self.user_info})

    def start(self, wait: bool = True) -> BasicAuthRegistryProcess:
        super().start(wait)
        return self


BROKERS: dict[str, type[BrokerProcess]] = {APACHE: ApacheBroker, EMBEDDED: EmbeddedBroker}
KIND_ENV = "KDR_TEST_KAFKA"  # start_brokers' kind unless told: apache (default) or embedded


def broker_kind() -> str:
    """$KDR_TEST_KAFKA, else Apache Kafka: the broker-only fixtures (the replication tests') on the embedded broker,
    as `outage_repeat.py --kafka embedded` runs them."""
    kind = os.environ.get(KIND_ENV, APACHE)
    if kind not in BROKERS:
        raise ValueError(f"${KIND_ENV}={kind!r}: not one of {', '.join(BROKERS)}")
    return kind


def start_brokers(
    root: Path, *names: str, configs: dict[str, str] | None = None, kind: str | None = None
) -> dict[str, BrokerProcess]:
    """One cluster of one node of `kind` (broker_kind() unless told) per name, each with its own data dir (and cluster
    id) under `root`; all spawned before the first is waited for (a JVM's start-up is mostly waiting); none left
    running if one fails."""
    brokers: dict[str, BrokerProcess] = {}
    try:
        for name in names:
            brokers[name] = BROKERS[kind or broker_kind()](name, root / name, configs=configs).start(wait=False)
        for broker in brokers.values():
            broker.wait_until(broker.ready, "to serve")
    except BaseException:
        stop_all(brokers.values())
        raise
    return brokers


@contextlib.contextmanager
def temporary_brokers(*names: str, kind: str = APACHE) -> Iterator[tuple[Path, dict[str, BrokerProcess]]]:
    """One-broker clusters of `kind` in a temporary folder (also the caller's scratch folder), stopped and removed at
    the end: what a benchmark script needs."""
    with tempfile.TemporaryDirectory(prefix="kdr-brokers-") as tmp:
        root = Path(tmp)
        brokers = start_brokers(root, *names, kind=kind)
        try:
            yield root, brokers
        finally:
            stop_all(brokers.values())


def stop_all(servers: Iterable[ServerProcess]) -> None:
    """Stop every server, even when one of them fails to stop (the first failure is raised at the end)."""
    failures = []
    for server in servers:
        try:
            server.stop()
        except RuntimeError as exc:
            failures.append(exc)
    if failures:
        raise failures[0]


def api_versions_ok(host: str, port: int, ca_file: Path | None = None) -> bool:
    """True when the port answers a Kafka ApiVersions v0 request with error 0 (a broker that serves); over TLS
    trusting `ca_file` when given (ApiVersions is served before SASL authentication too)."""
    try:
        with contextlib.ExitStack() as stack:
            sock = stack.enter_context(socket.create_connection((host, port), timeout=1))
            if ca_file is not None:
                sock = stack.enter_context(
                    ssl.create_default_context(cafile=str(ca_file)).wrap_socket(sock, server_hostname=host)
                )
            sock.settimeout(2)
            correlation_id = 7
            body = (
                (18).to_bytes(2, "big")
                + (0).to_bytes(2, "big")
                + correlation_id.to_bytes(4, "big")
                + (-1).to_bytes(2, "big", signed=True)
            )  # api key, version, correlation id, null client id
            sock.sendall(len(body).to_bytes(4, "big") + body)
            size = int.from_bytes(_recv_exact(sock, 4), "big")
            payload = _recv_exact(sock, size)
            return payload[:4] == correlation_id.to_bytes(4, "big") and payload[4:6] == b"\x00\x00"
    except OSError:
        return False


def _recv_exact(sock: socket.socket, count: int) -> bytes:
    buffer = b""
    while len(buffer) < count:
        chunk = sock.recv(count - len(buffer))
        if not chunk:
            raise ConnectionError("closed")
        buffer += chunk
    return buffer
