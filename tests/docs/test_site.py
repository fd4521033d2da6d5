"""The documentation site builds with --strict (a broken link, a missing anchor or a page left out of the nav fails
it), and every runbook section the code names for the operator exists."""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest
import yaml
from support.docs import DOCS, ROOT, anchors, code_of, markdown_files

from kafka_dr import readiness
from kafka_dr.runbooks import RUNBOOKS_DIR
from kafka_dr.topology import parse_topology

DAG_IDS = sorted(path.stem for path in (ROOT / "dags").glob("dr_*.py"))
SOURCES = [
    *(ROOT / "include" / "kafka_dr").rglob("*.py"),
    *(ROOT / "dags").glob("*.py"),
    *(ROOT / "plugins").glob("*.py"),
]


MERMAID = DOCS / "assets" / "javascripts" / "mermaid.min.js"  # make docs and make test fetch it from npm
DRAWN = "return [...document.querySelectorAll('div.mermaid')].filter(e => e.offsetHeight > 0).length"


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The site, built once for this module's tests."""
    built = tmp_path_factory.mktemp("docs") / "site"
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(built)],
        cwd=ROOT,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},  # mkdocs-material's banner about its end of life
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return built


def test_site_builds_strictly(site: Path) -> None:
    for dag_id in DAG_IDS:
        assert (site / "runbooks" / dag_id / "index.html").exists(), dag_id


@pytest.mark.integration  # a browser
def test_the_diagrams_render_without_a_network(site: Path) -> None:
    """In an air-gapped DC the site (served by Airflow at /kafka-dr/docs/) must draw its diagrams with the Mermaid it
    carries, not one from unpkg.com: Chromium, which reaches no outside host here, renders them from file://."""
    from selenium.webdriver.support.ui import WebDriverWait
    from support.browser import chromium

    assert MERMAID.exists(), f"{MERMAID.relative_to(ROOT)} missing: make test and make docs fetch it from npm"
    diagrams = (DOCS / "architecture.md").read_text(encoding="utf-8").count("```mermaid")
    assert diagrams, "the architecture page has no diagram"
    with chromium() as driver:
        driver.get((site / "architecture" / "index.html").as_uri())
        # The theme swaps each diagram's <pre> for a <div class="mermaid"> holding the SVG in a closed shadow root:
        # drawn, it has a height. Without Mermaid it waits for unpkg.com, and no such div appears.
        WebDriverWait(driver, 30).until(lambda d: d.execute_script(DRAWN) == diagrams)


def test_every_dag_has_a_runbook() -> None:
    pages = {path.stem for path in (DOCS / "runbooks").glob("dr_*.md")}
    assert pages == set(DAG_IDS)


def _runbook_calls() -> list[tuple[str, str, str]]:
    """(where, dag_id, section) of every runbook()/see_runbook() call with literal arguments in the product code."""
    found = []
    for path in SOURCES:
        if path.name == "runbooks.py" and path.parent.name == "kafka_dr":
            continue  # the helpers themselves
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) in ("runbook", "see_runbook"):
                args = [arg.value for arg in node.args if isinstance(arg, ast.Constant)]
                assert len(args) == len(node.args), f"{path}:{node.lineno}: name the runbook with literals"
                found.append((f"{path.relative_to(ROOT)}:{node.lineno}", args[0], args[1] if len(args) > 1 else ""))
    return found


def test_the_runbook_sections_the_code_names_exist() -> None:
    calls = _runbook_calls()
    assert {dag_id for _, dag_id, _ in calls} >= {"dr_failover", "dr_failback", "dr_drill"}, "no message names a page"
    for where, dag_id, section in calls:
        page = DOCS / "runbooks" / f"{dag_id}.md"
        assert page.exists(), f"{where}: no {page.relative_to(ROOT)}"
        assert not section or section in anchors(page), f"{where}: {page.relative_to(ROOT)} has no #{section}"


def test_every_readiness_check_has_its_section() -> None:
    """A readiness finding links `docs/runbooks/readiness.md#<its check, dashed>`: built from the check's name, so
    checked here rather than by the literal runbook() calls above."""
    topology = parse_topology({"clusters": {"dc1": {"bootstrap_servers": "dc1:9092"}}})
    findings = readiness.evaluate(topology, readiness.Facts(now=datetime.now(UTC)))
    assert len(findings) == len(readiness.CHECKS)
    page, sections = (ROOT / readiness.RUNBOOK).resolve(), anchors(ROOT / readiness.RUNBOOK)
    for finding in findings:
        path, section = finding.runbook.split("#")
        assert (ROOT / path).resolve() == page and section in sections, finding.runbook


def test_every_alert_names_an_existing_page() -> None:
    rules = yaml.safe_load((ROOT / "monitoring" / "prometheus" / "rules.yml").read_text())
    alerts = [rule for group in rules["groups"] for rule in group["rules"] if "alert" in rule]
    assert alerts
    for rule in alerts:
        page = rule["annotations"].get("runbook", "")
        assert page.startswith("docs/") and (ROOT / page).is_file(), f"{rule['alert']}: runbook {page!r}"


_RUNBOOK_PATH = re.compile(re.escape(RUNBOOKS_DIR) + r"/([\w-]+)\.md(?:#([\w-]+))?")


@pytest.mark.parametrize("path", markdown_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_runbook_paths_written_out_exist(path: Path) -> None:
    """A `docs/runbooks/<dag>.md#<section>` written in a page (as the messages print it) names a real section."""
    for line in code_of(path.read_text()):
        for dag_id, section in _RUNBOOK_PATH.findall(line):
            page = DOCS / "runbooks" / f"{dag_id}.md"
            assert page.exists() and (not section or section in anchors(page)), f"{line!r}"
