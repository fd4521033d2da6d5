"""Writers of a flow, and how a newer replicator fences an older one out (as MirrorMaker 2 does with KIP-618).

Every destination partition of a flow has exactly one writer slot, fixed by (source topic, partition),
and every copy is written by that slot's transactional producer, whose transactional id names the
flow and the slot. Whichever process or host starts copying a partition first initialises that id,
which makes the target cluster abort the open transaction of any older writer of the slot and refuse
its further writes and commits. After that, the destination holds everything the flow committed, so
the new writer resumes from it (copier.take_over) and the two never both get a copy in.

Writers are opened again at every continuous epoch, so an older replicator would fence the newer one
back. The drivers settle it with a claim of their own (FlowClaim): the newest driver's claim fences
the older ones, an older driver finds out before its next epoch and stops, and only the driver that
still holds the claim retries an epoch whose writers were fenced.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Sequence
from typing import Any, TypeVar

from confluent_kafka import KafkaError, KafkaException, Producer

from ..clients import init_transactions
from .internal import PROGRESS, owner_key

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
    (`<flow>/__owner__` in `_kdr.progress`: who runs the flow, for people) and says whether the claim still
    stands."""

    def __init__(self, flow: str, target_config: dict[str, Any], owner: dict[str, Any], timeout: float = 30.0) -> None:
        self.timeout = timeout
        self.key = owner_key(flow)
        self.value = json.dumps(owner, sort_keys=True).encode()
        self.producer = Producer({**target_config, "transactional.id": f"_kdr.{flow}.claim"})
        init_transactions(self.producer, timeout)
        self.lost = False

    def holds(self) -> bool:
        if self.lost:
            return False
        try:
            self.producer.begin_transaction()
            self.producer.produce(PROGRESS, key=self.key, value=self.value)
            self.producer.commit_transaction(self.timeout)
            return True
        except KafkaException as exc:
            if not is_fenced(exc.args[0]):
                raise
            self.lost = True
            return False
