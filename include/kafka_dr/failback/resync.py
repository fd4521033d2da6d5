"""Which flows copy the serving cluster's records back into a restored cluster.

The topology's own flows from the serving cluster into the restored one, when it has any (active-active). Otherwise
the inverse of each flow out of the restored cluster: same topics (destination names), groups and provenance, named
`<flow>.failback`, written with the rest of the topology into a derived file the replication job reads. The cycle
rule keeps the restored cluster's own records, copied out before the disaster, from coming back; a forward flow that
renames topics has no inverse here and is refused with one line (add a flow back to the topology instead).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from ..topology import Flow, TopologyError, load_topology


def resync_flows(topology_file: Path, restored: str, serving: str, derived_file: Path) -> tuple[Path, list[str], bool]:
    """The topology file the resync reads, the names of its flows serving -> restored, and whether they are inverses
    made here (then `derived_file` holds the topology with them added)."""
    topology = load_topology(topology_file)
    back = [f.name for f in topology.flows if f.source == serving and f.target == restored]
    if back:
        return topology_file, back, False
    forward = [f for f in topology.flows if f.source == restored and f.target == serving]
    data = yaml.safe_load(topology_file.read_text(encoding="utf-8"))
    data["flows"] = [*(data.get("flows") or []), *(_inverse(f) for f in forward)]
    derived_file.parent.mkdir(parents=True, exist_ok=True)
    derived_file.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    load_topology(derived_file)  # refused here, with its line, rather than by the job
    return derived_file, [f"{f.name}.failback" for f in forward], True


def _inverse(flow: Flow) -> dict[str, Any]:
    if flow.rename:
        raise TopologyError(
            f"flow {flow.name} renames topics, so it has no inverse to resync with: add a flow from {flow.target} to "
            f"{flow.source} to the topology"
        )
    return {
        "name": f"{flow.name}.failback",
        "source": flow.target,
        "target": flow.source,
        "topics": {
            "include": [p.pattern for p in flow.topics.include],
            "exclude": [p.pattern for p in flow.topics.exclude],
        },
        "provenance": flow.provenance,
        "sync_topic_configs": flow.sync_topic_configs,
        "groups": {
            "include": [p.pattern for p in flow.groups.include],
            "exclude": [p.pattern for p in flow.groups.exclude],
        },
    }
