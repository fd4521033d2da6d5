"""The two-DC stack as `kafka-dr-dev local` runs it (Apache Kafka nodes and registries, pid files, stack.json), on free
ports in a test's own folder, so it never meets a demo stack on the default ports; its brokers as a pair for tests
that need only brokers (BrokerPair); and a restart service for its registries that workers in PID namespaces of
their own can call (RegistryRestarts)."""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import signal
import subprocess
import threading
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from kafka_dr_dev.local.config import APACHE, StackConfig
from kafka_dr_dev.local.stack import BROKER, REGISTRY, LocalStack

from .kafka import ClusterEndpoint
from .ports import free_ports
from .topology import restart_registry_command, topology_text, write_topology


def free_stack_config(kafka: str = APACHE) -> StackConfig:
    """DESIGN's two-DC layout (dc1 leads the registry store) on four free ports, brokers of kind `kafka`."""
    ports = free_ports(4)
    return StackConfig.default(broker_ports=ports[:2], registry_ports=ports[2:], kafka=kafka)


@dataclass(frozen=True)
class Stack:
    """A running local stack and a folder for the topology files that point at it."""

    local: LocalStack
    root: Path

    def bootstrap(self, dc: str) -> str:
        return self.local.config.dc(dc).broker_address

    def registry(self, dc: str) -> str:
        return self.local.config.dc(dc).registry_url

    def write_topology(
        self,
        name: str,
        flows: str = "",
        schema_registry: bool = True,
        extra: str = "",
        restart: str | None = None,
        primary: str = "dc1",
    ) -> Path:
        """`root/<name>.yaml`: this stack's clusters, `flows`, and with `schema_registry` the registries (`primary`
        the primary, restarted through `restart`, by default `kafka-dr-dev local restart-registry` on this stack's data
        dir)."""
        dcs = self.local.config.dcs
        registries = {dc.name: dc.registry_url for dc in dcs} if schema_registry else None
        if schema_registry:
            command = restart or restart_registry_command(self.local.data_dir)
            extra = f"schema_registry: {{primary: {primary}, restart_command: {json.dumps(command)}}}\n{extra}"
        return write_topology(
            self.root / f"{name}.yaml", {dc.name: dc.broker_address for dc in dcs}, flows, registries, extra
        )


@dataclass
class StackBroker(ClusterEndpoint):
    """One DC's broker of a running stack, as the tests that need only brokers use one: its address, client settings
    and cluster id; `stop` is `kafka-dr-dev local stop` (SIGKILL, its registry with it), `start` brings both back with
    their data."""

    local: LocalStack
    name: str

    @property
    def bootstrap(self) -> str:
        return self.local.config.dc(self.name).broker_address

    def running(self) -> bool:
        return self.local.pid(self.name, BROKER) is not None

    def stop(self) -> None:
        self.local.stop(self.name)

    def start(self) -> None:
        self.local.start(self.name)


@dataclass(frozen=True)
class BrokerPair:
    """dc1 and dc2 of a running stack for tests that need only brokers; they share them with the stack's other
    tests, so each uses topic, group and flow names of its own."""

    dc1: StackBroker
    dc2: StackBroker

    @classmethod
    def of(cls, stack: Stack) -> BrokerPair:
        return cls(StackBroker(stack.local, "dc1"), StackBroker(stack.local, "dc2"))

    def topology_yaml(self, flows: str) -> str:
        """A topology document with clusters dc1 and dc2 pointing at these brokers, plus `flows` (YAML)."""
        return topology_text({"dc1": self.dc1.bootstrap, "dc2": self.dc2.bootstrap}, flows)


@contextlib.contextmanager
def running_stack(root: Path, kafka: str = APACHE) -> Iterator[Stack]:
    """A stack up on free ports with its data under `root/data` (Apache Kafka brokers unless told); down (or killed)
    at the end."""
    root.mkdir(parents=True, exist_ok=True)
    local = LocalStack(root / "data", free_stack_config(kafka))
    try:
        local.up()
        yield Stack(local, root)
    finally:
        tear_down(local)


def tear_down(local: LocalStack) -> None:
    """down(), and if that fails, kill whatever the pid files name, so no server outlives the tests."""
    try:
        local.down()
    finally:
        for dc in local.config.dcs:
            for kind in (BROKER, REGISTRY):
                pid = local.pid(dc.name, kind)
                if pid is not None:
                    with contextlib.suppress(ProcessLookupError):
                        os.killpg(pid, signal.SIGKILL)


@dataclass
class RegistryRestarts:
    """A registry host's restart service for workers that cannot reach the stack's processes themselves (a Celery
    worker in a PID namespace of its own): `POST /restart/<cluster>?kafkastore=..&leader_eligible=..` on 127.0.0.1
    runs `kafka-dr-dev local restart-registry` on this stack here, as a deployment's restart command reaches its
    registry's host (docker, systemd over ssh). A restart goes on when its caller is killed. `command` is the
    topology's `schema_registry.restart_command`; `begun` lists (cluster, leader_eligible) as each request arrived."""

    stack: Stack
    url: str = ""
    begun: list[tuple[str, str]] = field(default_factory=list)

    @property
    def command(self) -> str:
        query = "kafkastore={kafkastore}&leader_eligible={leader_eligible}"
        return f"curl -sS --fail-with-body -X POST '{self.url}/restart/{{cluster}}?{query}'"

    def restart(self, cluster: str, query: dict[str, list[str]]) -> tuple[int, str]:
        values = {
            "cluster": cluster,
            "kafkastore": query["kafkastore"][0],
            "leader_eligible": query["leader_eligible"][0],
        }
        self.begun.append((cluster, values["leader_eligible"]))
        # The same command a topology of this stack names when its workers can reach the registries themselves.
        template = shlex.split(restart_registry_command(self.stack.local.data_dir))
        done = subprocess.run([part.format(**values) for part in template], capture_output=True, text=True, timeout=120)
        lines = (done.stdout + done.stderr).strip().splitlines() or [f"exit {done.returncode}"]
        return (200 if done.returncode == 0 else 500), lines[-1] + "\n"


@contextlib.contextmanager
def registry_restarts(stack: Stack) -> Iterator[RegistryRestarts]:
    """A RegistryRestarts service for `stack`, serving until the block ends."""
    service = RegistryRestarts(stack)

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - http.server's name
            url = urllib.parse.urlsplit(self.path)
            code, body = service.restart(url.path.rpartition("/")[2], urllib.parse.parse_qs(url.query))
            self.send_response(code)
            self.end_headers()
            self.wfile.write(body.encode())

        def log_message(self, *_: object) -> None:
            pass  # the restarts are in `begun` and the stack's logs

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    service.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield service
    finally:
        server.shutdown()
        server.server_close()
