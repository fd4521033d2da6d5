"""The dr_backfill report (docs/design.md "Reports"): the plan and the backfill job's summary in, the JSON body and its
Markdown page out. Nothing here talks to Airflow or Kafka."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .plan import BackfillPlan


def backfill_report(plan: BackfillPlan, summary: Mapping[str, Any], *, dag_id: str, run_id: str) -> dict[str, Any]:
    """The JSON body of a dr_backfill report: the plan and the job's summary (its target topics first: the job
    resolves them again when it runs)."""
    window = {"window_start": plan.window_start, "window_end": plan.window_end, "offsets": plan.offsets}
    return {
        "dag_id": dag_id,
        "run_id": run_id,
        "flow": plan.flow,
        "dry_run": plan.dry_run,
        "window": {k: v for k, v in window.items() if v is not None},
        "target_topics": summary.get("target_topics", list(plan.target_topics)),
        "copied": summary.get("copied"),
        "to_copy": summary.get("to_copy"),
        "already_present": summary.get("already_present"),
        "unavailable": summary.get("unavailable", []),
        "verify": summary.get("verify"),
        "step": plan.step,
    }


def backfill_page(body: Mapping[str, Any]) -> str:
    """The Markdown page beside the JSON."""
    window = body["window"]
    span = (
        f"offsets {window['offsets']}"
        if "offsets" in window
        else f"{window.get('window_start')} (inclusive) to {window.get('window_end')} (exclusive)"
    )
    lines = [
        f"# Backfill of flow {body['flow']}" + (" (dry run)" if body["dry_run"] else ""),
        "",
        f"- run `{body['run_id']}`; window {span}; into {', '.join(body['target_topics'])}",
        f"- records copied: {body['copied']} (offsets to copy when planned: {body['to_copy']}); already present: "
        f"{body['already_present']}",
    ]
    lines += [
        f"- **unavailable**: {u['topic']}[{u['partition']}] offsets "
        f"{'?' if u['from_offset'] is None else u['from_offset']}-{u['to_offset']} deleted by retention at the source"
        for u in body["unavailable"]
    ]
    verify = body.get("verify")
    if verify:
        lines.append(
            f"- verify: {verify['status']} ({verify['expected']} records of the window expected, {verify['missing']} "
            f"missing, {verify['duplicated']} duplicated, {verify.get('mismatched', 0)} mismatched)"
        )
    return "\n".join(lines) + "\n"
