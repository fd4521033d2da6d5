"""A failback's outcome (dr_failback's verify step): every group moved back holds its translated offsets in the
restored cluster, no alias at home there is left on the serving cluster, and what the verify jobs found in each
flow."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..access import ClusterAccess
from ..failover.outcome import check_groups_and_clients
from ..reports import Step
from .plan import SwitchBack


@dataclass(frozen=True)
class FlowFigures:
    """What a verify job found in one flow: records expected, copied once, filtered by the cycle rule, skipped."""

    expected: int
    copied: int
    filtered: int
    skipped: int


@dataclass(frozen=True)
class FailbackOutcome:
    """The failback's verify step: the groups checked and each flow's figures; `step`: when its task ran."""

    groups_checked: int
    flows: dict[str, FlowFigures]
    step: Step | None = None


def check_failback(
    back: SwitchBack,
    access: ClusterAccess,
    translations: Sequence[Mapping[str, Any]],
    verifications: Sequence[Mapping[str, Any]],
) -> tuple[list[str], FailbackOutcome]:
    """Problems (one line each) and the result. The verify jobs (`verifications`: their summaries) fail their own
    tasks on a record missing, duplicated or changed."""
    problems, checked = check_groups_and_clients(access, back.failover, translations, back.failover.target)
    flows = {v["flow"]: FlowFigures(v["expected"], v["copied"], v["filtered"], v["skipped"]) for v in verifications}
    return problems, FailbackOutcome(checked, flows)
