"""Gate a DAG on a flow's replication lag (records and seconds, per partition, optionally per topic)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from airflow.sdk import BaseSensorOperator, Context, PokeReturnValue
from airflow.sdk.exceptions import AirflowException, AirflowSensorTimeout

from ...replication.lag import check_thresholds
from .. import topology_path
from ..triggers.replication_lag import ReplicationLagTrigger

WORKER_CHECK_S = 0.2  # wait_in_worker: how often lag is measured in the worker


class ReplicationLagSensor(BaseSensorOperator):
    """Waits until every source partition of `flow` lags at most `max_records` records and `max_seconds` s.

    :param flow: flow name in the topology
    :param max_records: records not yet copied, per partition (None: not checked)
    :param max_seconds: age of the oldest uncopied record, per partition (None: not checked)
    :param topics: regex (full match) restricting the source topics measured
    :param topology: topology file; default $KDR_TOPOLOGY, else include/topology.yaml
    :param deferrable: wait in the triggerer, holding no worker slot
    :param check_replicator: fail at once if the flow's tracked replicator is no longer running
    :param lag_timeout: seconds one lag measurement may take
    :param wait_in_worker: deferrable: seconds to check lag in the worker first, every WORKER_CHECK_S, before
        deferring (0: defer at once). A gate on a failover's path sets it: a gate met within that time passes within
        WORKER_CHECK_S of it, without the round trip through the triggerer and a second task process (seconds on a
        real scheduler); a longer wait holds no worker slot.
    Returns the FlowLag JSON that passed the gate.
    """

    template_fields: Sequence[str] = ("flow", "topology", "topics", "max_records", "max_seconds")
    ui_color = "#f7e8d7"

    def __init__(
        self,
        *,
        flow: str,
        max_records: int | None = None,
        max_seconds: float | None = None,
        topics: str | None = None,
        topology: str | None = None,
        deferrable: bool = True,
        check_replicator: bool = False,
        lag_timeout: float = 10.0,
        wait_in_worker: float = 0.0,
        poke_interval: float = 10.0,
        timeout: float = 600.0,
        **kwargs: Any,
    ) -> None:
        super().__init__(poke_interval=poke_interval, timeout=timeout, **kwargs)
        if max_records is None and max_seconds is None:
            raise ValueError("a lag gate needs max_records or max_seconds")
        self.flow = flow
        self.max_records = max_records
        self.max_seconds = max_seconds
        self.topics = topics
        self.topology = topology
        self.deferrable = deferrable
        self.check_replicator = check_replicator
        self.lag_timeout = lag_timeout
        self.wait_in_worker = wait_in_worker
        self._last_reason: str | None = None

    def execute(self, context: Context) -> Any:
        if self.deferrable:
            deadline = time.time() + self.timeout
            if self.wait_in_worker > 0 and (passed := self._wait_in_worker()) is not None:
                return passed
            self.defer(trigger=self._trigger(deadline=deadline), method_name="execute_complete")
        try:
            return super().execute(context)
        except AirflowSensorTimeout:
            if self._last_reason is None:
                raise
            raise AirflowSensorTimeout(f"{self._last_reason} (still after {self.timeout:g} s)") from None

    def poke(self, context: Context) -> bool | PokeReturnValue:
        done = self._check()
        self.log.info("%s", self._last_reason)
        return done

    def _check(self) -> PokeReturnValue:
        trigger = self._trigger(deadline=None)
        lag = trigger.measure()
        ok, self._last_reason = check_thresholds(lag, trigger.max_records, trigger.max_seconds)
        if not ok and self.check_replicator and (stopped := trigger.replicator_stopped()):
            raise AirflowException(f"{self._last_reason}; {stopped}")
        return PokeReturnValue(is_done=ok, xcom_value=lag.to_json() if ok else None)

    def _wait_in_worker(self) -> Any:
        """The lag JSON once the gate is met within `wait_in_worker` seconds; None when it is not (then it defers).
        Logs each new reading, not each check."""
        until = time.monotonic() + min(self.wait_in_worker, self.timeout)
        logged = None
        while True:
            done = self._check()
            if self._last_reason != logged:
                self.log.info("%s", logged := self._last_reason)
            if done.is_done:
                return done.xcom_value
            if time.monotonic() >= until:
                self.log.info("not met within %g s in the worker: waiting in the triggerer", self.wait_in_worker)
                return None
            time.sleep(WORKER_CHECK_S)

    def execute_complete(self, context: Context, event: dict[str, Any]) -> dict[str, Any]:
        """Turn the trigger's event into the task's result or a one-line failure."""
        if event["status"] == "success":
            self.log.info("%s", event["reason"])
            return event["lag"]
        if event["status"] == "timeout":
            raise AirflowSensorTimeout(f"{event['reason']} (still after {self.timeout:g} s)")
        raise AirflowException(event["message"])

    def _trigger(self, deadline: float | None) -> ReplicationLagTrigger:
        """The trigger does the measuring in both modes, so poke and defer judge lag the same way."""
        return ReplicationLagTrigger(
            flow=self.flow,
            topology=str(topology_path(self.topology)),
            max_records=None if self.max_records is None else int(self.max_records),
            max_seconds=None if self.max_seconds is None else float(self.max_seconds),
            topics=self.topics or None,
            poke_interval=self.poke_interval,
            deadline=deadline,
            lag_timeout=self.lag_timeout,
            check_replicator=self.check_replicator,
        )
