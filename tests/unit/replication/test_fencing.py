"""Writer slots and fencing (replication/fencing.py): the id scheme every replicator of a flow shares, copy tasks
grouped without splitting a slot, and a driver's claim that a newer driver fences."""

from __future__ import annotations

import json
import logging
import threading
import time
import zlib
from dataclasses import dataclass

import pytest
from confluent_kafka import KafkaError, KafkaException

from kafka_dr.replication import fencing
from kafka_dr.replication.fencing import (
    WRITER_SLOTS,
    ClaimRenewal,
    FlowClaim,
    is_fenced,
    transactional_id,
    writer_groups,
    writer_slot,
)
from kafka_dr.replication.internal import PROGRESS, owner_key


@dataclass(frozen=True, order=True)
class Task:
    topic: str
    partition: int


def test_consecutive_partitions_of_a_topic_get_consecutive_slots_modulo_the_slot_count() -> None:
    base = zlib.crc32(b"orders") % WRITER_SLOTS
    assert [writer_slot("orders", p) for p in range(WRITER_SLOTS + 1)] == [
        (base + p) % WRITER_SLOTS for p in range(WRITER_SLOTS + 1)
    ]
    assert writer_slot("orders", 0) == writer_slot("orders", WRITER_SLOTS)  # the same slot: one writer for both


def test_the_transactional_id_names_the_flow_and_the_slot() -> None:
    assert transactional_id("dc1-to-dc2", 7) == "_kdr.dc1-to-dc2.writer-7"


@pytest.mark.parametrize(
    ("code", "fenced"),
    [
        (KafkaError.PRODUCER_FENCED, True),
        (KafkaError._FENCED, True),
        (KafkaError.INVALID_PRODUCER_EPOCH, True),
        (KafkaError._TIMED_OUT, False),
        (KafkaError.NOT_COORDINATOR, False),
    ],
)
def test_only_a_newer_producer_taking_over_is_fenced(code: int, fenced: bool) -> None:
    assert is_fenced(KafkaError(code)) is fenced


def test_groups_never_split_a_slot_and_go_to_the_least_loaded_group() -> None:
    # 2 * WRITER_SLOTS partitions of one topic: every slot holds two tasks
    tasks = [Task("orders", p) for p in range(2 * WRITER_SLOTS)]
    groups = writer_groups(tasks, parallelism=3)
    assert len(groups) == 3 and sorted(t for g in groups for t in g) == sorted(tasks)
    slots = [{writer_slot(t.topic, t.partition) for t in group} for group in groups]
    assert all(not (a & b) for i, a in enumerate(slots) for b in slots[i + 1 :])
    assert sorted(len(g) for g in groups) == [10, 10, 12]  # 16 slots of 2 tasks dealt out to 3 groups


def test_the_largest_slots_are_placed_first() -> None:
    big = [Task("orders", 0), Task("orders", WRITER_SLOTS), Task("orders", 2 * WRITER_SLOTS)]  # one slot, 3 tasks
    small = [Task("orders", 1), Task("orders", 2), Task("orders", 3)]  # three slots of one task
    groups = writer_groups([*small, *big], parallelism=2)
    assert groups[0] == big and sorted(groups[1]) == small  # small first would have split them 2 + 4


def test_no_more_groups_than_slots_and_none_for_no_tasks() -> None:
    assert writer_groups([Task("orders", 0), Task("orders", WRITER_SLOTS)], parallelism=8) == [
        [Task("orders", 0), Task("orders", WRITER_SLOTS)]
    ]
    assert writer_groups([], parallelism=4) == []


class ClaimProducer:
    """A transactional producer of a driver's claim: commits until a newer driver fences it (or the broker fails).
    As librdkafka's, a commit that failed leaves the transaction to be committed (or aborted) again before a new one
    begins; `calls` lists the transaction calls made."""

    def __init__(self, config: dict) -> None:
        self.config = config
        self.commit_error: KafkaError | None = None
        self.produced: list[tuple[str, bytes, bytes]] = []
        self.initialised = False
        self.open = False
        self.calls: list[str] = []

    def list_topics(self, timeout: float) -> None:
        pass

    def init_transactions(self, timeout: float) -> None:
        self.initialised = True

    def begin_transaction(self) -> None:
        self.calls.append("begin")
        if self.open:
            raise KafkaException(KafkaError(KafkaError._CONFLICT, "Conflicting commit_transaction API call"))
        self.open = True

    def produce(self, topic: str, key: bytes, value: bytes) -> None:
        self.produced.append((topic, key, value))

    def commit_transaction(self, timeout: float) -> None:
        self.calls.append("commit")
        if self.commit_error is not None:
            raise KafkaException(self.commit_error)
        self.open = False

    def abort_transaction(self, timeout: float) -> None:
        self.calls.append("abort")
        self.open = False


@pytest.fixture
def claim(monkeypatch: pytest.MonkeyPatch) -> FlowClaim:
    monkeypatch.setattr(fencing, "Producer", ClaimProducer)
    return FlowClaim("dc1-to-dc2", {"bootstrap.servers": "dc2:9092"}, {"host": "h", "pid": 1})


def test_a_claim_holds_while_it_commits_its_owner_record(claim: FlowClaim) -> None:
    producer = claim.producer
    assert producer.config["transactional.id"] == "_kdr.dc1-to-dc2.claim" and producer.initialised
    assert claim.holds() and claim.holds()
    owner = (PROGRESS, owner_key("dc1-to-dc2"), json.dumps({"host": "h", "pid": 1}, sort_keys=True).encode())
    assert producer.produced == [owner, owner]


def test_a_fenced_claim_is_lost_for_good(claim: FlowClaim) -> None:
    claim.producer.commit_error = KafkaError(KafkaError.PRODUCER_FENCED)
    assert not claim.holds() and claim.lost
    claim.producer.commit_error = None
    assert not claim.holds()  # a newer driver holds it now
    assert len(claim.producer.produced) == 1


def test_any_other_commit_error_is_raised(claim: FlowClaim) -> None:
    claim.producer.commit_error = KafkaError(KafkaError._TIMED_OUT)
    with pytest.raises(KafkaException):
        claim.holds()
    assert not claim.lost


def test_a_commit_the_target_did_not_answer_is_finished_before_the_next_begins(claim: FlowClaim) -> None:
    """A target down for longer than the commit's timeout: the next renewal commits that transaction again, as
    librdkafka requires, instead of beginning one (which failed every renewal after and ended the replicator)."""
    producer = claim.producer
    producer.commit_error = KafkaError(KafkaError._TIMED_OUT, retriable=True)
    with pytest.raises(KafkaException):
        claim.holds()
    with pytest.raises(KafkaException):
        claim.holds()  # still down: the same commit again, no new transaction
    producer.commit_error = None
    assert claim.holds()
    assert producer.calls == ["begin", "commit", "commit", "commit", "begin", "commit"]


def test_a_commit_that_requires_an_abort_is_aborted_before_the_next_begins(claim: FlowClaim) -> None:
    producer = claim.producer
    producer.commit_error = KafkaError(KafkaError.INVALID_TXN_STATE, txn_requires_abort=True)
    with pytest.raises(KafkaException):
        claim.holds()
    producer.commit_error = None
    assert claim.holds()
    assert producer.calls == ["begin", "commit", "abort", "begin", "commit"]


def renewed_until(claim: FlowClaim, lost: list[None], commits: int) -> None:
    """ClaimRenewal every 10 ms until `commits` owner records were committed or the claim was lost."""
    stop = threading.Event()
    renewal = ClaimRenewal(claim, stop, lambda: lost.append(None), interval=0.01)
    renewal.start()
    deadline = time.monotonic() + 5
    while len(claim.producer.produced) < commits and not lost:
        assert time.monotonic() < deadline, "no renewal"
        time.sleep(0.01)
    stop.set()
    renewal.thread.join(5)


def test_a_renewal_commits_the_owner_record_every_interval_and_says_once_when_the_claim_is_lost(
    claim: FlowClaim,
) -> None:
    lost: list[None] = []
    renewed_until(claim, lost, commits=3)
    assert not lost
    claim.producer.commit_error = KafkaError(KafkaError.PRODUCER_FENCED)
    renewed_until(claim, lost, commits=1_000)
    assert lost == [None] and claim.lost


def test_a_renewal_that_fails_otherwise_is_logged_and_tried_again(claim: FlowClaim, caplog) -> None:
    caplog.set_level(logging.WARNING, logger="kafka_dr.replication.fencing")
    claim.producer.commit_error = KafkaError(KafkaError._TIMED_OUT, retriable=True)
    stop, lost = threading.Event(), []
    renewal = ClaimRenewal(claim, stop, lambda: lost.append(None), interval=0.01)
    renewal.start()
    deadline = time.monotonic() + 5
    while claim.producer.calls.count("commit") < 3:  # the one transaction's commit, asked again at each renewal
        assert time.monotonic() < deadline, "no renewal"
        time.sleep(0.01)
    stop.set()
    renewal.thread.join(5)
    assert not lost and caplog.text.count("claim not renewed: ") >= 2
