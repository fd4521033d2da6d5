"""Airflow test harness: a throw-away AIRFLOW_HOME, the project's dags/, Spark in local mode, and an
embedded two-DC stack on free ports.

Airflow reads its configuration when first imported, so the environment is set here, at conftest
import, before any test module imports airflow (kafka_dr.local and kafka_dr.spark_env do not). The
metadata DB is migrated once per session, only for tests that run DAGs (`airflow_db`); parsing,
hook and trigger tests need none.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from kafka_dr.local.stack import LocalStack, StackConfig
from kafka_dr.spark_env import spark_env

REPO_ROOT = Path(__file__).resolve().parents[2]
VENV_BIN = Path(sys.executable).parent
SESSION_DIR = Path(tempfile.mkdtemp(prefix="kdr-airflow-tests-"))

_ENV = {
    "AIRFLOW_HOME": str(SESSION_DIR / "airflow-home"),
    "AIRFLOW__CORE__DAGS_FOLDER": str(REPO_ROOT / "dags"),
    "AIRFLOW__CORE__PLUGINS_FOLDER": str(REPO_ROOT / "plugins"),
    "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
    "AIRFLOW__CORE__UNIT_TEST_MODE": "False",
    # The Spark provider's hook builds `--master local[2] --deploy-mode client` from this: a "spark"
    # connection whose host holds the whole master URL and no port.
    "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps({"conn_type": "spark", "host": "local[2]",
                                              "extra": {"deploy-mode": "client"}}),
    "KDR_STATE_DIR": str(SESSION_DIR / "state"),
}
os.environ.update(_ENV)
os.environ.update(spark_env())  # spark-submit on PATH, SPARK_HOME and PYSPARK_PYTHON from this venv
os.environ.pop("KDR_TOPOLOGY", None)  # tests name their topology files explicitly


def pytest_sessionfinish(session: pytest.Session) -> None:
    if os.environ.get("KDR_KEEP_TEST_DIRS") != "1":
        shutil.rmtree(SESSION_DIR, ignore_errors=True)


@pytest.fixture(scope="session")
def airflow_db() -> Path:
    """A migrated metadata DB in this session's AIRFLOW_HOME (about 5 s, once)."""
    home = Path(os.environ["AIRFLOW_HOME"])
    result = subprocess.run([str(VENV_BIN / "airflow"), "db", "migrate"], capture_output=True, text=True,
                            env=os.environ, timeout=180)
    assert result.returncode == 0, f"airflow db migrate failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    return home


@dataclass(frozen=True)
class Stack:
    """The embedded stack of this session and how to write topology files for its ports."""

    local: LocalStack
    root: Path

    def bootstrap(self, dc: str) -> str:
        return self.local.config.dc(dc).broker_address

    @staticmethod
    def unused_port() -> int:
        return _free_ports(1)[0]

    def write_topology(self, name: str, flows: str, schema_registry: bool = True) -> Path:
        """A topology file with this stack's clusters and the given YAML `flows:` block."""
        lines = ["clusters:"]
        for dc in self.local.config.dcs:
            registry = f', schema_registry: "{dc.registry_url}"' if schema_registry else ""
            lines.append(f'  {dc.name}: {{bootstrap_servers: "{dc.broker_address}"{registry}}}')
        lines.append(flows.strip("\n"))
        if schema_registry:
            lines.append("schema_registry: {primary: dc1}")
        path = self.root / f"{name}.yaml"
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
        return path


@pytest.fixture(scope="session")
def stack() -> Iterator[Stack]:
    """dc1 and dc2 (broker and schema registry each) on free ports, data in this session's directory."""
    root = SESSION_DIR / "stack"
    ports = _free_ports(4)
    local = LocalStack(root / "data", StackConfig.default(broker_ports=ports[:2], registry_ports=ports[2:]))
    try:
        local.up()
        yield Stack(local, root)
    finally:
        local.down()


def _free_ports(count: int) -> list[int]:
    sockets = [socket.socket() for _ in range(count)]
    try:
        for sock in sockets:
            sock.bind(("127.0.0.1", 0))
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()
