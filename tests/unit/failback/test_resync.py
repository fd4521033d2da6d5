"""Which flows resync a restored cluster: the topology's flows back, and the inverse of a flow out for each serving
topic no flow back covers (in a derived topology file), renaming the copies back to their names in the restored
cluster."""

from __future__ import annotations

from pathlib import Path

from kafka_dr.failback.resync import resync_flows
from kafka_dr.topology import load_topology

CLUSTERS = 'clusters:\n  dc1: {bootstrap_servers: "127.0.0.1:1"}\n  dc2: {bootstrap_servers: "127.0.0.1:2"}\n'


def topology(tmp_path: Path, flows: str) -> Path:
    path = tmp_path / "t.yaml"
    path.write_text(CLUSTERS + "flows:\n" + flows)
    return path


def test_the_flows_back_when_they_cover_every_topic(tmp_path: Path) -> None:
    path = topology(
        tmp_path,
        "  - {name: out, source: dc2, target: dc1, topics: {include: ['topic1']}}\n"
        "  - {name: back, source: dc1, target: dc2, topics: {include: ['topic1']}}\n",
    )
    assert resync_flows(path, "dc2", "dc1", ["topic1", "_kdr.progress"], tmp_path / "d.yaml") == (path, ["back"], [])
    assert not (tmp_path / "d.yaml").exists()


def test_an_inverse_for_the_topics_no_flow_back_covers(tmp_path: Path) -> None:
    path = topology(
        tmp_path,
        "  - {name: out, source: dc2, target: dc1, topics: {include: ['topic1', 'dc2-only.*']}, "
        "groups: {include: ['app-.*']}}\n"
        "  - {name: back, source: dc1, target: dc2, topics: {include: ['topic1']}}\n",
    )
    serving = ["topic1", "dc2-only.events", "dc1-only", "_kdr.checkpoints"]
    derived, flows, inverse = resync_flows(path, "dc2", "dc1", serving, tmp_path / "d.yaml")
    assert (derived, flows, inverse) == (tmp_path / "d.yaml", ["back", "out.failback"], ["out.failback"])
    made = load_topology(derived).flow("out.failback")
    assert (made.source, made.target) == ("dc1", "dc2")
    assert [t for t in serving if made.topics.matches(t)] == ["dc2-only.events"]
    assert made.groups.matches("app-billing") and not made.groups.matches("other")
    assert load_topology(derived).flow("back") == load_topology(path).flow("back")  # the rest as it was


def test_the_inverse_of_a_renaming_flow_renames_back(tmp_path: Path) -> None:
    path = topology(
        tmp_path,
        "  - {name: out, source: dc1, target: dc2, topics: {include: ['orders', 'pay.*']}, "
        "rename: {'orders': '{topic}.replica', 'pay.*': 'dc1.{topic}'}}\n",
    )
    serving = ["orders.replica", "dc1.payments", "orders", "dc1.other", "_kdr.progress"]
    derived, flows, inverse = resync_flows(path, "dc1", "dc2", serving, tmp_path / "d.yaml")
    assert (flows, inverse) == (["out.failback"], ["out.failback"])
    made = load_topology(derived).flow("out.failback")
    assert [t for t in serving if made.topics.matches(t)] == ["orders.replica", "dc1.payments"]
    assert [made.destination_topic(t) for t in ("orders.replica", "dc1.payments")] == ["orders", "payments"]


def test_the_inverse_of_a_flow_naming_its_source_renames_back(tmp_path: Path) -> None:
    path = topology(
        tmp_path,
        "  - {name: out, source: dc1, target: dc2, topics: {include: ['.*']}, rename: {'.*': '{source}.{topic}'}}\n",
    )
    serving = ["dc1.orders", "dc1.payments", "orders", "dc2.orders", "_kdr.progress"]
    derived, flows, inverse = resync_flows(path, "dc1", "dc2", serving, tmp_path / "d.yaml")
    assert (flows, inverse) == (["out.failback"], ["out.failback"])
    made = load_topology(derived).flow("out.failback")
    assert [t for t in serving if made.topics.matches(t)] == ["dc1.orders", "dc1.payments"]
    assert [made.destination_topic(t) for t in ("dc1.orders", "dc1.payments")] == ["orders", "payments"]
