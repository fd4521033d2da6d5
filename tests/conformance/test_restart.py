"""Durability across a broker restart (SIGTERM, then a new process on the same data dir)."""

from __future__ import annotations

import pytest
from clients import CLIENT_NAMES, make_client, past_ts, records_for, unique

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("client_name", CLIENT_NAMES)
def test_data_and_committed_offsets_survive_restart(restartable_broker, client_name):
    broker = restartable_broker
    c = make_client(client_name, broker.bootstrap)
    topic, group = unique("durable"), unique("group")
    try:
        cluster_id = c.cluster_id()
        c.create_topic(topic, 2, configs={"retention.ms": "86400000"})
        records = records_for(c, 500, base_ts=past_ts(), seed=4, partition=1)
        c.produce(topic, records, batch_records=100)
        c.commit(group, {(topic, 0): 0, (topic, 1): 321}, metadata="before-restart")
    finally:
        c.close()

    broker.restart()

    c = make_client(client_name, broker.bootstrap)
    try:
        assert c.cluster_id() == cluster_id == broker.cluster_id_on_disk()
        assert c.partition_count(topic) == 2
        assert c.committed(group, [(topic, 0), (topic, 1)]) == {(topic, 0): 0, (topic, 1): 321}
        assert c.watermarks(topic, 1) == (0, 500)
        assert c.watermarks(topic, 0) == (0, 0)
        got = c.consume(topic, 1, 0, 500)
        assert [g.content() for g in got] == [(r.key, r.value, r.headers, r.timestamp_ms) for r in records]
        assert c.describe_configs(topic)["retention.ms"].value == "86400000"
        # The log goes on where it stopped.
        more = records_for(c, 10, base_ts=past_ts(), seed=5, partition=1)
        assert c.produce(topic, more) == [(1, 500 + i) for i in range(10)]
        c.commit(group, {(topic, 1): 510})
        assert c.committed(group, [(topic, 1)]) == {(topic, 1): 510}
    finally:
        c.close()
