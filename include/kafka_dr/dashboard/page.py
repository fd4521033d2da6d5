"""The dashboard's one HTML page, drawn from view.collect_view's dict on the server: inline CSS, the lag charts as
inline SVG, no script and nothing fetched from elsewhere (the api-server may have no internet, and a page without
third-party code has nothing to trust). Every value from the view is escaped.
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

from ..runbooks import site_url
from ..times import epoch_ms

# Airflow 3.3's UI has no route that opens a DAG's trigger form (it is a modal opened by the Trigger button of the
# DAG's page: no `trigger` path among the routes of airflow/ui/dist/assets/index-*.js), so the buttons open
# /dags/<dag_id>, where that button is.
TRIGGER_DAGS = (("dr_failover", "Fail over"), ("dr_failback", "Fail back"))

_STATUS_CLASS = {"OK": "ok", "WARN": "warn", "ERR": "err", "leader": "ok", "follower": "info", "unreachable": "err"}
_CHART_W, _CHART_H, _LEFT, _BOTTOM, _TOP = 640, 150, 64, 22, 10
_PLOT_W, _PLOT_H = _CHART_W - _LEFT - 8, _CHART_H - _BOTTOM - _TOP

_CSS = """
body{font:14px/1.4 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0;padding:16px 24px;color:#1f2933;
background:#f7f8fa}
h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:24px 0 8px}.muted{color:#6b7280}
table{border-collapse:collapse;background:#fff;width:100%;margin-bottom:4px}
th,td{border:1px solid #e1e4e8;padding:5px 8px;text-align:left;vertical-align:top}th{background:#eef1f4}
td.num{text-align:right;font-variant-numeric:tabular-nums}
.badge{display:inline-block;padding:1px 7px;border-radius:9px;font-size:12px;font-weight:600;background:#e5e7eb}
.ok{background:#d1fae5;color:#065f46}.warn{background:#fef3c7;color:#92400e}.err{background:#fee2e2;color:#991b1b}
.info{background:#dbeafe;color:#1e40af}.error{color:#991b1b}
.banner{background:#fee2e2;color:#991b1b;padding:8px 12px;border-radius:6px;margin:12px 0}
.actions{margin:12px 0}.button{display:inline-block;padding:6px 14px;margin-right:8px;border-radius:6px;
background:#017cee;color:#fff;text-decoration:none;font-weight:600}
.cards{display:flex;flex-wrap:wrap;gap:12px}.card{background:#fff;border:1px solid #e1e4e8;border-radius:6px;
padding:10px 14px;min-width:260px;flex:1}.card h3{font-size:15px;margin:0 0 6px}.card dl{margin:0}
.card dt{float:left;clear:left;width:90px;color:#6b7280}.card dd{margin:0 0 2px 96px}
figure{margin:8px 8px 8px 0;background:#fff;border:1px solid #e1e4e8;border-radius:6px;padding:8px;
display:inline-block;vertical-align:top}
figcaption{font-weight:600;margin-bottom:4px}svg text{font-size:11px;fill:#4b5563}
"""


def render_page(view: Mapping[str, Any], ui_root: str = "/") -> str:
    """The whole page. `ui_root`: the path of Airflow's UI (its [api] base_url path), for the links into it."""
    topology = view["topology"]
    parts = [
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>",
        "<meta name='viewport' content='width=device-width, initial-scale=1'>",
        f"<title>Kafka DR</title><style>{_CSS}</style></head><body>",
        "<h1>Kafka DR</h1>",
        f"<div class='muted'>State at {_e(view['generated_at'])} (collected in {_e(view['collected_in_s'])} s) "
        f"from topology <code>{_e(topology['path'])}</code> · <a href='api/state'>JSON</a></div>",
        "<div class='actions'>",
        *(
            f"<a class='button' href='{_e(_dag_url(ui_root, dag_id))}' title='opens the DAG, whose Trigger button "
            f"opens the form'>{_e(label)} ({_e(dag_id)})…</a>"
            for dag_id, label in TRIGGER_DAGS
        ),
        "</div>",
    ]
    if topology["error"]:
        parts.append(f"<div class='banner'>The topology does not load: {_e(topology['error'])}</div>")
    for entry in view.get("failed_over") or []:  # the deployment's state since a failover, until its failback
        back = _e(_dag_url(ui_root, "dr_failback"))
        parts.append(f"<div class='banner'>Failed over: {_e(entry['line'])} (<a href='{back}'>dr_failback</a>)</div>")
    parts += _readiness(view.get("readiness"))
    parts += _clusters(view["clusters"], topology["error"])
    parts += _flows(view["flows"], topology["error"])
    parts += _clients(view["clients"], view["clients_error"], topology["error"])
    parts += _reports(view["reports"], ui_root)
    parts += _drills(view.get("drills") or [])
    parts += _alerts(view.get("alerts") or [])
    parts.append("</body></html>")
    return "\n".join(parts)


def _readiness(saved: Mapping[str, Any] | None) -> list[str]:
    """The newest health run's readiness: what would stop or slow a failover now, each with its runbook section."""
    parts = ["<h2>Ready to fail over?</h2>"]
    if saved is None:
        return [*parts, "<div class='muted'>Not checked yet: each dr_replication_health run checks it.</div>"]
    verdict = _badge("ready", "ok") if saved["ready"] else _badge("NOT READY", "err")
    parts.append(f"<div>{verdict} <span class='muted'>checked at {_e(saved['checked_at'])}</span></div>")
    parts.append("<table><tr><th>Check</th><th>State</th><th>Why</th></tr>")
    marks = {True: ("ready", "ok"), False: ("NOT READY", "err"), None: ("not checked", "info")}
    for finding in saved["findings"]:
        mark = _badge(*marks[finding["ready"]])
        link = f" <a href='{_e(site_url(finding['runbook']))}'>runbook</a>" if finding["ready"] is not True else ""
        parts.append(f"<tr><td>{_e(finding['check'])}</td><td>{mark}</td><td>{_e(finding['reason'])}{link}</td></tr>")
    return [*parts, "</table>"]


def _clusters(clusters: Sequence[Mapping[str, Any]], topology_error: str | None) -> list[str]:
    parts = ["<h2>Clusters</h2>"]
    if not clusters:
        return [*parts, _none("No clusters", topology_error)]
    parts.append(
        "<table><tr><th>Cluster</th><th>Bootstrap servers</th><th>Kafka</th><th>Cluster id</th>"
        "<th>Schema registry</th><th>Registry role</th></tr>"
    )
    for cluster in clusters:
        if cluster["reachable"]:
            kafka = _badge("reachable", "ok")
        else:
            kafka = f"{_badge('unreachable', 'err')} <span class='error'>{_e(cluster['error'])}</span>"
        registry = cluster["schema_registry"]
        if registry["url"] is None:
            url, role = "<span class='muted'>none</span>", ""
        else:
            url = f"<code>{_e(registry['url'])}</code>"
            if registry["primary"]:
                url += " <span class='muted'>(primary)</span>"
            role = _badge(registry["role"], _STATUS_CLASS.get(registry["role"], ""))
            if registry["error"]:
                role += f" <span class='muted'>{_e(registry['error'])}</span>"
            elif registry["role"] == "follower":
                role += f" <span class='muted'>leader: {_e(registry['leader'] or 'none known')}</span>"
        parts.append(
            f"<tr><td><b>{_e(cluster['name'])}</b></td><td><code>{_e(cluster['bootstrap_servers'])}</code></td>"
            f"<td>{kafka}</td><td><code>{_e(cluster['cluster_id'] or '—')}</code></td>"
            f"<td>{url}</td><td>{role}</td></tr>"
        )
    return [*parts, "</table>"]


def _flows(flows: Sequence[Mapping[str, Any]], topology_error: str | None) -> list[str]:
    parts = ["<h2>Replication flows</h2>"]
    if not flows:
        return [*parts, _none("No flows", topology_error)]
    parts.append(
        "<table><tr><th>Flow</th><th>Source → target</th><th>Health</th><th>Lag (records)</th>"
        "<th>Lag (seconds)</th><th>Evaluated</th><th>Problems</th></tr>"
    )
    for flow in flows:
        if flow["error"]:
            health = f"<span class='error'>{_e(flow['error'])}</span>"
        elif flow["status"] is None:
            health = "<span class='muted'>never evaluated (dr_replication_health)</span>"
        else:
            health = _badge(flow["status"], _STATUS_CLASS.get(flow["status"], ""))
        if flow.get("stalled_seconds"):  # alive and copying nothing: the RPO grows while nothing looks down
            health += " " + _badge(f"STALLED {flow['stalled_seconds']:,.0f} s", "err")
        problems = "".join(f"<div>{_e(problem)}</div>" for problem in flow["problems"])
        parts.append(
            f"<tr><td><b>{_e(flow['name'])}</b></td><td>{_e(flow['source'])} → {_e(flow['target'])}</td>"
            f"<td>{health}</td><td class='num'>{_e(_count(flow['lag_records']))}</td>"
            f"<td class='num'>{_e(_seconds(flow['lag_seconds']))}</td><td>{_e(_time(flow['evaluated_at_ms']))}</td>"
            f"<td>{problems}</td></tr>"
        )
    parts.append("</table>")
    for flow in flows:
        parts.append(f"<figure><figcaption>{_e(flow['name'])}: lag in records over the health history</figcaption>")
        if flow["history"]:
            parts.append(lag_chart(flow["history"]))
        else:
            parts.append("<div class='muted'>No health history yet.</div>")
        if flow["history_error"]:
            parts.append(f"<div class='muted'>{_e(flow['history_error'])}</div>")
        parts.append("</figure>")
    return parts


def lag_chart(points: Sequence[Mapping[str, Any]]) -> str:
    """An SVG line of the flow's lag in records over its evaluations, a dot per evaluation coloured by its status
    (hover: time, records, seconds), and a red tick at the bottom for an evaluation that measured nothing."""
    first, last = points[0]["at_ms"], points[-1]["at_ms"]
    top = max((p["lag_records"] for p in points if p["lag_records"] is not None), default=0) or 1
    parts = _chart("lag in records over time", _count(top), _time(first), _time(last) if last != first else None)
    measured = [p for p in points if p["lag_records"] is not None]
    if len(measured) > 1:
        line = " ".join(f"{_x(p['at_ms'], first, last):.1f},{_y(p['lag_records'], top):.1f}" for p in measured)
        parts.append(f"<polyline points='{line}' fill='none' stroke='#017cee' stroke-width='1.5'/>")
    for point in points:
        tip = (
            f"{_time(point['at_ms'])}: {point['status']}, {_count(point['lag_records'])} records, "
            f"{_seconds(point['lag_seconds'])} s"
        ) + "".join(f"; {problem}" for problem in point["problems"])
        colour = {"OK": "#059669", "WARN": "#d97706"}.get(point["status"], "#dc2626")
        at = _x(point["at_ms"], first, last)
        if point["lag_records"] is None:
            parts.append(_tick(at, colour, tip))
        else:
            mark = f"<circle cx='{at:.1f}' cy='{_y(point['lag_records'], top):.1f}' r='3' fill='{colour}'>"
            parts.append(f"{mark}<title>{_e(tip)}</title></circle>")
    parts.append("</svg>")
    return "".join(parts)


def rto_chart(drills: Sequence[Mapping[str, Any]]) -> str:
    """An SVG line of the RTO of a scenario's drills, evenly spaced in their order (months may pass between two): a
    green dot for a drill that passed, a red square for one that failed, grey for one without a verdict, and a
    tick at the bottom for one that measured no RTO (its clients never switched). Hover: the drill and its result."""
    last = len(drills) - 1
    top = max((d["rto_seconds"] for d in drills if d["rto_seconds"] is not None), default=0) or 1
    first_at, last_at = _date(drills[0]["started"]), _date(drills[-1]["started"])
    parts = _chart("RTO in seconds over the drills", f"{_seconds(top)} s", first_at, last_at if last else None)
    measured = [(i, d["rto_seconds"]) for i, d in enumerate(drills) if d["rto_seconds"] is not None]
    if len(measured) > 1:
        line = " ".join(f"{_x(i, 0, last):.1f},{_y(rto, top):.1f}" for i, rto in measured)
        parts.append(f"<polyline points='{line}' fill='none' stroke='#017cee' stroke-width='1.5'/>")
    for i, drill in enumerate(drills):
        result, _ = _verdict(drill)
        tip = (
            f"{_date(drill['started'])} {drill['from_cluster']} → {drill['to_cluster']}: "
            f"RTO {_seconds(drill['rto_seconds'])} s, {result}"
        ) + (f"; {drill['failure']}" if drill["failure"] else "")
        colour = {True: "#059669", False: "#dc2626"}.get(drill["passed"], "#6b7280")
        at = _x(i, 0, last)
        if drill["rto_seconds"] is None:
            parts.append(_tick(at, colour, tip))
        elif drill["passed"] is False:
            mark = f"<rect x='{at - 4:.1f}' y='{_y(drill['rto_seconds'], top) - 4:.1f}' width='8' height='8'"
            parts.append(f"{mark} fill='{colour}'><title>{_e(tip)}</title></rect>")
        else:
            mark = f"<circle cx='{at:.1f}' cy='{_y(drill['rto_seconds'], top):.1f}' r='4' fill='{colour}'>"
            parts.append(f"{mark}<title>{_e(tip)}</title></circle>")
    parts.append("</svg>")
    return "".join(parts)


def _chart(label: str, top: str, first: str, last: str | None) -> list[str]:
    """A chart's opening: the SVG, its axes, the y axis's top and 0, the x axis's first and (if any) last label."""
    parts = [
        f"<svg width='{_CHART_W}' height='{_CHART_H}' role='img' aria-label='{_e(label)}'>",
        f"<line x1='{_LEFT}' y1='{_TOP + _PLOT_H}' x2='{_LEFT + _PLOT_W}' y2='{_TOP + _PLOT_H}' stroke='#9ca3af'/>",
        f"<line x1='{_LEFT}' y1='{_TOP}' x2='{_LEFT}' y2='{_TOP + _PLOT_H}' stroke='#9ca3af'/>",
        f"<text x='{_LEFT - 6}' y='{_TOP + 4}' text-anchor='end'>{_e(top)}</text>",
        f"<text x='{_LEFT - 6}' y='{_TOP + _PLOT_H}' text-anchor='end'>0</text>",
        f"<text x='{_LEFT}' y='{_CHART_H - 6}'>{_e(first)}</text>",
    ]
    if last is not None:
        parts.append(f"<text x='{_LEFT + _PLOT_W}' y='{_CHART_H - 6}' text-anchor='end'>{_e(last)}</text>")
    return parts


def _x(at: float, first: float, last: float) -> float:
    """Where `at` of the range first..last lies across the plot (its middle when the range is one point)."""
    return _LEFT + (_PLOT_W / 2 if last == first else (at - first) / (last - first) * _PLOT_W)


def _y(value: float, top: float) -> float:
    return _TOP + _PLOT_H - value / top * _PLOT_H


def _tick(at: float, colour: str, tip: str) -> str:
    """The mark of a point that measured nothing: a tick on the x axis."""
    mark = f"<rect x='{at - 1:.1f}' y='{_TOP + _PLOT_H - 8}' width='2' height='8' fill='{colour}'>"
    return f"{mark}<title>{_e(tip)}</title></rect>"


def _clients(clients: Sequence[Mapping[str, Any]], error: str | None, topology_error: str | None) -> list[str]:
    parts = ["<h2>Client aliases</h2>"]
    if error:
        return [*parts, f"<div class='banner'>{_e(error)}</div>"]
    if not clients:
        return [*parts, _none("No client aliases", topology_error)]
    parts.append(
        "<table><tr><th>Alias</th><th>Role</th><th>Home cluster</th><th>Active cluster</th><th>Since</th>"
        "<th>Reason</th></tr>"
    )
    for alias in clients:
        active = _e(alias["active"])
        if alias["active"] != alias["home"]:
            active = f"<b>{active}</b> {_badge('moved', 'warn')}"
        parts.append(
            f"<tr><td><b>{_e(alias['alias'])}</b></td><td>{_e(alias['role'])}</td><td>{_e(alias['home'])}</td>"
            f"<td>{active}</td><td>{_e(alias['since'] or '—')}</td><td>{_e(alias['reason'] or '')}</td></tr>"
        )
    return [*parts, "</table>"]


def _reports(reports: Mapping[str, Mapping[str, Any] | None], ui_root: str) -> list[str]:
    parts = ["<h2>Latest reports</h2>", "<div class='cards'>"]
    for dag_id, report in reports.items():
        parts.append(f"<div class='card'><h3>{_e(dag_id)}</h3>")
        if report is None:
            parts.append("<div class='muted'>No report yet.</div></div>")
            continue
        if report["error"]:
            parts.append(f"<div class='error'>{_e(report['file'])}: {_e(report['error'])}</div></div>")
            continue
        rows = [("What", _e(report["title"]))]
        if report["run_id"]:
            link = f"{_dag_url(ui_root, dag_id)}/runs/{quote(str(report['run_id']), safe='')}"
            rows.append(("Run", f"<a href='{_e(link)}'>{_e(report['run_id'])}</a>"))
        if "rpo_records" in report:
            rows.append(("RPO", _e(_rpo(report))))
            rto = report["rto_seconds"]
            rows.append(("RTO", "—" if rto is None else _e(f"{_seconds(rto)} s")))
            rows.append(("Approved", _e(_approved(report))))
        if "copied" in report:
            rows.append(("Copied", _e(_count(report["copied"]))))
            rows.append(("Verify", _e(report["verify"] or "—")))
        rows += [("Started", _e(report["started"] or "—")), ("Written", _e(report["written_at"]))]
        parts.append("<dl>" + "".join(f"<dt>{label}</dt><dd>{value}</dd>" for label, value in rows) + "</dl></div>")
    return [*parts, "</div>"]


def _drills(drills: Sequence[Mapping[str, Any]]) -> list[str]:
    """The drills done (kafka_dr.drill.history), newest first, each linked to its evidence (served by the app at
    drills/<file>), and the RTO of each scenario's drills charted; an unreadable evidence file is a row of its own."""
    parts = ["<h2>DR drills</h2>"]
    if not drills:
        return [*parts, "<div class='muted'>No drill yet (the <code>dr_drill</code> DAG).</div>"]
    parts.append(
        "<table><tr><th>Started</th><th>Scenario</th><th>From → to</th><th>RPO (records)</th><th>RTO (s)</th>"
        "<th>Result</th><th>Evidence</th></tr>"
    )
    for drill in reversed(drills):
        if drill["error"]:
            parts.append(f"<tr><td colspan='7' class='error'>{_e(drill['error'])}</td></tr>")
            continue
        result, css_class = _verdict(drill)
        failure = f" <span class='error'>{_e(drill['failure'])}</span>" if drill["failure"] else ""
        pages = [
            f"<a href='drills/{_e(quote(drill[kind], safe=''))}'>{kind.upper()}</a>"
            for kind in ("html", "pdf")
            if drill[kind]
        ]
        evidence = " · ".join(pages) or "<span class='muted'>none</span>"
        parts.append(
            f"<tr><td>{_e(_date(drill['started']))}</td><td>{_e(drill['scenario'])}</td>"
            f"<td>{_e(drill['from_cluster'])} → {_e(drill['to_cluster'])}</td>"
            f"<td class='num'>{_e(_count(drill['rpo_records']))}</td>"
            f"<td class='num'>{_e(_seconds(drill['rto_seconds']))}</td><td>{_badge(result, css_class)}{failure}</td>"
            f"<td>{evidence}</td></tr>"
        )
    parts.append("</table>")
    legend = "green dot: passed · red square: failed · grey dot: no verdict · tick on the axis: no RTO"
    readable = [drill for drill in drills if not drill["error"]]
    for scenario in sorted({str(drill["scenario"]) for drill in readable}):  # a planned and a disaster RTO differ
        parts.append(
            f"<figure><figcaption>{_e(scenario)}: RTO of each drill (run start to clients switched)</figcaption>"
        )
        parts.append(rto_chart([drill for drill in readable if str(drill["scenario"]) == scenario]))
        parts.append(f"<div class='muted'>{legend}</div></figure>")
    return parts


def _verdict(drill: Mapping[str, Any]) -> tuple[str, str]:
    """A drill's result and its badge's class (NO VERDICT for evidence that gives none: history.drill_history)."""
    if drill["passed"] is None:
        return "NO VERDICT", "warn"
    return ("PASSED", "ok") if drill["passed"] else ("FAILED", "err")


def _alerts(sent: Sequence[Mapping[str, Any]]) -> list[str]:
    """The newest alerts sent (kafka_dr.alerts' sent log), each with every target's answer, targets masked."""
    parts = ["<h2>Last alerts sent</h2>"]
    if not sent:
        return [*parts, "<div class='muted'>None sent yet (the topology's <code>alerts:</code> section).</div>"]
    parts.append("<table><tr><th>When</th><th>Event</th><th>Alert</th><th>Targets</th></tr>")
    for alert in sent:
        answers = "<br>".join(
            f"{_badge('accepted', 'ok') if t['accepted'] else _badge('failed', 'err')} <code>{_e(t['shown'])}</code>"
            for t in alert["targets"]
        )
        parts.append(
            f"<tr><td>{_e(alert['at'])}</td><td>{_e(alert['event'])}</td><td>{_e(alert['title'])}</td>"
            f"<td>{answers}</td></tr>"
        )
    return [*parts, "</table>"]


def _approved(report: Mapping[str, Any]) -> str:
    """Who approved the switch and after how long (the RTO leaves that wait out), and who triggered it."""
    by = f"; triggered by {report['triggered_by']}" if report.get("triggered_by") else ""
    if not report.get("approved_by"):
        return f"no approval asked{by}"
    return f"by {report['approved_by']} after {_seconds(report['approval_wait_seconds'])} s{by}"


def _rpo(report: Mapping[str, Any]) -> str:
    """RPO in records, exact or estimated, and the exact figure a later failback measured if any."""
    if report["rpo_records"] is None:
        text = "unknown"
    else:
        text = f"{_count(report['rpo_records'])} records ({'exact' if report['rpo_exact'] else 'estimate'})"
    after = report.get("rpo_exact_after_failback")
    return text if after is None else f"{text}; exact after failback: {_count(after)} records"


def _none(what: str, topology_error: str | None) -> str:
    reason = "the topology does not load" if topology_error else "none in the topology"
    return f"<div class='muted'>{_e(what)}: {reason}.</div>"


def _dag_url(ui_root: str, dag_id: str) -> str:
    return f"{ui_root.rstrip('/')}/dags/{quote(dag_id, safe='')}"


def _badge(text: str, css_class: str) -> str:
    return f"<span class='badge {css_class}'>{_e(text)}</span>"


def _count(value: int | None) -> str:
    return "—" if value is None else f"{value:,}"


def _seconds(value: float | None) -> str:
    return "—" if value is None else f"{value:,.1f}"


def _date(iso: str) -> str:
    """A drill's ISO time (any zone), as the page's other times: UTC, to the second."""
    return _time(epoch_ms(iso, "started"))


def _time(at_ms: int | None) -> str:
    return "—" if at_ms is None else datetime.fromtimestamp(at_ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _e(value: object) -> str:
    return html.escape("" if value is None else str(value))
