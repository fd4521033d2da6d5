"""A flow's destination compared with its source, partition by partition (verify_partition), on fake consumers:
every record the cycle rule lets through is copied exactly once with its key, value, headers and timestamp."""

from __future__ import annotations

import pytest
from support.fakes import FakeConsumer, FakeMessage, patch_sleep

from kafka_dr.replication import verify
from kafka_dr.replication.provenance import HEADER, ForceCopy, Hop
from kafka_dr.replication.verify import EXAMPLES, VerifyResult, VerifyTask, summarize, verify_partition

SOURCE = {"bootstrap.servers": "dc1:9092"}
TARGET = {"bootstrap.servers": "dc2:9092"}
SRC, DST = "dc1-id", "dc2-id"
DEST = "dc1.orders"


def original(offset: int, headers: list | None = None) -> FakeMessage:
    return FakeMessage("orders", 0, offset, b"k%d" % offset, b"v%d" % offset, headers or [("trace", b"t")], offset)


def copy_of(
    record: FakeMessage,
    dest_offset: int,
    value: bytes | None = None,
    partition: int = 0,
    headers: list | None = None,
    timestamp: int | None = None,
) -> FakeMessage:
    """The copy the flow makes of `record`: same key, value, headers and time (unless given), and one hop naming the
    original."""
    hop = Hop(SRC, record.topic(), partition, record.offset(), 1)
    headers = [*(record.headers() if headers is None else headers), (HEADER, hop.encode())]
    value = record.value() if value is None else value
    timestamp = record.timestamp()[1] if timestamp is None else timestamp
    return FakeMessage(DEST, 0, dest_offset, record.key(), value, headers, timestamp)


def verified(monkeypatch: pytest.MonkeyPatch, source: list[FakeMessage], dest: list[FakeMessage], **task) -> dict:
    consumers = {
        "dc1:9092": FakeConsumer().add("orders", 0, source),
        "dc2:9092": FakeConsumer().add(DEST, 0, dest),
    }
    monkeypatch.setattr(verify, "Consumer", lambda config: consumers[config["bootstrap.servers"]])
    end = task.pop("end", source[-1].offset() + 1 if source else 0)
    result = verify_partition(VerifyTask(SOURCE, TARGET, SRC, DST, "orders", 0, DEST, end, **task))
    return result.to_dict()


def counts(result: dict) -> tuple[int, ...]:
    keys = ("expected", "copied", "filtered", "skipped", "missing", "duplicated", "mismatched")
    return tuple(result[key] for key in keys)


def test_every_record_copied_once_as_it_was_is_ok(monkeypatch) -> None:
    source = [original(o) for o in range(4)]
    dest = [FakeMessage(DEST, 0, 0, b"local", b"x"), *(copy_of(r, i + 1) for i, r in enumerate(source))]
    result = verified(monkeypatch, source, dest)
    assert counts(result) == (4, 4, 0, 0, 0, 0, 0)
    assert result["ok"] and result["examples"] == {}


def test_missing_duplicated_and_mismatched_copies_are_counted_with_their_offsets(monkeypatch) -> None:
    source = [original(o) for o in range(5)]
    dest = [
        copy_of(source[0], 0),
        copy_of(source[1], 1),
        copy_of(source[1], 2),
        copy_of(source[1], 3),  # offset 1 copied three times: two duplicates
        copy_of(source[3], 4, value=b"changed"),
    ]  # offsets 2 and 4 never copied
    result = verified(monkeypatch, source, dest)
    assert counts(result) == (5, 3, 0, 0, 2, 2, 1)
    assert result["examples"] == {"missing": [2, 4], "duplicated": [1], "mismatched": [3]}
    assert result["mismatched_fields"] == {"value": 1}
    assert not result["ok"]


def test_a_changed_header_or_timestamp_is_a_mismatch_named_by_its_field(monkeypatch) -> None:
    source = [original(o) for o in range(4)]
    dest = [
        copy_of(source[0], 0, headers=[("trace", b"other")]),
        copy_of(source[1], 1, timestamp=source[1].timestamp()[1] + 1),
        copy_of(source[2], 2, headers=[]),  # a header dropped
        copy_of(source[3], 3),
        copy_of(source[3], 4, value=b"x", timestamp=0),  # a duplicate that differs in two fields
    ]
    result = verified(monkeypatch, source, dest)
    assert counts(result) == (4, 4, 0, 0, 0, 1, 4)
    assert result["mismatched_fields"] == {"headers": 2, "timestamp": 2, "value": 1}
    assert result["examples"] == {"duplicated": [3], "mismatched": [0, 1, 2, 3]}


def test_copies_of_another_origin_do_not_count(monkeypatch) -> None:
    source = [original(0)]
    other_partition = copy_of(original(0), 0, partition=1)
    result = verified(monkeypatch, source, [other_partition])
    assert counts(result) == (1, 0, 0, 0, 1, 0, 0)


def test_records_the_cycle_rule_blocks_are_filtered_unless_forced(monkeypatch) -> None:
    back_home = [(HEADER, Hop(DST, DEST, 0, 7, 500).encode())]  # a copy of the target's own record
    source = [original(0), original(1, back_home), original(2)]
    dest = [copy_of(source[0], 0), copy_of(source[2], 1)]
    assert counts(verified(monkeypatch, source, dest)) == (2, 2, 1, 0, 0, 0, 0)

    force = ForceCopy(cluster=DST, topic=DEST, from_ms=0, to_ms=10)
    forced = verified(monkeypatch, source, dest, force=force)
    assert counts(forced) == (3, 2, 0, 0, 1, 0, 0) and forced["examples"] == {"missing": [1]}


def test_skipped_ranges_and_offsets_outside_start_and_end_are_not_judged(monkeypatch) -> None:
    source = [original(o) for o in range(10)]
    dest = [copy_of(source[o], i) for i, o in enumerate((2, 5, 6))]
    result = verified(monkeypatch, source, dest, start=2, end=7, skipped=((3, 4),))
    assert counts(result) == (3, 3, 0, 2, 0, 0, 0) and result["ok"]


def test_examples_are_the_first_few_offsets(monkeypatch) -> None:
    source = [original(o) for o in range(EXAMPLES + 3)]
    result = verified(monkeypatch, source, [])
    assert result["missing"] == EXAMPLES + 3 and result["examples"] == {"missing": list(range(EXAMPLES))}


def test_records_not_copied_yet_are_read_again_until_they_settle(monkeypatch) -> None:
    source = [original(0), original(1)]
    target = FakeConsumer().add(DEST, 0, [copy_of(source[0], 0)])
    consumers = {"dc1:9092": FakeConsumer().add("orders", 0, source), "dc2:9092": target}
    monkeypatch.setattr(verify, "Consumer", lambda config: consumers[config["bootstrap.servers"]])
    waits = []

    def replicator_copies_meanwhile(seconds: float) -> None:
        waits.append(seconds)
        target.add(DEST, 0, [copy_of(source[0], 0), copy_of(source[1], 1)])

    patch_sleep(monkeypatch, verify, replicator_copies_meanwhile)
    result = verify_partition(VerifyTask(SOURCE, TARGET, SRC, DST, "orders", 0, DEST, 2, settle_s=60))
    assert (result.copied, result.missing, len(waits)) == (2, 0, 1)


def test_summarize_adds_partitions_up_and_names_each_problem_in_one_line() -> None:
    good = VerifyResult("orders", 0, DEST, expected=3, copied=3)
    bad = VerifyResult(
        "orders", 1, DEST, expected=5, copied=4, missing=1, duplicated=2, mismatched=3,
        mismatched_fields={"value": 1, "timestamp": 2},
        examples={"missing": [3], "duplicated": [5], "mismatched": [6, 7, 8]},
    )  # fmt: skip
    summary = summarize([good, bad])
    assert (summary["status"], summary["expected"], summary["copied"], summary["missing"]) == ("failed", 8, 7, 1)
    assert summary["mismatched_fields"] == {"value": 1, "timestamp": 2}
    assert summary["error"] == (
        "1 missing, 2 duplicated, 3 mismatched (value 1, timestamp 2) of 8 records, in 1 of 2 partitions; "
        f"{DEST}-1: missing [3], duplicated [5], mismatched [6, 7, 8]"
    )
    assert "\n" not in summary["error"]
    assert summarize([good]) == {
        "expected": 3, "copied": 3, "filtered": 0, "skipped": 0, "missing": 0, "duplicated": 0, "mismatched": 0,
        "mismatched_fields": {}, "status": "verified",
    }  # fmt: skip
