"""dr_failback: bring a failed datacenter back after a failover (seeds 001 and 004).

validate params (both clusters reachable) -> measure the records that never left the restored cluster (the exact
RPO of the disaster; the failover report this failback follows gains the figure) -> decide: the report is written to
.kafka-dr/reports/, and the run stops on a dry run, or when records never left and `unreplicated` is `report`.
Resync, the switch back and resuming the flows come next (issue 10, in progress). The first task checks every param;
a bad one fails the run there, with nothing changed.
"""

from __future__ import annotations

from airflow.sdk import DAG, Param

from kafka_dr.airflow.common import cluster_param, form_clusters, topology_param
from kafka_dr.airflow.failback import decide, measure_unreplicated, validate_failback

CLUSTERS = form_clusters()

with DAG(
    dag_id="dr_failback",
    schedule=None,
    catchup=False,
    max_active_runs=1,
    tags=["kafka-dr"],
    doc_md=__doc__,
    params={
        "topology": topology_param(),
        "restored_cluster": cluster_param(
            CLUSTERS, CLUSTERS[0], "Restored cluster", "The datacenter coming back (the one a failover left)."
        ),
        "serving_cluster": cluster_param(
            CLUSTERS, CLUSTERS[-1], "Serving cluster", "The datacenter clients use now (the failover's target)."
        ),
        "mode": Param(
            "data_kept",
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
    decide(plan, measure_unreplicated(plan))
