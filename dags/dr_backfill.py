"""dr_backfill: copy exactly the source records of a window that a flow's target topic lacks, then verify the window.

validate (params, else the run's hourly data interval; the window checked against the source) -> the backfill job
(spark_jobs/backfill.py through BackfillOperator) -> report. Hourly data intervals make Airflow's own backfill ("Run
backfill" in the UI, `airflow backfill create --dag-id dr_backfill --from-date ... --to-date ...`) re-run past hours;
each run copies only what the target lacks, so re-runs copy nothing. The DAG starts unpaused, so that a run triggered
from the form, the REST API or `airflow backfill create` starts at once; its scheduled hourly runs copy nothing (they
skip themselves): the past hour of a running flow is in its destination already, and older copies cannot be appended
after newer ones.
"""

from __future__ import annotations

import pendulum
from airflow.sdk import DAG, Param, chain
from airflow.timetables.interval import CronDataIntervalTimetable

from kafka_dr.airflow.backfill import backfill_report, validate_backfill
from kafka_dr.airflow.common import result_field, topology_param
from kafka_dr.airflow.notifications.dag_failed import DagFailedNotifier
from kafka_dr.airflow.operators.backfill import BackfillOperator
from kafka_dr.runbooks import runbook_doc_md
from kafka_dr.topology import TopologyError, load_topology


def _flows() -> list[str]:
    try:
        return [flow.name for flow in load_topology().flows] or [""]
    except TopologyError:
        return [""]


FLOWS = _flows()

with DAG(
    dag_id="dr_backfill",
    default_args={"on_failure_callback": DagFailedNotifier()},  # the dag_failed alert
    schedule=CronDataIntervalTimetable("0 * * * *", timezone="UTC"),
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    is_paused_upon_creation=False,  # a manual or backfill run starts when triggered
    max_active_runs=1,
    tags=["kafka-dr"],
    doc_md=runbook_doc_md("dr_backfill", __doc__),
    params={
        "topology": topology_param(),
        "flow": Param(FLOWS[0], type="string", title="Flow", description="The flow whose source records are copied."),
        "topics": Param(
            "", type="string", title="Topics", description="Regex (full match) within the flow's topics; empty: all."
        ),
        "window_start": Param(
            "", type="string", title="Window start", description="ISO-8601, inclusive; empty: the run's data interval."
        ),
        "window_end": Param("", type="string", title="Window end", description="ISO-8601, exclusive."),
        "offsets": Param(
            "",
            type="string",
            title="Offsets",
            description='Instead of times: {"topic:partition": [first, last]}, inclusive.',
        ),
        "target_topic": Param(
            "",
            type="string",
            title="Target topic",
            description="A format such as {topic}.backfill; empty: the flow's rename.",
        ),
        "dry_run": Param(False, type="boolean", title="Dry run", description="Plan and report only; change nothing."),
    },
):
    plan = validate_backfill()
    job_args = ("flow", "topology", "window_start", "window_end", "offsets", "topics", "target_topic", "dry_run")
    copied = BackfillOperator(
        task_id="backfill",
        **{name: result_field(plan, name) for name in job_args},  # the plan's fields of those names
        max_active_tis_per_dag=1,  # runs of a backfill go one at a time: two copiers of a flow fence each other
    )
    report = backfill_report(plan, copied.output)
    chain(plan, copied, report)
