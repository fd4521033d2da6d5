"""librdkafka settings for the clusters of a topology.

The bootstrap address comes from the topology file; security settings (SASL/SSL, any librdkafka
key) come from the environment variable named by `config_env_var`, as a JSON object, which the
Airflow hook fills from a connection. The YAML never holds secrets and `redact` keeps them out of
logs.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Iterator, Mapping
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Message, TopicPartition

from .topology import Cluster

SECRET_HINTS = ("password", "secret", "sasl.jaas.config", "ssl.key.pem", "oauthbearer", "token")


class ClientConfigError(ValueError):
    """A malformed client settings variable; the message names the variable, never its value."""


def config_env_var(cluster_name: str) -> str:
    """Environment variable holding extra librdkafka settings for a cluster, e.g. KDR_CLUSTER_DC1_CONFIG."""
    return f"KDR_CLUSTER_{re.sub(r'[^A-Za-z0-9]', '_', cluster_name).upper()}_CONFIG"


def extra_settings(cluster_name: str, environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    name = config_env_var(cluster_name)
    raw = (environ if environ is not None else os.environ).get(name)
    if not raw:
        return {}
    try:
        settings = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ClientConfigError(f"{name}: not a JSON object ({exc.msg} at position {exc.pos})") from None
    if not isinstance(settings, dict) or not all(
            isinstance(k, str) and isinstance(v, str | int | float | bool) for k, v in settings.items()):
        raise ClientConfigError(f"{name}: must be a JSON object of librdkafka settings (string keys, scalar values)")
    return settings


def client_config(cluster: Cluster, environ: Mapping[str, str] | None = None, **overrides: Any) -> dict[str, Any]:
    """Settings for a confluent-kafka client of `cluster`; keyword overrides use librdkafka names
    with dots written as underscores (enable_idempotence=True)."""
    return {"bootstrap.servers": cluster.bootstrap_servers, **extra_settings(cluster.name, environ),
            **{k.replace("_", "."): v for k, v in overrides.items()}}


def redact(settings: dict[str, Any]) -> dict[str, Any]:
    """A copy safe to log: values of secret-looking keys replaced."""
    return {k: ("***" if any(h in k.lower() for h in SECRET_HINTS) else v) for k, v in settings.items()}


def next_batch(consumer: Consumer, max_messages: int = 10_000, wait: float = 0.1) -> list[Message]:
    """What has arrived, at once; else the first record within `wait` seconds. (consume(n, timeout)
    would hold until n records or the whole timeout, adding its timeout to every short batch.)"""
    batch = consumer.consume(max_messages, timeout=0)
    if batch:
        return batch
    message = consumer.poll(wait)
    return [] if message is None else [message]


def read_partition(consumer: Consumer, topic: str, partition: int, start: int, stop: int,
                   idle_timeout: float) -> Iterator[Message]:
    """Records of one partition from `start` (an offset or OFFSET_BEGINNING) to `stop` (exclusive) or
    the end of the partition, whichever comes first. `consumer` needs enable.partition.eof; a
    TimeoutError follows `idle_timeout` seconds without data."""
    if start != OFFSET_BEGINNING and start >= stop:
        return
    consumer.assign([TopicPartition(topic, partition, start)])
    deadline = time.monotonic() + idle_timeout
    try:
        while True:
            batch = next_batch(consumer)
            if batch:
                deadline = time.monotonic() + idle_timeout
            elif time.monotonic() > deadline:
                raise TimeoutError(f"no data from {topic}-{partition} within {idle_timeout:g}s")
            for message in batch:
                error = message.error()
                if error is not None:
                    if error.code() == KafkaError._PARTITION_EOF:
                        return
                    raise RuntimeError(f"reading {topic}-{partition}: {error.str()}")
                if message.offset() >= stop:
                    return
                yield message
                if message.offset() >= stop - 1:
                    return  # the last wanted record: no need to wait for end-of-partition
    finally:
        consumer.unassign()
