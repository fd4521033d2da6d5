"""The drills done, as the Kafka DR page's "DR drills" section and the drill metrics show them: each evidence JSON
that dr_drill left directly in STATE_DIR/drills/ (fields: kafka_dr.drill's docstring) summed up in a few figures.
No Airflow import: `kafka-dr metrics` reads it too.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..reports import number
from ..state import subdir
from ..times import epoch_ms

EVIDENCE_PAGES = (".html", ".pdf")  # what the dashboard serves from the folder; the JSON is summed up instead

# A summary's fields, all unknown: what an unreadable file's entry shows beside its error.
_UNKNOWN: dict[str, Any] = dict.fromkeys(
    [
        "run_id",
        "scenario",
        "from_cluster",
        "to_cluster",
        "started",
        "ended",
        "rpo_records",
        "rto_seconds",
        "passed",
        "failure",
        "html",
        "pdf",
        "file",
    ]
)


def drill_history(limit: int | None = None) -> list[dict[str, Any]]:
    """Each drill's summary, oldest first by `started`; `limit`: only the newest `limit`. `passed` is None for
    evidence without a verdict (dr_drill's report always gives one; a file copied in or edited by hand may not).
    A file that does not parse or lacks its run_id or start is an entry whose `error` names it, placed by the file's
    time: one bad file must not hide the others, nor fail the page or the scrape."""
    try:
        paths = [path for path in subdir("drills").glob("*.json") if path.is_file()]
    except OSError as exc:  # a state dir the api-server may not write, without the folder yet
        return [{**_UNKNOWN, "error": f"drills: {exc}"}]
    drills = [drill for _, drill in sorted(_summary(path) for path in paths)]
    return drills if limit is None else drills[max(len(drills) - limit, 0) :]


def evidence_file(name: str) -> Path | None:
    """The evidence page `name` (EVIDENCE_PAGES) directly in the drills folder, for the dashboard to serve; None for
    anything else: a path, `..`, another kind of file, a missing one, a link out of the folder."""
    directory = subdir("drills")
    path = directory / name
    if Path(name).name != name or path.suffix not in EVIDENCE_PAGES or not path.is_file():
        return None
    return path if path.resolve().parent == directory.resolve() else None


def _summary(path: Path) -> tuple[tuple[int, str], dict[str, Any]]:
    """A drill's figures and the pages beside its JSON, with the sort key of its start (a bad file's: its time)."""
    files = {suffix.lstrip("."): _beside(path, suffix) for suffix in EVIDENCE_PAGES}
    found = {"file": path.name, **files, "error": None}
    try:
        body = json.loads(path.read_text(encoding="utf-8"))
        missing = [key for key in ("run_id", "started") if not body.get(key)]
        if missing:
            raise ValueError(f"no {' and no '.join(missing)}")
        started_ms = epoch_ms(body["started"], "started")
        if body.get("ended") is not None:
            epoch_ms(body["ended"], "ended")  # the metrics' time of the drill: checked here, once for all readers
        summary = {
            "run_id": str(body["run_id"]),
            "scenario": body.get("scenario"),
            "from_cluster": body.get("from_cluster"),
            "to_cluster": body.get("to_cluster"),
            "started": body["started"],
            "ended": body.get("ended"),
            "rpo_records": number((body.get("rpo") or {}).get("records")),
            "rto_seconds": number(body.get("rto_seconds")),
            "passed": body["passed"] if isinstance(body.get("passed"), bool) else None,  # None: no verdict given
            "failure": body.get("failure"),
        }
    except (OSError, ValueError, TypeError, AttributeError) as exc:  # AttributeError: JSON that is not an object
        error = " ".join(f"{path.name}: unreadable: {type(exc).__name__}: {exc}".split())
        return (_mtime_ms(path), path.name), {**_UNKNOWN, **found, "error": error}
    return (started_ms, path.name), {**summary, **found}


def _beside(path: Path, suffix: str) -> str | None:
    """The name of the drill's page of that kind beside its JSON, None when it has none."""
    page = path.with_suffix(suffix)
    return page.name if page.is_file() else None


def _mtime_ms(path: Path) -> int:
    try:
        return int(path.stat().st_mtime * 1000)
    except OSError:  # removed meanwhile
        return 0
