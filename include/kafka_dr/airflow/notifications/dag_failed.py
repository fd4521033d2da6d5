"""The dag_failed alert as Airflow's notifier interface: every kafka-dr DAG's tasks have it as `on_failure_callback`
(default_args of the DAGs in dags/), so a failed run reaches people with its DAG, run, failed task and one-line
error. It sends with Apprise (what the Apprise provider is built on) to the topology's `alerts:` targets
(hooks/alerts.py), through kafka_dr.alerts: a scheduled run that fails the same way again is one alert per
`repeat_after`, a manual run one alert. Not the provider's AppriseNotifier: that one takes its targets from one Apprise
connection and does not tell which target accepted (the DR page shows it), and importing it (Apprise with it) would
add 0.3 s to every parse of a DAG file, so to every task; here Apprise is loaded only when an alert is sent.
Alerting never fails anything more: a problem is logged, not raised.
"""

from __future__ import annotations

import logging
from typing import Any

from airflow.sdk.bases.notifier import BaseNotifier

from ...alerts import AlertConfigError, answers, dag_failed_alert, notify
from ...topology import TopologyError, load_topology
from .. import topology_path
from ..hooks.alerts import topology_targets

log = logging.getLogger(__name__)


class DagFailedNotifier(BaseNotifier):
    def notify(self, context: Any) -> None:
        ti = context["ti"]
        error = " ".join(str(context.get("exception") or "failed").split())
        try:
            topology = load_topology(topology_path((context.get("params") or {}).get("topology")))
            to = topology_targets(topology)
        except (TopologyError, AlertConfigError) as exc:
            log.warning("dag_failed alert for %s %s not sent: %s", ti.dag_id, ti.run_id, exc)
            return
        scheduled = str(getattr(context.get("dag_run"), "run_type", "")).endswith("scheduled")
        once_per = f"dag_failed/{ti.dag_id}/" + (f"{ti.task_id}/{error}" if scheduled else ti.run_id)
        alert = dag_failed_alert(ti.dag_id, ti.run_id, ti.task_id, error)
        if results := notify(topology.alerts, alert, to, once_per=once_per):
            log.info("alert sent: %s (%s)", alert.title, answers(results))
