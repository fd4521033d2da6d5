"""Whether a flow's replicator runs, and stopping it, from any process on any host.

The flow's target cluster is the source of truth. A running replicator's driver appends an owner record to
`_kdr.progress` every second (fencing.ClaimRenewal) and, as it ends, a last one saying so (FlowClaim.release); it
obeys stop requests written to `_kdr.control` (control.py). So a replicator runs when its newest owner record does
not say it ended and a new one comes within activity.WINDOW_S. The tracker's pid is only a shortcut, taken where it
means something: in the host and PID namespace that started the replicator (replicators.ReplicatorProcess.here), where
a stop is a signal and a dead pid is an answer at once.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

from confluent_kafka import Consumer, TopicPartition

from ..times import iso_from_ms
from . import activity, control, replicators
from .internal import PROGRESS, newest_value, owner_key


@dataclass(frozen=True)
class Liveness:
    flow: str
    running: bool
    detail: str  # one line for people: where it runs, or how it ended


def liveness(flow: str, target_config: dict[str, Any], window: float = activity.WINDOW_S) -> Liveness:
    """Whether `flow`'s replicator runs: by its pid when it was started here, else as its target sees it (up to
    `window` seconds of watching, less when one runs). Raises the client's KafkaException when the target does not
    answer."""
    tracked = replicators.status(flow)
    if tracked is not None and tracked.here:
        if tracked.running:
            return Liveness(flow, True, f"pid {tracked.pid} on this host")
        if tracked.stopped_at is not None:
            return Liveness(flow, False, f"its replicator was stopped at {tracked.stopped_at}")
        why = replicators.last_error(flow)
        return Liveness(flow, False, f"its replicator (pid {tracked.pid}) exited: {why}; see {tracked.log}")
    owner = _newest_owner(target_config, flow)
    if owner is None:
        return Liveness(flow, False, "no replicator ever claimed it in its target")
    if owner.get("ended_at_ms") is not None:
        return Liveness(flow, False, _ended(owner))
    where = f"{owner.get('host', '?')} pid {owner.get('pid', '?')}"
    if activity.claimed_within(target_config, flow, window):
        return Liveness(flow, True, f"claims it in its target ({where})")
    return Liveness(flow, False, f"its replicator ({where}) stopped renewing its claim: it died")


def stop(
    flow: str,
    target_config: dict[str, Any] | None,
    timeout: float,
    source_config: dict[str, Any] | None = None,
    lost: str | None = None,
) -> str:
    """Stop `flow`'s replicator wherever it runs; "stopped", "not running", or "stop requested". Started here: SIGTERM,
    then SIGKILL after `timeout` (replicators.stop); SIGKILL at once when its target is lost. Elsewhere: a stop request
    through the target, acknowledged by the driver's last owner record (or its claim falling silent) within `timeout`;
    the tracker here, if any, then records the stop. `target_config` None: the target is lost. Nothing can copy into it
    now, but a replicator elsewhere would once it is back: the request goes through the source (`source_config`) and
    cannot be acknowledged ("stop requested"). `lost`: the cluster a disaster lost, named in the request (control.py).
    Raises replicators.ReplicatorError with one line when it does not stop."""
    tracked = replicators.status(flow)
    if tracked is not None and tracked.here:
        # Into a lost cluster a replicator can commit nothing more: no grace to wait out (its open transaction aborts
        # there, fenced by the flow's next writer).
        grace = 0.0 if target_config is None else timeout
        return "stopped" if tracked.running and replicators.stop(flow, grace) is not None else "not running"
    if target_config is None:
        if tracked is None or tracked.stopped_at is not None or source_config is None:
            return "not running"  # never started by this host's DAGs, or already stopped
        control.request_stop(source_config, flow, lost=lost)
        replicators.mark_stopped(flow)
        return "stop requested"
    since = activity.progress_end(target_config)
    if not liveness(flow, target_config).running:
        replicators.mark_stopped(flow)
        return "not running"
    request = control.request_stop(target_config, flow, lost=lost)
    try:
        _wait_ended(target_config, flow, request.id, since, timeout)
    except TimeoutError:
        raise replicators.ReplicatorError(
            f"flow {flow}: its replicator did not acknowledge stop request {request.id} within {timeout:g} s"
        ) from None
    replicators.mark_stopped(flow)
    return "stopped"


def _newest_owner(target_config: dict[str, Any], flow: str) -> dict[str, Any] | None:
    value = newest_value(target_config, PROGRESS, owner_key(flow))
    try:
        return None if value is None else json.loads(value)
    except ValueError:
        return None


def _ended(owner: dict[str, Any]) -> str:
    request = f" (stop request {owner['request']})" if owner.get("request") else ""
    return f"ended at {iso_from_ms(owner['ended_at_ms'])}: {owner.get('reason', '?')}{request}"


def _wait_ended(target_config: dict[str, Any], flow: str, request: str, since: int, timeout: float) -> None:
    """Until the flow's driver appends its last owner record after offset `since` of `_kdr.progress`, or its claim
    is silent for activity.WINDOW_S (it died meanwhile); TimeoutError after `timeout` seconds of neither."""
    reader = Consumer({**target_config, "group.id": "_kdr.activity", "enable.auto.commit": False})
    reader.assign([TopicPartition(PROGRESS, 0, since)])  # claims are committed: read_committed is the default
    key = owner_key(flow)
    deadline = time.monotonic() + timeout
    last_claim = time.monotonic()
    try:
        while time.monotonic() < deadline:
            message = reader.poll(0.2)
            if message is not None and not message.error() and message.key() == key:
                last_claim = time.monotonic()
                if activity.ended(message.value()):
                    return
            elif time.monotonic() - last_claim > activity.WINDOW_S:
                return
    finally:
        reader.close()
    raise TimeoutError(f"flow {flow}: no end of its replicator for stop request {request} within {timeout:g} s")
