"""What the whole test session shares: the JVM settings of every Spark driver the tests start, and two halves for
`make test`'s two pytest-xdist workers, one per core: the Airflow tests (and the unit tests) in one, the broker
and Spark tests in the other, but for a few moved to even them out. Each half runs on one worker, in the order of
a serial run and on session fixtures of its own, so no test meets state that the other half left."""

from __future__ import annotations

import os
from typing import Any

import pytest

# The shared Spark session's driver (pyspark launches it, not kafka-dr's spark-submit command, which sets C1 itself:
# kafka_dr.spark.driver_jvm) lives for the tests and only schedules Python tasks: C1 alone starts it on less CPU.
os.environ.setdefault("SPARK_SUBMIT_OPTS", "-XX:TieredStopAtLevel=1")

AIRFLOW_HALF = ("airflow", "unit", "e2e")  # e2e: the browser test, a real Airflow of its own (about 200 s)
# Conformance's group tests (mostly waiting out session timeouts, on brokers of their own) even the halves out:
# without them the broker half took about 400 s of a 330 + 400 s suite.
BALANCE = ("tests/conformance/test_groups.py",)
BROKER_HALF = (  # Airflow tests that even the halves out
    "tests/airflow/test_dr_failback_cycles.py",
    "tests/airflow/test_dr_failback_rebuilt.py",
    "tests/airflow/test_spark_standalone.py",
)


def half(nodeid: str) -> str:
    """The half a test belongs to, "airflow" or "brokers", from its node id (tests/<dir>/...)."""
    path = nodeid.split("::")[0]
    if (nodeid.split("/")[1] in AIRFLOW_HALF and path not in BROKER_HALF) or path in BALANCE:
        return "airflow"
    return "brokers"


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    from xdist.scheduler import LoadScopeScheduling

    class Halves(LoadScopeScheduling):
        """xdist's scope scheduling (a scope's tests go to one worker, in order) with the halves as scopes."""

        def _split_scope(self, nodeid: str) -> str:
            return half(nodeid)

    return Halves(config, log)
