"""dr_failover (disaster) with 1,000 consumer groups x 6 partitions checkpointed, through dag.test() on an embedded
stack of its own: every group resumes in dc2 exactly where the ground truth read from dc2's provenance says.
`make bench-failover` times the same drill (RTO, kafka-dr's own steps, Airflow's overhead)."""

from __future__ import annotations

import json

import pytest
from airflow.utils.state import DagRunState
from support.drills import FLEET_PARTITIONS, FLEET_TOPIC, checkpointed_fleet, fail_over, resumed_offsets, states_of
from support.fleet import ground_truth

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.usefixtures("jobs_in_process")]
GROUPS = 1000


def test_disaster_failover_applies_1000_groups_exactly(dags, own_stack, state, tmp_path):
    dc2 = own_stack.config.dc("dc2")
    fleet = checkpointed_fleet(own_stack, tmp_path / "t.yaml", GROUPS, records=500)
    own_stack.stop("dc1")  # the disaster: from here on only the checkpoints in dc2 know the groups

    run = fail_over(dags, tmp_path / "t.yaml", "disaster", groups="fleet-.*")
    assert run.state == DagRunState.SUCCESS, states_of(run)
    report = json.loads(next((state / "reports").glob("dr_failover-*.json")).read_text())
    print(f"disaster failover of {GROUPS} groups: RTO {report['rto_seconds']} s, steps {json.dumps(report['steps'])}")
    assert report["groups"]["translated"] == GROUPS and len(report["groups"]["applied"]) == GROUPS
    assert report["rpo"]["per_topic"][FLEET_TOPIC] == 50 * FLEET_PARTITIONS  # the records never replicated
    dc2_config = {"bootstrap.servers": dc2.broker_address}
    truth = ground_truth(dc2_config, FLEET_TOPIC, FLEET_PARTITIONS, fleet.source_cluster_id)
    resumed = resumed_offsets(dc2.broker_address, sorted(fleet.commits), FLEET_TOPIC)
    assert truth.score(fleet.commits, resumed) == (GROUPS, GROUPS * FLEET_PARTITIONS)
