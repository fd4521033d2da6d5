"""dr_failover end to end with dag.test() on an embedded stack of its own (dc1 is lost in the disaster test):
the white paper's example, dry runs whose preview is right and that change nothing, bad params that change nothing, and
dr_schema_redirect's new ids.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import httpx
import pytest
from airflow.sdk.exceptions import ParamValidationError
from airflow.utils.state import DagRunState, TaskInstanceState
from confluent_kafka.admin import AdminClient
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from support.drills import (
    committed,
    copy_flow,
    fail_over,
    observable,
    produce,
    read_rest,
    run_job,
    states_of,
    write_topology,
)
from support.kafka import commit_offsets, create_topic, read_all, resume_offsets

from kafka_dr import client_switch
from kafka_dr.access import ClusterAccess
from kafka_dr.replication import replicators
from kafka_dr.replication.fencing import ClaimRenewal, FlowClaim
from kafka_dr.replication.internal import PROGRESS, ensure_internal_topics, latest_value, owner_key
from kafka_dr.replication.provenance import hops
from kafka_dr.spark.submit import spark_env, spark_submit_command
from kafka_dr.state import report_path
from kafka_dr.topology import load_topology
from kafka_dr.translation.group_offsets import LIVE, translated_offsets
from kafka_dr_dev.local.stack import LocalStack

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.usefixtures("jobs_in_process")]
LOCAL = 7  # records dc2 holds of its own before the copies: a translator that kept dc1's offsets would be caught
# What a dry run must not start: every step after the preview that changes something.
CHANGING_STEPS = (
    "switch_producers",
    "stop_inbound",
    "lag_zero",
    "disaster_path",
    "stop_replication",
    "translate_offsets",
    "redirect_schema_registry",
    "switch_consumers",
    "verify_failover",
    "failover_report",  # the preview wrote the dry run's
)
USER_SCHEMA = json.dumps({"type": "record", "name": "User", "fields": [{"name": "name", "type": "string"}]})


def test_bad_params_fail_at_the_first_task_and_change_nothing(dags, own_stack, state, tmp_path):
    topology = write_topology(own_stack, tmp_path / "t.yaml", "untouched")
    dc2 = own_stack.config.dc("dc2")
    create_topic({"bootstrap.servers": dc2.broker_address}, "untouched")
    commit_offsets({"bootstrap.servers": dc2.broker_address}, "idle-app", {("untouched", 0): 0})
    before = (committed(dc2.broker_address, "idle-app"), own_stack.config.dc("dc2"))
    # One bad param shows the wiring (each param's refusal is tests/unit/failover/test_plan.py's).
    run = dags["dr_failover"].test(
        run_conf={"topology": str(topology), "failed_cluster": "dc1", "target_cluster": "dc1", "mode": "disaster"}
    )
    states = states_of(run)
    assert run.state == DagRunState.FAILED and states["validate_failover"] == TaskInstanceState.FAILED, states
    assert all(s != TaskInstanceState.SUCCESS for s in states.values()), states
    with pytest.raises(ParamValidationError, match="dc9"):  # not a cluster of the trigger form: no run at all
        dags["dr_failover"].test(
            run_conf={"topology": str(topology), "failed_cluster": "dc9", "target_cluster": "dc2", "mode": "disaster"}
        )
    assert (committed(dc2.broker_address, "idle-app"), LocalStack(own_stack.data_dir).config.dc("dc2")) == before
    assert client_switch.history() == []


def test_planned_failover_loses_nothing_and_consumers_resume_without_duplicates(dags, own_stack, state, tmp_path):
    """dc1 still up: producers move first, the lag drains to 0, then offsets and consumers move. RPO 0."""
    dc1, dc2 = own_stack.config.dc("dc1"), own_stack.config.dc("dc2")
    topology = write_topology(own_stack, tmp_path / "t.yaml", "payments", registry=False)
    for dc in (dc1, dc2):
        create_topic({"bootstrap.servers": dc.broker_address}, "payments")
    produce(dc2.broker_address, "payments", 0, LOCAL)
    produce(dc1.broker_address, "payments", 0, 5_000)
    commit_offsets({"bootstrap.servers": dc1.broker_address}, "ledger", {("payments", 0): 3_000})
    command = spark_submit_command(
        "replicate",
        ["--topology", str(topology), "--flow", "wp-dc1-to-dc2", "--mode", "continuous", "--checkpoint-interval", "0"],
    )
    replicators.start("wp-dc1-to-dc2", command, env=spark_env())
    produce(dc1.broker_address, "payments", 5_000, 100)  # still arriving when the failover starts

    # A dry run: the replicator keeps running, no alias moves, no group offset changes on either side.
    moved_by_nobody = ({s.alias: s.active for s in client_switch.states(load_topology(topology))}, _ledger(own_stack))
    dry = fail_over(dags, topology, "planned", groups=".*", dry_run=True)
    states = states_of(dry)
    assert dry.state == DagRunState.SUCCESS, states
    assert {t: str(states[t]) for t in CHANGING_STEPS} == dict.fromkeys(CHANGING_STEPS, "skipped")
    assert replicators.is_running("wp-dc1-to-dc2")
    assert (
        {s.alias: s.active for s in client_switch.states(load_topology(topology))},
        _ledger(own_stack),
    ) == moved_by_nobody
    preview = json.loads(report_path("dr_failover", dry.run_id).read_text())["preview"]
    assert preview["replicators"]["wp-dc1-to-dc2"].startswith("stops: pid "), preview["replicators"]
    assert preview["clients"] == {"producers_first": ["orders-producer"], "moved": ["billing"]}
    assert preview["rpo_estimate"]["records"] == 0 and preview["groups"]["origin"] == "source"
    assert list(preview["groups"]["offsets"]["wp-dc1-to-dc2"]) == ["ledger"]

    run = fail_over(dags, topology, "planned", groups=".*")
    states = states_of(run)
    assert run.state == DagRunState.SUCCESS, states
    assert states["lag_zero"] == TaskInstanceState.SUCCESS and states["disaster_path"] == TaskInstanceState.SKIPPED
    assert not replicators.is_running("wp-dc1-to-dc2")
    report = json.loads(report_path("dr_failover", run.run_id).read_text())
    assert report["rpo"] == {**report["rpo"], "records": 0, "exact": True}
    assert report["clients"]["producers_first"] == ["orders-producer"] and report["clients"]["moved"] == ["billing"]
    assert report["schema_registry"]["skipped"].startswith("the primary registry is not set")
    copies = [hops(m.headers()) for m in read_all({"bootstrap.servers": dc2.broker_address}, "payments")]
    assert [chain[-1].offset for chain in copies if chain] == list(range(5_100))  # the whole topic, once, in order
    resume = resume_offsets({"bootstrap.servers": dc2.broker_address}, "payments", {0: 3_000})
    assert committed(dc2.broker_address, "ledger") == resume
    assert read_rest(dc2.broker_address, "ledger", "payments") == list(range(3_000, 5_100))  # none lost, none twice


def test_a_replicator_the_tracker_does_not_know_is_stopped_through_its_target(dags, own_stack, state, tmp_path):
    """A replicator of the failed side started outside this host's tracker (another host, a lost state dir):
    stop_replication finds no pid to signal, asks it through dc2's `_kdr.control`, and it ends its epoch and exits on
    its own, its last owner record naming the request; the failover holds."""
    dc1, dc2 = own_stack.config.dc("dc1"), own_stack.config.dc("dc2")
    topology = write_topology(own_stack, tmp_path / "t.yaml", "refunds", registry=False)
    create_topic({"bootstrap.servers": dc1.broker_address}, "refunds")
    produce(dc1.broker_address, "refunds", 0, 100)
    command = spark_submit_command(
        "replicate",
        ["--topology", str(topology), "--flow", "wp-dc1-to-dc2", "--mode", "continuous", "--checkpoint-interval", "0"],
    )
    elsewhere = subprocess.Popen(
        command, env=spark_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
    try:
        run = fail_over(dags, topology, "planned", groups="none")
        states = states_of(run)
        assert elsewhere.wait(30) == 0, "the untracked replicator did not end on its own"
    finally:
        if elsewhere.poll() is None:
            os.killpg(elsewhere.pid, signal.SIGKILL)
            elsewhere.wait()
    assert run.state == DagRunState.SUCCESS, states
    ended = json.loads(latest_value({"bootstrap.servers": dc2.broker_address}, PROGRESS, owner_key("wp-dc1-to-dc2")))
    assert ended["reason"].startswith("stop request from ") and ended["request"], ended


def test_failover_fails_while_a_replicator_elsewhere_does_not_answer_and_still_writes(
    dags, own_stack, state, tmp_path, capfd
):
    """A replicator on a host the failover cannot reach, that neither reads stop requests nor stops claiming its flow
    in dc2 (played by its claim alone): in a disaster, stop_replication gives up on it after 5 s, and verify sees its
    claims in dc2 and fails the run naming the flow."""
    dc2 = {"bootstrap.servers": own_stack.config.dc("dc2").broker_address}
    topology = write_topology(own_stack, tmp_path / "t.yaml", "deaf", registry=False)
    ensure_internal_topics(AdminClient(dc2), (PROGRESS,))
    claim, renewing = FlowClaim("wp-dc1-to-dc2", dc2, {"host": "unreachable-host", "pid": 1}), threading.Event()
    assert claim.holds()
    ClaimRenewal(claim, renewing, lost=lambda: None).start()
    try:
        run = fail_over(dags, topology, "disaster", groups="none")
    finally:
        renewing.set()
    states = states_of(run)
    assert (
        states["stop_replication"] == TaskInstanceState.SUCCESS
        and states["verify_failover"] == TaskInstanceState.FAILED
    ), states
    assert run.state == DagRunState.FAILED
    assert "AirflowFailException: flow wp-dc1-to-dc2 still copies into dc2" in "".join(capfd.readouterr())


def test_white_paper_disaster_failover(dags, own_stack, state, tmp_path):
    """10,000 records in dc1, 9,998 replicated after 7 of dc2's own, a group that read 8,000; dc1 lost; dr_failover
    (disaster): the group resumes in dc2 at the copy of origin offset 8,000 (8,007 when no copy transaction committed
    before it) and reads exactly the other 1,998; RPO = 2;
    dc2's registry registers new ids; clients point at dc2."""
    dc1, dc2 = own_stack.config.dc("dc1"), own_stack.config.dc("dc2")
    topology = write_topology(own_stack, tmp_path / "t.yaml", "orders")
    for dc in (dc1, dc2):
        create_topic({"bootstrap.servers": dc.broker_address}, "orders")
    produce(dc2.broker_address, "orders", 0, LOCAL)
    registry1 = SchemaRegistryClient({"url": dc1.registry_url})
    old_id = registry1.register_schema("users-value", _schema())
    produce(dc1.broker_address, "orders", 0, 9_998)
    loaded = load_topology(topology)
    copy_flow(loaded, "wp-dc1-to-dc2")  # replication up to the disaster: 9,998 records and the schemas
    produce(dc1.broker_address, "orders", 9_998, 2)  # never replicated
    commit_offsets({"bootstrap.servers": dc1.broker_address}, "billing", {("orders", 0): 8_000})
    resume = resume_offsets({"bootstrap.servers": dc2.broker_address}, "orders", {0: 8_000})[("orders", 0)]
    checkpoint = run_job("translate_offsets", "--topology", str(topology), "--flow", "wp-dc1-to-dc2")
    assert checkpoint["groups"]["billing"][0]["dest_offset"] == resume
    live = translated_offsets(
        "billing", "dc2", ClusterAccess.from_environ(loaded), source=LIVE
    )  # what an application asks while dc1 answers
    assert [(p.topic, p.partition, p.offset) for p in live.partitions] == [("orders", 0, resume)]
    own_stack.stop("dc1")  # the disaster

    preview = dry_run_preview(dags, own_stack, topology, resume)

    run = fail_over(dags, topology, "disaster", groups="billing")
    states = states_of(run)
    assert run.state == DagRunState.SUCCESS, states
    assert states["switch_producers"] == TaskInstanceState.SKIPPED and states["lag_zero"] == TaskInstanceState.SKIPPED
    assert states["disaster_path"] == TaskInstanceState.SUCCESS
    assert committed(dc2.broker_address, "billing") == {("orders", 0): resume}
    # The application's view, dc1 lost: the checkpoint kept in dc2, as the DAG applied it.
    assert offsets_for_applications(topology, "billing", "dc2") == [("orders", 0, resume)]
    assert read_rest(dc2.broker_address, "billing", "orders") == list(range(8_000, 9_998))
    report_file = report_path("dr_failover", run.run_id)
    report = json.loads(report_file.read_text())
    assert report["dry_run"] is False and report["preview"]["groups"]["offsets"] == preview["groups"]["offsets"]
    print(f"disaster failover RTO {report['rto_seconds']} s, steps: {json.dumps(report.get('steps'))}")
    assert report["rpo"]["records"] == 2 and report["rpo"]["per_topic"] == {"orders": 2, "_schemas": 0}
    assert report["rpo"]["exact"] is False  # dc1 is gone: the last lag measurement, kept in dc2
    assert report["rto_seconds"] > 0 and report["groups"]["applied"] == ["billing"]
    redirected = report["schema_registry"]
    assert redirected["primary"]["store"] == "dc2" and redirected["primary"]["probe_id"] > old_id
    assert redirected["follower"] == {"skipped": "the dc1 registry does not answer: it is demoted by dr_failback"}
    assert "**RPO: 2 records**" in report_file.with_suffix(".md").read_text()
    assert {s.alias: s.active for s in client_switch.states(loaded)} == {"orders-producer": "dc2", "billing": "dc2"}
    assert_serializers_work(dc2.registry_url, old_id, redirected["primary"]["probe_id"])


def dry_run_preview(dags: dict[str, Any], own_stack: LocalStack, topology: Path, resume: int) -> dict[str, Any]:
    """A dry run first: its preview says what the failover will do, and nothing observable changes."""
    before = observable(own_stack, topology, ("dc2",))
    dry = fail_over(dags, topology, "disaster", groups="billing", dry_run=True)
    states = states_of(dry)
    assert dry.state == DagRunState.SUCCESS, states
    assert {t: str(states[t]) for t in CHANGING_STEPS} == dict.fromkeys(CHANGING_STEPS, "skipped")
    assert observable(own_stack, topology, ("dc2",)) == before
    dry_report = json.loads(report_path("dr_failover", dry.run_id).read_text())
    preview = dry_report["preview"]
    assert dry_report["dry_run"] is True and dry_report["rto_seconds"] is None and dry_report["rpo"]["records"] == 2
    assert preview["groups"]["offsets"] == {
        "wp-dc1-to-dc2": {"billing": [{"topic": "orders", "partition": 0, "offset": resume}]}
    }
    assert preview["groups"]["origin"] == "checkpoints" and preview["schema_registry"] == {
        "leader": "dc2",
        "follower": "dc1",
    }
    assert preview["clients"] == {"producers_first": [], "moved": ["orders-producer", "billing"]}
    assert preview["replicators"]["wp-dc1-to-dc2"].startswith("not running"), preview["replicators"]
    assert (
        "groups: 1 (1 partitions, offsets from checkpoints)"
        in report_path("dr_failover", dry.run_id).with_suffix(".md").read_text()
    )
    return preview


def offsets_for_applications(topology: Path, group: str, cluster: str) -> list[tuple[str, int, int]]:
    """What `kafka-dr offsets GROUP --to CLUSTER --json` tells an application: (topic, partition, offset)."""
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "kafka_dr.cli",
            "offsets",
            group,
            "--to",
            cluster,
            "--topology",
            str(topology),
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return [(p["topic"], p["partition"], p["offset"]) for p in json.loads(done.stdout)["partitions"]]


def assert_serializers_work(registry_url: str, old_id: int, probe_id: int) -> None:
    """Serializers keep working against the registry: the old schema resolves, a new one gets an id never used
    before (above the redirect's probe)."""
    registry = SchemaRegistryClient({"url": registry_url})
    assert json.loads(registry.get_schema(old_id).schema_str) == json.loads(USER_SCHEMA)  # known there
    serializer = AvroSerializer(
        registry, USER_SCHEMA.replace('"string"}]', '"string"}, {"name": "age", "type": "int", "default": 0}]')
    )
    ctx = SerializationContext("users", MessageField.VALUE)
    payload = serializer({"name": "ann", "age": 3}, ctx)
    assert int.from_bytes(payload[1:5], "big") > probe_id - 1
    assert AvroDeserializer(registry)(payload, ctx) == {"name": "ann", "age": 3}
    assert httpx.get(f"{registry_url}/subjects").status_code == 200


def _ledger(stack) -> list[dict]:
    return [committed(stack.config.dc(dc).broker_address, "ledger") for dc in ("dc1", "dc2")]


def _schema():
    from confluent_kafka.schema_registry import Schema

    return Schema(USER_SCHEMA, "AVRO")
