"""dr_failback: bring a failed datacenter back after a failover (seeds 001 and 004).

validate params (both clusters reachable) -> measure the records that never left the restored cluster (the exact
RPO of the disaster; the failover report this failback follows gains the figure) -> decide: the report is written to
.kafka-dr/reports/, and the run stops on a dry run, or when records never left and `unreplicated` is `report` ->
approve (a person approves that report's page, per the topology's `dr:` section) -> resync the serving cluster's
records into the restored one -> the switch back, a planned failover in reverse: the restored cluster's ends
marked -> the unreplicated records republished or discarded -> producers back -> catch-up resync -> lag 0 ->
offsets translated back (no later than the first record written after the marks) -> schema registry back ->
consumers back -> every flow of the topology resumed -> verify (the verify job on every flow and resync inverse, so
both clusters per origin; groups and aliases) -> report.
The first task checks every param; a bad one fails the run there, with nothing changed. `data_lost` (a wiped or
rebuilt cluster): nothing to measure, and the resync restores every record, those that first came from it included
(forced past the cycle rule when the cluster kept its id). A run stopped part-way by a lost worker resumes when its
failed tasks are cleared (docs/design.md, "An interrupted run resumes with Clear").
"""

from __future__ import annotations

from airflow.sdk import DAG, Param, chain

from kafka_dr.airflow.common import cluster_param, form_clusters, result_field, topology_param
from kafka_dr.airflow.failback import (
    decide,
    failback_report,
    gate_kwargs,
    handle_unreplicated,
    mark_restored_ends,
    measure_unreplicated,
    prepare_switch_back,
    registry_back,
    resume_kwargs,
    resync_kwargs,
    translate_back_kwargs,
    validate_failback,
    verify_failback,
    verify_kwargs,
)
from kafka_dr.airflow.failover import switch_consumers, switch_producers
from kafka_dr.airflow.notifications.dag_failed import DagFailedNotifier
from kafka_dr.airflow.operators.approval import DrApprovalOperator
from kafka_dr.airflow.operators.replication import ReplicationOperator
from kafka_dr.airflow.operators.translation import TranslateOffsetsOperator
from kafka_dr.airflow.operators.verify import VerifyFlowOperator
from kafka_dr.airflow.sensors.replication_lag import ReplicationLagSensor
from kafka_dr.failback.switch_back import CATCH_UP_QUIET_S
from kafka_dr.runbooks import runbook_doc_md

CLUSTERS = form_clusters()

with DAG(
    dag_id="dr_failback",
    default_args={"on_failure_callback": DagFailedNotifier()},  # the dag_failed alert
    schedule=None,
    catchup=False,
    is_paused_upon_creation=False,  # a run triggered on a paused DAG queues and never starts
    max_active_runs=1,
    tags=["kafka-dr"],
    doc_md=runbook_doc_md("dr_failback", __doc__),
    params={
        "topology": topology_param(),
        "restored_cluster": cluster_param(
            CLUSTERS, "Restored cluster", "The datacenter coming back (the one a failover left)."
        ),
        "serving_cluster": cluster_param(
            CLUSTERS, "Serving cluster", "The datacenter clients use now (the failover's target)."
        ),
        "mode": Param(
            type="string",
            enum=["data_kept", "data_lost"],
            title="Mode",
            values_display={
                "data_kept": "data_kept: the restored cluster came back with its data",
                "data_lost": "data_lost: it was wiped or rebuilt (new cluster id, maybe empty)",
            },
            description="data_kept measures exactly what never left it; data_lost restores everything into it.",
        ),
        "unreplicated": Param(
            "report",
            type="string",
            enum=["report", "republish", "discard"],
            title="Records that never left the restored cluster",
            values_display={
                "report": "report: write the report and stop before anything changes",
                "republish": "republish: the groups moved back read each of them once",
                "discard": "discard: leave them unread, and say so",
            },
            description="No record is ever deleted from any cluster.",
        ),
        "groups": Param(
            ".*", type="string", title="Consumer groups", description="Regex (full match) of the groups to move back."
        ),
        "dry_run": Param(
            False, type="boolean", title="Dry run", description="Measure and write the report only; change nothing."
        ),
    },
):
    plan = validate_failback()
    measured = measure_unreplicated(plan)
    go = decide(plan, measured)
    back = prepare_switch_back(plan)
    each = resync_kwargs(back)
    resynced = ReplicationOperator.partial(task_id="resync", mode="bounded").expand_kwargs(each)
    mark = mark_restored_ends(back)
    switch_back = result_field(back, "failover")  # the switch back is a planned failover in reverse
    producers = switch_producers(switch_back)
    caught_up = ReplicationOperator.partial(
        task_id="resync_catch_up", mode="bounded", until_quiet=CATCH_UP_QUIET_S
    ).expand_kwargs(each)
    drained = ReplicationLagSensor.partial(
        task_id="lag_zero", max_records=0, wait_in_worker=10, poke_interval=2, timeout=600
    ).expand_kwargs(gate_kwargs(back))
    handled = handle_unreplicated(plan, measured)
    translated = TranslateOffsetsOperator.partial(task_id="translate_back", apply=True).expand_kwargs(
        translate_back_kwargs(back, mark)
    )
    registry = registry_back(plan)
    consumers = switch_consumers(switch_back)
    resumed = ReplicationOperator.partial(task_id="flows_resumed", mode="continuous").expand_kwargs(resume_kwargs(plan))
    flows_verified = VerifyFlowOperator.partial(task_id="verify_flows").expand_kwargs(verify_kwargs(back, measured))
    verified = verify_failback(back, translated.output, flows_verified.output)
    # It approves what `decide` offered; dr.approval: none skips it.
    approve = DrApprovalOperator(task_id="approve", preview_task_id=go.operator.task_id)
    report = failback_report(
        plan,
        measured=measured,
        approval=approve.output,  # None when skipped (dr.approval: none)
        back=back,
        resync_runs=resynced.output,
        producers=producers,
        catch_up_runs=caught_up.output,
        handled=handled,
        registry=registry,
        consumers=consumers,
        verified=verified,
    )
    # The records that never left go to the end of the restored partitions before the producers come back: behind
    # the producers' new records they would follow later records of their own origin partition, which a consumer
    # that de-duplicates by origin (kafka_dr.follower) takes for records read again.
    chain(go, approve, back, each, resynced, mark, handled, producers, caught_up, drained, translated, registry)
    chain(registry, consumers)
    chain(consumers, resumed, flows_verified, verified, report)
