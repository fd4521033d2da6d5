"""Fixtures of the integration tests: embedded brokers on free ports (the Spark session for the jobs run in process
is tests/conftest.py's `spark`).

`broker_pair` gives two independent single-broker clusters (dc1, dc2) for the whole session, which is what most
replication tests need; tests that only need brokers avoid the cost of the full local stack (registries
included). Tests must use topic and group names of their own, since the clusters are shared.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from support.servers import FAST_GROUPS, BrokerPair, start_brokers, stop_all
from support.spark import close_cached_clients


@pytest.fixture(scope="session")
def broker_pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerPair]:
    """Two single-broker clusters, dc1 and dc2, each with its own cluster id."""
    brokers = start_brokers(tmp_path_factory.mktemp("brokers"), "dc1", "dc2", configs=FAST_GROUPS)
    try:
        yield BrokerPair(brokers["dc1"], brokers["dc2"])
    finally:
        close_cached_clients()
        stop_all(brokers.values())
