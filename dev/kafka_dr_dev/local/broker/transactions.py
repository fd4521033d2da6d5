"""Producer ids and the transaction coordinator.

The state machine is Kafka's (Empty -> Ongoing -> PrepareCommit/PrepareAbort -> Complete*), with
markers written synchronously, so the Prepare states are never observed between requests. The
coordinator's state, including the offsets a transaction will commit, is an append-only file
replayed at start (the part of __transaction_state). Transactions that outlive their timeout are
aborted with a bumped epoch, fencing the zombie producer as Kafka does.
"""

from __future__ import annotations

import json
import logging
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

import kafka.errors as Errors

from kafka_dr.processes import write_atomic

from .groups import GroupCoordinator, OffsetAndMetadata
from .topics import TopicStore

log = logging.getLogger(__name__)

STATE_FILE = "__transaction_state.jsonl"
PRODUCER_ID_FILE = "producer-id-block"
MAX_TIMEOUT_MS = 900000  # transaction.max.timeout.ms
EMPTY, ONGOING, COMPLETE_COMMIT, COMPLETE_ABORT = "Empty", "Ongoing", "CompleteCommit", "CompleteAbort"
MAX_EPOCH = 32767


@dataclass
class TxnMetadata:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: str = EMPTY
    partitions: set[tuple[str, int]] = field(default_factory=set)
    groups: set[str] = field(default_factory=set)
    pending_offsets: dict[str, dict[tuple[str, int], OffsetAndMetadata]] = field(default_factory=dict)
    started_ms: int = 0

    def to_json(self) -> str:
        return (
            json.dumps(
                {
                    "id": self.transactional_id,
                    "pid": self.producer_id,
                    "epoch": self.producer_epoch,
                    "timeout": self.timeout_ms,
                    "state": self.state,
                    "started": self.started_ms,
                    "partitions": sorted(self.partitions),
                    "groups": sorted(self.groups),
                    "offsets": {
                        g: [
                            [t, p, om.offset, om.metadata, om.leader_epoch, om.commit_timestamp]
                            for (t, p), om in offs.items()
                        ]
                        for g, offs in self.pending_offsets.items()
                    },
                }
            )
            + "\n"
        )

    @classmethod
    def from_json(cls, entry: dict) -> TxnMetadata:
        return cls(
            entry["id"],
            entry["pid"],
            entry["epoch"],
            entry["timeout"],
            entry["state"],
            {(t, p) for t, p in entry["partitions"]},
            set(entry["groups"]),
            {
                g: {(t, p): OffsetAndMetadata(o, m, e, ts) for t, p, o, m, e, ts in offs}
                for g, offs in entry["offsets"].items()
            },
            entry["started"],
        )


class TransactionCoordinator:
    def __init__(self, data_dir: Path, topics: TopicStore, groups: GroupCoordinator) -> None:
        self.topics = topics
        self.groups = groups
        self.txns: dict[str, TxnMetadata] = {}
        self._pid_path = data_dir / PRODUCER_ID_FILE
        self._next_pid = int(self._pid_path.read_text()) if self._pid_path.exists() else 1000
        self._path = data_dir / STATE_FILE
        if self._path.exists():
            for line in self._path.read_text().splitlines():
                try:
                    txn = TxnMetadata.from_json(json.loads(line))
                except (json.JSONDecodeError, KeyError):
                    continue  # a torn last line after a crash
                self.txns[txn.transactional_id] = txn
        write_atomic(self._path, "".join(t.to_json() for t in self.txns.values()))
        self._fd = os.open(self._path, os.O_WRONLY | os.O_APPEND, 0o644)
        self.by_pid = {t.producer_id: t for t in self.txns.values()}

    def close(self) -> None:
        os.close(self._fd)

    def _persist(self, txn: TxnMetadata) -> None:
        os.write(self._fd, txn.to_json().encode())

    def new_producer_id(self) -> int:
        pid = self._next_pid
        self._next_pid += 1
        write_atomic(self._pid_path, str(self._next_pid))
        return pid

    # ---- InitProducerId --------------------------------------------------------------------
    def init_producer_id(
        self, transactional_id: str | None, timeout_ms: int, producer_id: int = -1, producer_epoch: int = -1
    ) -> tuple[int, int]:
        if not transactional_id:
            return self.new_producer_id(), 0
        if not 0 < timeout_ms <= MAX_TIMEOUT_MS:
            raise Errors.InvalidTransactionTimeoutError(
                f"transaction timeout {timeout_ms} ms is outside (0, {MAX_TIMEOUT_MS}]"
            )
        txn = self.txns.get(transactional_id)
        if txn is None:
            txn = TxnMetadata(transactional_id, self.new_producer_id(), 0, timeout_ms)
        else:
            if producer_id >= 0 and (producer_id, producer_epoch) != (txn.producer_id, txn.producer_epoch):
                raise Errors.ProducerFencedError("producer id and epoch do not match the current ones")
            if txn.state == ONGOING:
                self._bump_epoch(txn)
                self._complete(txn, commit=False)
            self._bump_epoch(txn)
            txn.timeout_ms = timeout_ms
            txn.state = EMPTY
        self.by_pid[txn.producer_id] = txn
        self.txns[transactional_id] = txn
        self._persist(txn)
        return txn.producer_id, txn.producer_epoch

    def _bump_epoch(self, txn: TxnMetadata) -> None:
        if txn.producer_epoch + 1 >= MAX_EPOCH:
            self.by_pid.pop(txn.producer_id, None)
            txn.producer_id, txn.producer_epoch = self.new_producer_id(), 0
            self.by_pid[txn.producer_id] = txn
        else:
            txn.producer_epoch += 1

    # ---- validation ------------------------------------------------------------------------
    def _check(self, transactional_id: str, producer_id: int, producer_epoch: int) -> TxnMetadata:
        txn = self.txns.get(transactional_id)
        if txn is None or txn.producer_id != producer_id:
            raise Errors.InvalidProducerIdMappingError(
                f"producer id {producer_id} is not mapped to transactional id {transactional_id}"
            )
        if producer_epoch != txn.producer_epoch:
            raise Errors.ProducerFencedError(f"producer epoch {producer_epoch} is fenced by {txn.producer_epoch}")
        return txn

    def check_produce(self, producer_id: int, producer_epoch: int, topic: str, partition: int) -> None:
        """A transactional batch must belong to an ongoing transaction that added its partition."""
        txn = self.by_pid.get(producer_id)
        if txn is None:
            raise Errors.InvalidProducerIdMappingError(f"unknown transactional producer id {producer_id}")
        if producer_epoch < txn.producer_epoch:
            raise Errors.ProducerFencedError(f"producer epoch {producer_epoch} is fenced")
        if txn.state != ONGOING or (topic, partition) not in txn.partitions:
            raise Errors.InvalidTxnStateError(
                f"{topic}-{partition} was not added to transaction {txn.transactional_id}"
            )

    def _begin(self, txn: TxnMetadata) -> None:
        if txn.state != ONGOING:
            txn.state = ONGOING
            txn.started_ms = int(time.time() * 1000)
            txn.partitions.clear()
            txn.groups.clear()
            txn.pending_offsets.clear()

    # ---- AddPartitionsToTxn / AddOffsetsToTxn / TxnOffsetCommit ------------------------------
    def add_partitions(
        self, transactional_id: str, producer_id: int, producer_epoch: int, partitions: list[tuple[str, int]]
    ) -> dict[tuple[str, int], int]:
        """Per-partition error codes; nothing is added unless every partition is valid (as Kafka)."""
        txn = self._check(transactional_id, producer_id, producer_epoch)
        errors: dict[tuple[str, int], int] = {}
        for topic, partition in partitions:
            try:
                self.topics.partition(topic, partition)
                errors[(topic, partition)] = 0
            except Errors.UnknownTopicOrPartitionError:
                errors[(topic, partition)] = Errors.UnknownTopicOrPartitionError.errno
        if any(errors.values()):
            return {tp: code or Errors.OperationNotAttemptedError.errno for tp, code in errors.items()}
        self._begin(txn)
        txn.partitions.update(partitions)
        self._persist(txn)
        return errors

    def add_offsets(self, transactional_id: str, producer_id: int, producer_epoch: int, group_id: str) -> None:
        txn = self._check(transactional_id, producer_id, producer_epoch)
        self._begin(txn)
        txn.groups.add(group_id)
        self._persist(txn)

    def txn_offset_commit(
        self,
        transactional_id: str,
        group_id: str,
        producer_id: int,
        producer_epoch: int,
        offsets: dict[tuple[str, int], OffsetAndMetadata],
    ) -> None:
        txn = self._check(transactional_id, producer_id, producer_epoch)
        if txn.state != ONGOING or group_id not in txn.groups:
            raise Errors.InvalidTxnStateError(f"group {group_id} was not added to the transaction")
        txn.pending_offsets.setdefault(group_id, {}).update(offsets)
        self._persist(txn)

    # ---- EndTxn ----------------------------------------------------------------------------
    def end_txn(self, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool) -> None:
        txn = self._check(transactional_id, producer_id, producer_epoch)
        if txn.state in (COMPLETE_COMMIT, COMPLETE_ABORT):
            if (txn.state == COMPLETE_COMMIT) == commit:
                return  # a retried EndTxn
            raise Errors.InvalidTxnStateError(f"transaction already ended as {txn.state}")
        if txn.state == EMPTY:
            if commit:
                return  # committing an empty transaction is a no-op in Kafka clients' view
            txn.state = COMPLETE_ABORT
            self._persist(txn)
            return
        self._complete(txn, commit)

    def _complete(self, txn: TxnMetadata, commit: bool) -> None:
        now = int(time.time() * 1000)
        for topic, partition in sorted(txn.partitions):
            try:
                log_ = self.topics.partition(topic, partition)
            except Errors.UnknownTopicOrPartitionError:
                continue  # deleted while the transaction was open
            log_.append_marker(txn.producer_id, txn.producer_epoch, commit, 0, now)
        if commit:
            for group_id, offsets in txn.pending_offsets.items():
                self.groups.store_offsets(self.groups.group(group_id), offsets)
        txn.state = COMPLETE_COMMIT if commit else COMPLETE_ABORT
        txn.partitions.clear()
        txn.groups.clear()
        txn.pending_offsets.clear()
        self._persist(txn)

    def pending_offsets(self, group_id: str) -> set[tuple[str, int]]:
        """Partitions with uncommitted transactional offsets (OffsetFetch require_stable)."""
        return {tp for t in self.txns.values() if t.state == ONGOING for tp in t.pending_offsets.get(group_id, {})}

    def abort_expired(self) -> None:
        now = int(time.time() * 1000)
        for txn in self.txns.values():
            if txn.state == ONGOING and now - txn.started_ms > txn.timeout_ms:
                log.info("aborting transaction %s after %d ms", txn.transactional_id, txn.timeout_ms)
                self._bump_epoch(txn)
                self._complete(txn, commit=False)
