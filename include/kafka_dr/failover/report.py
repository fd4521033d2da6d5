"""The dr_failover report (docs/design.md "Reports"): the plan, what the steps returned and the lag readings in, the
JSON body and its Markdown page out. Nothing here talks to Airflow or Kafka, so its rules are unit-tested with
hand-built inputs (tests/unit/failover/test_report.py)."""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ..codec import encode
from ..reports import Approval, Step, approval_line, run_start, step_table, switch_times, without_step
from ..schema_redirect.steps import RegistryMove
from .outcome import FailoverOutcome
from .plan import FailoverPlan
from .preview import Preview
from .rpo import LagReading, rpo
from .stop import Stopped
from .switch import Switched


@dataclass(frozen=True)
class FailoverRun:
    """What a failover's steps after validation returned, for its report; None for a step that did not run.
    `translations` are the per-flow translation summaries (translate_offsets' JSON, with the operator's "step");
    `approval` is None when none was asked."""

    stop_replication: Stopped | None = None
    translations: Sequence[Mapping[str, Any]] = ()
    schema_registry: RegistryMove | None = None
    switch_consumers: Switched | None = None
    verify: FailoverOutcome | None = None
    approval: Approval | None = None

    def steps(self) -> dict[str, Step]:
        """The steps that recorded their timing, by name, in the order they run; the translations apart."""
        steps = {
            "approve": self.approval,  # asked to answered: the wait for a person
            "stop_replication": self.stop_replication,
            "schema_registry": self.schema_registry,
            "switch_consumers": self.switch_consumers,
            "verify": self.verify,
        }
        return {name: result.step for name, result in steps.items() if result is not None and result.step is not None}


def group_summary(translations: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Groups translated, applied and left alone (with the reason), over the per-flow translation summaries."""
    return {
        "translated": sum(t.get("group_count", 0) for t in translations),
        "applied": sorted(g for t in translations for g in t.get("applied", [])),
        "skipped": [s for t in translations for s in t.get("skipped", [])],
    }


def failover_report(
    plan: FailoverPlan,
    run: FailoverRun,
    lag: Mapping[str, LagReading],
    *,
    dag_id: str,
    run_id: str,
    run_started: datetime | None,
    producers_first: Sequence[str],
    previewed: Preview | None = None,
    triggered_by: str | None = None,
    writers: Collection[str] = (),
) -> dict[str, Any]:
    """The JSON body of a dr_failover report. `lag` is each failed flow's reading, `producers_first` the aliases this
    run moved before the lag drained, `previewed` what the preview said it would do, `triggered_by` who started the run
    and `writers` the topology's aliases that produce (role producer or both). Without a recorded start the run counts
    from its validation's start (plan.step). The RTO is the machine's: the wait for a person's approval is left out of
    `rto_seconds`, counted in `rto_with_approval_seconds`."""
    start = run_start(run_started, plan.step)
    switched = run.switch_consumers
    steps = {"validate": plan.step, **({"preview": previewed.step} if previewed and previewed.step else {})}
    steps.update(run.steps())
    steps.update({f"translate_offsets {t.get('flow')}": _translation_step(t) for t in run.translations})
    return {
        **_heading(plan, dag_id, run_id, start, triggered_by),
        "rpo": rpo(lag),
        **switch_times(start, None if switched is None else switched.step, run.approval),
        "groups": group_summary(run.translations),
        "schema_registry": encode(run.schema_registry),
        "clients": {
            "producers_first": list(producers_first),
            "moved": [] if switched is None else list(switched.moved),
            "writers_before_registry": writers_before_registry(run, producers_first, writers),
        },
        "steps": steps,
        "dry_run": False,
        "preview": without_step(previewed),
    }


def writers_before_registry(run: FailoverRun, producers_first: Sequence[str], writers: Collection[str]) -> list[str]:
    """The producing aliases this run had on the target before the registry redirect ended: the switch does not wait
    for it (a follower serves reads), but until the target's registry leads, a new schema they register is not
    in the target's store. None of them when the redirect moved nothing or never ended."""
    registry, consumers = run.schema_registry, run.switch_consumers
    ended = None if registry is None or registry.step is None else registry.step.get("ended")
    if registry is None or registry.primary is None or ended is None:
        return []
    switched = None if consumers is None or consumers.step is None else consumers.step.get("ended")
    early = list(producers_first)
    if switched is not None and datetime.fromisoformat(switched) < datetime.fromisoformat(ended):
        early += consumers.moved
    return [alias for alias in early if alias in writers]


def dry_run_report(
    plan: FailoverPlan,
    previewed: Preview,
    *,
    dag_id: str,
    run_id: str,
    run_started: datetime | None,
    triggered_by: str | None = None,
) -> dict[str, Any]:
    """The report of a dry run: its preview, nothing done, so no RTO; the RPO is the preview's estimate."""
    steps = {"validate": plan.step, "preview": previewed.step}
    return {
        **_heading(plan, dag_id, run_id, run_start(run_started, plan.step), triggered_by),
        "rpo": previewed.rpo_estimate,
        "rto_seconds": None,
        "dry_run": True,
        "preview": without_step(previewed),
        "steps": {name: step for name, step in steps.items() if step is not None},
    }


def _heading(plan: FailoverPlan, dag_id: str, run_id: str, start: datetime, triggered_by: str | None) -> dict[str, Any]:
    """The fields every failover report begins with: which run, what it was, when it started, who started it."""
    return {
        "dag_id": dag_id,
        "run_id": run_id,
        "failed_cluster": plan.failed,
        "target_cluster": plan.target,
        "mode": plan.mode,
        "run_started": start.isoformat(),
        "triggered_by": triggered_by,
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
        f"- **RTO: {body['rto_seconds']} s** (trigger to clients switched, the wait for approval left out)",
        approval_line(body),
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
    early = body["clients"].get("writers_before_registry")
    if early:
        lines.append(
            f"- moved before the target's registry led (new schemas they registered meanwhile may be missing from "
            f"its store; reads were served): {', '.join(early)}"
        )
    return "\n".join(lines + step_table(body["steps"])) + "\n"


def with_exact_rpo(failover: Mapping[str, Any], unreplicated: Mapping[str, Any], failback_run: str) -> dict[str, Any]:
    """A failover report body with the exact RPO a later failback measured beside its own estimate."""
    exact = {"records": unreplicated["records"], "per_topic": unreplicated["per_topic"], "failback_run": failback_run}
    return {**failover, "rpo": {**failover["rpo"], "exact_after_failback": exact}}


def _translation_step(summary: Mapping[str, Any]) -> Mapping[str, Any]:
    """A translation's step: the operator's start and end when it recorded them, else the job's own seconds."""
    return summary.get("step") or {"seconds": summary.get("seconds")}
