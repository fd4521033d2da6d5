"""FollowingConsumer on the embedded stack: its alias moves from dc1 to dc2 while it reads, the group's offset in dc2
lies behind what it delivered (a disaster's last checkpoint), and each record still reaches the application once.

dc2's copies of dc1's records are written here with the provenance header a flow writes (the header's contract is
tested with the replicator elsewhere), so the test needs no Spark job.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from functools import partial
from pathlib import Path

import pytest
from confluent_kafka import KafkaError
from confluent_kafka.admin import AdminClient
from support.kafka import Record, commit_offsets, create_topic, produce
from support.stack import Stack, running_stack

from kafka_dr.client_switch import switch
from kafka_dr.clients import read_committed
from kafka_dr.follower import SWITCH_CHECK_S, FollowingConsumer, FollowingProducer
from kafka_dr.replication.provenance import HEADER, Hop
from kafka_dr.topology import load_topology

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

TOPIC, GROUP, ALIAS = "fc-orders", "fc-billing", "fc-consumer"
PRODUCED = "fp-orders"  # the producer test's topic
LOCAL_DC1, LOCAL_DC2 = 30, 10
DELIVERED_IN_DC1 = 20
CHECKPOINT = 12  # the group's translated offset in dc2: 8 records behind what it delivered in dc1


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """One stack for the module; the producer test stops dc1 and starts it again."""
    with running_stack(tmp_path_factory.mktemp("follower")) as running:
        yield running


def test_a_following_consumer_moves_with_its_alias_and_delivers_each_record_once(
    stack: Stack, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KDR_STATE_DIR", str(tmp_path / "state"))
    topology = load_topology(stack.write_topology("consumer", extra=f"clients:\n  {ALIAS}: {{cluster: dc1}}\n"))
    dc1, dc2 = ({"bootstrap.servers": stack.bootstrap(dc)} for dc in ("dc1", "dc2"))
    admin = AdminClient(dc1)  # held: a handle destroyed before the result fails the call
    dc1_id = admin.describe_cluster(request_timeout=10).result().cluster_id
    for config in (dc1, dc2):
        create_topic(config, TOPIC)
    produce(dc1, TOPIC, [Record(f"dc1-{i}".encode()) for i in range(LOCAL_DC1)])
    # dc2: dc1's records as a flow copies them (same offsets), then records produced in dc2 after the switch.
    copies = [[(HEADER, Hop(dc1_id, TOPIC, 0, i, 0).encode())] for i in range(LOCAL_DC1)]
    produce(dc2, TOPIC, [Record(f"dc1-{i}".encode(), headers=copy) for i, copy in enumerate(copies)])
    produce(dc2, TOPIC, [Record(f"dc2-{i}".encode()) for i in range(LOCAL_DC2)])
    commit_offsets(dc2, GROUP, {(TOPIC, 0): CHECKPOINT})

    moves: list[tuple[str | None, str]] = []
    consumer = FollowingConsumer(
        topology,
        ALIAS,
        [TOPIC],
        {"group.id": GROUP, "auto.offset.reset": "earliest"},
        on_move=lambda before, now: moves.append((before, now)),
    )
    delivered: list[tuple[str | None, str]] = []  # (cluster read from, value)
    try:
        read_until(consumer, delivered, DELIVERED_IN_DC1)
        assert consumer.cluster == "dc1"
        switch(topology, [ALIAS], "dc2", "test")
        read_until(consumer, delivered, LOCAL_DC1 + LOCAL_DC2)
        assert consumer.cluster == "dc2"
    finally:
        consumer.close()
    assert [value for _, value in delivered] == [f"dc1-{i}" for i in range(LOCAL_DC1)] + [
        f"dc2-{i}" for i in range(LOCAL_DC2)
    ]
    # What it read again in dc2: from the checkpoint to the last record it delivered in dc1 (it goes on reading
    # there until it next looks at its alias).
    in_dc1 = sum(cluster == "dc1" for cluster, _ in delivered)
    assert in_dc1 >= DELIVERED_IN_DC1 and consumer.dropped == in_dc1 - CHECKPOINT
    assert moves == [(None, "dc1"), ("dc1", "dc2")]


def read_until(
    consumer: FollowingConsumer, delivered: list[tuple[str | None, str]], count: int, polls: int = 200
) -> None:
    """Poll until `count` records were delivered in all (polls of 0.2 s at most)."""
    for _ in range(polls):
        if len(delivered) >= count:
            return
        message = consumer.poll(0.2)
        if message is not None and message.error() is None:
            delivered.append((consumer.cluster, (message.value() or b"").decode()))
    raise AssertionError(f"{len(delivered)} of {count} records delivered: {delivered}")


def test_a_following_producer_moves_with_its_alias_and_produces_again_what_its_old_cluster_never_acknowledged(
    stack: Stack, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """20 records queued while dc1 is down, the alias moved to dc2: they are produced there, before the 10 produced
    after the move, and each of the 70 records is reported delivered once."""
    monkeypatch.setenv("KDR_STATE_DIR", str(tmp_path / "state"))
    acknowledged: list[int] = []
    try:
        topology = load_topology(stack.write_topology("follower", extra=f"clients:\n  {ALIAS}: {{cluster: dc1}}\n"))
        dc1, dc2 = ({"bootstrap.servers": stack.bootstrap(dc)} for dc in ("dc1", "dc2"))
        for config in (dc1, dc2):
            create_topic(config, PRODUCED)
        moves: list[tuple[str | None, str]] = []
        producer = FollowingProducer(topology, ALIAS, on_move=lambda before, now: moves.append((before, now)))

        def delivered(number: int, err: KafkaError | None, _message: object) -> None:
            if err is None:
                acknowledged.append(number)

        def send(numbers: range) -> None:
            for n in numbers:
                producer.produce(PRODUCED, value=str(n).encode(), partition=0, on_delivery=partial(delivered, n))

        send(range(40))
        assert producer.flush(30) == 0 and producer.cluster == "dc1"
        stack.local.stop("dc1")  # the disaster: what is produced now is never acknowledged there
        send(range(40, 60))
        producer.poll(1.0)
        switch(topology, [ALIAS], "dc2", "test")
        time.sleep(SWITCH_CHECK_S)  # the producer looks at its alias at most once a second
        send(range(60, 70))
        assert producer.flush(60) == 0
        in_dc2 = [int(m.value()) for m in read_committed(dc2, {(PRODUCED, 0): (0, 30)}, 30)]
    finally:
        stack.local.start("dc1")  # back with its data (start starts only what is stopped)
    assert producer.cluster == "dc2" and moves == [(None, "dc1"), ("dc1", "dc2")]
    assert producer.resent == 20 and in_dc2 == list(range(40, 70))
    assert sorted(acknowledged) == list(range(70))
