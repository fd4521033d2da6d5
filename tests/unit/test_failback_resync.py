"""Which flows resync a restored cluster: the topology's flows back, and the inverse of a flow out for each serving
topic no flow back covers (in a derived topology file); a renaming flow without a flow back is refused in one line."""

from __future__ import annotations

from pathlib import Path

import pytest

from kafka_dr.failback.resync import resync_flows
from kafka_dr.topology import TopologyError, load_topology

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


def test_a_renaming_flow_with_nothing_back_is_refused_in_one_line(tmp_path: Path) -> None:
    path = topology(
        tmp_path,
        "  - {name: out, source: dc1, target: dc2, topics: {include: ['orders']}, rename: {'.*': 'r.{topic}'}}\n",
    )
    with pytest.raises(
        TopologyError, match=r"^flow out renames topics, so it has no inverse .*add a flow from dc2 to dc1"
    ):
        resync_flows(path, "dc1", "dc2", ["orders"], tmp_path / "d.yaml")
