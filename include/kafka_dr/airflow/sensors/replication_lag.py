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
        self._last_reason: str | None = None

    def execute(self, context: Context) -> Any:
        if self.deferrable:
            self.defer(trigger=self._trigger(deadline=time.time() + self.timeout), method_name="execute_complete")
        try:
            return super().execute(context)
        except AirflowSensorTimeout:
            if self._last_reason is None:
                raise
            raise AirflowSensorTimeout(f"{self._last_reason} (still after {self.timeout:g} s)") from None

    def poke(self, context: Context) -> bool | PokeReturnValue:
        trigger = self._trigger(deadline=None)
        lag = trigger.measure()
        ok, self._last_reason = check_thresholds(lag, trigger.max_records, trigger.max_seconds)
        self.log.info("%s", self._last_reason)
        if not ok and self.check_replicator and (stopped := trigger.replicator_stopped()):
            raise AirflowException(f"{self._last_reason}; {stopped}")
        return PokeReturnValue(is_done=ok, xcom_value=lag.to_json() if ok else None)

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
