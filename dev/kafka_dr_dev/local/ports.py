"""Free TCP ports for the local servers: chosen below the kernel's ephemeral range, which it hands out as the source
ports of outgoing connections. A port from that range that was free a moment ago may be any client's by the time a
JVM binds it (seen in the suite: a node's controller listener failed with "Address already in use")."""

from __future__ import annotations

import random
import socket
from pathlib import Path

LOWEST = 10_000
EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")


def _ephemeral_start() -> int:
    try:
        return int(EPHEMERAL_RANGE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32_768  # Linux's default


def free_port(host: str, avoid: frozenset[int] = frozenset()) -> int:
    """A port of `host` nothing listens on now, outside the ephemeral range and not in `avoid`."""
    top = max(_ephemeral_start(), LOWEST + 1_000)
    for _ in range(200):
        port = random.randrange(LOWEST, top)
        if port in avoid:
            continue
        with socket.socket() as probe:
            try:
                probe.bind((host, port))
            except OSError:
                continue
            return port
    raise OSError(f"no free port of {host} between {LOWEST} and {top}")
