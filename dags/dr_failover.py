"""dr_failover: move clients, consumer offsets and the schema registry from a failed datacenter to another.

validate params -> preview (what the run would do, changing nothing; a dry run ends with it as the report)
-> approve (a person approves the preview, per the topology's `dr:` section) -> (planned: switch producers
-> stop replication into the failed cluster -> lag 0 on every flow failed -> target) -> stop replication from and
into the failed cluster -> translate and apply consumer offsets (disaster: from the checkpoints kept in the target)
-> switch consumers, with the schema redirect beside -> verify -> report (RPO, RTO, groups, registry, timings) in
.kafka-dr/reports/. The first task checks every param; a bad one fails the run there, with nothing changed. A run
stopped part-way by a lost worker resumes when its failed tasks are cleared (docs/design.md, "An interrupted run
resumes with Clear").
"""

from __future__ import annotations

from airflow.providers.standard.operators.empty import EmptyOperator
from airflow.sdk import DAG, Param, chain

from kafka_dr.airflow.common import cluster_param, form_clusters, topology_param
from kafka_dr.airflow.failover import (
    choose_mode,
    failover_report,
    flows_to_drain,
    preview_failover,
    redirect_schema_registry,
    stop_inbound,
    stop_replication,
    switch_consumers,
    switch_producers,
    translation_kwargs,
    unless_dry_run,
    validate_failover,
    verify_failover,
)
from kafka_dr.airflow.notifications.dag_failed import DagFailedNotifier
from kafka_dr.airflow.operators.approval import DrApprovalOperator
from kafka_dr.airflow.operators.translation import TranslateOffsetsOperator
from kafka_dr.airflow.sensors.replication_lag import ReplicationLagSensor
from kafka_dr.runbooks import runbook_doc_md

CLUSTERS = form_clusters()

with DAG(
    dag_id="dr_failover",
    default_args={"on_failure_callback": DagFailedNotifier()},  # the dag_failed alert
    schedule=None,
    catchup=False,
    is_paused_upon_creation=False,  # a failover triggered on a paused DAG queues and never starts
    max_active_runs=1,
    tags=["kafka-dr"],
    doc_md=runbook_doc_md("dr_failover", __doc__),
    params={
        "topology": topology_param(),
        "failed_cluster": cluster_param(
            CLUSTERS,
            "Failed cluster",
            "The datacenter that is lost (disaster) or being evacuated (planned).",
        ),
        "target_cluster": cluster_param(
            CLUSTERS,
            "Target cluster",
            "The datacenter that takes over; a flow must replicate the failed cluster into it.",
        ),
        "mode": Param(
            type="string",
            enum=["planned", "disaster"],
            title="Mode",
            values_display={
                "planned": "planned: failed cluster still up, nothing lost (RPO 0)",
                "disaster": "disaster: failed cluster gone, use the last checkpoints",
            },
            description="planned moves producers first and waits for replication lag 0 before moving "
            "consumers; disaster uses the offsets checkpointed while both sides were up.",
        ),
        "groups": Param(
            ".*",
            type="string",
            title="Consumer groups",
            description="Regex (full match) of the groups to move, within each flow's groups filter.",
        ),
        "dry_run": Param(
            False,
            type="boolean",
            title="Dry run",
            description="Preview only: compute the plan (lag, RPO estimate, replicators, offsets, registry and "
            "client moves), write it as the report and change nothing.",
        ),
        "reset_to_datetime": Param(
            None,
            type=["null", "string"],
            title="Reset to datetime",
            description="Optional ISO-8601 time (e.g. 2026-11-21T10:00:00Z; no zone = UTC): "
            "commit the offsets of that time instead of translated ones, as "
            "kafka-consumer-groups --reset-offsets --to-datetime does.",
        ),
    },
):
    plan = validate_failover()
    previewed = preview_failover(plan)
    mode = choose_mode(plan)
    producers = switch_producers(plan)
    inbound = stop_inbound(plan)  # planned: replication into the failed cluster stops before its lag is drained
    drain = flows_to_drain(plan)
    drained = ReplicationLagSensor.partial(
        task_id="lag_zero", max_records=0, wait_in_worker=10, poke_interval=2, timeout=600
    ).expand_kwargs(drain)
    disaster = EmptyOperator(task_id="disaster_path")
    stopped = stop_replication(plan)
    translated = TranslateOffsetsOperator.partial(task_id="translate_offsets", apply=True).expand_kwargs(
        translation_kwargs(plan)
    )
    registry = redirect_schema_registry(plan)
    consumers = switch_consumers(plan)
    verified = verify_failover(plan, translated.output)
    # It approves what the preview offered; dr.approval: none skips it.
    approve = DrApprovalOperator(task_id="approve", preview_task_id=previewed.operator.task_id)
    report = failover_report(
        plan,
        previewed,
        stopped=stopped,
        translations=translated.output,
        registry=registry,
        consumers=consumers,
        verified=verified,
        approval=approve.output,  # None when skipped (dr.approval: none)
    )
    chain(plan, previewed, unless_dry_run(plan), approve, mode, [producers, disaster])
    chain(producers, inbound, drain, drained, stopped)
    # Consumers move once their offsets are in; the registry redirect runs beside (clients only reading schemas are
    # served by the target's follower meanwhile; the report names the writers it moved before the redirect ended).
    chain(disaster, stopped, translated, consumers, verified, report)
    chain(stopped, registry, verified)
