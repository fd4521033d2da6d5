"""dr_replication_health: every few minutes, sample each flow, evaluate it, restart dead replicators, report.

validate -> check (one mapped task per flow: sample, keep it in the target's `_kdr.health`, evaluate the
last 10 samples with Burrow's rules plus GAP, DRIFT, CYCLE and the topology's SLOs) -> self-heal (restart a
dead continuous replicator, at most 3 times an hour per flow) -> report (snapshot JSON; the run fails with
one line per flow in ERR). Beside self-heal: count_outages (each cluster a check could not reach, runs in a row)
-> propose_failover (a disaster dr_failover of a cluster unreachable in `dr.propose_failover_after` runs, which
waits at its `approve` task with its preview ready; one per outage, and it ends by itself if the cluster answers
again before anyone approved). Beside them: readiness (what would stop or slow a failover now: paused DR DAGs,
unknown approvers, flows down or over the RPO objective, an old drill, ...; saved for the DR page and the metrics,
alerted when it degrades; it never fails the run).

The schedule is $KDR_HEALTH_SCHEDULE (a cron expression or preset, read when the DAG file is parsed),
every 5 minutes by default.
"""

from __future__ import annotations

import os

import pendulum
from airflow.providers.standard.operators.trigger_dagrun import TriggerDagRunOperator
from airflow.sdk import DAG, chain

from kafka_dr.airflow.common import flows_param, topology_param
from kafka_dr.airflow.health import check, check_readiness, count_outages, report, self_heal, validate_flows
from kafka_dr.airflow.notifications.dag_failed import DagFailedNotifier
from kafka_dr.runbooks import runbook_doc_md

with DAG(
    dag_id="dr_replication_health",
    default_args={"on_failure_callback": DagFailedNotifier()},  # the dag_failed alert
    schedule=os.environ.get("KDR_HEALTH_SCHEDULE") or "*/5 * * * *",
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    is_paused_upon_creation=False,  # its checks, alerts and failover proposals run from the first schedule on
    max_active_runs=1,
    tags=["kafka-dr"],
    doc_md=runbook_doc_md("dr_replication_health", __doc__),
    params={
        "topology": topology_param(),
        "flows": flows_param("Flows to check"),
    },
):
    plan = validate_flows()
    checked = check.expand_kwargs(plan)
    healed = self_heal(checked, topology="{{ params.topology }}")
    done = report(checked, healed, topology="{{ params.topology }}")
    proposals = count_outages(checked, topology="{{ params.topology }}")
    check_readiness(checked, topology="{{ params.topology }}")
    # One run id per outage (count_outages): Airflow refuses a second, and the mapped task then skips.
    proposed = TriggerDagRunOperator.partial(
        task_id="propose_failover", trigger_dag_id="dr_failover", skip_when_already_exists=True
    ).expand_kwargs(proposals)
    chain(plan, checked, healed, done)
    chain(checked, proposals, proposed)
