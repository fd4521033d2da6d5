"""An application that never restarts, through a disaster dr_failover and then a dr_failback (dag.test() on an
embedded stack of its own): a FollowingProducer writes through its alias wherever it points, and two
FollowingConsumers read continuously, one in a group the DAGs apply offsets for and one in a group they leave out
(it starts at the translation kept in the new cluster's checkpoints). Each consumer delivers every record of the
topic exactly once, in order per partition."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest
from airflow.utils.state import DagRunState
from support.drills import copy_flow, fail_back, fail_over, states_of, write_topology
from support.kafka import create_topic

from kafka_dr.follower import FollowingConsumer, FollowingProducer
from kafka_dr.replication import replicators
from kafka_dr.topology import load_topology
from kafka_dr.translation.checkpoints import checkpoint_groups
from kafka_dr.translation.offsets import close_readers

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.usefixtures("jobs_in_process")]

TOPIC, PARTITIONS, FLOW = "following", 2, "wp-dc1-to-dc2"
APPLIED, SELF = "follow-applied", "follow-self"  # the DAGs apply offsets for the first only


class Reader:
    """A FollowingConsumer polled in a thread: `values` in the order the application received them."""

    def __init__(self, topology, group: str) -> None:
        config = {"group.id": group, "auto.offset.reset": "earliest", "session.timeout.ms": 6000}
        self.consumer = FollowingConsumer(topology, "billing", [TOPIC], config)
        self.values: list[tuple[int, int]] = []  # (partition, number)
        self._running = True
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        while self._running:
            message = self.consumer.poll(0.2)
            if message is not None and message.error() is None:
                self.values.append((message.partition(), int(message.value())))

    def stop(self) -> None:
        self._running = False
        self._thread.join(30)
        self.consumer.close()


def produce(producer: FollowingProducer, numbers: range) -> None:
    for number in numbers:
        producer.produce(TOPIC, value=str(number).encode(), key=str(number).encode(), partition=number % PARTITIONS)
    assert producer.flush(60) == 0


def until(condition: Callable[[], bool], timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.2)


def test_an_application_follows_a_disaster_failover_and_a_failback_without_a_restart(dags, own_stack, state, tmp_path):
    dc1 = own_stack.config.dc("dc1")
    path = write_topology(own_stack, tmp_path / "t.yaml", TOPIC, registry=False)
    topology = load_topology(path)
    create_topic({"bootstrap.servers": dc1.broker_address}, TOPIC, PARTITIONS)
    producer = FollowingProducer(topology, "orders-producer", {"linger.ms": 5})
    readers = [Reader(topology, APPLIED), Reader(topology, SELF)]
    try:
        produce(producer, range(0, 300))
        until(lambda: all(len(r.values) >= 150 for r in readers))  # reading in dc1
        copy_flow(topology, FLOW)  # all 300 replicated: the disaster loses no record, so every one must arrive
        checkpoint_groups(topology, topology.flow(FLOW), None)  # the replicator's last checkpoint pass
        close_readers()
        own_stack.stop("dc1")  # the disaster

        run = fail_over(dags, path, "disaster", groups=APPLIED)
        assert run.state == DagRunState.SUCCESS, states_of(run)
        produce(producer, range(300, 500))  # the business goes on in dc2
        assert producer.cluster == "dc2"
        until(lambda: all(len({v for _, v in r.values}) >= 500 for r in readers))

        own_stack.start("dc1")  # back, with its data
        run = fail_back(dags, path, groups=APPLIED)
        assert run.state == DagRunState.SUCCESS, states_of(run)
        produce(producer, range(500, 600))  # and in dc1 again
        assert producer.cluster == "dc1"
        until(lambda: all(len({v for _, v in r.values}) >= 600 for r in readers))
        time.sleep(3)  # anything read twice would arrive now
    finally:
        for reader in readers:
            reader.stop()
        replicators.stop(FLOW)
    for reader in readers:
        assert reader.consumer.cluster == "dc1"
        numbers = [v for _, v in reader.values]
        assert sorted(numbers) == list(range(600)), (reader.consumer.config["group.id"], len(numbers))
        for partition in range(PARTITIONS):
            in_partition = [v for p, v in reader.values if p == partition]
            assert in_partition == sorted(in_partition) and all(v % PARTITIONS == partition for v in in_partition)
    print(f"dropped (read again, not delivered): {[r.consumer.dropped for r in readers]}, resent {producer.resent}")
