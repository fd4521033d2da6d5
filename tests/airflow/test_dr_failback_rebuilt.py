"""dr_failback `data_lost` into a cluster rebuilt with its old cluster id (formatted with it, as `kafka-storage format
--cluster-id` does): the copies in the serving cluster name that id, so the cycle rule alone would keep dc1's own
records out; the failback forces them back (docs/design.md's filter override). The only flow renames (`orders` ->
`orders.replica`) and has no flow back, so the resync runs its inverse, renaming back; `_schemas` comes back with it
and dc1's registry keeps every id, those issued by dc2 while dc1 was away included."""

from __future__ import annotations

import json
import re
import time
from typing import Any

import httpx
import pytest
from airflow.utils.state import DagRunState
from confluent_kafka.admin import AdminClient
from support.drills import (
    copy_flow,
    fail_back,
    fail_over,
    produce,
    read_and_commit,
    run_job,
    send,
    states_of,
    values_of,
)
from support.kafka import create_topic
from support.topology import restart_registry_command, write_topology

from kafka_dr.replication import replicators
from kafka_dr.topology import load_topology

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.usefixtures("jobs_in_process")]
FLOW = "rb-dc1-to-dc2"


def register(url: str, name: str) -> int:
    """The schema's id; a registry still electing its leader answers 500 meanwhile, so that is retried."""
    schema = {"type": "record", "name": name, "fields": [{"name": "id", "type": "long"}]}
    deadline = time.monotonic() + 60
    while True:
        response = httpx.post(f"{url}/subjects/{name}-value/versions", json={"schema": json.dumps(schema)}, timeout=30)
        if response.status_code < 500 or time.monotonic() > deadline:
            response.raise_for_status()
            return response.json()["id"]
        time.sleep(1)


def test_a_cluster_rebuilt_with_its_old_id_gets_every_record_and_every_schema_id_back_through_a_renaming_flow(
    dags: dict[str, Any], own_stack: Any, state: Any, tmp_path: Any
) -> None:
    dc1, dc2 = own_stack.config.dc("dc1"), own_stack.config.dc("dc2")
    path = write_topology(
        tmp_path / "rebuilt.yaml",
        {"dc1": dc1.broker_address, "dc2": dc2.broker_address},
        f"""\
  - {{name: {FLOW}, source: dc1, target: dc2, topics: {{include: ["orders", "_schemas"]}},
      rename: {{orders: "{{topic}}.replica"}}}}
""",
        {"dc1": dc1.registry_url, "dc2": dc2.registry_url},
        f"""clients:
  orders-producer: {{cluster: dc1, role: producer}}
  billing: {{cluster: dc1, role: consumer}}
schema_registry: {{primary: dc1, restart_command: {json.dumps(restart_registry_command(own_stack.data_dir))}}}
""",
    )
    topology = load_topology(path)
    admin = AdminClient({"bootstrap.servers": dc1.broker_address})  # kept: a collected client cancels its futures
    create_topic({"bootstrap.servers": dc1.broker_address}, "orders")
    id_from_dc1 = register(dc1.registry_url, "Order")
    produce(dc1.broker_address, "orders", 0, 100)
    copy_flow(topology, FLOW)  # dc2 holds orders.replica and _schemas, copies naming dc1's cluster id
    assert len(read_and_commit(dc1.broker_address, "billing", "orders", limit=60)) == 60
    run_job("translate_offsets", "--topology", str(path), "--flow", FLOW)  # billing's checkpoints in dc2
    dc1_id = admin.describe_cluster().result(10).cluster_id
    own_stack.wipe("dc1", keep_cluster_id=True)  # lost, to be rebuilt under the same id
    failover = fail_over(dags, path, "disaster", "billing")
    assert failover.state == DagRunState.SUCCESS, states_of(failover)
    send(dc2.broker_address, "orders.replica", [f"dc2-{i}" for i in range(20)])  # produced while dc1 is away
    id_from_dc2 = register(dc2.registry_url, "Refund")
    assert len(read_and_commit(dc2.broker_address, "billing", "orders.replica", limit=10)) == 10  # read 60-69
    own_stack.start("dc1")
    rebuilt = AdminClient({"bootstrap.servers": dc1.broker_address})
    assert rebuilt.describe_cluster().result(10).cluster_id == dc1_id

    try:
        run = fail_back(dags, path, restored_cluster="dc1", serving_cluster="dc2", mode="data_lost")
        assert run.state == DagRunState.SUCCESS, states_of(run)
        every = [f"order {i}" for i in range(100)] + [f"dc2-{i}" for i in range(20)]
        assert values_of(dc1.broker_address, "orders") == [v.encode() for v in every]  # each once, in order
        assert read_and_commit(dc1.broker_address, "billing", "orders") == [v.encode() for v in every[70:]]
        for schema_id in (id_from_dc1, id_from_dc2):  # dc1's registry leads again and knows every id
            assert httpx.get(f"{dc1.registry_url}/schemas/ids/{schema_id}", timeout=30).status_code == 200
        report = json.loads(sorted((state / "reports").glob("dr_failback-*.json"))[-1].read_text())
        assert report["resynced"]["inverse_flows"] == [f"{FLOW}.failback"]
        assert report["resynced"]["forced"]["cluster"] == re.escape(dc1_id)
        assert report["verify"]["flows"][f"{FLOW}.failback"]["copied"] >= 120  # the orders and the schemas
    finally:
        replicators.stop(FLOW)
