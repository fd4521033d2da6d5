"""What the failover and failback DAG tests share: a topology over the local stack with the white paper's flow and
client aliases, producing and reading orders, a group's committed offsets, DAG runs through dag.test() and their task
states, and a Spark job that must succeed."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, KafkaError, Producer
from confluent_kafka.admin import AdminClient

from kafka_dr.local.stack import LocalStack
from kafka_dr.replication.provenance import hops

from .spark import submit
from .topology import restart_registry_command


def write_topology(local: LocalStack, path: Path, topic: str, registry: bool = True) -> Path:
    dc1, dc2 = local.config.dc("dc1"), local.config.dc("dc2")
    restart = restart_registry_command(local.data_dir)
    path.write_text(
        f"""clusters:
  dc1: {{bootstrap_servers: "{dc1.broker_address}", schema_registry: "{dc1.registry_url}"}}
  dc2: {{bootstrap_servers: "{dc2.broker_address}", schema_registry: "{dc2.registry_url}"}}
flows:
  - {{name: wp-dc1-to-dc2, source: dc1, target: dc2, topics: {{include: ["{topic}", "_schemas"]}}}}
clients:
  orders-producer: {{cluster: dc1, role: producer}}
  billing: {{cluster: dc1, role: consumer}}
"""
        + (f"schema_registry: {{primary: dc1, restart_command: {json.dumps(restart)}}}\n" if registry else "")
    )
    return path


def produce(bootstrap: str, topic: str, start: int, count: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "enable.idempotence": True})
    for i in range(start, start + count):
        while True:
            try:
                producer.produce(topic, key=f"k{i}".encode(), value=f"order {i}".encode(), partition=0)
                break
            except BufferError:
                producer.poll(0.1)
    assert producer.flush(60) == 0


def committed(bootstrap: str, group: str) -> dict[tuple[str, int], int]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    result = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group].result(15)
    return {(tp.topic, tp.partition): tp.offset for tp in result.topic_partitions if tp.offset >= 0}


def read_rest(bootstrap: str, group: str, topic: str) -> list[int]:
    """Origin offsets a consumer of `group` reads from its committed offset to the end."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "enable.partition.eof": True,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe([topic])
    origins, deadline = [], time.monotonic() + 60
    while time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is None:
            continue
        if message.error():
            assert message.error().code() == KafkaError._PARTITION_EOF, message.error().str()
            break
        origins.append(hops(message.headers())[-1].offset)
    consumer.close()
    return origins


def fail_over(dags: dict[str, Any], topology: Path, mode: str, groups: str) -> Any:
    """dr_failover from dc1 to dc2 with every param given: dag.test() keeps params of an earlier run's conf."""
    return dags["dr_failover"].test(
        run_conf={
            "topology": str(topology),
            "failed_cluster": "dc1",
            "target_cluster": "dc2",
            "mode": mode,
            "groups": groups,
            "reset_to_datetime": None,
        }
    )


def states_of(run: Any) -> dict[str, Any]:
    return {ti.task_id: ti.state for ti in run.get_task_instances()}


def subprocess_run(job: str, *args: str) -> dict[str, Any]:
    code, summary, err = submit(job, *args)
    assert code == 0 and summary, err[-3000:]
    return summary
