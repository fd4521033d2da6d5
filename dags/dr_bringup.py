"""dr_bringup: bring replication up between the datacenters of a topology, verify it, and report.

validate topology -> clusters reachable -> internal topics -> destination topics synced -> schema
registries checked -> replicators started (one continuous job per flow) -> lag gate -> heartbeat
round trip -> report. The first task checks every param before anything changes.
"""

from __future__ import annotations

from airflow.sdk import DAG, Param, chain

from kafka_dr.airflow.bringup import (
    clusters_reachable,
    destination_topics_synced,
    heartbeat_round_trip,
    internal_topics,
    report,
    schema_registries_checked,
    validate_topology,
)
from kafka_dr.airflow.common import flows_param, topology_param
from kafka_dr.airflow.notifications.dag_failed import DagFailedNotifier
from kafka_dr.airflow.operators.replication import ReplicationOperator
from kafka_dr.airflow.sensors.replication_lag import ReplicationLagSensor
from kafka_dr.runbooks import runbook_doc_md

with DAG(
    dag_id="dr_bringup",
    default_args={"on_failure_callback": DagFailedNotifier()},  # the dag_failed alert
    schedule=None,
    catchup=False,
    is_paused_upon_creation=False,  # a run triggered on a paused DAG queues and never starts
    max_active_runs=1,
    render_template_as_native_obj=True,  # thresholds reach the lag gate as numbers (or None)
    tags=["kafka-dr"],
    doc_md=runbook_doc_md("dr_bringup", __doc__),
    params={
        "topology": topology_param(),
        "flows": flows_param("Flows to bring up"),
        "max_lag_records": Param(
            1000,
            type=["null", "integer"],
            minimum=0,
            description="Lag gate: records not yet copied, per source partition.",
        ),
        "max_lag_seconds": Param(
            60,
            type=["null", "number"],
            minimum=0,
            description="Lag gate: age in seconds of the oldest uncopied record.",
        ),
    },
):
    plan = validate_topology()  # one {"flow", "topology"} per flow: also the mapped operators' kwargs
    reachable = clusters_reachable(plan)
    internal = internal_topics(plan)
    synced = destination_topics_synced(plan)
    registries = schema_registries_checked(plan)
    started = ReplicationOperator.partial(task_id="replicators_started", mode="continuous").expand_kwargs(plan)
    gate = ReplicationLagSensor.partial(
        task_id="lag_gate",
        max_records="{{ params.max_lag_records }}",
        max_seconds="{{ params.max_lag_seconds }}",
        check_replicator=True,
        poke_interval=2,
        timeout=600,
    ).expand_kwargs(plan)
    heartbeats = heartbeat_round_trip(plan)
    done = report(
        plan,
        cluster_ids=reachable,
        internal_topics_created=internal,
        topic_sync=synced,
        schema_registries=registries,
        replicators=started.output,
        lag=gate.output,
        heartbeat_latency_s=heartbeats,
    )
    chain(plan, reachable, internal, synced, registries, started, gate, heartbeats, done)
