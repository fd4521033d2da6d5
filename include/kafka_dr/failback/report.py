"""The dr_failback report (docs/design.md "Reports"): the plan and what the steps returned in, the JSON body and its
Markdown page out (unit-tested with hand-built inputs: tests/unit/failback/test_report.py); and the exact RPO a
failback measures, written into the report of the failover it follows."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ..failover.report import failover_page, with_exact_rpo
from ..failover.switch import Switched
from ..reports import Approval, Step, approval_line, cell, run_start, step_table, switch_times, without_step
from ..schema_redirect.steps import RegistryMove
from ..state import subdir
from ..topology import is_data_topic
from .outcome import FailbackOutcome
from .plan import FailbackPlan, SwitchBack
from .republish import Handled
from .unreplicated import Measured


@dataclass(frozen=True)
class FailbackRun:
    """What a failback's steps after validation returned, for its report; None for a step that did not run (yet).
    `resync_records`: data records the resync runs copied; `approval` is None when none was asked."""

    measure_unreplicated: Measured | None = None
    approval: Approval | None = None
    prepare_switch_back: SwitchBack | None = None
    resync_records: int | None = None
    switch_producers: Switched | None = None
    handle_unreplicated: Handled | None = None
    registry_back: RegistryMove | None = None
    switch_consumers: Switched | None = None
    verify: FailbackOutcome | None = None

    def steps(self) -> dict[str, Step]:
        """The steps that recorded their timing, by name, in the order they run."""
        steps = {
            "measure_unreplicated": self.measure_unreplicated,
            "approve": self.approval,  # asked to answered: the wait for a person
            "prepare_switch_back": self.prepare_switch_back,
            "switch_producers": self.switch_producers,
            "handle_unreplicated": self.handle_unreplicated,
            "registry_back": self.registry_back,
            "switch_consumers": self.switch_consumers,
            "verify": self.verify,
        }
        return {name: result.step for name, result in steps.items() if result is not None and result.step is not None}


def failback_report(
    plan: FailbackPlan,
    run: FailbackRun,
    *,
    dag_id: str,
    run_id: str,
    run_started: datetime | None,
    triggered_by: str | None = None,
) -> dict[str, Any]:
    """The JSON body of a dr_failback report. Steps not run yet are absent, and so are their figures (None).
    Without a recorded start the run counts from its validation's start (plan.step). As a failover's, the RTO
    leaves out the wait for a person's approval (`rto_with_approval_seconds` counts it)."""
    start = run_start(run_started, plan.step)
    back = run.prepare_switch_back
    return {
        "dag_id": dag_id,
        "run_id": run_id,
        "restored_cluster": plan.restored,
        "serving_cluster": plan.serving,
        "mode": plan.mode,
        "dry_run": plan.dry_run,
        "run_started": start.isoformat(),
        "triggered_by": triggered_by,
        "unreplicated": {
            **(without_step(run.measure_unreplicated) or {}),
            "action": plan.unreplicated,
            **{
                k: v
                for k, v in (without_step(run.handle_unreplicated) or {}).items()
                if k in ("republished", "flows_moved")
            },
        },
        "resynced": {
            "records": run.resync_records,
            "flows": [] if back is None else list(back.flows),
            "inverse_flows": [] if back is None else list(back.inverse_flows),
            "forced": None if back is None or back.force is None else dict(back.force),
        },
        **switch_times(start, None if run.switch_consumers is None else run.switch_consumers.step, run.approval),
        "verify": without_step(run.verify) or {},
        "schema_registry": without_step(run.registry_back) or {},
        "steps": {"validate": plan.step, **run.steps()},
    }


def resync_records(runs: Iterable[Mapping[str, Any]]) -> int:
    """The data records the resync's replication runs copied (their summaries): heartbeats and kafka-dr's other
    internal topics are not counted."""
    return sum(p["records"] for r in runs for p in r.get("partitions", []) if is_data_topic(p["topic"]))


def add_exact_rpo(restored: str, serving: str, unreplicated: Mapping[str, Any], failback_run: str) -> None:
    """The latest dr_failover report of `restored` -> `serving` (JSON and page) gains the exact figure beside its
    estimate."""
    found = []
    for path in subdir("reports").glob("dr_failover-*.json"):
        body = json.loads(path.read_text(encoding="utf-8"))
        if (body.get("failed_cluster"), body.get("target_cluster")) == (restored, serving):
            found.append((body["run_started"], path, body))
    if not found:
        return
    _, path, body = max(found, key=lambda item: item[0])
    updated = with_exact_rpo(body, unreplicated, failback_run)
    path.write_text(json.dumps(updated, indent=2, default=str) + "\n", encoding="utf-8")
    path.with_suffix(".md").write_text(failover_page(updated), encoding="utf-8")


def failback_page(body: Mapping[str, Any]) -> str:
    """The Markdown page beside the JSON: what never left the restored cluster first, range by range."""
    unreplicated = body["unreplicated"]
    count = unreplicated.get("records")
    lines = [
        f"# Failback {body['serving_cluster']} -> {body['restored_cluster']} ({body['mode']}"
        + (", dry run)" if body["dry_run"] else ")"),
        "",
        f"- run `{body['run_id']}`, started {body['run_started']}",
        "- **records that never left "
        + f"{body['restored_cluster']}: {'unknown' if count is None else count}** (exact RPO of the disaster)"
        + "".join(f"; {topic}: {n}" for topic, n in sorted(unreplicated.get("per_topic", {}).items())),
        f"- what happens to them: {unreplicated['action']}",
    ]
    if unreplicated.get("note"):
        lines.append(f"- {unreplicated['note']}")
    lines += [
        f"  - {r['topic']}[{r['partition']}] offsets {r['from_offset']}-{r['to_offset']}: {r['records']} records"
        for r in unreplicated.get("ranges", [])
    ]
    lines += [
        f"  - deleted by retention before they were copied: {d['topic']}[{d['partition']}] offsets "
        f"{d['from_offset']}-{d['to_offset']}"
        for d in unreplicated.get("deleted_before_copied", [])
    ]
    resynced = body["resynced"]
    lines.append(f"- records resynced: {cell(resynced['records']) or 'not yet'}")
    if resynced.get("inverse_flows"):
        lines.append(
            f"  - by the inverse of the flows out ({', '.join(resynced['inverse_flows'])}): the topology has no flow "
            f"back for those topics"
        )
    if resynced.get("forced"):
        lines.append(
            f"  - records first from {body['restored_cluster']} forced past the cycle rule: {resynced['forced']}"
        )
    lines.append(f"- **RTO: {body['rto_seconds']} s** (trigger to clients back, the wait for approval left out)")
    lines.append(approval_line(body))
    lines += [
        f"- verified {name}: {v['expected']} records expected, {v['copied']} copied once, {v['filtered']} filtered "
        f"by the cycle rule, {v['skipped']} skipped"
        for name, v in sorted(body["verify"].get("flows", {}).items())
    ]
    return "\n".join(lines + step_table(body["steps"])) + "\n"
