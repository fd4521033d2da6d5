"""Writers of a flow, and how a newer replicator fences an older one out (as MirrorMaker 2 does with KIP-618).

Every destination partition of a flow has exactly one writer slot, fixed by (source topic, partition),
and every copy is written by that slot's transactional producer, whose transactional id names the
flow and the slot. Whichever process or host starts copying a partition first initialises that id,
which makes the target cluster abort the open transaction of any older writer of the slot and refuse
its further writes and commits. After that, the destination holds everything the flow committed, so
the new writer resumes from it (copier.take_over) and the two never both get a copy in.

Writers are opened again at every continuous epoch, so an older replicator would fence the newer one
back. The drivers settle it with a claim of their own (FlowClaim): the newest driver's claim fences
the older ones, an older driver finds out within a second (ClaimRenewal) or before its next epoch and
stops, and only the driver that still holds the claim retries an epoch whose writers were fenced.
"""

from __future__ import annotations

import json
import logging
import threading
import time
import zlib
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from confluent_kafka import KafkaError, KafkaException, Producer

from ..clients import init_transactions
from .internal import PROGRESS, owner_key

log = logging.getLogger(__name__)

WRITER_SLOTS = 16  # part of the id scheme: every replicator of a flow must use the same number

_FENCED = {KafkaError.PRODUCER_FENCED, KafkaError._FENCED, KafkaError.INVALID_PRODUCER_EPOCH}

T = TypeVar("T")


def writer_slot(topic: str, partition: int) -> int:
    """The slot of a source partition: consecutive partitions of a topic get consecutive slots."""
    return (zlib.crc32(topic.encode()) + partition) % WRITER_SLOTS


def transactional_id(flow: str, slot: int) -> str:
    return f"_kdr.{flow}.writer-{slot}"


def is_fenced(error: KafkaError) -> bool:
    """The error says a newer producer with the same transactional id took over."""
    return error.code() in _FENCED


def writer_groups(tasks: Sequence[T], parallelism: int, key=lambda task: (task.topic, task.partition)) -> list[list[T]]:
    """Split copy tasks into at most `parallelism` groups, one Spark task each, never splitting a slot:
    two tasks of one run holding the same transactional id would fence each other. Slots go to the
    least loaded group, the largest first."""
    slots: dict[int, list[T]] = {}
    for task in tasks:
        slots.setdefault(writer_slot(*key(task)), []).append(task)
    groups: list[list[T]] = [[] for _ in range(min(parallelism, len(slots)))]
    for slot in sorted(slots, key=lambda s: (-len(slots[s]), s)):
        min(groups, key=len).extend(slots[slot])
    return groups


class FlowClaim:
    """A replicator driver's claim on its flow: a transactional producer whose id names the flow, in the target.
    Initialising it fences the claim of every older driver of the flow; `holds()` commits an owner record
    (`<flow>/__owner__` in `_kdr.progress`: who runs the flow, for people and liveness.py) and says whether the
    claim still stands; `release()` commits the last one, saying the replicator ended."""

    def __init__(self, flow: str, target_config: dict[str, Any], owner: dict[str, Any], timeout: float = 30.0) -> None:
        self.timeout = timeout
        self.key = owner_key(flow)
        self.value = json.dumps(owner, sort_keys=True).encode()
        self.producer = Producer({**target_config, "transactional.id": f"_kdr.{flow}.claim"})
        init_transactions(self.producer, timeout)
        self.lost = False
        # The transaction call a target outage left unfinished ("commit" or "abort"): librdkafka wants that same call
        # again before anything else (a new transaction meanwhile fails with "Conflicting commit_transaction API call
        # is already in progress", which ended a replicator whose target was down for 15 s).
        self._unfinished: str | None = None
        self._lock = threading.Lock()  # the epoch loop and ClaimRenewal both commit through the one producer

    def holds(self) -> bool:
        return self._commit(self.value, self.timeout)

    def release(self, reason: str, request: str | None = None, timeout: float = 10.0) -> None:
        """The driver's last owner record: the flow's replicator ended (`reason`; `request`: the stop request it
        obeyed, control.py), which anyone reading the target takes as its end (liveness.py). Nothing is written by
        a driver whose claim a newer one took: the newest owner record is that one's. Best effort: a target that
        does not answer is logged, and the claim's silence says as much."""
        ended = {**json.loads(self.value), "ended_at_ms": int(time.time() * 1000), "reason": reason, "request": request}
        try:
            self._commit(json.dumps(ended, sort_keys=True).encode(), timeout)
        except KafkaException as exc:
            log.warning("claim not released: %s", exc.args[0].str())

    def _commit(self, value: bytes, timeout: float) -> bool:
        with self._lock:
            if self.lost:
                return False
            try:
                self._finish(timeout)
                self.producer.begin_transaction()
                self.producer.produce(PROGRESS, key=self.key, value=value)
                self._unfinished = "commit"
                self.producer.commit_transaction(timeout)
                self._unfinished = None
                return True
            except KafkaException as exc:
                error = exc.args[0]
                if is_fenced(error):
                    self.lost = True
                    return False
                if error.txn_requires_abort():
                    self._unfinished = "abort"
                raise

    def _finish(self, timeout: float) -> None:
        """The commit or abort an earlier call left unfinished, called again until it completes."""
        if self._unfinished == "commit":
            self.producer.commit_transaction(timeout)
        elif self._unfinished == "abort":
            self.producer.abort_transaction(timeout)
        self._unfinished = None


CLAIM_INTERVAL_S = 1.0  # a running driver's owner record at least this often, whatever its epoch's length


class ClaimRenewal:
    """The claim renewed every `interval` seconds on a daemon thread until `stop` is set, beside the epochs: a
    running replicator appends an owner record that often even while it copies nothing (activity.watch sees
    it), and a driver whose claim a newer one took calls `lost` within that time (the replicator ends its epoch
    and stops) instead of at its epoch's end. A failed commit is logged and tried again: the epoch loop's own
    check fails the run if the target stays unreachable."""

    def __init__(
        self, claim: FlowClaim, stop: threading.Event, lost: Callable[[], None], interval: float = CLAIM_INTERVAL_S
    ) -> None:
        self.claim, self.stop, self.lost, self.interval = claim, stop, lost, interval
        self.thread = threading.Thread(target=self.run, name="kdr-claim", daemon=True)

    def start(self) -> None:
        self.thread.start()

    def run(self) -> None:
        while not self.stop.wait(self.interval):
            try:
                if not self.claim.holds():
                    self.lost()
                    return
            except KafkaException as exc:
                log.warning("claim not renewed: %s", exc.args[0].str())
