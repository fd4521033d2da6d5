"""Which flows copy the serving cluster's records back into a restored cluster.

The topology's own flows from the serving cluster into the restored one (active-active), and for every topic of the
serving cluster that a flow out of the restored cluster fills but no flow back covers, the inverse of that flow:
`<flow>.failback`, serving -> restored, over exactly those topics, renamed back to their names in the restored
cluster (`orders.replica` -> `orders`), with the flow's groups and provenance. Inverses are written with the rest of
the topology into a derived file that the replication and translation jobs read. The cycle rule keeps the restored
cluster's own records from coming back (data kept); a wiped cluster has a new id, so every record comes back, those
that first came from it included (data lost; the DAG forces them past the cycle rule when the id is the old one).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml

from ..topology import DRILL_TOPIC, FAILBACK_FLOW_SUFFIX, Flow, load_topology


def resync_flows(
    topology_file: Path, restored: str, serving: str, serving_topics: Iterable[str], derived_file: Path
) -> tuple[Path, list[str], list[str]]:
    """The topology file the resync reads (`derived_file` when inverses were made), the names of its flows serving ->
    restored, and which of them are inverses made here."""
    topology = load_topology(topology_file)
    back = [f for f in topology.flows if f.source == serving and f.target == restored]
    drill_copied = any(b.copies_data(DRILL_TOPIC) for b in back)
    inverses = []
    for flow in (f for f in topology.flows if f.source == restored and f.target == serving):
        uncovered = {}
        for topic in sorted(serving_topics):
            if any(b.copies_data(topic) for b in back):
                continue
            origin = flow.source_topic(topic)
            if origin is not None:
                uncovered[topic] = origin
        if uncovered:
            inverses.append(_inverse(flow, uncovered, drill_copied))
    names = [f.name for f in back] + [f["name"] for f in inverses]
    if not inverses:
        return topology_file, names, []
    data = yaml.safe_load(topology_file.read_text(encoding="utf-8"))
    data["flows"] = [*(data.get("flows") or []), *inverses]
    derived_file.parent.mkdir(parents=True, exist_ok=True)
    derived_file.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    load_topology(derived_file)  # refused here, with its line, rather than by the job
    return derived_file, names, [f["name"] for f in inverses]


def _inverse(flow: Flow, topics: dict[str, str], drill_copied: bool) -> dict[str, Any]:
    """`topics`: serving cluster's name -> restored cluster's name. `drill_copied`: a flow back copies the drill's
    probe topic (every flow does unless it excludes it), so the inverse leaves it out: two flows into one cluster
    would each copy every probe record."""
    return {
        "name": f"{flow.name}{FAILBACK_FLOW_SUFFIX}",
        "source": flow.target,
        "target": flow.source,
        "topics": {
            "include": [re.escape(t) for t in topics],
            "exclude": [re.escape(DRILL_TOPIC)] if drill_copied else [],
        },
        "rename": {re.escape(t): origin for t, origin in topics.items() if origin != t},
        "provenance": flow.provenance,
        "sync_topic_configs": flow.sync_topic_configs,
        "groups": {
            "include": [p.pattern for p in flow.groups.include],
            "exclude": [p.pattern for p in flow.groups.exclude],
        },
    }
