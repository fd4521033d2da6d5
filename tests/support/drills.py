"""What the failover and failback DAG tests share: a topology over the local stack with the white paper's flow and
client aliases, producing and reading records, a group's committed offsets and reads as an application does, high
watermarks, in-process copies of a flow, DAG runs through dag.test() and their task states, and a Spark job that must
succeed (in process)."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, KafkaError, Message
from confluent_kafka.admin import AdminClient
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient

from kafka_dr import client_switch
from kafka_dr.access import ClusterAccess
from kafka_dr.clients import list_group_offsets, read_committed
from kafka_dr.replication import replicators
from kafka_dr.replication.copier import close_clients, copy_ranges
from kafka_dr.replication.provenance import hops
from kafka_dr.topology import Topology, load_topology
from kafka_dr.translation.checkpoints import checkpoint_groups
from kafka_dr.translation.offsets import close_readers
from kafka_dr_dev.local.stack import LocalStack

from .fleet import GroupOffsets, commit_random_groups, fill
from .kafka import Record, cluster_id, committed_offsets, create_topic, first_round
from .kafka import high_watermarks as partition_ends
from .kafka import produce as produce_records
from .spark import close_cached_clients, run_in_process
from .topology import restart_registry_command
from .topology import write_topology as write_clusters_topology


def write_topology(local: LocalStack, path: Path, topic: str, registry: bool = True, dr: str = "") -> Path:
    """The white paper's topology over `local`: the flow wp-dc1-to-dc2 of `topic` (and `_schemas`), the client aliases
    orders-producer and billing, with `registry` the registries (dc1 primary, restarted on `local`'s data dir), and
    `dr` the YAML of a `dr:` section (none: no approval asked)."""
    dc1, dc2 = local.config.dc("dc1"), local.config.dc("dc2")
    restart = restart_registry_command(local.data_dir)
    return write_clusters_topology(
        path,
        {"dc1": dc1.broker_address, "dc2": dc2.broker_address},
        f'  - {{name: wp-dc1-to-dc2, source: dc1, target: dc2, topics: {{include: ["{topic}", "_schemas"]}}}}',
        {"dc1": dc1.registry_url, "dc2": dc2.registry_url},
        "clients:\n  orders-producer: {cluster: dc1, role: producer}\n  billing: {cluster: dc1, role: consumer}\n"
        + (f"schema_registry: {{primary: dc1, restart_command: {json.dumps(restart)}}}\n" if registry else "")
        + (f"dr: {dr}\n" if dr else ""),
    )


def produce(bootstrap: str, topic: str, start: int, count: int, settings: dict[str, Any] | None = None) -> None:
    """Records start..start+count-1 into partition 0 of `topic`: key k<i>, value "order <i>"; `settings`: further
    client settings (a secured cluster's)."""
    records = (Record(f"order {i}".encode(), f"k{i}".encode()) for i in range(start, start + count))
    produce_records({"bootstrap.servers": bootstrap, **(settings or {})}, topic, records)


def committed(bootstrap: str, group: str) -> dict[tuple[str, int], int]:
    return committed_offsets({"bootstrap.servers": bootstrap}, group)


def read_rest(bootstrap: str, group: str, topic: str) -> list[int]:
    """Origin offsets a consumer of `group` reads from its committed offset to the end."""
    return [hops(message.headers())[-1].offset for message in _read_group(bootstrap, group, topic)]


def fail_over(dags: dict[str, Any], topology: Path, mode: str, groups: str, dry_run: bool = False) -> Any:
    """dr_failover from dc1 to dc2 with every param given: dag.test() keeps params of an earlier run's conf."""
    return dags["dr_failover"].test(
        run_conf={
            "topology": str(topology),
            "failed_cluster": "dc1",
            "target_cluster": "dc2",
            "mode": mode,
            "groups": groups,
            "reset_to_datetime": None,
            "dry_run": dry_run,
        }
    )


def observable(local: LocalStack, topology: Path, clusters: tuple[str, ...], live: bool = False) -> dict[str, Any]:
    """Everything a failover may change, as it is now: in each of `clusters` every partition's end (the registries'
    own topics aside) and every group's committed offsets; the registries' roles as the stack records them; where
    each client alias points; which flows' replicators run. `live`: replicators and health runs are at work, so
    what they change on their own is left out: kafka-dr's internal topics, the flows' own groups, and whether the
    replicators run (one whose cluster is lost ends after its retries, and a health run restarts it)."""
    loaded = load_topology(topology)
    flows = {flow.name for flow in loaded.flows}
    seen: dict[str, Any] = {
        "registries": {dc: LocalStack(local.data_dir).config.dc(dc) for dc in ("dc1", "dc2")},  # store, eligibility
        "aliases": {s.alias: s.active for s in client_switch.states(loaded)},
    }
    if not live:
        seen["replicators"] = {flow.name: replicators.is_running(flow.name) for flow in loaded.flows}
    for name in clusters:
        bootstrap = local.config.dc(name).broker_address
        admin = AdminClient({"bootstrap.servers": bootstrap})
        groups = sorted(g.group_id for g in admin.list_consumer_groups().result(30).valid)
        ends = high_watermarks(bootstrap)
        if live:
            groups = [g for g in groups if g not in flows]
            ends = {(topic, p): end for (topic, p), end in ends.items() if not topic.startswith("_kdr.")}
        seen[name] = {"ends": ends, "groups": {g: committed(bootstrap, g) for g in groups}}
    return seen


def states_of(run: Any) -> dict[str, Any]:
    return {ti.task_id: ti.state for ti in run.get_task_instances()}


def run_job(job: str, *args: str) -> dict[str, Any]:
    """The Spark job's summary, run in this process on the session's Spark (the `spark` fixture); it must succeed."""
    try:
        code, summary, err = run_in_process(job, *args)
    finally:
        close_cached_clients()
    assert code == 0 and summary, err[-3000:]
    return summary


def fail_back(dags: dict[str, Any], topology: Path, **conf: Any) -> Any:
    """dr_failback dc2 -> dc1 with every param given: dag.test() keeps params of an earlier run's conf."""
    params = {"restored_cluster": "dc1", "serving_cluster": "dc2", "mode": "data_kept", "unreplicated": "report"}
    params |= {"groups": ".*", "dry_run": False, **conf}
    return dags["dr_failback"].test(run_conf={"topology": str(topology), **params})


def high_watermarks(bootstrap: str) -> dict[tuple[str, int], int]:
    """Every partition's high watermark but the running registries' own (their start-up makes `_schemas`, their leader
    election writes on) and Apache Kafka's own topics: a group's commit of the offsets it already has, a producer's
    transaction, append to `__consumer_offsets` and `__transaction_state` what changes no state (the groups' offsets
    are compared apart)."""
    ignore = ("_schemas_leader", "_schemas", "__consumer_offsets", "__transaction_state")
    return partition_ends({"bootstrap.servers": bootstrap}, ignore=ignore)


def read_and_commit(bootstrap: str, group: str, topic: str, limit: int | None = None) -> list[bytes]:
    """The values a consumer of `group` reads from its committed offset to the end (or `limit` of them), then
    commits, as an application does."""
    return [message.value() for message in _read_group(bootstrap, group, topic, limit, commit=True)]


def _read_group(
    bootstrap: str, group: str, topic: str, limit: int | None = None, commit: bool = False
) -> list[Message]:
    """What a consumer of `group` (subscribed to `topic`) reads from its committed offset to the end of the topic,
    or its first `limit` records; with `commit`, the position after them is committed."""
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
    read: list[Message] = []
    deadline = time.monotonic() + 60
    try:
        while True:
            assert time.monotonic() < deadline, f"{group} did not reach the end of {topic} in 60 s"
            message = consumer.poll(0.5)
            if message is None:
                continue
            if message.error():
                assert message.error().code() == KafkaError._PARTITION_EOF, message.error().str()
                break
            read.append(message)
            if len(read) == limit:
                break
        if commit and read:
            consumer.commit(read[-1], asynchronous=False)
    finally:
        consumer.close()
    return read


def values_of(bootstrap: str, topic: str) -> list[bytes]:
    """Every committed value of partition 0 of `topic`."""
    config = {"bootstrap.servers": bootstrap}
    end = high_watermarks(bootstrap)[(topic, 0)]
    return [m.value() for m in read_committed(config, {(topic, 0): (0, end)}, 30)]


def send(bootstrap: str, topic: str, values: list[str]) -> None:
    """`values` into partition 0 of `topic`, in order, without keys."""
    produce_records({"bootstrap.servers": bootstrap}, topic, (Record(value.encode()) for value in values))


def copy_flow(topology: Topology, flow: str) -> None:
    """A bounded copy of the flow, in process, as a replicator that is caught up has done."""
    try:
        copy_ranges(first_round(topology, flow).tasks)
    finally:
        close_clients()


FLEET_TOPIC = "fleet"
FLEET_PARTITIONS = 6
FLEET_FLOW = "wp-dc1-to-dc2"


@dataclass(frozen=True)
class Fleet:
    commits: GroupOffsets  # what each group committed in dc1
    source_cluster_id: str  # dc1's, which the copies' provenance names


def replicate_fleet(
    source: dict[str, str], target: dict[str, str], topology: Topology, flow: str, records: int, local: int, late: int
) -> None:
    """Topic `fleet` (6 partitions) in both clusters: `local` records of the target's own per partition first (so
    destination offsets differ from source offsets), `records` per partition from the source copied by `flow` in
    process, then `late` more per partition in the source, never copied (groups there resume after the last copy)."""
    for config in (source, target):
        create_topic(config, FLEET_TOPIC, FLEET_PARTITIONS)
    fill(target, FLEET_TOPIC, FLEET_PARTITIONS, local, "local")
    fill(source, FLEET_TOPIC, FLEET_PARTITIONS, records, "origin")
    copy_flow(topology, flow)
    fill(source, FLEET_TOPIC, FLEET_PARTITIONS, late, "late")


def checkpointed_fleet(local: LocalStack, path: Path, groups: int, records: int) -> Fleet:
    """The white paper's topology over topic `fleet` in `path`, replicated (replicate_fleet: 100 local records per
    partition in dc2, `records` copied, 50 late); `groups` groups (`fleet-NNNN`) commit random offsets in dc1 and
    are checkpointed into dc2 as a replicator's checkpoint pass does."""
    dc1, dc2 = ({"bootstrap.servers": local.config.dc(dc).broker_address} for dc in ("dc1", "dc2"))
    topology = load_topology(write_topology(local, path, FLEET_TOPIC))
    replicate_fleet(dc1, dc2, topology, FLEET_FLOW, records, local=100, late=50)
    commits = commit_random_groups(dc1, FLEET_TOPIC, FLEET_PARTITIONS, groups, records + 50, "fleet")
    checkpoint_groups(ClusterAccess.from_environ(topology), topology.flow(FLEET_FLOW), None)
    close_readers()
    return Fleet(commits, cluster_id(dc1))


def resumed_offsets(bootstrap: str, groups: list[str], topic: str) -> dict[str, dict[int, int]]:
    """Each group's committed offset per partition of `topic`, every request in flight at once."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = list_group_offsets(admin, [ConsumerGroupTopicPartitions(group) for group in groups], 60)
    return {
        group: {tp.partition: tp.offset for tp in future.result(60).topic_partitions or [] if tp.topic == topic}
        for group, future in futures.items()
    }


def one_leader(via: str, leader: str, subject: str) -> bool:
    """A new schema registered through the registry at `via` gets an id no schema had, served by the registry at
    `leader` under `subject`: the two issue ids from one store."""
    before = {s["id"] for s in httpx.get(f"{leader}/schemas", params={"deleted": "true"}).json()}
    schema = {"type": "record", "name": "Probe", "fields": [{"name": subject.replace("-", "_"), "type": "long"}]}
    new_id = SchemaRegistryClient({"url": via}).register_schema(f"{subject}-value", Schema(json.dumps(schema), "AVRO"))
    return new_id not in before and httpx.get(f"{leader}/schemas/ids/{new_id}/subjects").json() == [f"{subject}-value"]
