"""Destination topics of a flow: created like their source, grown with it, configs kept in step.

A copied record keeps its partition, so a destination topic must have at least the source's partition
count. A missing destination is created with the source's count and (with `sync_topic_configs`) its
topic configs. A smaller destination is grown only when this flow itself created or synced it at exactly
its current count (`flow_state`), i.e. when the difference is a source partition increase being
propagated; a smaller topic someone else made is refused, since adding partitions to it would re-route
its own producers' keys. A larger destination is fine.

Config sync mirrors MirrorMaker 2 with incremental alter configs (KIP-894): the destination's dynamic topic
configs follow the source's (SET what differs, DELETE what the source no longer overrides), except the keys
in CONFIG_EXCLUDE, which are never read nor written so each cluster keeps its own.

The flow state (destination topic -> partition count last synced) is persisted by the caller in the
target's compacted `_kdr.progress` under key `<flow>/__topics__` (`persist_flow_state`/`load_flow_state`).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
    ResourceType,
)

from ..clients import wait_for_leaders
from ..topology import COPIED_INTERNAL_TOPICS, INTERNAL_TOPIC_PREFIX, Flow
from .internal import PROGRESS, TOPIC_CONFIGS, latest_value, put_records

CONFIG_EXCLUDE = tuple(
    re.compile(p)
    for p in (
        # MirrorMaker 2's defaults (DefaultConfigPropertyFilter):
        r"follower\.replication\.throttled\.replicas",  # replica ids of the source's brokers
        r"leader\.replication\.throttled\.replicas",
        r"min\.insync\.replicas",  # depends on the target's replication factor
        r"unclean\.leader\.election\.enable",  # each cluster's own durability choice
        r"message\.timestamp\.type",  # the target must keep CreateTime, or copies lose their timestamps
        r"message\.timestamp\.difference\.max\.ms",  # would refuse copies of old records
        # Their KIP-937 successors, for the same reason:
        r"message\.timestamp\.(before|after)\.max\.ms",
        # Tiered storage is set up per cluster; enabling it where it is not configured fails:
        r"remote\.storage\.enable",
        r"local\.retention\.(ms|bytes)",
        # Confluent Server placement and tiering, tied to the source's racks and brokers:
        r"confluent\..*",
    )
)
"""Topic config keys never synced. segment.bytes and other storage tuning are synced: they are safe on
any cluster and part of what the operator chose for the topic."""

STATE_KEY_SUFFIX = "__topics__"


class TopicSyncError(RuntimeError):
    """A destination topic cannot be made to match its source; the message is one line saying which and why."""


@dataclass
class SyncReport:
    created: list[str] = field(default_factory=list)
    grown: dict[str, int] = field(default_factory=dict)
    """destination topic -> its new partition count"""
    changed_configs: dict[str, dict[str, str | None]] = field(default_factory=dict)
    """destination topic -> key -> value set (None: deleted, back to the target's default)"""
    flow_state: dict[str, int] = field(default_factory=dict)
    """destination topic -> partition count, for the next call"""


def excluded(key: str) -> bool:
    return any(p.fullmatch(key) for p in CONFIG_EXCLUDE)


def sync_topics(
    flow: Flow,
    source_admin: AdminClient,
    target_admin: AdminClient,
    *,
    flow_state: dict[str, int] | None,
    timeout: float = 15.0,
) -> SyncReport:
    """Make the flow's destination topics ready; everything is checked before anything changes.

    Connection failures surface as KafkaException (callers retry); refusals as TopicSyncError."""
    source_topics = {
        name: len(meta.partitions)
        for name, meta in source_admin.list_topics(timeout=timeout).topics.items()
        if meta.error is None and flow.copies(name)
    }
    dests = _destinations(flow, source_topics)
    target_meta = target_admin.list_topics(timeout=timeout)
    target_topics = {name: len(meta.partitions) for name, meta in target_meta.topics.items() if meta.error is None}

    to_create, to_grow = _changes(flow, source_topics, dests, target_topics, flow_state or {})
    source_configs = dynamic_configs(source_admin, list(source_topics), timeout) if flow.sync_topic_configs else {}
    report = SyncReport()
    if to_create:
        replication_factor = max(1, min(3, len(target_meta.brokers)))
        new_topics = [
            NewTopic(
                dests[t],
                source_topics[t],
                replication_factor,
                config={**TOPIC_CONFIGS.get(dests[t], {}), **source_configs.get(t, {})},
            )
            for t in to_create
        ]
        _settle(flow, "create", target_admin.create_topics(new_topics, operation_timeout=timeout), timeout)
        report.created = [dests[t] for t in to_create]
        wait_for_leaders(target_admin, report.created, timeout)
    if to_grow:
        futures = target_admin.create_partitions(
            [NewPartitions(d, n) for d, n in to_grow.items()], operation_timeout=timeout
        )
        _settle(flow, "add partitions to", futures, timeout)
        report.grown = dict(to_grow)
        wait_for_leaders(target_admin, list(to_grow), timeout)
    if flow.sync_topic_configs:
        existing = {t: dests[t] for t in source_topics if t not in to_create}
        report.changed_configs = _sync_configs(flow, target_admin, existing, source_configs, timeout)
    report.flow_state = {dests[t]: max(n, target_topics.get(dests[t], 0)) for t, n in source_topics.items()}
    return report


def _changes(
    flow: Flow,
    source_topics: dict[str, int],
    dests: dict[str, str],
    target_topics: dict[str, int],
    state: dict[str, int],
) -> tuple[list[str], dict[str, int]]:
    """The source topics whose destination is to be created, and the destinations to grow (to their source's
    partition count). A destination with fewer partitions than its source that the flow did not make so (`state`:
    the counts it left) is refused, all such at once: its records would change partition."""
    refusals, to_create, to_grow = [], [], {}
    for topic, count in sorted(source_topics.items()):
        dest = dests[topic]
        have = target_topics.get(dest)
        if have is None:
            to_create.append(topic)
        elif have < count and state.get(dest) == have:
            to_grow[dest] = count
        elif have < count:
            refusals.append(
                f"destination topic {flow.target}:{dest} has {have} partitions, fewer than its source "
                f"{flow.source}:{topic} ({count}): records would change partition; delete it or add "
                f"partitions"
            )
    if refusals:
        raise TopicSyncError("; ".join(refusals))
    return to_create, to_grow


def _destinations(flow: Flow, source_topics: dict[str, int]) -> dict[str, str]:
    """Destination name of each source topic; two sources into one destination, or a data topic renamed
    into kafka-dr's internal namespace, would mix records that must stay apart."""
    dests: dict[str, str] = {}
    for topic in sorted(source_topics):
        dest = flow.destination_topic(topic)
        if topic not in COPIED_INTERNAL_TOPICS and dest.startswith(INTERNAL_TOPIC_PREFIX):
            raise TopicSyncError(
                f"flow {flow.name}: {flow.source}:{topic} would be copied to {flow.target}:{dest}, "
                f"a name reserved for kafka-dr's internal topics; change the rename"
            )
        clash = next((t for t, d in dests.items() if d == dest), None)
        if clash is not None:
            raise TopicSyncError(
                f"flow {flow.name}: source topics {flow.source}:{clash} and {flow.source}:{topic} "
                f"would both be copied to {flow.target}:{dest}; change the rename"
            )
        dests[topic] = dest
    return dests


def dynamic_configs(admin: AdminClient, topics: list[str], timeout: float) -> dict[str, dict[str, str]]:
    """Per topic, the configs set on the topic itself (not broker or built-in defaults), minus excluded keys."""
    if not topics:
        return {}
    futures = admin.describe_configs([ConfigResource(ResourceType.TOPIC, t) for t in topics], request_timeout=timeout)
    result = {}
    for resource, future in futures.items():
        entries = future.result(timeout).values()
        result[resource.name] = {
            e.name: e.value
            for e in entries
            if e.source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value and e.value is not None and not excluded(e.name)
        }
    return result


def _sync_configs(
    flow: Flow,
    target_admin: AdminClient,
    dests: dict[str, str],
    source_configs: dict[str, dict[str, str]],
    timeout: float,
) -> dict[str, dict[str, str | None]]:
    """Bring existing destinations' dynamic configs in line with their sources'; returns what changed."""
    target_configs = dynamic_configs(target_admin, list(dests.values()), timeout)
    changes: dict[str, dict[str, str | None]] = {}
    for topic, dest in sorted(dests.items()):
        want, have = source_configs.get(topic, {}), target_configs.get(dest, {})
        change: dict[str, str | None] = {k: v for k, v in sorted(want.items()) if have.get(k) != v}
        change.update({k: None for k in sorted(have) if k not in want})
        if change:
            changes[dest] = change
    if changes:
        resources = [
            ConfigResource(
                ResourceType.TOPIC,
                dest,
                incremental_configs=[
                    ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET)
                    if v is not None
                    else ConfigEntry(k, None, incremental_operation=AlterConfigOpType.DELETE)
                    for k, v in change.items()
                ],
            )
            for dest, change in changes.items()
        ]
        futures = target_admin.incremental_alter_configs(resources, request_timeout=timeout)
        _settle(flow, "alter configs of", {r.name: f for r, f in futures.items()}, timeout)
    return changes


def _settle(flow: Flow, action: str, futures: dict[Any, Any], timeout: float) -> None:
    """Wait for admin results; a retriable error propagates as KafkaException, a refusal as TopicSyncError."""
    for name, future in futures.items():
        try:
            future.result(timeout)
        except KafkaException as exc:
            err = exc.args[0] if exc.args and isinstance(exc.args[0], KafkaError) else None
            if err is None or err.retriable() or err.code() in _TRANSIENT:
                raise
            raise TopicSyncError(f"flow {flow.name}: cannot {action} {flow.target}:{name}: {err.str()}") from None


_TRANSIENT = (
    KafkaError._TRANSPORT,
    KafkaError._TIMED_OUT,
    KafkaError.TOPIC_ALREADY_EXISTS,
)  # a concurrent creator: the next round sees the topic and checks it


def _state_key(flow_name: str) -> bytes:
    return f"{flow_name}/{STATE_KEY_SUFFIX}".encode()


def persist_flow_state(
    target_config: dict[str, Any], flow_name: str, flow_state: dict[str, int], timeout: float = 10.0
) -> None:
    """Store the flow state in the target's `_kdr.progress` (it must survive the loss of the source)."""
    put_records(target_config, PROGRESS, [(_state_key(flow_name), flow_state)], timeout)


def load_flow_state(target_config: dict[str, Any], flow_name: str, timeout: float = 10.0) -> dict[str, int]:
    """The flow state last persisted ({} if none): `_kdr.progress` read to its end, the last value wins."""
    key = _state_key(flow_name)
    value = latest_value(target_config, PROGRESS, key, timeout)
    if value is None:
        return {}
    try:
        state = json.loads(value)
    except ValueError:
        state = None
    if not isinstance(state, dict) or not all(isinstance(k, str) and type(v) is int for k, v in state.items()):
        raise TopicSyncError(
            f"{PROGRESS}: value of key {key.decode()} is not a JSON object of topic -> partition count: {value[:80]!r}"
        )
    return state
