"""A drill waits for what happens on its own (flows healthy, a checkpoint, the probe's consumer caught up, the probe
started or drained): one poll loop with a deadline, so that every wait ends and says in one line what did not come."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, TypeVar

from .plan import DrillError

T = TypeVar("T")


class WaitTimeout(DrillError):
    """A wait reached its deadline: one line naming what did not happen, and the last value seen (`last`), for the
    waits whose caller goes on with it."""

    def __init__(self, message: str, last: Any) -> None:
        super().__init__(message)
        self.last = last


def wait_until(probe: Callable[[], T], done: Callable[[T], bool], *, timeout: float, every: float, what: str) -> T:
    """Call `probe` every `every` seconds until `done` holds for its value, and return that value; WaitTimeout
    "`what` within `timeout` s" with the last value when `timeout` passes first. The probe runs at least once, the
    last time at the deadline."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if done(value):
            return value
        left = deadline - time.monotonic()
        if left <= 0:
            raise WaitTimeout(f"{what} within {timeout:g} s", value)
        time.sleep(min(every, left))
