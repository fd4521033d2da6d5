"""Fixtures of the integration tests (the Spark session for the jobs run in process is tests/conftest.py's `spark`).

`broker_pair` gives two independent single-node clusters (dc1, dc2): the brokers of the worker's session stack,
which is what most replication tests need. Tests must use topic, group and flow names of their own, since the
clusters are shared (with the Airflow tests too).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from support.spark import close_cached_clients
from support.stack import BrokerPair, Stack


@pytest.fixture(scope="session")
def broker_pair(stack: Stack) -> Iterator[BrokerPair]:
    """dc1 and dc2 of the session's stack, each with its own cluster id."""
    try:
        yield BrokerPair.of(stack)
    finally:
        close_cached_clients()
