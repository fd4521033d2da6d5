"""A drill's evidence files (kafka_dr.drill.evidence): the HTML page shows every value of the JSON, escaped, and
renders what an interrupted drill left; the files appear whole; the PDF comes from Debian's headless Chromium and its
absence or failure is a reason returned, never an exception."""

from __future__ import annotations

import json
import re
import shutil
import time
from collections.abc import Iterator
from html import escape
from pathlib import Path
from typing import Any

import pytest
from support.drill_evidence import drill_evidence, failed_drill_evidence

from kafka_dr.drill.evidence import evidence_path, render_html, render_pdf, write_evidence


@pytest.fixture(autouse=True)
def state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("KDR_STATE_DIR", str(tmp_path / "state"))
    return tmp_path / "state"


def leaves(value: Any) -> Iterator[Any]:
    """Every scalar of a JSON body, keys left out."""
    if isinstance(value, dict):
        for item in value.values():
            yield from leaves(item)
    elif isinstance(value, list):
        for item in value:
            yield from leaves(item)
    else:
        yield value


def fake_chromium(folder: Path, script: str) -> None:
    """A `chromium` on PATH that runs `script` (sh) instead of printing."""
    folder.mkdir()
    (folder / "chromium").write_text(f"#!/bin/sh\n{script}\n")
    (folder / "chromium").chmod(0o755)


def test_the_page_of_a_passed_drill_shows_every_value_it_holds() -> None:
    evidence = drill_evidence()
    page = render_html(evidence)
    assert "<h1>kafka-dr DR drill: disaster_round_trip dc1 -&gt; dc2</h1>" in page
    assert "PASSED" in page and "FAILED" not in page
    shown = [value for value in leaves(evidence) if value is not None and not isinstance(value, bool)]
    assert len(shown) > 80
    assert [value for value in shown if escape(str(value)) not in page] == []
    for name, value in (
        ("Triggered by", "admin"),
        ("Started", "2026-11-27T14:00:00.000+00:00"),
        ("Ended", "2026-11-27T14:03:10.000+00:00"),
        ("Duration", "3 min 10.0 s"),
        ("Topology file", "/srv/kafka-dr/topology.yaml"),
        ("Topology sha256", evidence["topology_sha256"]),
        ("RPO", "0 records (exact; dr_failback: records that never left dc1)"),
    ):
        assert f"<tr><th>{name}</th><td>{escape(value)}</td></tr>" in page
    assert (
        "<td>RPO (rpo_records)</td><td>1000 records</td><td>0 records</td><td><span class='ok'>pass</span></td>" in page
    )
    assert "<tr><td>read_twice</td><td>385</td></tr>" in page
    for name in ("dc1-to-dc2", "dc2-to-dc1"):
        assert f"<td>{name}</td><td><span class='ok'>OK</span></td><td><span class='ok'>OK</span></td>" in page
    failover = evidence["runs"][0]
    assert (
        f"<tr><td>dr_failover</td><td><a class='wrap' href='{escape(failover['url'])}'>{escape(failover['run_id'])}</a>"
        "</td><td>success</td><td>7</td><td>11.2 s</td><td>approver</td>"
        f"<td><code class='wrap'>{failover['report_file']}</code></td></tr>"
    ) in page
    assert "<h2>Left changed</h2>\n<p>nothing</p>" in page
    # Self-contained: no script, and the only URLs are the inner runs'.
    assert "<script" not in page
    assert re.findall(r"\w+://[^'\"<> ]+", page) == [run["url"] for run in evidence["runs"]]


def test_the_page_of_a_failed_drill_says_failed_and_why() -> None:
    page = render_html(failed_drill_evidence())
    assert "<div class='banner err'>FAILED<div>RTO objective missed: 21.0 s &gt; 0.5 s (dr.rto_seconds)</div>" in page
    assert "PASSED" not in page
    assert "<td>RTO (rto_seconds)</td><td>0.5 s</td><td>21.0 s</td><td><span class='err'>fail</span></td>" in page
    assert "<td>RTO objective</td><td><span class='err'>fail</span></td><td>21.0 s &gt; 0.5 s</td>" in page


def test_every_value_is_escaped_and_only_http_urls_are_links() -> None:
    evidence = drill_evidence(triggered_by="<script>alert(1)</script>", left=["alias <b>orders</b> on dc2"])
    evidence["timeline"][0]["detail"] = "\"'><script>x()</script>"
    evidence["runs"][0]["url"] = "javascript:alert(1)"
    evidence["health_after"]["flows"]["<img src=x>"] = "ERR"
    page = render_html(evidence)
    assert "<script" not in page and "<img" not in page and "<b>orders" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page and "&quot;&#x27;&gt;&lt;script&gt;x()" in page
    assert "<li>alias &lt;b&gt;orders&lt;/b&gt; on dc2</li>" in page
    assert "javascript:" not in page and f"<span class='wrap'>{escape(evidence['runs'][0]['run_id'])}</span>" in page


@pytest.mark.parametrize(
    "removed",
    [
        *[[key] for key in drill_evidence() if key != "run_id"],
        ["runs", "probe", "objectives", "ended", "health_after", "checks", "left", "passed", "failure"],
        [key for key in drill_evidence() if key != "run_id"],
    ],
    ids=lambda removed: removed[0] if len(removed) == 1 else f"{len(removed)} keys",
)
def test_partial_evidence_renders_its_gaps_as_dashes(removed: list[str]) -> None:
    """An interrupted drill writes what it has: keys missing, or present as None."""
    missing = {key: value for key, value in drill_evidence().items() if key not in removed}
    for page in (render_html(missing), render_html(drill_evidence(**dict.fromkeys(removed)))):
        assert page.endswith("</body></html>")
        if "passed" in removed:
            assert "FAILED<div>no verdict recorded: the drill did not finish</div>" in page
        if "ended" in removed:
            assert "<th>Duration</th><td>-</td>" in page
        if "runs" in removed:
            assert "<h2>Inner runs</h2>" in page and "<tr>" + "<td>-</td>" * 7 + "</tr>" in page
        if "left" in removed:
            assert "<h2>Left changed</h2>\n<p>-</p>" in page  # unknown, not "nothing"


def test_partial_evidence_with_none_inside_renders() -> None:
    evidence = drill_evidence(rpo={"records": None, "exact": None, "source": None})
    evidence["objectives"]["rto_seconds"] = None
    evidence["objectives"]["rpo_records"]["measured"] = None
    evidence["runs"][0] = {"dag_id": "dr_failover", "run_id": "r1", "state": "running"}
    evidence["health_after"] = {"flows": {}, "passed": None}
    page = render_html(evidence)
    assert "<th>RPO</th><td>- records (-; -)</td>" in page
    assert "<td>RTO (rto_seconds)</td><td>-</td><td>-</td><td>-</td>" in page
    assert "<td>RPO (rpo_records)</td><td>1000 records</td><td>-</td><td><span class='ok'>pass</span></td>" in page
    assert "<td>dr_failover</td><td><span class='wrap'>r1</span></td><td>running</td>" in page


def test_the_evidence_path_makes_the_run_id_safe_as_a_file_name(state_dir: Path) -> None:
    assert evidence_path("manual__2026-11-27T14:00:00+00:00", ".json") == (
        state_dir / "drills" / "manual__2026-11-27T14_00_00_00_00.json"
    )
    assert evidence_path("a/../b c", ".html").name == "a_.._b_c.html"


def test_write_evidence_writes_json_and_html_whole(state_dir: Path) -> None:
    evidence = failed_drill_evidence()
    stale = evidence_path(evidence["run_id"], ".pdf")
    stale.write_bytes(b"%PDF of an earlier, partial write")
    first = write_evidence({**evidence, "passed": None, "failure": None}, pdf=False)
    inodes = {kind: Path(first[kind]).stat().st_ino for kind in ("json", "html")}

    written = write_evidence(evidence, pdf=False)
    assert written == {**first, "pdf": None, "pdf_error": None}
    assert json.loads(Path(written["json"]).read_text()) == evidence
    assert Path(written["json"]).read_text().startswith('{\n  "dag_id": "dr_drill",')
    assert Path(written["html"]).read_text() == render_html(evidence)
    # Replaced by a rename (a new file), not rewritten in place, and no temporary file left behind.
    assert all(Path(written[kind]).stat().st_ino != inode for kind, inode in inodes.items())
    assert sorted(p.name for p in (state_dir / "drills").iterdir()) == [
        "manual__2026-11-28T09_00_00_00_00.html",
        "manual__2026-11-28T09_00_00_00_00.json",
    ]  # and the PDF that no longer matched them is gone


def test_no_chromium_is_a_reason_not_an_error(state_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    written = write_evidence(drill_evidence())
    assert written["pdf"] is None and written["pdf_error"] == "chromium not installed"
    assert Path(written["json"]).exists() and Path(written["html"]).exists()


def test_a_failing_chromium_gives_its_last_line_and_leaves_no_pdf(
    state_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_chromium(tmp_path / "bin", "echo noise >&2; echo 'Failed to load the page' >&2; echo >&2; exit 1")
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    html = state_dir / "page.html"
    state_dir.mkdir()
    html.write_text("<p>x</p>")
    assert render_pdf(html, state_dir / "page.pdf") == "chromium exited 1: Failed to load the page"
    fake_chromium(tmp_path / "bin2", "exit 0")  # exits 0 without printing
    monkeypatch.setenv("PATH", str(tmp_path / "bin2"))
    assert render_pdf(html, state_dir / "page.pdf") == "chromium wrote no PDF: no output"
    assert sorted(p.name for p in state_dir.iterdir()) == ["page.html"]


def test_a_hung_chromium_is_killed_with_its_children_at_the_timeout(
    state_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The child holds the output pipes: only killing the whole group lets the call return."""
    fake_chromium(tmp_path / "bin", f"{shutil.which('sleep')} 60 & wait")
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    state_dir.mkdir()
    started = time.monotonic()
    assert render_pdf(state_dir / "page.html", state_dir / "page.pdf", timeout=0.5) == "chromium timed out after 0.5 s"
    assert time.monotonic() - started < 5
    assert list(state_dir.iterdir()) == []


@pytest.mark.skipif(shutil.which("chromium") is None, reason="no chromium (make venv installs Debian's)")
def test_chromium_prints_the_page_to_an_a4_pdf(
    state_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))  # where Chromium's own profile goes
    written = write_evidence(failed_drill_evidence())
    assert written["pdf_error"] is None and written["pdf"] is not None
    pdf = Path(written["pdf"]).read_bytes()
    assert pdf.startswith(b"%PDF")
    assert len(re.findall(rb"/Type\s*/Page\b", pdf)) >= 1
    assert re.search(rb"/MediaBox \[0 0 59[45]\.\d+ 84[12]\.\d+\]", pdf)  # A4: 595 x 842 points
    assert sorted(p.name for p in tmp_path.iterdir()) == ["state"]  # the profile removed
    assert len(list((state_dir / "drills").iterdir())) == 3  # json, html, pdf: no temporary file left
