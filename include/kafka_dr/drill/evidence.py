"""The evidence a drill leaves in $KDR_STATE_DIR/drills (the fields: kafka_dr.drill's docstring): the JSON as
written, one self-contained HTML page an auditor can open or print (inline CSS, no script, nothing fetched; the
only links go to the inner Airflow runs), and a PDF of that page when Debian's headless Chromium is there.

The JSON and the HTML are the evidence; the PDF is a convenience, so a missing or failing Chromium is a reason
returned, never an exception. A drill that failed part-way writes what it has: every missing value renders as "-".
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
import uuid
from collections.abc import Mapping, Sequence
from datetime import datetime
from html import escape
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from ..processes import send_group, write_atomic
from ..state import safe_name, subdir, write_json

CHROMIUM = "chromium"  # Debian's launcher (/usr/bin/chromium), installed by the Makefile
# --headless is the new headless mode in this Chromium (156); --disable-dev-shm-usage because containers have a
# small /dev/shm (Debian's launcher means to add it, but its check of /dev/shm's size fails where findmnt lists
# the mount twice); the four after it stop Chromium's calls to outside hosts at start, which a closed network
# refuses slowly (as in tests/support/browser.py).
CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",  # root in a container: no user namespace for the sandbox
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-pdf-header-footer",  # no date, file:// path and page numbers printed over the page
)
MISSING = "-"
_OBJECTIVES = {"rpo_records": ("RPO", "records"), "rto_seconds": ("RTO", "s")}

_CSS = """
@page{size:A4;margin:14mm 12mm}
*{-webkit-print-color-adjust:exact;print-color-adjust:exact}
body{font:12px/1.4 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0 auto;padding:16px;max-width:186mm;
color:#1f2933;background:#fff}
h1{font-size:19px;margin:0 0 8px}h2{font-size:15px;margin:18px 0 6px;break-after:avoid}
table{border-collapse:collapse;width:100%;margin-bottom:4px}tr{break-inside:avoid}
th,td{border:1px solid #d5d9de;padding:3px 6px;text-align:left;vertical-align:top}
th{background:#eef1f4}
table.facts th{width:28%}table.facts td,.wrap{overflow-wrap:anywhere}
.banner{padding:8px 12px;border-radius:6px;margin:8px 0 12px;font-size:16px;font-weight:700}
.banner div{font-size:13px;font-weight:400}
.ok{background:#d1fae5;color:#065f46}.err{background:#fee2e2;color:#991b1b}.warn{background:#fef3c7;color:#92400e}
code{font-size:11px}
"""


def evidence_path(run_id: str, suffix: str) -> Path:
    """STATE_DIR/drills/<run><suffix>, the run id made safe as a file name as report files are."""
    return subdir("drills") / f"{safe_name(run_id)}{suffix}"


def render_html(evidence: Mapping[str, Any]) -> str:
    """The whole page, every value escaped; partial evidence renders, its gaps as "-"."""
    scenario, source, target = (_v(evidence.get(key)) for key in ("scenario", "from_cluster", "to_cluster"))
    title = f"kafka-dr DR drill: {scenario} {source} -> {target}"
    parts = [
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>",
        f"<title>{_e(title)}</title><style>{_CSS}</style></head><body>",
        f"<h1>{_e(title)}</h1>",
        _banner(evidence),
        *_summary(evidence),
        *_objectives(evidence.get("objectives")),
        *_probe(evidence.get("probe")),
        *_runs(evidence.get("runs")),
        "<h2>Timeline</h2>",
        *_table(
            ("at", "step", "detail"), [_cells(e, ("at", "step", "detail")) for e in evidence.get("timeline") or []]
        ),
        *_health(evidence.get("health_before"), evidence.get("health_after")),
        "<h2>Checks</h2>",
        *_table(
            ("check", "result", "detail"),
            [
                [_e(_v(c.get("check"))), _verdict(c.get("passed")), _e(_v(c.get("detail")))]
                for c in evidence.get("checks") or []
            ],
        ),
        "<h2>Left changed</h2>",
        *_left(evidence.get("left")),
        "</body></html>",
    ]
    return "\n".join(parts)


def _banner(evidence: Mapping[str, Any]) -> str:
    """PASSED only on an explicit pass: evidence without a verdict has not passed."""
    if evidence.get("passed") is True:
        return "<div class='banner ok'>PASSED</div>"
    reason = evidence.get("failure") or (
        "no verdict recorded: the drill did not finish" if evidence.get("passed") is None else MISSING
    )
    return f"<div class='banner err'>FAILED<div>{_e(reason)}</div></div>"


def _summary(evidence: Mapping[str, Any]) -> list[str]:
    rpo = evidence.get("rpo") or {}
    exact = {True: "exact", False: "estimate"}.get(rpo.get("exact"), MISSING)
    facts = [
        ("Drill run", f"{_v(evidence.get('dag_id'))} {_v(evidence.get('run_id'))}"),
        ("Triggered by", _v(evidence.get("triggered_by"))),
        ("Started", _v(evidence.get("started"))),
        ("Ended", _v(evidence.get("ended"))),
        ("Duration", _duration(evidence.get("started"), evidence.get("ended"))),
        ("Approval", _v(evidence.get("approval"))),
        ("Probe", f"{_v(evidence.get('probe_topic'))} at {_v(evidence.get('rate'))} records/s"),
        ("Topology file", _v(evidence.get("topology_file"))),
        ("Topology sha256", _v(evidence.get("topology_sha256"))),
        ("RPO", f"{_v(rpo.get('records'))} records ({exact}; {_v(rpo.get('source'))})"),
        ("RTO (failover)", _unit(evidence.get("rto_seconds"), "s")),
        ("RTO (failback)", _unit(evidence.get("failback_rto_seconds"), "s")),
    ]
    return [
        "<table class='facts'>",
        *(f"<tr><th>{_e(name)}</th><td>{_e(value)}</td></tr>" for name, value in facts),
        "</table>",
    ]


def _objectives(objectives: Any) -> list[str]:
    rows = []
    for key, found in (objectives or {}).items():
        name, unit = _OBJECTIVES.get(key, (key, ""))
        found = found or {}
        measured = [_unit(found.get("objective"), unit), _unit(found.get("measured"), unit)]
        rows.append([_e(f"{name} ({key})"), *map(_e, measured), _verdict(found.get("passed"))])
    return ["<h2>Objectives</h2>", *_table(("objective", "target", "measured", "result"), rows)]


def _probe(probe: Any) -> list[str]:
    rows = [[_e(name), _e(_v(count))] for name, count in (probe or {}).items()]
    return ["<h2>Probe</h2>", *_table(("count", "records"), rows)]


def _runs(runs: Any) -> list[str]:
    rows = [
        [
            _e(_v(run.get("dag_id"))),
            _link(run.get("run_id"), run.get("url")),
            _e(_v(run.get("state"))),
            _e(_v(run.get("rpo_records"))),
            _e(_unit(run.get("rto_seconds"), "s")),
            _e(_v(run.get("approved_by"))),
            f"<code class='wrap'>{_e(_v(run.get('report_file')))}</code>",
        ]
        for run in (runs or [])
    ]
    return [
        "<h2>Inner runs</h2>",
        *_table(("DAG", "run", "state", "RPO (records)", "RTO", "approved by", "report file"), rows),
    ]


def _health(before: Any, after: Any) -> list[str]:
    """One row per flow, before and after side by side, and whether each health check passed."""
    flows_before, flows_after = (before or {}).get("flows") or {}, (after or {}).get("flows") or {}
    rows = [
        [_e(flow), _status(flows_before.get(flow)), _status(flows_after.get(flow))]
        for flow in dict.fromkeys([*flows_before, *flows_after])
    ]
    rows.append(["<b>passed</b>", _verdict((before or {}).get("passed")), _verdict((after or {}).get("passed"))])
    return ["<h2>Health</h2>", *_table(("flow", "before", "after"), rows)]


def _left(left: Any) -> list[str]:
    """An empty list is "nothing"; no list at all (a drill interrupted before it put things back) is "-"."""
    if not left:
        return [f"<p>{'nothing' if left == [] else MISSING}</p>"]
    return ["<ul>", *(f"<li>{_e(_v(line))}</li>" for line in left), "</ul>"]


def _table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    """`rows` hold cells already escaped; none shows one row of "-"."""
    body = rows or [[MISSING] * len(headers)]
    return [
        "<table><tr>" + "".join(f"<th>{_e(h)}</th>" for h in headers) + "</tr>",
        *("<tr>" + "".join(f"<td>{cell}</td>" for cell in row) + "</tr>" for row in body),
        "</table>",
    ]


def _cells(item: Mapping[str, Any], keys: Sequence[str]) -> list[str]:
    return [_e(_v(item.get(key))) for key in keys]


def _link(run_id: Any, url: Any) -> str:
    """The run id, linked to its Airflow run when the URL is http(s) (a javascript: URL escaped is still a script)."""
    if isinstance(url, str) and urlsplit(url).scheme in ("http", "https"):
        return f"<a class='wrap' href='{_e(url)}'>{_e(_v(run_id))}</a>"
    return f"<span class='wrap'>{_e(_v(run_id))}</span>"


def _verdict(passed: Any) -> str:
    if passed is None:
        return MISSING
    return "<span class='ok'>pass</span>" if passed else "<span class='err'>fail</span>"


def _status(status: Any) -> str:
    css = {"OK": "ok", "WARN": "warn", "ERR": "err"}.get(status)
    return f"<span class='{css}'>{_e(status)}</span>" if css else _e(_v(status))


def _duration(started: Any, ended: Any) -> str:
    try:
        seconds = (datetime.fromisoformat(ended) - datetime.fromisoformat(started)).total_seconds()
    except (TypeError, ValueError):
        return MISSING
    minutes, rest = divmod(seconds, 60)
    return f"{int(minutes)} min {rest:.1f} s" if minutes else f"{rest:.1f} s"


def _unit(value: Any, unit: str) -> str:
    return MISSING if value is None else f"{value} {unit}".rstrip()


def _v(value: Any) -> str:
    return MISSING if value is None or value == "" else str(value)


def _e(value: str) -> str:
    return escape(value, quote=True)


def render_pdf(html: Path, pdf: Path, timeout: float = 60) -> str | None:
    """Print `html` to `pdf` with headless Chromium: None when written, else why not, in one line. The PDF
    appears whole or not at all (printed beside it, then renamed); the profile is a fresh temporary folder, so
    parallel calls do not share Chromium's profile lock."""
    binary = shutil.which(CHROMIUM)
    if binary is None:
        return "chromium not installed"
    tmp = pdf.with_name(f".{pdf.name}.{uuid.uuid4().hex}.tmp")  # Chromium creates it, with the usual permissions
    try:
        with tempfile.TemporaryDirectory(prefix="kdr-chromium-", ignore_cleanup_errors=True) as profile:
            reason = _print(binary, html, tmp, Path(profile), timeout)
        if reason is None:
            os.replace(tmp, pdf)
        return reason
    finally:
        tmp.unlink(missing_ok=True)


def _print(binary: str, html_file: Path, pdf: Path, profile: Path, timeout: float) -> str | None:
    """One Chromium run, in a session of its own: on timeout the whole group is killed (its renderer and GPU
    processes keep the output pipes open, so killing the launcher alone would leave the read waiting)."""
    command = [
        binary,
        *CHROMIUM_FLAGS,
        f"--user-data-dir={profile}",
        f"--print-to-pdf={pdf}",
        html_file.resolve().as_uri(),
    ]
    try:
        proc = subprocess.Popen(
            command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True
        )
    except OSError as exc:
        return f"chromium did not start: {exc}"
    try:
        _, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        send_group(proc.pid, signal.SIGKILL)  # the leader is not reaped yet, so its group id is still ours
        proc.communicate()
        return f"chromium timed out after {timeout:g} s"
    last = next((line.strip() for line in reversed(stderr.decode(errors="replace").splitlines()) if line.strip()), "")
    if proc.returncode != 0:
        return f"chromium exited {proc.returncode}: {last or 'no output'}"
    with contextlib.suppress(OSError), pdf.open("rb") as written:
        if written.read(4) == b"%PDF":
            return None
    return f"chromium wrote no PDF: {last or 'no output'}"


def write_evidence(evidence: Mapping[str, Any], pdf: bool = True) -> dict[str, str | None]:
    """<run>.json, <run>.html and, when `pdf` and Chromium works, <run>.pdf in STATE_DIR/drills, each written whole
    then renamed into place. The JSON first: it is the record, the rest is drawn from it. A PDF of an earlier write
    (a report task retried) that is not printed again is removed rather than left beside JSON it no longer matches."""
    run_id = evidence["run_id"]
    json_file, html_file, pdf_file = (evidence_path(run_id, suffix) for suffix in (".json", ".html", ".pdf"))
    write_json(json_file, evidence)
    write_atomic(html_file, render_html(evidence))
    pdf_error = render_pdf(html_file, pdf_file) if pdf else None
    printed = pdf and pdf_error is None
    if not printed:
        pdf_file.unlink(missing_ok=True)
    return {
        "json": str(json_file),
        "html": str(html_file),
        "pdf": str(pdf_file) if printed else None,
        "pdf_error": pdf_error,
    }
