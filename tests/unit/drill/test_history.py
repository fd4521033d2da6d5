"""The drills done (kafka_dr.drill.history) from evidence written by dr_drill's own writer: their order by start
whatever the time zone, their figures and pages, a bad file as an entry naming it, the newest few; and which names
the dashboard may serve from the folder."""

from __future__ import annotations

import json
import os
from datetime import datetime
from pathlib import Path

import pytest
from support.drill_evidence import drill_evidence, failed_drill_evidence

from kafka_dr.drill.evidence import write_evidence
from kafka_dr.drill.history import drill_history, evidence_file


@pytest.fixture(autouse=True)
def state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("KDR_STATE_DIR", str(tmp_path / "state"))
    return tmp_path / "state"


def three_drills() -> None:
    """The failed planned drill (28th, 09:00 UTC) written first; a disaster drill at 10:00+02:00 that day, earlier
    although its text sorts after; the passed disaster drill of the 27th."""
    write_evidence(failed_drill_evidence(), pdf=False)
    write_evidence(drill_evidence(run_id="east", started="2026-11-28T10:00:00+02:00", ended=None), pdf=False)
    write_evidence(drill_evidence(), pdf=False)


def test_drills_oldest_first_by_their_start_with_their_figures_and_pages(state_dir: Path) -> None:
    three_drills()
    (state_dir / "drills" / "manual__2026-11-27T14_00_00_00_00.pdf").write_bytes(b"%PDF-1.4")

    drills = drill_history()

    assert [d["run_id"] for d in drills] == [
        "manual__2026-11-27T14:00:00+00:00",
        "east",
        "manual__2026-11-28T09:00:00+00:00",
    ]
    passed, _, failed = drills
    assert passed == {
        "run_id": "manual__2026-11-27T14:00:00+00:00",
        "scenario": "disaster_round_trip",
        "from_cluster": "dc1",
        "to_cluster": "dc2",
        "started": "2026-11-27T14:00:00.000+00:00",
        "ended": "2026-11-27T14:03:10.000+00:00",
        "rpo_records": 0,
        "rto_seconds": 11.2,
        "passed": True,
        "failure": None,
        "html": "manual__2026-11-27T14_00_00_00_00.html",
        "pdf": "manual__2026-11-27T14_00_00_00_00.pdf",
        "file": "manual__2026-11-27T14_00_00_00_00.json",
        "error": None,
    }
    assert (failed["scenario"], failed["passed"], failed["rto_seconds"], failed["pdf"]) == (
        "planned_round_trip",
        False,
        21.0,
        None,
    )
    assert failed["failure"] == "RTO objective missed: 21.0 s > 0.5 s (dr.rto_seconds)"
    json.dumps(drills)  # part of /kafka-dr/api/state


def test_a_drill_without_a_verdict_yet_has_passed_none() -> None:
    """dr_drill writes its evidence as it goes: a drill running (or stopped) has neither a verdict nor an end."""
    write_evidence(drill_evidence(passed=None, ended=None, rto_seconds=None), pdf=False)
    (drill,) = drill_history()
    assert (drill["passed"], drill["ended"], drill["rto_seconds"], drill["error"]) == (None, None, None, None)


def test_a_bad_file_is_an_entry_naming_it_placed_by_its_time_and_the_others_still_read(state_dir: Path) -> None:
    three_drills()
    folder = state_dir / "drills"
    bad = {
        "broken.json": "{not json",
        "anonymous.json": json.dumps(drill_evidence(run_id=None)),
        "undated.json": json.dumps(drill_evidence(started="last Tuesday")),
        "list.json": "[]",
        "worded.json": json.dumps(drill_evidence(rto_seconds="eleven")),
    }
    between = datetime.fromisoformat("2026-11-27T20:00:00+00:00").timestamp()  # after the 27th's drill
    for name, text in bad.items():
        (folder / name).write_text(text)
        os.utime(folder / name, (between, between))
    (folder / "nested.json").mkdir()  # not a file: not a drill
    (folder / "nested.json" / "inner.json").write_text(json.dumps(drill_evidence(run_id="inner")))
    (folder / "notes.txt").write_text("not evidence")

    drills = drill_history()

    assert [d["run_id"] for d in drills if not d["error"]] == [
        "manual__2026-11-27T14:00:00+00:00",
        "east",
        "manual__2026-11-28T09:00:00+00:00",
    ]
    assert [d["file"] for d in drills[1:6]] == sorted(bad)  # by their time, then their names
    errors = {d["file"]: d["error"] for d in drills if d["error"]}
    assert errors["broken.json"].startswith("broken.json: unreadable: JSONDecodeError: ")
    assert errors["anonymous.json"] == "anonymous.json: unreadable: ValueError: no run_id"
    assert errors["undated.json"].startswith("undated.json: unreadable: ValueError: started: not an ISO-8601 time")
    assert errors["list.json"].startswith("list.json: unreadable: AttributeError: ")
    assert errors["worded.json"] == "worded.json: unreadable: TypeError: not a number: 'eleven'"
    assert all("\n" not in error for error in errors.values())
    assert {d["run_id"] for d in drills if d["error"]} == {None}


def test_limit_keeps_the_newest_oldest_first() -> None:
    three_drills()
    assert [d["run_id"] for d in drill_history(limit=2)] == ["east", "manual__2026-11-28T09:00:00+00:00"]
    assert len(drill_history(limit=5)) == 3 and drill_history(limit=0) == []


def test_only_evidence_pages_directly_in_the_folder_may_be_served(state_dir: Path, tmp_path: Path) -> None:
    write_evidence(drill_evidence(), pdf=False)
    folder = state_dir / "drills"
    (folder / "manual.pdf").write_bytes(b"%PDF-1.4")
    (tmp_path / "outside.html").write_text("secret")
    (folder / "link.html").symlink_to(tmp_path / "outside.html")
    (folder / "sub").mkdir()
    (folder / "sub" / "inner.html").write_text("inner")

    assert evidence_file("manual__2026-11-27T14_00_00_00_00.html") == folder / "manual__2026-11-27T14_00_00_00_00.html"
    assert evidence_file("manual.pdf") == folder / "manual.pdf"
    for refused in (
        "manual__2026-11-27T14_00_00_00_00.json",  # summed up on the page, not served
        "missing.html",
        "../outside.html",
        "sub/inner.html",
        "sub",
        "..",
        ".",
        "",
        str(tmp_path / "outside.html"),
        "link.html",  # a link out of the folder
        "bad\0.html",
    ):
        assert evidence_file(refused) is None, refused
