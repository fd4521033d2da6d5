"""Alerts to people, through Apprise (Slack, PagerDuty, e-mail, webhooks, ...; the URLs of the topology's `alerts:`
section), deduplicated as Alertmanager does: one alert per change of a subject's state, an unchanged ERR repeated at
most every `repeat_after`, never one per health run.

A URL's `${VAR}` comes from the environment (or, in Airflow, the connection `kafka_dr_alerts`), so secrets stay out of
the file; they never reach a log: a target is named by its key and Apprise's privacy form of its URL (passwords
masked). A target that fails never fails the caller: it is logged, counted and kept in the sent log, which the DR page
shows. What was sent, and the last state notified per subject, live under STATE_DIR/alerts/ (made by the first
alert: a reader, the metrics or the DR page, makes no folder). No Airflow import.
"""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from . import reports
from .health.rules import FlowHealth
from .paths import state_dir
from .processes import locked
from .readiness import Finding
from .roles import FailedOver
from .state import now_iso, subdir, write_json
from .topology import Alerts

log = logging.getLogger(__name__)

FIRING, RESOLVED, SUCCEEDED, PENDING = "firing", "resolved", "succeeded", "pending"
NOTIFY_TYPES = {FIRING: "failure", RESOLVED: "success", SUCCEEDED: "success", PENDING: "info"}
SENT_KEPT = 200  # newest alerts kept in the sent log
READINESS_KEY = "readiness"  # its last notified state in notified.json
_VAR_RE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


class AlertConfigError(ValueError):
    """A target that cannot be used: one line naming its key (alerts.urls[i]) and why, with no secret in it."""


@dataclass(frozen=True)
class Target:
    key: str  # alerts.urls[i]
    shown: str  # Apprise's privacy form of the URL: what logs and the DR page show
    plugin: Any = field(repr=False, compare=False)  # the Apprise plugin instance, which holds the secrets


@dataclass(frozen=True)
class Alert:
    event: str  # flow_status, readiness, failed_over, dag_failed, approval_needed, dr_report
    subject: str  # the flow, DAG or cluster it is about
    state: str  # firing, resolved, succeeded or pending
    title: str
    body: str


def targets(config: Alerts, environ: Mapping[str, str]) -> list[Target]:
    """The topology's alert URLs with `${VAR}` taken from `environ`, each checked by Apprise. Raises
    AlertConfigError naming the first bad one: a variable not set, or a URL Apprise does not take."""
    import apprise  # its ~190 plugins load in 1-3 s: only where alerts are configured

    found = []
    for i, url in enumerate(config.urls):
        key = f"alerts.urls[{i}]"
        missing = [name for name in _VAR_RE.findall(url) if not environ.get(name)]
        if missing:
            raise AlertConfigError(f"{key}: ${{{missing[0]}}} is not set (environment or connection kafka_dr_alerts)")
        plugin = apprise.Apprise.instantiate(_VAR_RE.sub(lambda m: environ[m.group(1)], url), suppress_exceptions=True)
        if plugin is None:
            scheme = url.split("://", 1)[0]
            raise AlertConfigError(f"{key}: not a URL Apprise can send to (scheme {scheme!r}; see Apprise's wiki)")
        found.append(Target(key, plugin.url(privacy=True), plugin))
    return found


def send(alert: Alert, to: Sequence[Target]) -> list[dict[str, Any]]:
    """Send `alert` to each target; per target whether it accepted. Never raises for a target that fails, and
    records the alert in the sent log."""
    results = []
    for target in to:
        try:
            accepted = bool(
                target.plugin.notify(body=alert.body, title=alert.title, notify_type=NOTIFY_TYPES[alert.state])
            )
            error = None if accepted else "the target refused it or did not answer (see the log above)"
        except Exception as exc:  # noqa: BLE001 - any plugin failure is the target's, never the run's
            accepted, error = False, f"{type(exc).__name__}"
        if not accepted:
            log.warning("alert %r not delivered to %s (%s): %s", alert.title, target.key, target.shown, error)
        results.append({"target": target.key, "shown": target.shown, "accepted": accepted, "error": error})
    _record(alert, results)
    return results


def answers(results: Sequence[Mapping[str, Any]]) -> str:
    """Each target's answer to one alert, for a log line: "alerts.urls[0] accepted, alerts.urls[1] failed"."""
    return ", ".join(f"{r['target']} {'accepted' if r['accepted'] else 'failed'}" for r in results)


def delivery_counts() -> dict[tuple[str, str], int]:
    """How many alerts each target (by key) accepted and failed, ever: {(target, "accepted"|"failed"): count}."""
    try:
        counted = json.loads((state_dir() / "alerts" / "deliveries.json").read_text(encoding="utf-8"))
    except (FileNotFoundError, ValueError):
        return {}
    return {(target, result): count for target, results in counted.items() for result, count in results.items()}


def flow_status_alerts(
    config: Alerts, flows: Sequence[FlowHealth], now: float | None = None
) -> list[tuple[Alert, str]]:
    """What the latest health of `flows` calls for, against the state last notified per flow: (alert, flow) pairs,
    without sending them (`notify_flow_statuses` does). A flow's first OK is no news."""
    if "flow_status" not in config.on or not config.urls:
        return []
    now = time.time() if now is None else now
    notified = _load_state()
    due = []
    for flow in flows:
        last = notified.get(f"flow_status/{flow.name}") or {}
        before, sent_at = last.get("status"), last.get("sent_at", 0.0)
        if flow.status == "OK":
            if before in (None, "OK"):
                continue
            state, title = RESOLVED, f"kafka-dr flow_status {flow.name}: OK again (was {before})"
        elif flow.status == before and not (flow.status == "ERR" and now - sent_at >= config.repeat_after_s):
            continue
        else:
            again = " (still)" if flow.status == before else ""
            state, title = FIRING, f"kafka-dr flow_status {flow.name}: {flow.status}{again}"
        body = "\n".join(flow.problems) if flow.problems else "no problem left"
        due.append((Alert("flow_status", flow.name, state, title, body), flow.status))
    return due


def notify_flow_statuses(
    config: Alerts, flows: Sequence[FlowHealth], to: Sequence[Target], now: float | None = None
) -> list[dict[str, Any]]:
    """Send what flow_status_alerts calls for; a flow's new state counts as notified once a target accepted it
    (else the next run tries again). Returns what was sent, with each target's answer."""
    now = time.time() if now is None else now
    sent = []
    for alert, status in flow_status_alerts(config, flows, now):
        results = send(alert, to)
        if any(r["accepted"] for r in results):
            _remember(f"flow_status/{alert.subject}", {"status": status, "sent_at": now})
        sent.append({**asdict(alert), "targets": results})
    return sent


def readiness_alert(config: Alerts, findings: Sequence[Finding], now: float | None = None) -> Alert | None:
    """What readiness calls for against the last notified: a new set of checks NOT READY fires, the same set repeats
    after `repeat_after`, all ready again resolves. A check not gathered (None) is no news either way."""
    if "readiness" not in config.on or not config.urls:
        return None
    now = time.time() if now is None else now
    failing = [finding for finding in findings if finding.ready is False]
    last = _load_state().get(READINESS_KEY) or {}
    before, sent_at = last.get("not_ready", []), last.get("sent_at", 0.0)
    names = [finding.check for finding in failing]
    if not names:
        if not before:
            return None
        return Alert("readiness", "readiness", RESOLVED, "kafka-dr readiness: ready again", f"was: {', '.join(before)}")
    if names == before and now - sent_at < config.repeat_after_s:
        return None
    again = " (still)" if names == before else ""
    title = f"kafka-dr readiness: NOT READY{again}: {', '.join(names)}"
    return Alert("readiness", "readiness", FIRING, title, "\n".join(finding.line() for finding in failing))


def notify_readiness(
    config: Alerts, findings: Sequence[Finding], to: Sequence[Target], now: float | None = None
) -> list[dict[str, Any]]:
    """Send what readiness_alert calls for; its state counts as notified once a target accepted it. Returns what was
    sent, with each target's answer ([] when nothing was due)."""
    now = time.time() if now is None else now
    alert = readiness_alert(config, findings, now)
    if alert is None:
        return []
    results = send(alert, to)
    if any(r["accepted"] for r in results):
        names = [finding.check for finding in findings if finding.ready is False]
        _remember(READINESS_KEY, {"not_ready": names, "sent_at": now})
    return [{**asdict(alert), "targets": results}]


def notify_failovers(
    config: Alerts, pending: Mapping[str, FailedOver], to: Sequence[Target], now: float | None = None
) -> list[dict[str, Any]]:
    """One `failed_over` alert per failover whose failback is pending, again every `repeat_after` (it stands in for
    the alerts about the cluster failed over from, which the health runs hold back), and one resolving it once the
    failback ran. A state counts as notified once a target accepted it. Returns what was sent."""
    if "failed_over" not in config.on or not config.urls:
        return []
    now = time.time() if now is None else now
    notified = _load_state()
    due = []
    for away, entry in sorted(pending.items()):
        last = notified.get(f"failed_over/{away}")
        if last is None or now - last.get("sent_at", 0.0) >= config.repeat_after_s:
            again = " (still)" if last else ""
            title = f"kafka-dr failed_over {away}: {entry.serving} serves, failback pending{again}"
            due.append(Alert("failed_over", away, FIRING, title, entry.line()))
    for key in sorted(notified):
        away = key.removeprefix("failed_over/")
        if key.startswith("failed_over/") and away not in pending:
            body = "the failback ran: alerts about it are sent as usual again"
            due.append(Alert("failed_over", away, RESOLVED, f"kafka-dr failed_over {away}: failed back", body))
    sent = []
    for alert in due:
        results = send(alert, to)
        if any(r["accepted"] for r in results):
            key = f"failed_over/{alert.subject}"
            if alert.state == FIRING:
                _remember(key, {"sent_at": now})
            else:
                _forget(key)
        sent.append({**asdict(alert), "targets": results})
    return sent


def notify(
    config: Alerts, alert: Alert, to: Sequence[Target], once_per: str | None = None, now: float | None = None
) -> list[dict[str, Any]]:
    """Send a one-off alert (dag_failed, approval_needed, dr_report) when its event is on; [] when it is not. With
    `once_per`, a key: not again for that key within repeat_after once a target accepted it (a scheduled run that
    fails the same way every 5 minutes is one alert an hour, not twelve)."""
    if alert.event not in config.on or not to:
        return []
    now = time.time() if now is None else now
    if once_per is not None and now - (_load_state().get(once_per) or {}).get("sent_at", -1e18) < config.repeat_after_s:
        return []
    results = send(alert, to)
    if once_per is not None and any(r["accepted"] for r in results):
        _remember(once_per, {"sent_at": now})
    return results


def dag_failed_alert(dag_id: str, run_id: str, task_id: str, error: str) -> Alert:
    """A kafka-dr DAG run failed: its DAG, run, failed task and the task's one-line error."""
    title = f"kafka-dr dag_failed {dag_id}: {task_id} failed"
    return Alert("dag_failed", dag_id, FIRING, title, f"run {run_id}\n{error}")


def approval_needed_alert(dag_id: str, run_id: str, what: str, cluster: str, page: str) -> Alert:
    """A run waits at its `approve` task: what it would do (`what`, e.g. "failover dc1 -> dc2 (disaster)"), the
    cluster it is about, and its preview (`page`) as the body."""
    title = f"kafka-dr approval_needed {dag_id}: {what} waits for approval"
    return Alert("approval_needed", cluster, PENDING, title, f"run {run_id}\n{page}")


def dr_report_alert(dag_id: str, run_id: str, body: Mapping[str, Any], report_file: str) -> Alert:
    """A failover, failback or backfill finished: what it was, its RPO and RTO (a backfill: its copies), the report."""
    summary = reports.summarize(dag_id, body)
    figures = []
    if summary.get("rpo_records") is not None:
        estimate = "" if summary.get("rpo_exact") else " (estimate)"
        figures.append(f"RPO {summary['rpo_records']} records{estimate}")
    if summary.get("rto_seconds") is not None:
        figures.append(f"RTO {summary['rto_seconds']:.1f} s")
    if summary.get("copied") is not None:
        figures.append(f"{summary['copied']} records copied")
    title = f"kafka-dr dr_report {dag_id}: {summary['title']}" + (f", {', '.join(figures)}" if figures else "")
    kind = SUCCEEDED if summary.get("passed", True) else FIRING  # a failed drill is a failure to look at
    return Alert("dr_report", dag_id, kind, title, f"run {run_id}\nreport {report_file}")


def sent_log(limit: int = 20) -> list[dict[str, Any]]:
    """The newest alerts sent, newest first, each with its targets' answers (the DR page's list)."""
    try:
        lines = (state_dir() / "alerts" / "sent.json").read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    return list(reversed(json.loads(lines)))[:limit]


def _record(alert: Alert, results: list[dict[str, Any]]) -> None:
    """The alert into the sent log, and each target's answer into the delivery counts (the metrics' counter)."""
    path, counts = subdir("alerts") / "sent.json", subdir("alerts") / "deliveries.json"
    with locked(path):
        try:
            kept = json.loads(path.read_text(encoding="utf-8"))
        except (FileNotFoundError, ValueError):
            kept = []
        kept.append({"at": now_iso(), **asdict(alert), "targets": results})
        write_json(path, kept[-SENT_KEPT:])
        try:
            counted = json.loads(counts.read_text(encoding="utf-8"))
        except (FileNotFoundError, ValueError):
            counted = {}
        for result in results:
            per_target = counted.setdefault(result["target"], {"accepted": 0, "failed": 0})
            per_target["accepted" if result["accepted"] else "failed"] += 1
        write_json(counts, counted)


def _load_state() -> dict[str, Any]:
    try:
        return json.loads((state_dir() / "alerts" / "notified.json").read_text(encoding="utf-8"))
    except (FileNotFoundError, ValueError):
        return {}


def _remember(key: str, value: dict[str, Any]) -> None:
    path = subdir("alerts") / "notified.json"
    with locked(path):
        state = _load_state()
        state[key] = value
        write_json(path, state)


def _forget(key: str) -> None:
    path = subdir("alerts") / "notified.json"
    with locked(path):
        write_json(path, {k: v for k, v in _load_state().items() if k != key})
