"""The failover and failback reports (DESIGN.md "Reports"), built from what the DAG's tasks gathered: plain dicts
and lag readings in, the JSON body and its Markdown page out. Nothing here talks to Airflow or Kafka, so the rules of
RPO, RTO, groups and step timings are unit-tested with hand-built inputs (tests/unit/test_reports.py).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from .replication.lag import FlowLag
from .topology import INTERNAL_TOPIC_PREFIX


@dataclass(frozen=True)
class LagReading:
    """One flow's lag when the report is written: measured from the source now (`exact`), else the last
    snapshot kept in the target (an estimate as of its time); `lag` is None when there is neither."""

    lag: FlowLag | None
    exact: bool


def rpo(readings: Mapping[str, LagReading]) -> dict[str, Any]:
    """Records committed in the failed cluster but not replicated, per topic, kafka-dr's own topics left out.
    The total is unknown (None) when a flow has no reading at all, and exact only when every flow was measured
    from its source."""
    per_topic: dict[str, int] = {}
    sources: dict[str, dict[str, Any]] = {}
    for name, reading in readings.items():
        if reading.lag is None:
            sources[name] = {"exact": False, "measured_at_ms": None, "note": "source unreachable and no snapshot"}
            continue
        sources[name] = {"exact": reading.exact, "measured_at_ms": reading.lag.measured_at_ms}
        for partition in reading.lag.partitions:
            if not partition.topic.startswith(INTERNAL_TOPIC_PREFIX):
                per_topic[partition.topic] = per_topic.get(partition.topic, 0) + partition.lag_records
    known = all(s["measured_at_ms"] is not None for s in sources.values())
    return {
        "records": sum(per_topic.values()) if known else None,
        "per_topic": per_topic,
        "exact": known and all(s["exact"] for s in sources.values()),
        "flows": sources,
    }


def rto_seconds(run_started: datetime, clients_switched: Mapping[str, Any] | None) -> float | None:
    """Seconds from the run's start to the end of the step that switched the clients; None when that step
    never ended, because then the clients were not switched."""
    ended = (clients_switched or {}).get("ended")
    return None if ended is None else round((datetime.fromisoformat(ended) - run_started).total_seconds(), 3)


def group_summary(translations: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Groups translated, applied and left alone (with the reason), over the per-flow translation summaries."""
    return {
        "translated": sum(t.get("group_count", 0) for t in translations),
        "applied": sorted(g for t in translations for g in t.get("applied", [])),
        "skipped": [s for t in translations for s in t.get("skipped", [])],
    }


def step_seconds(step: Mapping[str, Any]) -> float | None:
    """A step's duration: the seconds its job reported, else ended - started; None for a step with no end."""
    if "seconds" in step:
        return step["seconds"]
    if not step.get("started") or not step.get("ended"):
        return None
    return round((datetime.fromisoformat(step["ended"]) - datetime.fromisoformat(step["started"])).total_seconds(), 3)


def failover_report(
    plan: Mapping[str, Any],
    results: Mapping[str, Any],
    lag: Mapping[str, LagReading],
    *,
    dag_id: str,
    run_id: str,
    run_started: datetime | None,
    producers_first: Sequence[str],
) -> dict[str, Any]:
    """The JSON body of a dr_failover report. `plan` is validate_failover's result, `results` the later tasks'
    by task name ("translations": the per-flow translation summaries), `lag` each failed flow's reading and
    `producers_first` the aliases this run moved before the lag drained. Without a recorded start the run counts
    from its validation's start."""
    start = run_started or datetime.fromisoformat(plan["step"]["started"])
    switched = results.get("switch_consumers") or {}
    translations = results.get("translations") or []
    steps = _steps(plan, results)
    steps.update({f"translate_offsets {t.get('flow')}": _translation_step(t) for t in translations})
    return {
        "dag_id": dag_id,
        "run_id": run_id,
        "failed_cluster": plan["failed"],
        "target_cluster": plan["target"],
        "mode": plan["mode"],
        "run_started": start.isoformat(),
        "rpo": rpo(lag),
        "rto_seconds": rto_seconds(start, switched.get("step")),
        "groups": group_summary(translations),
        "schema_registry": results.get("schema_registry"),
        "clients": {"producers_first": list(producers_first), "moved": switched.get("moved", [])},
        "steps": steps,
    }


def failover_page(body: Mapping[str, Any]) -> str:
    """The Markdown page beside the JSON: RPO and RTO first, for the person who ran the failover."""
    rpo_ = body["rpo"]
    rpo_text = "unknown" if rpo_["records"] is None else f"{rpo_['records']} records"
    rpo_kind = "exact" if rpo_["exact"] else "estimate from the last lag measurement"
    lines = [
        f"# Failover {body['failed_cluster']} -> {body['target_cluster']} ({body['mode']})",
        "",
        f"- run `{body['run_id']}`, started {body['run_started']}",
        f"- **RPO: {rpo_text}** ({rpo_kind})"
        + "".join(f"; {topic}: {n}" for topic, n in sorted(rpo_["per_topic"].items())),
        f"- **RTO: {body['rto_seconds']} s** (trigger to clients switched)",
    ]
    exact = rpo_.get("exact_after_failback")
    if exact is not None:
        lines.append(f"- exact RPO measured by failback `{exact['failback_run']}`: {exact['records']} records")
    lines += [
        f"- groups translated: {body['groups']['translated']}, applied: {len(body['groups']['applied'])}, "
        f"left alone: {len(body['groups']['skipped'])}",
    ]
    lines += [f"  - {s['group']}: {s['reason']}" for s in body["groups"]["skipped"]]
    lines += [
        f"- schema registry: {json.dumps(body['schema_registry'], default=str)}",
        f"- clients moved: {', '.join(body['clients']['producers_first'] + body['clients']['moved']) or 'none'}",
    ]
    return "\n".join(lines + _step_table(body["steps"])) + "\n"


def _steps(plan: Mapping[str, Any], results: Mapping[str, Any]) -> dict[str, Any]:
    """Validation's step, then each later task's that recorded one (`timed`), by task name."""
    steps = {"validate": plan["step"]}
    steps.update(
        {name: value["step"] for name, value in results.items() if isinstance(value, Mapping) and "step" in value}
    )
    return steps


def _translation_step(summary: Mapping[str, Any]) -> Mapping[str, Any]:
    """A translation's step: the operator's start and end when it recorded them, else the job's own seconds."""
    return summary.get("step") or {"seconds": summary.get("seconds")}


def _step_table(steps: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """The Markdown table of a report page: each step's start, end and seconds."""
    rows = [
        f"| {name} | {step.get('started', '')} | {step.get('ended', '')} | {_cell(step_seconds(step))} |"
        for name, step in steps.items()
    ]
    return ["", "| step | started | ended | seconds |", "|---|---|---|---|", *rows]


def _cell(value: float | None) -> str:
    return "" if value is None else str(value)


def failback_report(
    plan: Mapping[str, Any],
    results: Mapping[str, Any],
    *,
    dag_id: str,
    run_id: str,
    run_started: datetime | None,
) -> dict[str, Any]:
    """The JSON body of a dr_failback report. `plan` is validate_failback's result, `results` the later tasks' by
    task name ("measure_unreplicated": its `unreplicated` fields; "prepare_switch_back": the resync flows;
    "resync": records copied back; "switch_consumers": when clients were back; "verify": what each flow holds).
    Steps not run yet are absent, and so are their figures (None)."""
    start = run_started or datetime.fromisoformat(plan["step"]["started"])
    measured = results.get("measure_unreplicated") or {}
    back = results.get("prepare_switch_back") or {}
    steps = _steps(plan, results)
    return {
        "dag_id": dag_id,
        "run_id": run_id,
        "restored_cluster": plan["restored"],
        "serving_cluster": plan["serving"],
        "mode": plan["mode"],
        "dry_run": plan["dry_run"],
        "run_started": start.isoformat(),
        "unreplicated": {
            **measured.get("unreplicated", {}),
            "action": plan["unreplicated"],
            **{
                k: v
                for k, v in (results.get("handle_unreplicated") or {}).items()
                if k in ("republished", "flows_moved")
            },
        },
        "resynced": {
            "records": (results.get("resync") or {}).get("records"),
            "flows": back.get("flows", []),
            "inverse_flows": back.get("inverse_flows", []),
            "forced": back.get("force"),
        },
        "rto_seconds": rto_seconds(start, (results.get("switch_consumers") or {}).get("step")),
        "verify": {k: v for k, v in (results.get("verify") or {}).items() if k != "step"},
        "steps": steps,
    }


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
    lines.append(f"- records resynced: {_cell(resynced['records']) or 'not yet'}")
    if resynced.get("inverse_flows"):
        lines.append(
            f"  - by the inverse of the flows out ({', '.join(resynced['inverse_flows'])}): the topology has no flow "
            f"back for those topics"
        )
    if resynced.get("forced"):
        lines.append(
            f"  - records first from {body['restored_cluster']} forced past the cycle rule: {resynced['forced']}"
        )
    lines.append(f"- **RTO: {body['rto_seconds']} s** (trigger to clients back)")
    lines += [
        f"- verified {name}: {v['expected']} records expected, {v['copied']} copied once, {v['filtered']} filtered "
        f"by the cycle rule, {v['skipped']} skipped"
        for name, v in sorted(body["verify"].get("flows", {}).items())
    ]
    return "\n".join(lines + _step_table(body["steps"])) + "\n"


def with_exact_rpo(failover: Mapping[str, Any], unreplicated: Mapping[str, Any], failback_run: str) -> dict[str, Any]:
    """A failover report body with the exact RPO a later failback measured beside its own estimate."""
    exact = {"records": unreplicated["records"], "per_topic": unreplicated["per_topic"], "failback_run": failback_run}
    return {**failover, "rpo": {**failover["rpo"], "exact_after_failback": exact}}


def backfill_report(plan: Mapping[str, Any], summary: Mapping[str, Any], *, dag_id: str, run_id: str) -> dict[str, Any]:
    """The JSON body of a dr_backfill report: validate_backfill's plan and the backfill job's summary."""
    return {
        "dag_id": dag_id,
        "run_id": run_id,
        "flow": plan["flow"],
        "dry_run": plan["dry_run"],
        "window": {k: plan[k] for k in ("window_start", "window_end", "offsets") if plan.get(k) is not None},
        "target_topics": summary.get("target_topics", plan.get("target_topics", [])),
        "copied": summary.get("copied"),
        "to_copy": summary.get("to_copy"),
        "already_present": summary.get("already_present"),
        "unavailable": summary.get("unavailable", []),
        "verify": summary.get("verify"),
        "step": plan.get("step"),
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
            f"missing, {verify['duplicated']} duplicated)"
        )
    return "\n".join(lines) + "\n"
