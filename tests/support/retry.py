"""Waiting in tests for something that becomes true on its own (a registry that elects itself, a forward that
starts to work): retry a probe until it answers."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def eventually(probe: Callable[[], T], what: str, timeout: float = 15.0) -> T:
    """Retry `probe` until it returns a truthy value without raising; its result. After `timeout` seconds, an
    AssertionError naming `what` and the last result or error."""
    deadline = time.monotonic() + timeout
    last: object = None
    while time.monotonic() < deadline:
        try:
            if result := probe():
                return result
            last = result
        except Exception as exc:  # noqa: BLE001 - any failure means "not yet"
            last = exc
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}: last result {last!r}")
