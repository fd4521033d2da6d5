"""Whether anything still copies a flow, seen from its target alone: no tracker, any host.

Every running replicator appends to `_kdr.progress` in its target: its copy tasks a progress record per
partition about once a second while records (or the driver's heartbeats) flow, its driver an owner record
(its claim) every second even when nothing flows (fencing.ClaimRenewal) and at every epoch, and a last one saying
it ended (`ended`), which copies nothing. Records of a flow appended during WINDOW_S, committed or not, mean some
replicator of it still runs. A claim
appended after a replicator was started says it is up (`wait_for_claim`): it reached both clusters,
planned, fenced any older replicator of the flow and began its first epoch.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from confluent_kafka import Consumer, IsolationLevel, TopicPartition
from confluent_kafka.admin import AdminClient

from ..clients import end_offsets, read_partition
from .fencing import CLAIM_INTERVAL_S
from .internal import PROGRESS, owner_key

# Seconds to watch for: a claim renewal and a margin for a commit under way, so even an idle replicator writes its
# owner record meanwhile, whatever its epoch's length.
WINDOW_S = CLAIM_INTERVAL_S + 1.0


@dataclass(frozen=True)
class Activity:
    flow: str
    records: int  # progress and claim records the flow's replicators appended during the window
    last_key: str | None


def watch(
    target_config: dict[str, Any], flows: Iterable[str], window: float, timeout: float = 10.0
) -> dict[str, Activity]:
    """Watch the target's `_kdr.progress` for `window` seconds; what each flow's replicators appended meanwhile."""
    flows = list(flows)
    admin = AdminClient(target_config)
    partition = [(PROGRESS, 0)]
    start = end_offsets(admin, partition, IsolationLevel.READ_UNCOMMITTED, timeout)[partition[0]]
    time.sleep(window)
    end = end_offsets(admin, partition, IsolationLevel.READ_UNCOMMITTED, timeout)[partition[0]]
    counts = dict.fromkeys(flows, 0)
    last: dict[str, str] = {}
    # read_uncommitted: a write of a transaction still open counts as much as a committed one.
    reader = Consumer(
        {
            **target_config,
            "group.id": "_kdr.activity",
            "enable.auto.commit": False,
            "isolation.level": "read_uncommitted",
            "enable.partition.eof": True,
        }
    )
    try:
        for message in read_partition(reader, PROGRESS, 0, start, end, timeout):
            key = (message.key() or b"").decode(errors="replace")
            flow, _, rest = key.partition("/")
            claim = key.encode() == owner_key(flow) and not ended(message.value())  # an end copies nothing
            if flow in counts and (claim or rest.rpartition("/")[2].isdigit()):
                counts[flow] += 1
                last[flow] = key
    finally:
        reader.close()
    return {flow: Activity(flow, counts[flow], last.get(flow)) for flow in flows}


def progress_end(target_config: dict[str, Any], timeout: float = 10.0) -> int:
    """The end offset of the target's `_kdr.progress`, where what is appended from now on will be found (0 before
    any replicator created the topic)."""
    admin = AdminClient(target_config)
    if PROGRESS not in admin.list_topics(timeout=timeout).topics:
        return 0
    partition = (PROGRESS, 0)
    return end_offsets(admin, [partition], IsolationLevel.READ_UNCOMMITTED, timeout)[partition]


def ended(owner: bytes | None) -> bool:
    """Whether an owner record is a driver's last, saying its replicator ended (FlowClaim.release)."""
    try:
        return json.loads(owner or b"{}").get("ended_at_ms") is not None
    except (ValueError, AttributeError):
        return False


def wait_for_claim(
    target_config: dict[str, Any], flow: str, since: int, running: Callable[[], bool], timeout: float
) -> bool:
    """Until a claim of `flow` is appended to the target's `_kdr.progress` at or after offset `since` (True; False
    when it is the driver's last, saying it ended), or `running()` says the replicator is gone (False); TimeoutError
    after `timeout` seconds of neither."""
    reader = Consumer({**target_config, "group.id": "_kdr.activity", "enable.auto.commit": False})
    reader.assign([TopicPartition(PROGRESS, 0, since)])  # read_uncommitted is not needed: a claim is committed
    deadline = time.monotonic() + timeout
    claim = owner_key(flow)
    try:
        while time.monotonic() < deadline:
            message = reader.poll(0.2)
            if message is not None and not message.error() and message.key() == claim:
                return not ended(message.value())  # a driver that failed at start releases its claim at once
            if not running():
                return False
    finally:
        reader.close()
    raise TimeoutError(f"flow {flow}: no claim in {PROGRESS} within {timeout:g} s")


def claimed_within(target_config: dict[str, Any], flow: str, window: float) -> bool:
    """Whether a replicator of `flow` appends a claim to the target's `_kdr.progress` within `window` seconds (a
    running one does every CLAIM_INTERVAL_S): at once when one comes, after `window` when none does."""
    try:
        return wait_for_claim(target_config, flow, progress_end(target_config), lambda: True, window)
    except TimeoutError:
        return False
