"""`kafka-dr demo`: bring the local stack up and prove each DC stores and serves records.

A newcomer's first command. It shows, in both DCs, that what a producer writes (key, value,
headers) is what a consumer reads back, before any DR machinery is involved.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from pathlib import Path

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from kafka_dr.local.stack import DcConfig, LocalStack

DEMO_TOPIC = "kdr-demo"
RECORDS = 3
TIMEOUT = 15.0

Record = tuple[bytes, bytes, list[tuple[str, bytes]]]


def run_demo(data_dir: str | Path, out: Callable[[str], None] = print) -> bool:
    """Start the stack, round-trip a few records in every DC; True when all came back intact."""
    stack = LocalStack(data_dir)
    started = stack.up()
    out(f"local stack up in {stack.data_dir}" + (f" (started: {', '.join(started)})" if started else ""))
    results = [_round_trip(dc, out) for dc in stack.config.dcs]
    ok = all(results)
    out(f"demo: {'OK' if ok else 'FAIL'}")
    return ok


def _round_trip(dc: DcConfig, out: Callable[[str], None]) -> bool:
    run = uuid.uuid4().hex[:8]
    sent: list[Record] = [
        (
            f"key-{i}".encode(),
            f"{dc.name} demo record {i} of run {run}".encode(),
            [("kdr-demo-run", run.encode()), ("seq", str(i).encode())],
        )
        for i in range(RECORDS)
    ]
    try:
        _ensure_topic(dc.broker_address)
        positions = _produce(dc.broker_address, sent)
        where = ", ".join(f"{p}:{o}" for p, o in positions)
        out(
            f"{dc.name} ({dc.broker_address}): produced {len(sent)} records to {DEMO_TOPIC} at partition:offset {where}"
        )
        received = _consume(dc.broker_address, positions)
    except KafkaException as exc:
        out(f"{dc.name}: FAIL ({exc.args[0]})")
        return False
    for key, value, headers in received:
        out(f"  read back key={key!r} value={value!r} headers={headers!r}")
    if received == sent:
        out(f"{dc.name}: OK")
        return True
    if len(received) != len(sent):
        out(f"{dc.name}: FAIL (read back {len(received)} of {len(sent)} records within {TIMEOUT:g} s)")
    else:
        out(f"{dc.name}: FAIL (records read back differ from those sent)")
    return False


def _ensure_topic(bootstrap: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept alive: its futures die with it
    futures = admin.create_topics(
        [NewTopic(DEMO_TOPIC, num_partitions=1, replication_factor=1)], request_timeout=TIMEOUT
    )
    try:
        futures[DEMO_TOPIC].result(TIMEOUT)
    except KafkaException as exc:
        if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
            raise


def _produce(bootstrap: str, records: list[Record]) -> list[tuple[int, int]]:
    """Write `records` in order; returns each one's (partition, offset)."""
    positions: list[tuple[int, int]] = []
    errors: list[KafkaError] = []

    def delivered(err: KafkaError | None, msg: Message) -> None:
        if err is not None:
            errors.append(err)
        else:
            positions.append((msg.partition(), msg.offset()))

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "message.timeout.ms": int(TIMEOUT * 1000)})
    for key, value, headers in records:
        producer.produce(DEMO_TOPIC, key=key, value=value, headers=headers, on_delivery=delivered)
    producer.flush(TIMEOUT)
    if errors:
        raise KafkaException(errors[0])
    if len(positions) != len(records):
        raise KafkaException(KafkaError(KafkaError._TIMED_OUT, f"only {len(positions)} records delivered"))
    return positions


def _consume(bootstrap: str, positions: list[tuple[int, int]]) -> list[Record]:
    """Read exactly the records at `positions` back, in the order they were written."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "kdr-demo", "enable.auto.commit": False})
    wanted = set(positions)
    start: dict[int, int] = {}
    for partition, offset in positions:
        start[partition] = min(offset, start.get(partition, offset))
    consumer.assign([TopicPartition(DEMO_TOPIC, p, o) for p, o in start.items()])
    found: dict[tuple[int, int], Record] = {}
    try:
        while len(found) < len(wanted):
            msg = consumer.poll(TIMEOUT)
            if msg is None:
                break
            if msg.error():
                raise KafkaException(msg.error())
            if (msg.partition(), msg.offset()) in wanted:
                found[(msg.partition(), msg.offset())] = (msg.key(), msg.value(), list(msg.headers() or []))
    finally:
        consumer.close()
    return [found[pos] for pos in positions if pos in found]
