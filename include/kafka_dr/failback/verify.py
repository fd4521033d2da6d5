"""Verifying a failback: every group moved back holds its translated offsets in the restored cluster, no alias at
home there is left on the serving cluster, and what the verify jobs found in each flow."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..failover.verify import check_groups_and_clients
from ..topology import load_topology
from .plan import SwitchBack

FLOW_FIGURES = ("expected", "copied", "filtered", "skipped")


def verify_failback(
    back: SwitchBack,
    translations: Sequence[Mapping[str, Any]],
    verifications: Sequence[Mapping[str, Any]],
    restored_config: Mapping[str, Any],
) -> tuple[list[str], dict[str, Any]]:
    """Problems (one line each) and the result: groups checked and each flow's verify figures. The verify jobs fail
    their own tasks on a record missing, duplicated or changed."""
    topo = load_topology(back.topology)
    problems, checked = check_groups_and_clients(topo, back.failover, translations, restored_config)
    flows = {v["flow"]: {k: v[k] for k in FLOW_FIGURES} for v in verifications}
    return problems, {"groups_checked": checked, "flows": flows}
