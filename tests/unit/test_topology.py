"""Topology loader: the default file, the helpers, and one clear line for every kind of bad file."""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from kafka_dr.topology import DEFAULT_TOPOLOGY, TopologyError, load_topology, parse_topology

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
    assert dataclasses.replace(topology, clients={}) == parse_topology(DESIGN_TOPOLOGY, source="design")
    assert {a.name: (a.cluster, a.role) for a in topology.clients.values()} == {
        "orders-producer": ("dc1", "producer"), "orders-consumer": ("dc1", "consumer"), "analytics": ("dc2", "both")}

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


def test_defaults_of_a_minimal_flow() -> None:
    backward = load_topology(DEFAULT_TOPOLOGY).flow("dc2-to-dc1")
    assert (backward.source, backward.target) == ("dc2", "dc1")
    assert dict(backward.rename) == {}
    assert backward.provenance is True
    assert backward.sync_topic_configs is True
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


BAD_TOPOLOGIES: list[tuple[str, Callable[[dict[str, Any]], None], str]] = [
    # missing required fields
    ("no clusters", lambda d: d.pop("clusters"), "missing required key 'clusters'"),
    (
        "no bootstrap",
        lambda d: d["clusters"]["dc2"].pop("bootstrap_servers"),
        "clusters.dc2: missing required key 'bootstrap_servers'",
    ),
    ("no flow name", lambda d: d["flows"][1].pop("name"), "flows[1]: missing required key 'name'"),
    ("no source", lambda d: d["flows"][0].pop("source"), "flows[0]: missing required key 'source'"),
    ("no target", lambda d: d["flows"][0].pop("target"), "flows[0]: missing required key 'target'"),
    ("no topics", lambda d: d["flows"][1].pop("topics"), "flows[1]: missing required key 'topics'"),
    (
        "no include",
        lambda d: d["flows"][1]["topics"].pop("include"),
        "flows[1].topics: missing required key 'include'",
    ),
    (
        "no primary",
        lambda d: d["schema_registry"].pop("primary"),
        "schema_registry: missing required key 'primary'",
    ),
    # unknown keys (typos) at every level
    ("top-level typo", lambda d: d.update(flow=[]), "unknown key 'flow' (did you mean 'flows'? allowed: "),
    (
        "cluster typo",
        lambda d: d["clusters"]["dc1"].update(schema_regsitry="http://h:1"),
        "clusters.dc1: unknown key 'schema_regsitry' (did you mean 'schema_registry'? allowed: "
        "bootstrap_servers, schema_registry)",
    ),
    (
        "flow typo",
        lambda d: d["flows"][1].update(provenence=False),
        "flows[1]: unknown key 'provenence' (did you mean 'provenance'? ",
    ),
    (
        "topics typo",
        lambda d: d["flows"][0]["topics"].update(exclued=[]),
        "flows[0].topics: unknown key 'exclued' (did you mean 'exclude'? allowed: include, exclude)",
    ),
    (
        "groups typo",
        lambda d: d["flows"][0]["groups"].update(includes=[]),
        "flows[0].groups: unknown key 'includes' (did you mean 'include'? ",
    ),
    (
        "schema registry typo",
        lambda d: d["schema_registry"].update(primery="dc1"),
        "schema_registry: unknown key 'primery' (did you mean 'primary'? allowed: primary, restart_command)",
    ),
    (
        "registry restart placeholder",
        lambda d: d["schema_registry"].update(restart_command="systemctl restart {unit}"),
        "schema_registry.restart_command: unknown placeholder {unit} (allowed: {cluster}, {kafkastore}, "
        "{leader_eligible})",
    ),
    (
        "unrelated key",
        lambda d: d.update(zzz=1),
        "unknown key 'zzz' (allowed: clusters, flows, schema_registry, clients)",
    ),
    # wrong types
    ("clusters list", lambda d: d.update(clusters=["dc1"]), "clusters: must be a mapping of cluster name"),
    (
        "cluster not mapping",
        lambda d: d["clusters"].update(dc2="h:1"),
        "clusters.dc2: must be a mapping, got str",
    ),
    (
        "cluster int name",
        lambda d: d["clusters"].update({7: {}}),
        "clusters: cluster name must be a string, got int 7",
    ),
    ("flows mapping", lambda d: d.update(flows={"a": 1}), "flows: must be a list of flows, got dict"),
    ("flow not mapping", lambda d: d["flows"].append("x"), "flows[2]: must be a mapping, got str"),
    ("source int", lambda d: d["flows"][0].update(source=1), "flows[0].source: must be a string, got int"),
    (
        "flow name int",
        lambda d: d["flows"][0].update(name=3),
        "flows[0].name: flow name must be a string, got int 3",
    ),
    ("bad flow name", lambda d: d["flows"][0].update(name="a b"), "flows[0].name: bad flow name 'a b' (use "),
    (
        "topics str",
        lambda d: d["flows"][0].update(topics="topic1"),
        "flows[0].topics: must be a mapping, got str",
    ),
    (
        "include str",
        lambda d: d["flows"][0]["topics"].update(include="topic1"),
        "flows[0].topics.include: must be a list of regexes, got str",
    ),
    (
        "include item int",
        lambda d: d["flows"][0]["topics"].update(include=["a", 5]),
        "flows[0].topics.include[1]: must be a regex string, got int",
    ),
    (
        "empty include",
        lambda d: d["flows"][0]["topics"].update(include=[]),
        "flows[0].topics.include: must list at least one regex",
    ),
    (
        "provenance str",
        lambda d: d["flows"][0].update(provenance="no way"),
        "flows[0].provenance: must be true or false, got str 'no way'",
    ),
    (
        "sync null",
        lambda d: d["flows"][0].update(sync_topic_configs=None),
        "flows[0].sync_topic_configs: must be true or false, got null None",
    ),
    (
        "rename list",
        lambda d: d["flows"][0].update(rename=["x"]),
        "flows[0].rename: must be a mapping of topic regex to format, got list",
    ),
    (
        "registry int",
        lambda d: d["clusters"]["dc1"].update(schema_registry=8081),
        "clusters.dc1.schema_registry: must be a string, got int",
    ),
    (
        "schema_registry str",
        lambda d: d.update(schema_registry="dc1"),
        "schema_registry: must be a mapping, got str",
    ),
    # cross references
    (
        "unknown source",
        lambda d: d["flows"][1].update(source="dc3"),
        "flows[1].source: unknown cluster 'dc3' (known: dc1, dc2)",
    ),
    (
        "unknown target",
        lambda d: d["flows"][0].update(target="DC2"),
        "flows[0].target: unknown cluster 'DC2' (known: dc1, dc2)",
    ),
    (
        "source is target",
        lambda d: d["flows"][0].update(target="dc1"),
        "flows[0].target: source and target are both 'dc1'",
    ),
    (
        "duplicate flow",
        lambda d: d["flows"].append(copy.deepcopy(d["flows"][0])),
        "flows[2].name: duplicate flow name 'dc1-to-dc2' (also flows[0])",
    ),
    (
        "unknown primary",
        lambda d: d["schema_registry"].update(primary="dc9"),
        "schema_registry.primary: unknown cluster 'dc9' (known: dc1, dc2)",
    ),
    (
        "primary without registry",
        lambda d: d["clusters"]["dc1"].pop("schema_registry"),
        "schema_registry.primary: cluster 'dc1' has no schema_registry URL",
    ),
    ("empty clusters", lambda d: d.update(clusters={}), "clusters: must define at least one cluster"),
    # regexes
    (
        "bad include regex",
        lambda d: d["flows"][0]["topics"].update(include=["topic1", "topic(2"]),
        "flows[0].topics.include[1]: bad regex 'topic(2': missing ), unterminated subpattern at position 5",
    ),
    (
        "bad exclude regex",
        lambda d: d["flows"][0]["groups"].update(exclude=["*x"]),
        "flows[0].groups.exclude[0]: bad regex '*x': nothing to repeat at position 0",
    ),
    (
        "bad rename regex",
        lambda d: d["flows"][0].update(rename={"[a": "{topic}"}),
        "flows[0].rename['[a']: bad regex '[a': unterminated character set at position 0",
    ),
    # rename formats
    (
        "rename without placeholder",
        lambda d: d["flows"][0].update(rename={"topic2": "replica"}),
        "flows[0].rename['topic2']: format 'replica' must contain the {topic} placeholder",
    ),
    (
        "rename other placeholder",
        lambda d: d["flows"][0].update(rename={"topic2": "{topic}.{dc}"}),
        "flows[0].rename['topic2']: bad placeholder in '{topic}.{dc}': only a plain {topic} is allowed",
    ),
    (
        "rename positional",
        lambda d: d["flows"][0].update(rename={"topic2": "{}.x"}),
        "flows[0].rename['topic2']: bad placeholder in '{}.x': only a plain {topic} is allowed",
    ),
    (
        "rename attribute",
        lambda d: d["flows"][0].update(rename={"topic2": "{topic.upper}"}),
        "flows[0].rename['topic2']: bad placeholder in '{topic.upper}'",
    ),
    (
        "rename spec",
        lambda d: d["flows"][0].update(rename={"topic2": "{topic:>9}"}),
        "flows[0].rename['topic2']: bad placeholder in '{topic:>9}'",
    ),
    (
        "rename conversion",
        lambda d: d["flows"][0].update(rename={"topic2": "{topic!r}"}),
        "flows[0].rename['topic2']: bad placeholder in '{topic!r}'",
    ),
    (
        "rename unbalanced",
        lambda d: d["flows"][0].update(rename={"topic2": "{topic"}),
        "flows[0].rename['topic2']: bad format '{topic': expected '}' before end of string",
    ),
    (
        "rename illegal chars",
        lambda d: d["flows"][0].update(rename={"topic2": "dc1/{topic}"}),
        "flows[0].rename['topic2']: format 'dc1/{topic}' would make an illegal topic name (allowed: ",
    ),
    (
        "rename empty",
        lambda d: d["flows"][0].update(rename={"topic2": ""}),
        "flows[0].rename['topic2']: must not be empty",
    ),
    # addresses
    (
        "no port",
        lambda d: d["clusters"]["dc1"].update(bootstrap_servers="127.0.0.1"),
        "clusters.dc1.bootstrap_servers: bad address '127.0.0.1' (expected host:port with port 1-65535)",
    ),
    (
        "port not a number",
        lambda d: d["clusters"]["dc1"].update(bootstrap_servers="h:1,h:x"),
        "clusters.dc1.bootstrap_servers: bad address 'h:x' ",
    ),
    (
        "port zero",
        lambda d: d["clusters"]["dc1"].update(bootstrap_servers="h:0"),
        "clusters.dc1.bootstrap_servers: bad address 'h:0' ",
    ),
    (
        "port too big",
        lambda d: d["clusters"]["dc1"].update(bootstrap_servers="h:65536"),
        "clusters.dc1.bootstrap_servers: bad address 'h:65536' ",
    ),
    (
        "no host",
        lambda d: d["clusters"]["dc1"].update(bootstrap_servers=":9092"),
        "clusters.dc1.bootstrap_servers: bad address ':9092' ",
    ),
    (
        "empty item",
        lambda d: d["clusters"]["dc1"].update(bootstrap_servers="h:1,"),
        "clusters.dc1.bootstrap_servers: bad address '' (expected host:port",
    ),
    (
        "empty bootstrap",
        lambda d: d["clusters"]["dc1"].update(bootstrap_servers=""),
        "clusters.dc1.bootstrap_servers: must list at least one 'host:port'",
    ),
    (
        "bootstrap int",
        lambda d: d["clusters"]["dc1"].update(bootstrap_servers=9091),
        "clusters.dc1.bootstrap_servers: must be a 'host:port' list, got int",
    ),
    (
        "bootstrap list of int",
        lambda d: d["clusters"]["dc1"].update(bootstrap_servers=[9091]),
        "clusters.dc1.bootstrap_servers: must be a 'host:port' list, got list",
    ),
    (
        "registry not a URL",
        lambda d: d["clusters"]["dc2"].update(schema_registry="127.0.0.1:8082"),
        "clusters.dc2.schema_registry: bad URL '127.0.0.1:8082' (expected http(s)://host:port)",
    ),
]


@pytest.mark.parametrize(("change", "expected"), [c[1:] for c in BAD_TOPOLOGIES], ids=[c[0] for c in BAD_TOPOLOGIES])
def test_bad_topology_is_refused_with_one_line(
    tmp_path: Path, change: Callable[[dict[str, Any]], None], expected: str
) -> None:
    message = refused(tmp_path, mutated(change))
    assert message.startswith(f"{tmp_path / 'topology.yaml'}: {expected}"), message


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
