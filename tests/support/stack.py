"""The embedded two-DC stack as `kafka-dr local` runs it (brokers and registries, pid files, stack.json), on free
ports in a test's own folder, so it never meets a demo stack on the default ports."""

from __future__ import annotations

import contextlib
import json
import os
import signal
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from kafka_dr.local.config import StackConfig
from kafka_dr.local.stack import BROKER, REGISTRY, LocalStack

from .ports import free_ports
from .topology import restart_registry_command, write_topology


def free_stack_config() -> StackConfig:
    """DESIGN's two-DC layout (dc1 leads the registry store) on four free ports."""
    ports = free_ports(4)
    return StackConfig.default(broker_ports=ports[:2], registry_ports=ports[2:])


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
        self, name: str, flows: str = "", schema_registry: bool = True, extra: str = "", restart: str | None = None
    ) -> Path:
        """`root/<name>.yaml`: this stack's clusters, `flows`, and with `schema_registry` the registries (dc1
        primary, restarted through `restart`, by default `kafka-dr local restart-registry` on this stack's data
        dir)."""
        dcs = self.local.config.dcs
        registries = {dc.name: dc.registry_url for dc in dcs} if schema_registry else None
        if schema_registry:
            command = restart or restart_registry_command(self.local.data_dir)
            extra = f"schema_registry: {{primary: dc1, restart_command: {json.dumps(command)}}}\n{extra}"
        return write_topology(
            self.root / f"{name}.yaml", {dc.name: dc.broker_address for dc in dcs}, flows, registries, extra
        )


@contextlib.contextmanager
def running_stack(root: Path) -> Iterator[Stack]:
    """A stack up on free ports with its data under `root/data`; down (or killed) at the end."""
    root.mkdir(parents=True, exist_ok=True)
    local = LocalStack(root / "data", free_stack_config())
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
