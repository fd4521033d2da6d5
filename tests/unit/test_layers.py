"""The layers of kafka_dr, checked by the suite: the import-linter contracts in pyproject.toml ([tool.importlinter]: no
Airflow import in the core, no product module importing the embedded stack, the Spark plumbing above the core, no
circle between sibling packages or modules at any depth), and no import circle between any two modules, a package's
__init__ and its own modules included (the sibling contract does not look there). Imports inside functions and under
TYPE_CHECKING count: they are circles all the same, only hidden."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import grimp
import pytest

import kafka_dr
from kafka_dr.paths import PROJECT_ROOT

# The package these tests import, wherever it is (a worktree on PYTHONPATH beats the editable install).
INCLUDE = Path(kafka_dr.__file__).resolve().parents[1]


def test_the_import_contracts_hold() -> None:
    lint_imports = Path(sys.executable).parent / "lint-imports"
    done = subprocess.run(
        [str(lint_imports), "--no-cache", "--no-logo", "--config", str(PROJECT_ROOT / "pyproject.toml")],
        env={
            **os.environ,
            "PYTHONPATH": os.pathsep.join(filter(None, [str(INCLUDE), os.environ.get("PYTHONPATH")])),
            "COLUMNS": "200",  # a contract's name and a violation on one line each
        },
        capture_output=True,
        text=True,
        timeout=120,
    )
    if done.returncode != 0:
        pytest.fail(f"lint-imports exited {done.returncode}:\n{done.stdout}{done.stderr}", pytrace=False)


def import_circles(package: str) -> list[str]:
    """Each import circle between the modules of `package` as its chain, `a -> b -> a`, starting at its first module
    in name order (so a circle is listed once, whichever of its imports found it)."""
    graph = grimp.build_graph(package, cache_dir=None)
    circles = set()
    for module in graph.modules:
        for imported in graph.find_modules_directly_imported_by(module):
            back = graph.find_shortest_chain(importer=imported, imported=module)
            if back is not None:
                members = (module, *back[:-1])  # module -> imported -> ... -> (module)
                first = members.index(min(members))
                circle = members[first:] + members[:first]
                circles.add(" -> ".join((*circle, circle[0])))
    return sorted(circles)


def test_no_module_is_in_an_import_circle() -> None:
    circles = import_circles("kafka_dr")
    assert not circles, "import circles in kafka_dr:\n" + "\n".join(circles)
