"""The drill's probe application on a stack of its own: Avro through each DC's schema registry, and a move of its client
aliases from dc1 to dc2 while it runs (what dr_failover's switch does), counted by its own consumer."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from support.kafka import high_watermarks
from support.stack import running_stack

from kafka_dr.access import ClusterAccess
from kafka_dr.client_switch import switch
from kafka_dr.drill.probe import ProbeApplication
from kafka_dr.topology import load_topology
from kafka_dr_dev.demo import ensure_topic, known_state
from kafka_dr_dev.local.stack import LocalStack

pytestmark = pytest.mark.integration

TOPIC, PRODUCER_ALIAS, CONSUMER_ALIAS = "topic1", "orders-producer", "orders-consumer"
CLIENTS = (
    f"clients:\n  {PRODUCER_ALIAS}: {{cluster: dc1, role: producer}}\n"
    f"  {CONSUMER_ALIAS}: {{cluster: dc1, role: consumer}}\n"
)


def until(condition, timeout: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.2)
    return condition()


@pytest.mark.timeout(240)
def test_the_probe_follows_its_aliases_and_counts_each_record_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KDR_STATE_DIR", str(tmp_path / "state"))
    with running_stack(tmp_path / "stack") as stack:
        topology = load_topology(stack.write_topology("demo", extra=CLIENTS))
        for dc in ("dc1", "dc2"):
            ensure_topic(ClusterAccess.from_environ(topology).config(dc), TOPIC, 3)
        app = ProbeApplication(topology, TOPIC, PRODUCER_ALIAS, CONSUMER_ALIAS, rate=50, log=lambda _: None)
        app.start()
        try:
            assert until(lambda: len(app.tally.consumed) >= 50), app.tally
            app.hold_consumer()  # the drill's consumer is behind at the disaster
            time.sleep(0.6)
            held, acknowledged = len(app.tally.consumed), len(app.tally.acknowledged)
            assert until(lambda: len(app.tally.acknowledged) >= acknowledged + 25) and len(app.tally.consumed) == held
            app.release_consumer()
            assert app.wait_consumed(set(app.tally.acknowledged), 30), app.tally
            # Producers first, as a planned dr_failover moves them: with no flow here, a record the producer still
            # wrote to dc1 after the consumer had left would never reach it. dc2 has none of dc1's records: the
            # group starts there at the earliest offset, as it would at translated offsets after a failover.
            switch(topology, [PRODUCER_ALIAS], "dc2", "test")
            assert until(lambda: "probe producer moves dc1 -> dc2" in app.tally.moves), app.tally
            in_dc1 = sum(
                n
                for (topic, _), n in high_watermarks(ClusterAccess.from_environ(topology).config("dc1")).items()
                if topic == TOPIC
            )
            assert until(lambda: len(set(app.tally.consumed)) >= in_dc1), (in_dc1, app.tally)  # dc1 read to its end
            switch(topology, [CONSUMER_ALIAS], "dc2", "test")
            before = len(app.tally.acknowledged)
            assert until(lambda: len(app.tally.acknowledged) >= before + 50), app.tally
            app.stop_producing()
            assert app.drain(60), f"lost {app.tally.lost}"
        finally:
            app.stop()
        # Where a planned failover leaves things, a later drill starts from the known state: aliases home, dc2's
        # registry a follower of dc1's store again, dc1's the leader on its own.
        local, dc1, dc2 = stack.local, stack.local.config.dc("dc1"), stack.local.config.dc("dc2")
        local.restart_registry("dc1", dc2.broker_address, False)
        local.restart_registry("dc2", dc2.broker_address, True)
        assert known_state(topology, LocalStack(local.data_dir)) == [
            f"{PRODUCER_ALIAS} moved back to dc1",
            f"{CONSUMER_ALIAS} moved back to dc1",
            "the dc2 registry restarted: it follows dc1's store",
            "the dc1 registry restarted: it leads on its own store",
        ]
        restored = LocalStack(local.data_dir).config
        assert [(dc.registry_kafkastore, dc.registry_leader_eligible) for dc in restored.dcs] == [
            (dc1.broker_address, True),
            (dc1.broker_address, False),
        ]
        assert known_state(topology, LocalStack(local.data_dir)) == []  # nothing off: nothing done
    tally = app.tally
    assert tally.duplicated == tally.lost == tally.read_twice == 0
    assert (tally.sent, tally.refused, tally.unacknowledged) == (len(tally.acknowledged), set(), 0)
    assert sorted(set(tally.consumed)) == sorted(tally.acknowledged) == list(range(len(tally.acknowledged)))
    assert tally.moves[:2] == ["probe consumer connects to dc1", "probe producer connects to dc1"]
    assert sorted(tally.moves[2:]) == ["probe consumer moves dc1 -> dc2", "probe producer moves dc1 -> dc2"]
