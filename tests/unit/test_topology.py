"""Topology loader: the default file, the helpers, and one clear line for every kind of bad file."""

from __future__ import annotations

import copy
import dataclasses
import functools
import operator
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from kafka_dr.topology import DEFAULT_TOPOLOGY, DrPolicy, Flow, Slo, TopologyError, load_topology, parse_topology

DESIGN_TOPOLOGY: dict[str, Any] = {
    "clusters": {
        "dc1": {"bootstrap_servers": "127.0.0.1:9091", "schema_registry": "http://127.0.0.1:8081"},
        "dc2": {"bootstrap_servers": "127.0.0.1:9092", "schema_registry": "http://127.0.0.1:8082"},
    },
    "flows": [
        {
            "name": "dc1-to-dc2",
            "source": "dc1",
            "target": "dc2",
            "topics": {"include": ["topic1", "topic2", "_schemas"], "exclude": []},
            "rename": {"topic2": "{topic}.replica"},
            "provenance": True,
            "sync_topic_configs": True,
            "groups": {"include": [".*"], "exclude": ["console-consumer-.*"]},
        },
        {"name": "dc2-to-dc1", "source": "dc2", "target": "dc1", "topics": {"include": ["topic1"]}},
    ],
    "schema_registry": {"primary": "dc1"},
    "health": {
        "max_lag_records": 10000,
        "max_lag_seconds": 60,
        "max_heartbeat_latency_ms": 5000,
        "max_checkpoint_age_s": 120,
    },
}


def write(tmp_path: Path, data: Any, name: str = "topology.yaml") -> Path:
    path = tmp_path / name
    path.write_text(data if isinstance(data, str) else yaml.safe_dump(data), encoding="utf-8")
    return path


def refused(tmp_path: Path, data: Any) -> str:
    """Load `data` from a file, assert it is refused, and return the one-line message."""
    path = write(tmp_path, data)
    with pytest.raises(TopologyError) as info:
        load_topology(path)
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(f"{path}: ")
    return message


def mutated(change: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    data = copy.deepcopy(DESIGN_TOPOLOGY)
    change(data)
    return data


# --- the default file and the happy path ---------------------------------------------------------


def test_default_file_is_the_replicator_demo_topology() -> None:
    assert Path(__file__).resolve().parents[2] / "include" / "topology.yaml" == DEFAULT_TOPOLOGY
    topology = load_topology(DEFAULT_TOPOLOGY)
    local = dataclasses.replace(topology, clients={}, schema_registry_restart=None, dr=DrPolicy())
    assert local == parse_topology(DESIGN_TOPOLOGY, source="design")
    assert topology.dr == DrPolicy(
        rpo_records=1000,
        rto_seconds=60,
        cut_off_command="kafka-dr-dev local stop {cluster} --registry-url {registry_url}",  # kills the embedded DC
        bring_back_command="kafka-dr-dev local start {cluster} --registry-url {registry_url}",
    )
    # the local stack's
    assert (topology.schema_registry_restart or "").startswith("kafka-dr-dev local restart-registry ")
    assert {a.name: (a.cluster, a.role) for a in topology.clients.values()} == {
        "orders-producer": ("dc1", "producer"),
        "orders-consumer": ("dc1", "consumer"),
        "analytics": ("dc2", "both"),
    }

    dc1, dc2 = topology.cluster("dc1"), topology.cluster("dc2")
    assert (dc1.bootstrap_servers, dc1.schema_registry) == ("127.0.0.1:9091", "http://127.0.0.1:8081")
    assert (dc2.bootstrap_servers, dc2.schema_registry) == ("127.0.0.1:9092", "http://127.0.0.1:8082")
    assert topology.schema_registry_primary == "dc1"
    assert [f.name for f in topology.flows] == ["dc1-to-dc2", "dc2-to-dc1"]

    forward = topology.flow("dc1-to-dc2")
    assert (forward.source, forward.target, forward.provenance, forward.sync_topic_configs) == (
        "dc1",
        "dc2",
        True,
        True,
    )
    assert [p.pattern for p in forward.topics.include] == ["topic1", "topic2", "_schemas"]
    assert dict(forward.rename) == {"topic2": "{topic}.replica"}
    assert [p.pattern for p in forward.groups.exclude] == ["console-consumer-.*"]


def test_a_flow_sets_its_replicator_epoch_and_checkpoint_interval(tmp_path: Path) -> None:
    data = copy.deepcopy(DESIGN_TOPOLOGY)
    data["flows"][0] |= {"epoch_seconds": 2.5, "checkpoint_seconds": 1}
    flow = load_topology(write(tmp_path, data)).flow("dc1-to-dc2")
    assert (flow.epoch_seconds, flow.checkpoint_seconds) == (2.5, 1.0)


def test_defaults_of_a_minimal_flow() -> None:
    backward = load_topology(DEFAULT_TOPOLOGY).flow("dc2-to-dc1")
    assert (backward.source, backward.target) == ("dc2", "dc1")
    assert dict(backward.rename) == {}
    assert backward.provenance is True
    assert backward.sync_topic_configs is True
    assert backward.epoch_seconds == 5.0
    assert backward.checkpoint_seconds == 30.0
    assert [p.pattern for p in backward.topics.exclude] == []
    assert [p.pattern for p in backward.groups.include] == [".*"]
    assert [p.pattern for p in backward.groups.exclude] == []
    assert backward.destination_topic("topic1") == "topic1"


def test_none_means_kdr_topology_env_then_default(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KDR_TOPOLOGY", raising=False)
    assert load_topology() == load_topology(DEFAULT_TOPOLOGY)

    data = mutated(lambda d: d["flows"].pop())
    monkeypatch.setenv("KDR_TOPOLOGY", str(write(tmp_path, data, "other.yaml")))
    assert [f.name for f in load_topology().flows] == ["dc1-to-dc2"]
    assert [f.name for f in load_topology(str(DEFAULT_TOPOLOGY)).flows] == ["dc1-to-dc2", "dc2-to-dc1"]


def test_destination_topic_applies_the_first_full_matching_rename() -> None:
    data = mutated(
        lambda d: d["flows"][0].update(
            rename={"topic2": "{topic}.replica", "topic.*": "dc1.{topic}", "orders": "{topic}-{topic}"}
        )
    )
    flow = parse_topology(data).flow("dc1-to-dc2")
    assert flow.destination_topic("topic2") == "topic2.replica"
    assert flow.destination_topic("topic1") == "dc1.topic1"
    assert flow.destination_topic("orders") == "orders-orders"
    assert flow.destination_topic("xtopic2") == "xtopic2"  # full match only
    assert flow.destination_topic("_schemas") == "_schemas"


def test_a_one_topic_key_may_rename_to_a_plain_name() -> None:
    data = mutated(lambda d: d["flows"][0].update(rename={"topic2": "orders", "topic1\\.v2": "v2"}))
    flow = parse_topology(data).flow("dc1-to-dc2")
    assert [flow.destination_topic(t) for t in ("topic2", "topic1.v2", "topic1xv2")] == ["orders", "v2", "topic1xv2"]


def test_a_rename_may_name_the_source_cluster_as_mirrormaker_2_does() -> None:
    def change(d: dict[str, Any]) -> None:
        d["flows"][0].update(rename={"topic2": "{source}", ".*": "{source}.{topic}"})
        d["flows"][1].update(rename={".*": "{source}.{topic}"})

    topology = parse_topology(mutated(change))
    forward, backward = topology.flow("dc1-to-dc2"), topology.flow("dc2-to-dc1")
    assert [forward.destination_topic(t) for t in ("topic1", "topic2", "_schemas")] == [
        "dc1.topic1",
        "dc1",
        "dc1._schemas",
    ]
    assert backward.destination_topic("topic1") == "dc2.topic1"
    assert [forward.source_topic(t) for t in ("dc1.topic1", "dc1", "dc1._schemas")] == ["topic1", "topic2", "_schemas"]
    assert backward.source_topic("dc2.topic1") == "topic1"
    assert [forward.source_topic(t) for t in ("dc2.topic1", "topic1", "dc1.dc1.topic1")] == [None, None, None]


def renaming_flow(rename: dict[str, str]) -> Flow:
    """dc1-to-dc2 with `rename`, over the topics orders, ab, a and a.x."""
    data = mutated(lambda d: d["flows"][0].update(topics={"include": ["orders", "ab", "a", "a\\.x"]}, rename=rename))
    return parse_topology(data).flow("dc1-to-dc2")


@pytest.mark.parametrize(
    ("rename", "dest", "origin"),
    [
        ({}, "orders", "orders"),
        ({"orders": "{topic}.replica"}, "orders.replica", "orders"),
        ({"orders": "{topic}.replica"}, "orders", None),  # orders is renamed, so no topic lands on its own name
        ({".*": "{topic}-{topic}"}, "ab-ab", "ab"),
        ({".*": "{topic}-{topic}"}, "ab-cd", None),
        ({"orders": "orders_v2"}, "orders_v2", "orders"),  # a plain name for a one-topic key
        ({".*": "x.{topic}"}, "x.refunds", None),  # the filter does not select refunds
        ({".*": "{source}.{topic}"}, "dc1.orders", "orders"),
        ({".*": "{source}.{topic}"}, "dc2.orders", None),  # another cluster's name
        ({".*": "{source}.{topic}.{source}"}, "dc1.ab.dc1", "ab"),
        ({"orders": "{source}-orders"}, "dc1-orders", "orders"),  # a one-topic key without {topic}
    ],
)
def test_source_topic_reads_the_rename_backwards(rename: dict[str, str], dest: str, origin: str | None) -> None:
    flow = renaming_flow(rename)
    assert flow.source_topic(dest) == origin
    if origin is not None:
        assert flow.destination_topic(origin) == dest


def test_two_topics_renamed_onto_one_name_refuse_the_inverse() -> None:
    flow = renaming_flow({"a": "{topic}.x", "a\\.x": "a.x"})
    with pytest.raises(TopologyError, match=r"^flow dc1-to-dc2 renames both a and a\.x to a\.x$"):
        flow.source_topic("a.x")


def test_a_rename_longer_than_a_topic_name_is_refused(tmp_path: Path) -> None:
    long = "d" * 248  # a legal cluster name, but with a dot and a topic a name of 250 characters

    def change(d: dict[str, Any]) -> None:
        d["clusters"][long] = d["clusters"].pop("dc1")
        d["flows"][0].update(source=long, rename={".*": "{source}.{topic}"})
        d["flows"][1].update(target=long)
        d["schema_registry"]["primary"] = long

    message = refused(tmp_path, mutated(change))
    assert message.endswith(
        f"flows[0].rename['.*']: format '{{source}}.{{topic}}' with source '{long}' would make topic names longer "
        "than 249 characters"
    )

    def without_the_dot(d: dict[str, Any]) -> None:
        change(d)
        d["flows"][0].update(rename={".*": "{source}{topic}"})

    flow = parse_topology(mutated(without_the_dot)).flow("dc1-to-dc2")
    assert len(flow.destination_topic("a")) == 249  # the longest name the limit lets through
    message = refused(tmp_path, mutated(lambda d: d["flows"][0].update(rename={"topic2": "x" * 250})))
    assert message.endswith(
        "flows[0].rename['topic2']: format '" + "x" * 250 + "' would make topic names longer than 249 characters"
    )


def test_filter_matches_full_names_and_never_internal_topics() -> None:
    data = mutated(lambda d: d["flows"][0].update(topics={"include": [".*"], "exclude": ["tmp-.*"]}))
    topics = parse_topology(data).flow("dc1-to-dc2").topics
    assert topics.matches("topic1")
    assert not topics.matches("tmp-1")
    assert not topics.matches("_kdr.progress")
    assert not topics.matches("_kdr.heartbeats")

    design = parse_topology(DESIGN_TOPOLOGY).flow("dc1-to-dc2")
    assert design.topics.matches("topic1")
    assert design.topics.matches("_schemas")
    assert not design.topics.matches("topic10")  # full match, not prefix
    assert not design.topics.matches("xtopic1")
    assert design.groups.matches("my-app")
    assert not design.groups.matches("console-consumer-4242")


def test_every_flow_copies_heartbeats_and_the_drill_probe_under_their_own_names() -> None:
    flow = parse_topology(mutated(lambda d: d["flows"][0].update(rename={".*": "{source}.{topic}"}))).flow("dc1-to-dc2")
    assert flow.copies("_kdr.heartbeats") and not flow.copies_data("_kdr.heartbeats")  # measured, never lag
    assert flow.copies("_kdr.drill") and flow.copies_data("_kdr.drill")
    assert not flow.copies("_kdr.progress") and not flow.copies("_kdr.checkpoints")
    assert flow.destination_topic("_kdr.drill") == "_kdr.drill"
    assert flow.destination_topic("topic1") == "dc1.topic1"
    assert flow.source_topic("_kdr.drill") == "_kdr.drill"


def test_bootstrap_servers_accepts_a_list_and_normalises_it() -> None:
    data = mutated(lambda d: d["clusters"]["dc1"].update(bootstrap_servers=["a.example:9092", " b.example:9093"]))
    assert parse_topology(data).cluster("dc1").bootstrap_servers == "a.example:9092,b.example:9093"
    data = mutated(lambda d: d["clusters"]["dc1"].update(bootstrap_servers="[::1]:9092, h:1"))
    assert parse_topology(data).cluster("dc1").bootstrap_servers == "[::1]:9092,h:1"


def test_schema_registry_is_optional() -> None:
    def change(d: dict[str, Any]) -> None:
        del d["schema_registry"]
        del d["clusters"]["dc2"]["schema_registry"]
        del d["flows"]

    topology = parse_topology(mutated(change))
    assert topology.schema_registry_primary is None
    assert topology.cluster("dc2").schema_registry is None
    assert topology.flows == ()


def test_model_is_immutable() -> None:
    topology = load_topology(DEFAULT_TOPOLOGY)
    with pytest.raises(dataclasses.FrozenInstanceError):
        topology.flows[0].name = "x"  # type: ignore[misc]
    with pytest.raises(TypeError):
        topology.clusters["dc3"] = topology.clusters["dc1"]  # type: ignore[index]
    with pytest.raises(TypeError):
        topology.flows[0].rename["x"] = "{topic}"  # type: ignore[index]


def test_unknown_flow_and_cluster_lookups() -> None:
    topology = load_topology(DEFAULT_TOPOLOGY)
    with pytest.raises(TopologyError, match=r"^unknown flow 'dc9-to-dc1' \(known: dc1-to-dc2, dc2-to-dc1\)$"):
        topology.flow("dc9-to-dc1")
    with pytest.raises(TopologyError, match=r"^unknown cluster 'dc3' \(known: dc1, dc2\)$"):
        topology.cluster("dc3")


# --- bad files: one line naming the key path and the reason -------------------------------------


def test_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "nope.yaml"
    with pytest.raises(TopologyError, match=r"nope\.yaml: file not found$"):
        load_topology(path)


def test_unreadable_path(tmp_path: Path) -> None:
    with pytest.raises(TopologyError, match=r": cannot read: "):
        load_topology(tmp_path)


def test_not_yaml(tmp_path: Path) -> None:
    message = refused(tmp_path, "clusters: {dc1: [\n")
    assert ": not valid YAML: " in message
    assert "at line 2" in message


def test_duplicate_yaml_key(tmp_path: Path) -> None:
    text = "clusters:\n  dc1: {bootstrap_servers: 'h:1'}\n  dc1: {bootstrap_servers: 'h:2'}\n"
    message = refused(tmp_path, text)
    assert message.endswith("not valid YAML: duplicate key 'dc1' at line 3, column 3")


def test_empty_file(tmp_path: Path) -> None:
    assert refused(tmp_path, "").endswith(": empty file (expected a mapping with 'clusters' and 'flows')")


@pytest.mark.parametrize(
    ("text", "reason"),
    [("- a\n- b\n", "must be a mapping, got list"), ("just text\n", "must be a mapping, got str")],
)
def test_not_a_mapping(tmp_path: Path, text: str, reason: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(TopologyError) as info:
        load_topology(path)
    assert str(info.value) == f"{path}: {reason}"


# Each case changes DESIGN_TOPOLOGY and names the start of the one-line refusal (the file says how).
BAD_TOPOLOGIES: list[dict[str, Any]] = yaml.safe_load((Path(__file__).parent / "bad_topologies.yaml").read_text())


def apply_case(case: dict[str, Any]) -> Callable[[dict[str, Any]], None]:
    def change(data: dict[str, Any]) -> None:
        at = functools.reduce(operator.getitem, case["at"], data)
        if "pop" in case:
            at.pop(case["pop"])
        elif "append" in case:
            at.append(case["append"])
        else:
            at.update(case["set"])

    return change


@pytest.mark.parametrize("case", BAD_TOPOLOGIES, ids=[case["name"] for case in BAD_TOPOLOGIES])
def test_bad_topology_is_refused_with_one_line(tmp_path: Path, case: dict[str, Any]) -> None:
    message = refused(tmp_path, mutated(apply_case(case)))
    assert message.startswith(f"{tmp_path / 'topology.yaml'}: {case['error']}"), message


def test_health_slos_are_read_and_optional() -> None:
    assert parse_topology(DESIGN_TOPOLOGY).health == Slo(10000, 60, 5000, 120)
    assert parse_topology(mutated(lambda d: d.pop("health"))).health == Slo()  # nothing checked
    assert parse_topology(mutated(lambda d: d.update(health={"max_lag_seconds": 2.5}))).health == Slo(
        max_lag_seconds=2.5
    )


def test_the_dr_policy_requires_approval_by_another_user_unless_it_says_otherwise() -> None:
    assert parse_topology(mutated(lambda d: d.pop("dr", None))).dr == DrPolicy("required", (), True, 3600.0)
    policy = {"approval": "required", "approvers": ["alice", "bob"], "four_eyes": False, "approval_timeout": "15m"}
    policy |= {"propose_failover_after": 0, "rpo_records": 0, "rto_seconds": 45.5}
    assert parse_topology(mutated(lambda d: d.update(dr=policy))).dr == DrPolicy(
        "required", ("alice", "bob"), False, 900, 0, 0, 45.5
    )
    unset = parse_topology(mutated(lambda d: d.update(dr={}))).dr
    assert (unset.rpo_records, unset.rto_seconds) == (None, None)  # no objective: a drill gives figures, no verdict
    assert parse_topology(mutated(lambda d: d.update(dr={"approval": "none"}))).dr.approval == "none"


def test_refusal_names_the_file_as_given(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write(tmp_path, mutated(lambda d: d["flows"][1].update(source="dc3")))
    monkeypatch.chdir(tmp_path)
    with pytest.raises(TopologyError) as info:
        load_topology("topology.yaml")
    assert str(info.value) == "topology.yaml: flows[1].source: unknown cluster 'dc3' (known: dc1, dc2)"


def test_parse_topology_prefixes_its_source() -> None:
    with pytest.raises(TopologyError) as info:
        parse_topology({"clusters": {}}, source="dag params")
    assert str(info.value) == "dag params: clusters: must define at least one cluster"
