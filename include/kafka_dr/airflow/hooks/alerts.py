"""The alert targets of the topology's `alerts:` section, with the `${VAR}`s of their URLs taken from the task's
environment and, on top, from the Airflow connection `kafka_dr_alerts` (its extra: a JSON object of NAME: value; any
connection type). So an SMTP password or a webhook token can live in Airflow's secrets backend rather than in the
workers' environment. Nothing of it is logged; kafka_dr.alerts names targets by their masked URLs.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from typing import Any

from airflow.sdk import BaseHook
from airflow.sdk.exceptions import AirflowFailException, AirflowNotFoundException

from ...alerts import Alert, AlertConfigError, Target, answers, dr_report_alert, notify, targets
from ...topology import Topology

ALERTS_CONN_ID = "kafka_dr_alerts"

log = logging.getLogger(__name__)


def alerts_environ() -> dict[str, str]:
    """The environment, with the connection's variables on top (none when there is no such connection)."""
    try:
        extra = BaseHook.get_connection(ALERTS_CONN_ID).extra_dejson
    except AirflowNotFoundException:
        extra = {}
    return {**os.environ, **{str(k): str(v) for k, v in extra.items()}}


def topology_targets(topology: Topology) -> list[Target]:
    """The topology's targets, ready to send to ([] without URLs: no connection is looked up). Raises
    AlertConfigError naming a bad one."""
    return targets(topology.alerts, alerts_environ()) if topology.alerts.urls else []


def alert_targets(topology: Topology) -> list[Target]:
    """topology_targets for a task: a bad target fails it with its one line, before anything is sent."""
    try:
        return topology_targets(topology)
    except AlertConfigError as exc:
        raise AirflowFailException(str(exc)) from None


def send_report_alert(topology: Topology, dag_id: str, run_id: str, written: Mapping[str, Any]) -> None:
    """The dr_report alert of a report task that wrote `written` (write_report's result)."""
    try:
        alert = dr_report_alert(dag_id, run_id, written, written["report_file"])
    except (KeyError, TypeError, ValueError) as exc:
        log.warning("dr_report alert of %s %s not sent: %s", dag_id, run_id, exc)
        return
    send_alert(topology, alert)


def send_alert(topology: Topology, alert: Alert) -> None:
    """Send `alert` to the topology's targets when its event is on; logs each target's answer and never raises:
    the run goes on whatever the alert's fate."""
    try:
        to = topology_targets(topology)
    except AlertConfigError as exc:
        log.warning("%s alert not sent: %s", alert.event, exc)
        return
    if results := notify(topology.alerts, alert, to):
        print(f"alert sent: {alert.title} ({answers(results)})")
