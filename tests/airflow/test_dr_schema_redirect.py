"""dr_schema_redirect on the session's embedded stack, there and back: dc2's registry leads on dc2's copy of
`_schemas` with ids above every id issued before, then follows dc1's store again."""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING, Any

import httpx
import pytest
from airflow.dag_processing.dagbag import DagBag
from airflow.utils.state import DagRunState
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from support.drills import copy_flow
from support.kafka import cluster_id
from support.topology import restart_registry_command

from kafka_dr.access import ClusterAccess
from kafka_dr.schema_registry import PROBE_SUBJECT, redirect
from kafka_dr.topology import load_topology
from kafka_dr_dev.local.stack import LocalStack

if TYPE_CHECKING:
    from pathlib import Path

    from support.stack import Stack

pytestmark = [pytest.mark.integration, pytest.mark.slow]
V1 = {"type": "record", "name": "Trade", "fields": [{"name": "id", "type": "long"}]}
V2 = {
    "type": "record",
    "name": "Trade",
    "fields": [{"name": "id", "type": "long"}, {"name": "venue", "type": "string", "default": ""}],
}


def test_redirect_there_and_back(airflow_db: Path, stack: Stack) -> None:
    dag = DagBag(dag_folder=os.environ["AIRFLOW__CORE__DAGS_FOLDER"]).dags["dr_schema_redirect"]
    dc1, dc2 = stack.local.config.dc("dc1"), stack.local.config.dc("dc2")
    topology = stack.write_topology(
        "redirect", '  - {name: rd-schemas, source: dc1, target: dc2, topics: {include: ["_schemas"]}}'
    )
    ctx = SerializationContext("trades", MessageField.VALUE)
    v1_payload = AvroSerializer(SchemaRegistryClient({"url": dc1.registry_url}), json.dumps(V1))({"id": 7}, ctx)
    old_max = max(s["id"] for s in httpx.get(f"{dc1.registry_url}/schemas").json())
    copy_flow(load_topology(topology), "rd-schemas")  # dc2 holds a copy of every schema dc1 issued

    run = dag.test(
        run_conf={"topology": str(topology), "registry_cluster": "dc2", "store_cluster": "dc2", "leader_eligible": True}
    )
    assert run.state == DagRunState.SUCCESS
    result = _result(run, "redirect_registry")
    assert result["store"] == "dc2" and result["probe_id"] > old_max
    saved = LocalStack(stack.local.data_dir).config.dc("dc2")  # what the restart command applied
    assert (saved.registry_kafkastore, saved.registry_leader_eligible) == (dc2.broker_address, True)
    registry2 = SchemaRegistryClient({"url": dc2.registry_url})
    assert AvroDeserializer(registry2)(v1_payload, ctx) == {"id": 7}  # ids issued before still resolve in dc2
    v2_payload = AvroSerializer(registry2, json.dumps(V2))({"id": 8, "venue": "x"}, ctx)
    assert int.from_bytes(v2_payload[1:5], "big") > result["probe_id"]  # a new version, a new id

    back = dag.test(
        run_conf={
            "topology": str(topology),
            "registry_cluster": "dc2",
            "store_cluster": "dc1",
            "leader_eligible": False,
        }
    )
    assert back.state == DagRunState.SUCCESS
    assert _result(back, "redirect_registry")["probe_id"] is None
    saved = LocalStack(stack.local.data_dir).config.dc("dc2")
    assert (saved.registry_kafkastore, saved.registry_leader_eligible) == (dc1.broker_address, False)
    assert registry2.get_schema(int.from_bytes(v1_payload[1:5], "big")).schema_str
    assert httpx.get(f"{dc2.registry_url}/kdr/leader").json()["leader"].rstrip("/") == dc1.registry_url
    registry2.register_schema("trades-followup-value", Schema(json.dumps(V1), "AVRO"))  # forwarded to dc1


LATE_RESTART = """#!/bin/sh
# Returns at once; the registry restarts 2 s later, as a wrapper that only signals a container does.
( sleep 2; exec {restart} ) >/dev/null 2>&1 &
"""


def test_a_restart_command_that_returns_before_the_restart_does_not_verify_the_old_registry(
    airflow_db: Path, stack: Stack, tmp_path: Path
) -> None:
    """dc2's registry follows dc1's store; the redirect to dc2's own store goes through a restart command that
    returns before anything restarts. The redirect waits until the registry reports dc2's cluster as its store: its
    probe is registered by the restarted leader in dc2's store. Checked on the old follower instead, the probe would
    have been forwarded to dc1's leader and passed falsely, leaving dc1 and dc2 free to issue the same next id."""
    dag = DagBag(dag_folder=os.environ["AIRFLOW__CORE__DAGS_FOLDER"]).dags["dr_schema_redirect"]
    dc1, dc2 = stack.local.config.dc("dc1"), stack.local.config.dc("dc2")
    script = tmp_path / "late-restart.sh"
    restart = restart_registry_command(stack.local.data_dir).format(
        cluster='"$1"', kafkastore='"$2"', leader_eligible='"$3"'
    )
    script.write_text(LATE_RESTART.format(restart=restart))
    flows = '  - {name: rd-late, source: dc1, target: dc2, topics: {include: ["_schemas"]}}'
    late = stack.write_topology("late", flows, restart=f"sh {script} {{cluster}} {{kafkastore}} {{leader_eligible}}")
    copy_flow(load_topology(late), "rd-late")
    before = httpx.get(f"{dc2.registry_url}/v1/metadata/id").json()["scope"]["clusters"]["kafka-cluster"]
    assert before == cluster_id({"bootstrap.servers": dc1.broker_address})  # dc2's registry follows dc1's store
    try:
        run = dag.test(
            run_conf={"topology": str(late), "registry_cluster": "dc2", "store_cluster": "dc2", "leader_eligible": True}
        )
        assert run.state == DagRunState.SUCCESS
        probe = _result(run, "redirect_registry")["probe_id"]
        reads = httpx.get(f"{dc2.registry_url}/v1/metadata/id").json()["scope"]["clusters"]["kafka-cluster"]
        assert reads == cluster_id({"bootstrap.servers": dc2.broker_address})
        assert PROBE_SUBJECT in httpx.get(f"{dc2.registry_url}/subjects").json()
        assert httpx.get(f"{dc2.registry_url}/schemas/ids/{probe}/subjects").json() == [PROBE_SUBJECT]
        assert PROBE_SUBJECT not in httpx.get(f"{dc1.registry_url}/subjects").json(), "the probe went to dc1's leader"
    finally:  # dc2's registry follows dc1's store again, as the other tests of the session stack expect
        redirect(
            ClusterAccess.from_environ(load_topology(stack.write_topology("late-back", flows))),
            "dc2",
            "dc1",
            leader_eligible=False,
        )


def _result(run: Any, task_id: str) -> dict[str, Any]:
    [ti] = [ti for ti in run.get_task_instances() if ti.task_id == task_id]
    return ti.xcom_pull(task_ids=task_id)
