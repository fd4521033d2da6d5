"""dr_schema_redirect: point a datacenter's schema registry at a cluster's `_schemas` and set whether it
may lead (the white paper's "Schema Registration" table), restart it with the topology's restart
command, and verify it (a registration when leader-eligible). Failover: registry dc2, store dc2,
leader-eligible true. The reverse on failback: registry dc2, store dc1, false.
"""

from __future__ import annotations

from airflow.sdk import DAG, Param, chain

from kafka_dr.airflow.common import cluster_param, form_clusters, topology_param
from kafka_dr.airflow.notifications.dag_failed import DagFailedNotifier
from kafka_dr.airflow.schema_redirect import redirect_registry, validate_redirect
from kafka_dr.runbooks import runbook_doc_md

CLUSTERS = form_clusters()

with DAG(
    dag_id="dr_schema_redirect",
    default_args={"on_failure_callback": DagFailedNotifier()},  # the dag_failed alert
    schedule=None,
    catchup=False,
    is_paused_upon_creation=False,  # a run triggered on a paused DAG queues and never starts
    max_active_runs=1,
    tags=["kafka-dr"],
    doc_md=runbook_doc_md("dr_schema_redirect", __doc__),
    params={
        "topology": topology_param(),
        "registry_cluster": cluster_param(
            CLUSTERS, "Registry to restart", "The datacenter whose schema registry is redirected.", CLUSTERS[-1]
        ),
        "store_cluster": cluster_param(
            CLUSTERS,
            "Schema store cluster",
            "The cluster whose `_schemas` topic the registry uses (kafkastore.bootstrap.servers).",
            CLUSTERS[-1],
        ),
        "leader_eligible": Param(
            True,
            type="boolean",
            title="Leader-eligible",
            description="leader.eligibility: true lets it register schemas.",
        ),
    },
):
    plan = validate_redirect()
    chain(plan, redirect_registry(plan))
