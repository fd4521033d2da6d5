"""Fixtures for the Kafka conformance suite.

Default (embedded) mode: the suite starts the project's embedded broker
(``python -m kafka_dr.local.broker``) on free ports in temporary directories.

External mode: with ``KDR_CONFORMANCE_BOOTSTRAP=host:port`` the suite starts no broker and runs
against that cluster (for instance a real Apache Kafka, to check the suite itself).  Tests that need
a second cluster use ``KDR_CONFORMANCE_BOOTSTRAP_2``; tests that must restart or wipe a broker are
skipped in external mode (and only there).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from .clients import CLIENT_NAMES, ClientAdapter, make_client

REPO_ROOT = Path(__file__).resolve().parents[2]
EXTERNAL_BOOTSTRAP = os.environ.get("KDR_CONFORMANCE_BOOTSTRAP") or None
EXTERNAL_BOOTSTRAP_2 = os.environ.get("KDR_CONFORMANCE_BOOTSTRAP_2") or None
BROKER_START_TIMEOUT = float(os.environ.get("KDR_CONFORMANCE_START_TIMEOUT", "30"))


def external_mode() -> bool:
    return EXTERNAL_BOOTSTRAP is not None


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def read_meta_properties(data_dir: Path) -> dict[str, str]:
    props = {}
    for line in (data_dir / "meta.properties").read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#") and "=" in line:
            k, v = line.split("=", 1)
            props[k.strip()] = v.strip()
    return props


class EmbeddedBroker:
    """One ``python -m kafka_dr.local.broker`` process on a fixed port and data dir."""

    def __init__(self, data_dir: Path, port: int | None = None, node_id: int = 1, log_dir: Path | None = None,
                 configs: dict[str, str] | None = None):
        self.data_dir = Path(data_dir)
        self.configs = dict(configs or {})
        self.port = port or free_port()
        self.node_id = node_id
        self.log_path = (log_dir or self.data_dir.parent) / f"broker-{self.data_dir.name}.log"
        self.proc: subprocess.Popen | None = None
        self.starts = 0

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> EmbeddedBroker:
        assert self.proc is None or self.proc.poll() is not None, "already running"
        self.data_dir.mkdir(parents=True, exist_ok=True)
        cmd = [sys.executable, "-m", "kafka_dr.local.broker", "--host", "127.0.0.1", "--port", str(self.port),
               "--data-dir", str(self.data_dir), "--node-id", str(self.node_id)]
        for key, value in self.configs.items():
            cmd += ["--config", f"{key}={value}"]
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT / "include"), env.get("PYTHONPATH")]))
        log = open(self.log_path, "ab")  # noqa: SIM115 - handed to the child, closed below
        log.write(f"\n===== start #{self.starts + 1}: {' '.join(cmd)}\n".encode())
        log.flush()
        self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=REPO_ROOT, env=env)
        log.close()
        self.starts += 1
        self._wait_ready()
        return self

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + BROKER_START_TIMEOUT
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"broker exited with {self.proc.returncode} during startup:\n{self.log_tail()}")
            if _api_versions_ok("127.0.0.1", self.port):
                return
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"broker not ready after {BROKER_START_TIMEOUT}s:\n{self.log_tail()}")

    def stop(self, timeout: float = 20.0) -> int | None:
        """SIGTERM and wait; SIGKILL if it does not exit in ``timeout`` (and say so)."""
        if self.proc is None or self.proc.poll() is not None:
            return None if self.proc is None else self.proc.returncode
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
            raise RuntimeError(f"broker did not exit within {timeout}s of SIGTERM:\n{self.log_tail()}") from None

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def restart(self) -> EmbeddedBroker:
        self.stop()
        return self.start()

    def cluster_id_on_disk(self) -> str:
        return read_meta_properties(self.data_dir)["cluster.id"]

    def log_tail(self, n: int = 60) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return "(no log)"


def _api_versions_ok(host: str, port: int) -> bool:
    """True when the port answers an ApiVersions v0 request with error 0."""
    try:
        with socket.create_connection((host, port), timeout=1) as s:
            s.settimeout(2)
            body = (18).to_bytes(2, "big") + (0).to_bytes(2, "big") + (7).to_bytes(4, "big") + \
                (-1).to_bytes(2, "big", signed=True)
            s.sendall(len(body).to_bytes(4, "big") + body)
            head = _recv_exact(s, 4)
            payload = _recv_exact(s, int.from_bytes(head, "big"))
            return payload[:4] == (7).to_bytes(4, "big") and payload[4:6] == b"\x00\x00"
    except OSError:
        return False


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("closed")
        buf += chunk
    return buf


class BrokerFactory:
    """Starts embedded brokers in their own data dirs; stops them all at teardown."""

    def __init__(self, root: Path):
        self.root = root
        self.brokers: list[EmbeddedBroker] = []

    def start(self, name: str | None = None, node_id: int = 1, configs: dict[str, str] | None = None
              ) -> EmbeddedBroker:
        """A new broker in a fresh data dir; ``configs`` are broker configs (``--config KEY=VALUE``)."""
        name = name or f"broker{len(self.brokers) + 1}"
        data_dir = Path(tempfile.mkdtemp(prefix=f"{name}-", dir=self.root))
        broker = EmbeddedBroker(data_dir, node_id=node_id, log_dir=self.root, configs=configs)
        self.brokers.append(broker)
        return broker.start()

    def stop_all(self) -> None:
        for b in self.brokers:
            try:
                b.stop()
            except RuntimeError:
                b.kill()


@pytest.fixture(scope="session")
def conformance_root() -> Iterator[Path]:
    root = Path(tempfile.mkdtemp(prefix="kdr-conformance-"))
    yield root
    if os.environ.get("KDR_CONFORMANCE_KEEP") != "1":
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="session")
def broker_factory(conformance_root) -> Iterator[BrokerFactory]:
    """Start extra embedded brokers (embedded mode only)."""
    factory = BrokerFactory(conformance_root)
    yield factory
    factory.stop_all()


@pytest.fixture(scope="session")
def broker(broker_factory) -> EmbeddedBroker | None:
    """The shared embedded broker (None in external mode)."""
    if external_mode():
        return None
    # Keep Kafka's default 3 s group.initial.rebalance.delay.ms. With 0, a kafka-python 3.0.12 member rejoins
    # ~200 ms after its first join and then, about one run in five, its caller thread waits forever in
    # NetworkSelector.run() while its IO thread idles (no heartbeat reaches the broker): the client bug
    # dpkp/kafka-python#3121, fixed upstream after 3.0.12. The default delay avoids that double join.
    return broker_factory.start("main")


@pytest.fixture(scope="session")
def bootstrap(broker) -> str:
    return EXTERNAL_BOOTSTRAP if external_mode() else broker.bootstrap


@pytest.fixture
def restartable_broker(broker_factory) -> EmbeddedBroker:
    """A dedicated embedded broker the test may stop and restart on its data dir."""
    if external_mode():
        pytest.skip("needs an embedded broker to restart; an external cluster (KDR_CONFORMANCE_BOOTSTRAP) "
                    "cannot be restarted by the suite")
    return broker_factory.start("restartable")


@pytest.fixture
def second_cluster(broker_factory) -> str:
    """Bootstrap address of a second, independent cluster (dc2)."""
    if external_mode():
        if EXTERNAL_BOOTSTRAP_2 is None:
            pytest.skip("external mode without KDR_CONFORMANCE_BOOTSTRAP_2: no second cluster to compare with")
        return EXTERNAL_BOOTSTRAP_2
    return broker_factory.start("dc2").bootstrap


def _open_client(name: str, bootstrap: str) -> ClientAdapter:
    return make_client(name, bootstrap)


@pytest.fixture(params=CLIENT_NAMES)
def client(request, bootstrap) -> Iterator[ClientAdapter]:
    """The adapter for one client library; every test using it runs once per library."""
    c = _open_client(request.param, bootstrap)
    yield c
    c.close()


@pytest.fixture
def all_clients(bootstrap) -> Iterator[dict[str, ClientAdapter]]:
    """Both adapters at once, for cross-client checks (produce with one, consume with the other)."""
    opened = {name: _open_client(name, bootstrap) for name in CLIENT_NAMES}
    yield opened
    for c in opened.values():
        c.close()


def pytest_report_header(config):
    if external_mode():
        return f"kafka conformance: EXTERNAL cluster {EXTERNAL_BOOTSTRAP} (second: {EXTERNAL_BOOTSTRAP_2})"
    return "kafka conformance: embedded broker (python -m kafka_dr.local.broker)"
