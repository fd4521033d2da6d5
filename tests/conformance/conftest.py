"""Fixtures for the Kafka conformance suite.

Default (embedded) mode: the suite starts the project's embedded broker
(``python -m kafka_dr_dev.local.broker``) on free ports in temporary directories.

External mode: with ``KDR_CONFORMANCE_BOOTSTRAP=host:port`` the suite starts no broker and runs
against that cluster (for instance a real Apache Kafka, to check the suite itself).  Tests that need
a second cluster use ``KDR_CONFORMANCE_BOOTSTRAP_2``; tests that must restart or wipe a broker are
skipped in external mode (and only there).
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.servers import BrokerProcess, EmbeddedBroker, stop_all

from .clients import CLIENT_NAMES, ClientAdapter, make_client

# kafka-python logs every connection at INFO; in a failure report those lines bury the assertion.
logging.getLogger("kafka").setLevel(logging.WARNING)

EXTERNAL_BOOTSTRAP = os.environ.get("KDR_CONFORMANCE_BOOTSTRAP") or None
EXTERNAL_BOOTSTRAP_2 = os.environ.get("KDR_CONFORMANCE_BOOTSTRAP_2") or None


def external_mode() -> bool:
    return EXTERNAL_BOOTSTRAP is not None


class BrokerFactory:
    """Starts embedded brokers in their own data dirs; stops them all at teardown."""

    def __init__(self, root: Path):
        self.root = root
        self.brokers: list[BrokerProcess] = []

    def start(self, name: str | None = None, node_id: int = 1, configs: dict[str, str] | None = None) -> BrokerProcess:
        """A new broker in a fresh data dir; ``configs`` are broker configs (``--config KEY=VALUE``)."""
        name = name or f"broker{len(self.brokers) + 1}"
        data_dir = Path(tempfile.mkdtemp(prefix=f"{name}-", dir=self.root))
        broker = EmbeddedBroker(
            f"broker-{data_dir.name}", data_dir, node_id=node_id, configs=configs, log_dir=self.root
        )
        self.brokers.append(broker)
        return broker.start()

    def start_configured(self, name: str, configs: dict[str, str]) -> BrokerProcess:
        """A broker started with broker `configs` the check depends on; skipped in external mode, where the suite
        does not configure the cluster."""
        if external_mode():
            pytest.skip(
                f"needs a broker started with {', '.join(configs)}; an external cluster "
                "(KDR_CONFORMANCE_BOOTSTRAP) is not configured by the suite"
            )
        return self.start(name, configs=configs)

    def stop_all(self) -> None:
        stop_all(self.brokers)


@pytest.fixture(scope="session")
def conformance_root() -> Iterator[Path]:
    root = Path(tempfile.mkdtemp(prefix="kdr-conformance-"))
    yield root
    if os.environ.get("KDR_CONFORMANCE_KEEP") != "1":
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="session")
def broker_factory(conformance_root) -> Iterator[BrokerFactory]:
    """Start extra embedded brokers (embedded mode only)."""
    factory = BrokerFactory(conformance_root)
    yield factory
    factory.stop_all()


@pytest.fixture(scope="session")
def broker(broker_factory) -> BrokerProcess | None:
    """The shared embedded broker (None in external mode)."""
    if external_mode():
        return None
    # Keep Kafka's default 3 s group.initial.rebalance.delay.ms. With 0, a kafka-python 3.0.12 member rejoins
    # ~200 ms after its first join and then, about one run in five, its caller thread waits forever in
    # NetworkSelector.run() while its IO thread idles (no heartbeat reaches the broker): the client bug
    # dpkp/kafka-python#3121, fixed upstream after 3.0.12. The default delay avoids that double join.
    return broker_factory.start("main")


@pytest.fixture(scope="session")
def bootstrap(broker) -> str:
    return EXTERNAL_BOOTSTRAP if external_mode() else broker.bootstrap


@pytest.fixture
def restartable_broker(broker_factory) -> BrokerProcess:
    """A dedicated embedded broker the test may stop and restart on its data dir."""
    if external_mode():
        pytest.skip(
            "needs an embedded broker to restart; an external cluster (KDR_CONFORMANCE_BOOTSTRAP) "
            "cannot be restarted by the suite"
        )
    return broker_factory.start("restartable")


@pytest.fixture
def second_cluster(broker_factory) -> str:
    """Bootstrap address of a second, independent cluster (dc2)."""
    if external_mode():
        if EXTERNAL_BOOTSTRAP_2 is None:
            pytest.skip("external mode without KDR_CONFORMANCE_BOOTSTRAP_2: no second cluster to compare with")
        return EXTERNAL_BOOTSTRAP_2
    return broker_factory.start("dc2").bootstrap


def _open_client(name: str, bootstrap: str) -> ClientAdapter:
    return make_client(name, bootstrap)


@pytest.fixture(params=CLIENT_NAMES)
def client(request, bootstrap) -> Iterator[ClientAdapter]:
    """The adapter for one client library; every test using it runs once per library."""
    c = _open_client(request.param, bootstrap)
    yield c
    c.close()


@pytest.fixture
def all_clients(bootstrap) -> Iterator[dict[str, ClientAdapter]]:
    """Both adapters at once, for cross-client checks (produce with one, consume with the other)."""
    opened = {name: _open_client(name, bootstrap) for name in CLIENT_NAMES}
    yield opened
    for c in opened.values():
        c.close()


def pytest_report_header(config):
    if external_mode():
        return f"kafka conformance: EXTERNAL cluster {EXTERNAL_BOOTSTRAP} (second: {EXTERNAL_BOOTSTRAP_2})"
    return "kafka conformance: embedded broker (python -m kafka_dr_dev.local.broker)"
