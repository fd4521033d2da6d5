"""An application that never restarts, through a disaster dr_failover and then a dr_failback (dag.test() on an
embedded stack of its own): a FollowingProducer writes through its alias wherever it points, and two
FollowingConsumers read, one in a group the DAGs apply offsets for and one in a group they leave out (it starts at the
translation kept in the new cluster's checkpoints, and back home at its own old commits).

The consumers lag at the disaster and have delivered past the last checkpoint, so each reads a known number of
records again and must drop exactly those; dc1 holds records it never replicated, which the failback republishes while
the producer keeps writing; the producer has records dc1 never acknowledged, which it must send again to dc2 once.
Every record of the topic is delivered exactly once, in order per partition but for those stuck in dc1 and those
written during the failback."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest
from airflow.utils.state import DagRunState
from support.drills import copy_flow, fail_back, fail_over, states_of, write_topology
from support.kafka import create_topic, read_all

from kafka_dr.access import ClusterAccess
from kafka_dr.follower import FollowingConsumer, FollowingProducer
from kafka_dr.replication import replicators
from kafka_dr.topology import Topology, load_topology
from kafka_dr.translation.checkpoints import checkpoint_groups
from kafka_dr.translation.offsets import close_readers
from kafka_dr_dev.local.stack import LocalStack

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.usefixtures("jobs_in_process")]

TOPIC, PARTITIONS, FLOW = "following", 2, "wp-dc1-to-dc2"
APPLIED, SELF = "follow-applied", "follow-self"  # the DAGs apply offsets for the first only
CHECKPOINTED, AT_DISASTER = 100, 200  # records each group had delivered at the last checkpoint, at the disaster
UNREPLICATED = range(300, 310)  # acknowledged by dc1, never copied: only the failback's republish brings them
IN_FLIGHT = range(310, 360)  # produced once dc1 is down: never acknowledged there
WRITE_EVERY_S = 0.2


class Reader:
    """A FollowingConsumer polled in a thread, as far as `read_to` lets it: `values` in the order the application
    received them. Offsets are committed only by `read_to`, so each group's commits are known."""

    def __init__(self, topology, group: str) -> None:
        config = {
            "group.id": group,
            "auto.offset.reset": "earliest",
            "session.timeout.ms": 6000,
            "enable.auto.commit": False,
        }
        self.consumer = FollowingConsumer(topology, "billing", [TOPIC], config)
        self.values: list[tuple[int, int]] = []  # (partition, number)
        self._until, self._committed = 0, True
        self._running = True
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def read_to(self, count: int) -> None:
        """Deliver until `count` records in all, commit their positions, and stop there (the consumer lags)."""
        self._committed, self._until = False, count
        until(lambda: self._committed)

    def _read(self) -> None:
        while self._running:
            if len(self.values) >= self._until:
                if not self._committed:
                    self.consumer.commit(asynchronous=False)
                    self._committed = True
                time.sleep(0.05)
                continue
            message = self.consumer.poll(0.2)
            if message is not None and message.error() is None:
                self.values.append((message.partition(), int(message.value())))

    def stop(self) -> None:
        self._running = False
        self._thread.join(30)
        self.consumer.close()


class Writer:
    """The application producing one record every WRITE_EVERY_S from `start` on, in a thread, until `stop`."""

    def __init__(self, producer: FollowingProducer, start: int) -> None:
        self.producer, self.next = producer, start
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._write, daemon=True)
        self._thread.start()

    def _write(self) -> None:
        while not self._stopped.wait(WRITE_EVERY_S):
            produce(self.producer, range(self.next, self.next + 1), flush=False)
            self.producer.poll(0)
            self.next += 1

    def stop(self) -> int:
        """Stops, waits until all it wrote is acknowledged; how many records the topic holds now."""
        self._stopped.set()
        self._thread.join(30)
        assert self.producer.flush(60) == 0
        return self.next


def produce(producer: FollowingProducer, numbers: range, flush: bool = True) -> None:
    for number in numbers:
        producer.produce(TOPIC, value=str(number).encode(), key=str(number).encode(), partition=number % PARTITIONS)
    if flush:
        assert producer.flush(60) == 0


def until(condition: Callable[[], bool], timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def assert_read_once_in_order(reader: Reader, total: int) -> None:
    """Back in dc1, the reader has every record once, each from its own partition, in order but for the two
    exceptions below."""
    assert reader.consumer.cluster == "dc1"
    numbers = [v for _, v in reader.values]
    assert sorted(numbers) == list(range(total)), (reader.consumer.config["group.id"], len(numbers))
    for partition in range(PARTITIONS):
        in_partition = [v for p, v in reader.values if p == partition]
        assert all(v % PARTITIONS == partition for v in in_partition)
        # In order, but for the records stuck in dc1, which arrive once the failback republished them, and those
        # written during the failback: the catch-up's copies of what reached dc2 land after what the moved
        # producer already wrote into dc1.
        late = [v for v in in_partition if v in UNREPLICATED]
        before = [v for v in in_partition if v < 500 and v not in UNREPLICATED]
        assert late == sorted(late) and before == sorted(before), (reader.consumer.config["group.id"], in_partition)


def up_to_the_disaster(
    own_stack: LocalStack, topology: Topology, producer: FollowingProducer, readers: dict[str, Reader]
) -> None:
    """The application in dc1 while the flow replicates, then dc1 lost with records unreplicated and in flight."""
    produce(producer, range(0, 300))
    for reader in readers.values():
        reader.read_to(CHECKPOINTED)
    copy_flow(topology, FLOW)  # the replicator: all 300 copied...
    checkpoint_groups(ClusterAccess.from_environ(topology), topology.flow(FLOW), None)  # ...its last checkpoints
    close_readers()
    for reader in readers.values():
        reader.read_to(AT_DISASTER)  # delivered and committed in dc1 after the checkpoint; 100 still unread
    produce(producer, UNREPLICATED)
    own_stack.stop("dc1")  # the disaster
    produce(producer, IN_FLIGHT, flush=False)  # the application goes on writing: nothing acknowledges these


def test_an_application_follows_a_disaster_failover_and_a_failback_without_a_restart(dags, own_stack, state, tmp_path):
    dc1, dc2 = own_stack.config.dc("dc1"), own_stack.config.dc("dc2")
    path = write_topology(own_stack, tmp_path / "t.yaml", TOPIC, registry=False)
    topology = load_topology(path)
    create_topic({"bootstrap.servers": dc1.broker_address}, TOPIC, PARTITIONS)
    producer = FollowingProducer(topology, "orders-producer", {"linger.ms": 5})
    readers = {group: Reader(topology, group) for group in (APPLIED, SELF)}
    dropped: dict[str, list[int]] = {group: [] for group in readers}  # records read again, per phase
    try:
        up_to_the_disaster(own_stack, topology, producer, readers)

        run = fail_over(dags, path, "disaster", groups=APPLIED)
        assert run.state == DagRunState.SUCCESS, states_of(run)
        produce(producer, range(IN_FLIGHT.stop, 500))  # the business goes on in dc2; the 50 are sent again first
        assert producer.cluster == "dc2" and producer.resent == len(IN_FLIGHT)
        in_dc2 = 500 - len(UNREPLICATED)
        for group, reader in readers.items():
            reader.read_to(in_dc2)
            dropped[group].append(reader.consumer.dropped)

        own_stack.start("dc1")  # back, with its data
        writing = Writer(producer, start=500)  # through the failback: into dc2, then into dc1 once producers move
        try:
            run = fail_back(dags, path, groups=APPLIED, unreplicated="republish")
        finally:
            total = writing.stop()
        assert run.state == DagRunState.SUCCESS, states_of(run)
        assert producer.cluster == "dc1" and total > 520, total
        for group, reader in readers.items():
            reader.read_to(total)
            dropped[group].append(reader.consumer.dropped - dropped[group][-1])
        time.sleep(2)  # anything read twice would arrive now
        assert all(len(reader.values) == total for reader in readers.values())
    finally:
        for reader in readers.values():
            reader.stop()
        replicators.stop(FLOW)
    for reader in readers.values():
        assert_read_once_in_order(reader, total)
    # In dc2 both groups resume at the checkpoint and read again what they delivered after it. Back in dc1, the
    # applied group resumes where it stopped in dc2 and reads the republished records first; the other at its own
    # commits from before the disaster: it reads again dc1's records after them (the unreplicated ones it had not
    # seen are new to it), the resync's copies of what dc2 wrote meanwhile and the republished records.
    again = AT_DISASTER - CHECKPOINTED
    written_in_dc2 = 500 - IN_FLIGHT.start
    back_home = (UNREPLICATED.start - AT_DISASTER) + written_in_dc2 + len(UNREPLICATED)
    assert dropped == {APPLIED: [again, 0], SELF: [again, back_home]}
    # The 50 resent are in dc2 once (and maybe copies of 500-599: the flow resumed after the failback).
    in_dc2 = [int(m.value()) for m in read_all({"bootstrap.servers": dc2.broker_address}, TOPIC)]
    assert set(range(500)) <= set(in_dc2) and len(in_dc2) == len(set(in_dc2)), "dc2 lacks or doubles a record"
