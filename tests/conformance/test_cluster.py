"""Cluster identity: two clusters (dc1, dc2) have distinct, well-formed, stable cluster ids."""

from __future__ import annotations

import re

import pytest

from .clients import CLIENT_NAMES, make_client

pytestmark = pytest.mark.integration

# Kafka cluster ids are a random UUID in URL-safe base64 without padding: 22 characters.
CLUSTER_ID = re.compile(r"^[A-Za-z0-9_-]{22}$")


def test_cluster_ids_distinct_between_clusters(bootstrap, second_cluster, broker, broker_factory):
    ids = {}
    for name in CLIENT_NAMES:
        for label, addr in (("dc1", bootstrap), ("dc2", second_cluster)):
            c = make_client(name, addr)
            try:
                ids[(name, label)] = c.cluster_id()
            finally:
                c.close()
    dc1 = {v for (_, label), v in ids.items() if label == "dc1"}
    dc2 = {v for (_, label), v in ids.items() if label == "dc2"}
    assert len(dc1) == 1 and len(dc2) == 1, f"clients disagree: {ids}"
    (id1,), (id2,) = dc1, dc2
    assert id1 != id2
    assert CLUSTER_ID.match(id1) and CLUSTER_ID.match(id2), (id1, id2)
    if broker is not None:  # embedded: the id is the one in meta.properties
        assert broker.cluster_id_on_disk() == id1
        [dc2_broker] = [b for b in broker_factory.brokers if b.bootstrap == second_cluster]
        assert dc2_broker.cluster_id_on_disk() == id2


def test_metadata_advertises_the_broker(client, broker):
    brokers = client.brokers()
    assert brokers, "no broker in metadata"
    if broker is not None:  # embedded: the node id and address it was started with
        assert brokers == {broker.node_id: ("127.0.0.1", broker.port)}
    assert all(isinstance(port, int) and port > 0 for _, port in brokers.values())
