"""Shared fixtures for integration tests: embedded brokers on free ports in a temporary directory.

`broker_pair` gives two independent single-broker clusters (dc1, dc2) for the whole session, which
is what most replication tests need; tests that only need brokers avoid the cost of the full local
stack (registries included). Tests must use topic and group names of their own, since the
clusters are shared.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from kafka_dr.spark_env import spark_env, spark_submit_command

REPO_ROOT = Path(__file__).resolve().parents[2]
START_TIMEOUT = 30.0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class Broker:
    """One `python -m kafka_dr.local.broker` process: a single-broker cluster."""

    name: str
    data_dir: Path
    port: int
    proc: subprocess.Popen | None = None
    cluster_id: str = ""

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def config(self) -> dict[str, str]:
        """confluent-kafka settings reaching this broker."""
        return {"bootstrap.servers": self.bootstrap}

    @property
    def log_path(self) -> Path:
        return self.data_dir.parent / f"{self.name}.log"

    def start(self) -> Broker:
        cmd = [sys.executable, "-m", "kafka_dr.local.broker", "--host", "127.0.0.1", "--port", str(self.port),
               "--data-dir", str(self.data_dir), "--config", "group.initial.rebalance.delay.ms=0"]
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO_ROOT / "include"),
                                                                          os.environ.get("PYTHONPATH")]))}
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=REPO_ROOT)
        deadline = time.monotonic() + START_TIMEOUT
        admin = AdminClient(self.config)  # kept referenced: a collected client cancels its pending requests
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} broker exited with {self.proc.returncode}; see {self.log_path}")
            try:
                self.cluster_id = admin.describe_cluster(request_timeout=2).result().cluster_id
                return self
            except Exception:  # noqa: BLE001 - not listening yet
                if time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(f"{self.name} broker not ready after {START_TIMEOUT}s; see {self.log_path}"
                                       ) from None
                time.sleep(0.1)

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)


@dataclass
class BrokerPair:
    dc1: Broker
    dc2: Broker

    def topology_yaml(self, flows: str) -> str:
        """A topology file text with clusters dc1 and dc2 pointing at these brokers, plus `flows` (YAML)."""
        return (f"clusters:\n  dc1: {{bootstrap_servers: \"{self.dc1.bootstrap}\"}}\n"
                f"  dc2: {{bootstrap_servers: \"{self.dc2.bootstrap}\"}}\n{flows}")


@pytest.fixture(scope="session")
def broker_pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerPair]:
    """Two single-broker clusters, dc1 and dc2, each with its own cluster id."""
    root = tmp_path_factory.mktemp("brokers")
    brokers = [Broker(name, root / name, free_port()) for name in ("dc1", "dc2")]
    try:
        for broker in brokers:
            broker.start()
        yield BrokerPair(*brokers)
    finally:
        for broker in brokers:
            broker.stop()


def run_job(job: str, *args: str, timeout: float = 300) -> tuple[int, dict, str]:
    started = time.monotonic()
    proc = subprocess.run(spark_submit_command(job, list(args)), env=spark_env(), capture_output=True, text=True,
                          timeout=timeout)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    print(f"{job} {' '.join(args)}: exit {proc.returncode} in {time.monotonic() - started:.1f}s")
    return proc.returncode, json.loads(lines[-1]) if lines else {}, proc.stderr


def create(broker: Broker, topic: str, partitions: int, **configs: str) -> None:
    admin = AdminClient(broker.config)
    admin.create_topics([NewTopic(topic, partitions, config=configs)])[topic].result(15)  # admin kept alive
