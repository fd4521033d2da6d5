"""What a drill concludes from its figures: the probe's counts, the drill's RPO and RTO against the topology's
objectives, and each check with a one-line verdict. Pure: the DAG gathers the figures, this judges them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..runbooks import see_runbook
from ..topology import DrPolicy


@dataclass(frozen=True)
class Check:
    check: str
    passed: bool
    detail: str
    failure: str  # the run's one-line error when this is the first check that failed


def probe_counts(tally: Mapping[str, Any]) -> dict[str, Any]:
    """The probe's counts from its last tally: `produced` (acknowledged by a cluster), `delivered` (distinct records
    its consumer got), `lost` (acknowledged, never delivered), `duplicated` (delivered more than once after the
    follower's de-duplication), and the producer's own `sent`, `refused`, `unacknowledged`, `read_twice`, and
    `registry_retries` (serializations a registry refused while it did not lead yet, after a switch), and `errors`
    (a client thread that died, and why)."""
    acknowledged, consumed = set(tally.get("acknowledged", [])), list(tally.get("consumed", []))
    duplicated = len(consumed) - len(set(consumed))
    return {
        "produced": len(acknowledged),
        "delivered": len(set(consumed)),
        "lost": len(acknowledged - set(consumed)),
        "duplicated": duplicated,
        "sent": int(tally.get("sent", 0)),
        "refused": len(tally.get("refused", [])),
        "unacknowledged": int(tally.get("unacknowledged", 0)),
        "read_twice": int(tally.get("dropped", 0)) + duplicated,
        "registry_retries": int(tally.get("registry_retries", 0)),
        "errors": list(tally.get("errors", [])),
    }


def drill_rpo(disaster: bool, failover: Mapping[str, Any] | None, failback: Mapping[str, Any] | None) -> dict[str, Any]:
    """The drill's RPO in records. A disaster's is exact once the failback has measured what never left the failed
    cluster; before that (no failback report) it is the failover's estimate. A planned failover's is its own."""
    if disaster and failback is not None and (failback.get("unreplicated") or {}).get("records") is not None:
        return {"records": failback["unreplicated"]["records"], "exact": True, "source": "dr_failback: unreplicated"}
    rpo = (failover or {}).get("rpo") or {}
    return {"records": rpo.get("records"), "exact": bool(rpo.get("exact")), "source": "dr_failover: rpo"}


def objectives(policy: DrPolicy, rpo_records: int | None, rto_seconds: float | None) -> dict[str, dict[str, Any]]:
    """Each objective with the figure measured and its verdict (None: no objective set, or nothing measured)."""

    def verdict(objective: float | None, measured: float | None) -> bool | None:
        return None if objective is None or measured is None else measured <= objective

    return {
        "rpo_records": {
            "objective": policy.rpo_records,
            "measured": rpo_records,
            "passed": verdict(policy.rpo_records, rpo_records),
        },
        "rto_seconds": {
            "objective": policy.rto_seconds,
            "measured": rto_seconds,
            "passed": verdict(policy.rto_seconds, rto_seconds),
        },
    }


def drill_checks(
    runs: Sequence[Mapping[str, Any]],
    probe: Mapping[str, Any] | None,
    drained: bool,
    goals: Mapping[str, Mapping[str, Any]],
    health_after: Mapping[str, Any] | None,
    left: Sequence[str],
) -> list[Check]:
    """Every check of a drill, in the order an auditor reads them."""
    checks = []
    unfinished = [f"{r['dag_id']} {r.get('state') or 'not run'}" for r in runs if r.get("state") != "success"]
    runs_line = ", ".join(f"{r['dag_id']} {r.get('state')}" for r in runs) or "none ran"
    checks.append(Check("failover and failback succeeded", not unfinished and bool(runs), runs_line,
                        f"inner runs did not succeed: {', '.join(unfinished) or 'none ran'}"))  # fmt: skip
    if probe is None:
        checks.append(Check("probe delivered once", False, "no probe counts", "the probe gave no counts"))
    else:
        counts = (
            f"{probe['produced']} produced, {probe['delivered']} delivered, {probe['lost']} lost, "
            f"{probe['duplicated']} twice, {probe['refused']} refused, {probe['unacknowledged']} unacknowledged"
        )
        errors = list(probe.get("errors") or [])
        once = drained and not (probe["lost"] or probe["duplicated"] or probe["refused"] or probe["unacknowledged"])
        once = once and not errors
        why = counts if drained else f"{counts}; its consumer did not catch up"
        why += "".join(f"; {error}" for error in errors)
        checks.append(Check("probe delivered once", once, counts, f"probe records not delivered once: {why}"))
    for key, name, unit, topology_key in (
        ("rpo_records", "RPO objective", " records", "dr.rpo_records"),
        ("rto_seconds", "RTO objective", " s", "dr.rto_seconds"),
    ):
        goal = goals[key]
        if goal["objective"] is None:
            checks.append(Check(name, True, f"{goal['measured']}{unit}; no objective ({topology_key} not set)", ""))
        elif goal["measured"] is None:
            checks.append(Check(name, False, "not measured", f"{name} not measured ({topology_key})"))
        else:
            sign = "<=" if goal["passed"] else ">"
            line = f"{goal['measured']:g}{unit} {sign} {goal['objective']:g}{unit}"
            checks.append(Check(name, bool(goal["passed"]), line, f"{name} missed: {line} ({topology_key})"))
    flows = (health_after or {}).get("flows") or {}
    sick = sorted(f"{name} {status}" for name, status in flows.items() if status == "ERR")
    healthy = bool(flows) and not sick
    detail = ", ".join(f"{name} {status}" for name, status in sorted(flows.items())) or "not checked"
    checks.append(Check("flows healthy after", healthy, detail, f"flows not healthy after the drill: {detail}"))
    checks.append(Check("put back as found", not left, "; ".join(left) or "aliases, replicators, registries as before",
                        f"the drill left production changed: {'; '.join(left)}; "
                        + see_runbook("dr_drill", "a-drill-left-production-changed")))  # fmt: skip
    return checks


def first_failure(checks: Sequence[Check]) -> str | None:
    return next((c.failure for c in checks if not c.passed), None)
