"""Destination topics of a flow against real embedded brokers: creation, growth, refusal, config sync, state."""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    ResourceType,
)
from support.kafka import create_topic, partitions
from support.retry import eventually
from support.stack import BrokerPair

from kafka_dr.replication.internal import HEARTBEATS, ensure_internal_topics
from kafka_dr.replication.topic_sync import TopicSyncError, load_flow_state, persist_flow_state, sync_topics
from kafka_dr.topology import Flow, parse_topology

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def admins(broker_pair: BrokerPair) -> tuple[AdminClient, AdminClient]:
    return AdminClient(broker_pair.dc1.config), AdminClient(broker_pair.dc2.config)


def make_flow(pair: BrokerPair, prefix: str, sync_configs: bool = True) -> Flow:
    """A flow copying topics `<prefix>.*` from dc1 to dc2, renaming `<prefix>.r*` to `{topic}.replica`."""
    return parse_topology(
        {
            "clusters": {
                "dc1": {"bootstrap_servers": pair.dc1.bootstrap},
                "dc2": {"bootstrap_servers": pair.dc2.bootstrap},
            },
            "flows": [
                {
                    "name": f"flow-{prefix}",
                    "source": "dc1",
                    "target": "dc2",
                    "topics": {"include": [f"{prefix}\\..*"]},
                    "rename": {f"{prefix}\\.r.*": "{topic}.replica"},
                    "sync_topic_configs": sync_configs,
                }
            ],
        }
    ).flows[0]


def dynamic_configs(admin: AdminClient, topic: str) -> dict[str, str]:
    (future,) = admin.describe_configs([ConfigResource(ResourceType.TOPIC, topic)]).values()
    return {e.name: e.value for e in future.result(10).values() if e.source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value}


def alter(admin: AdminClient, topic: str, **changes: str | None) -> None:
    """Incremental config change; keyword names use '_' for '.', None deletes the key."""
    entries = [
        ConfigEntry(
            k.replace("_", "."),
            v,
            incremental_operation=AlterConfigOpType.SET if v is not None else AlterConfigOpType.DELETE,
        )
        for k, v in changes.items()
    ]
    (future,) = admin.incremental_alter_configs(
        [ConfigResource(ResourceType.TOPIC, topic, incremental_configs=entries)]
    ).values()
    future.result(10)


def new_prefix() -> str:
    return f"ts{uuid.uuid4().hex[:8]}"


def test_missing_destinations_are_created_like_their_source(broker_pair: BrokerPair, admins) -> None:
    source, target = admins
    p = new_prefix()
    create_topic(
        broker_pair.dc1.config,
        f"{p}.orders",
        3,
        **{"retention.ms": "123456", "cleanup.policy": "compact", "min.insync.replicas": "1"},
    )  # excluded: the target keeps its own
    create_topic(broker_pair.dc1.config, f"{p}.raw", 2)
    ensure_internal_topics(source, (HEARTBEATS,))

    report = sync_topics(make_flow(broker_pair, p), source, target, flow_state=None)

    assert sorted(t for t in report.created if t.startswith(p)) == [f"{p}.orders", f"{p}.raw.replica"]
    assert (partitions(target, f"{p}.orders"), partitions(target, f"{p}.raw.replica")) == (3, 2)
    assert dynamic_configs(target, f"{p}.orders") == {"retention.ms": "123456", "cleanup.policy": "compact"}
    assert dynamic_configs(target, f"{p}.raw.replica") == {}
    assert report.flow_state[f"{p}.orders"] == 3 and report.flow_state[f"{p}.raw.replica"] == 2
    # Heartbeats are copied to the same name, so the target's topic exists too.
    assert HEARTBEATS in target.list_topics(timeout=10).topics and report.flow_state[HEARTBEATS] == 1
    assert report.grown == {} and f"{p}.orders" not in report.changed_configs

    again = sync_topics(make_flow(broker_pair, p), source, target, flow_state=report.flow_state)
    assert (again.created, again.grown, again.changed_configs, again.flow_state) == ([], {}, {}, report.flow_state)


def test_source_partition_increase_is_propagated(broker_pair: BrokerPair, admins) -> None:
    source, target = admins
    p = new_prefix()
    flow = make_flow(broker_pair, p)
    create_topic(broker_pair.dc1.config, f"{p}.events", 2)
    state = sync_topics(flow, source, target, flow_state={}).flow_state
    source.create_partitions([NewPartitions(f"{p}.events", 5)])[f"{p}.events"].result(10)
    # The source's own metadata shows the new count a moment after the request returns (the node applies the
    # controller's record after answering): a sync that early finds nothing to grow, and the next one grows it.
    eventually(lambda: partitions(source, f"{p}.events") == 5, "the source's 5 partitions", 30)

    report = sync_topics(flow, source, target, flow_state=state)

    assert report.grown == {f"{p}.events": 5} and partitions(target, f"{p}.events") == 5
    assert report.flow_state[f"{p}.events"] == 5


def test_smaller_destination_not_ours_is_refused_before_anything_changes(broker_pair: BrokerPair, admins) -> None:
    source, target = admins
    p = new_prefix()
    create_topic(broker_pair.dc1.config, f"{p}.topic2", 4)
    create_topic(broker_pair.dc1.config, f"{p}.other", 1)
    create_topic(broker_pair.dc2.config, f"{p}.topic2", 2)  # made by someone else

    with pytest.raises(TopicSyncError) as refused:
        sync_topics(make_flow(broker_pair, p), source, target, flow_state={})
    assert str(refused.value) == (
        f"destination topic dc2:{p}.topic2 has 2 partitions, fewer than its source "
        f"dc1:{p}.topic2 (4): records would change partition; delete it or add partitions"
    )
    assert f"{p}.other" not in target.list_topics(timeout=10).topics
    assert partitions(target, f"{p}.topic2") == 2

    # Synced by this flow, but at another count than it has now: not a propagation either.
    with pytest.raises(TopicSyncError, match="fewer than its source"):
        sync_topics(make_flow(broker_pair, p), source, target, flow_state={f"{p}.topic2": 3})


def test_larger_destination_is_accepted_and_can_grow_later(broker_pair: BrokerPair, admins) -> None:
    source, target = admins
    p = new_prefix()
    create_topic(broker_pair.dc1.config, f"{p}.wide", 2)
    create_topic(broker_pair.dc2.config, f"{p}.wide", 3)
    flow = make_flow(broker_pair, p)
    state = sync_topics(flow, source, target, flow_state={}).flow_state
    assert state[f"{p}.wide"] == 3
    source.create_partitions([NewPartitions(f"{p}.wide", 4)])[f"{p}.wide"].result(10)
    assert sync_topics(flow, source, target, flow_state=state).grown == {f"{p}.wide": 4}


def test_config_changes_are_propagated_except_excluded_keys(broker_pair: BrokerPair, admins) -> None:
    source, target = admins
    p = new_prefix()
    topic = f"{p}.cfg"
    flow = make_flow(broker_pair, p)
    create_topic(broker_pair.dc1.config, topic, 1, **{"retention.ms": "1000", "segment.bytes": "1048576"})
    state = sync_topics(flow, source, target, flow_state={}).flow_state
    alter(target, topic, min_insync_replicas="1")  # a DR-side choice, excluded from sync

    alter(
        source,
        topic,
        retention_ms=None,
        segment_ms="60000",
        max_message_bytes="2000000",
        unclean_leader_election_enable="true",
    )
    report = sync_topics(flow, source, target, flow_state=state)

    assert report.changed_configs == {
        topic: {"max.message.bytes": "2000000", "segment.ms": "60000", "retention.ms": None}
    }
    assert dynamic_configs(target, topic) == {
        "segment.bytes": "1048576",
        "segment.ms": "60000",
        "max.message.bytes": "2000000",
        "min.insync.replicas": "1",
    }


def test_configs_left_alone_when_the_flow_does_not_sync_them(broker_pair: BrokerPair, admins) -> None:
    source, target = admins
    p = new_prefix()
    create_topic(broker_pair.dc1.config, f"{p}.plain", 1, **{"retention.ms": "1000"})
    report = sync_topics(make_flow(broker_pair, p, sync_configs=False), source, target, flow_state={})
    assert f"{p}.plain" in report.created and dynamic_configs(target, f"{p}.plain") == {}
    alter(source, f"{p}.plain", retention_ms="2000")
    later = sync_topics(make_flow(broker_pair, p, sync_configs=False), source, target, flow_state=report.flow_state)
    assert later.changed_configs == {} and dynamic_configs(target, f"{p}.plain") == {}


def test_flow_state_persists_in_the_target(broker_pair: BrokerPair) -> None:
    config, flow = broker_pair.dc2.config, f"flow-{new_prefix()}"
    assert load_flow_state(config, flow) == {}
    persist_flow_state(config, flow, {"a": 1})
    persist_flow_state(config, f"{flow}-other", {"b": 9})
    persist_flow_state(config, flow, {"a": 2, "c": 3})
    assert load_flow_state(config, flow) == {"a": 2, "c": 3}
    assert load_flow_state(config, f"{flow}-other") == {"b": 9}
