"""Free TCP ports on the loopback interface, for servers the tests start (kafka_dr_dev.local.ports: outside the range
the kernel gives outgoing connections)."""

from __future__ import annotations

from kafka_dr_dev.local.ports import free_port as _free_port


def free_ports(count: int) -> list[int]:
    """`count` distinct ports free a moment ago."""
    ports: list[int] = []
    while len(ports) < count:
        ports.append(_free_port("127.0.0.1", frozenset(ports)))
    return ports


def free_port() -> int:
    return free_ports(1)[0]
