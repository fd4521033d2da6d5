"""Where kafka-dr's files are: the project root, the default topology, the run state, the local stack's data.

Worked out here only, from this file's place in the checkout (include/kafka_dr/paths.py), so that the
DAGs, the Spark jobs, the CLI and the tests agree on them whatever their working directory.
"""

from __future__ import annotations

import os
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_TOPOLOGY = PROJECT_ROOT / "include" / "topology.yaml"
SPARK_JOBS = PROJECT_ROOT / "spark_jobs"
DOCS_SITE = PROJECT_ROOT / "site"  # mkdocs.yml's site_dir: where `make docs` builds the documentation site
TOPOLOGY_ENV = "KDR_TOPOLOGY"
STATE_DIR_ENV = "KDR_STATE_DIR"
_STATE_DIR_NAME = ".kafka-dr"
# Relative on purpose: `kafka-dr-dev local` works on the stack of the terminal's working directory (run from the
# project root, that is the state dir's folder).
LOCAL_DATA_DIR = Path(_STATE_DIR_NAME)


def default_topology() -> Path:
    """The topology file where none is named: $KDR_TOPOLOGY (a deployment's own file), else DEFAULT_TOPOLOGY."""
    return Path(os.environ.get(TOPOLOGY_ENV) or DEFAULT_TOPOLOGY)


def state_dir() -> Path:
    """Root of kafka-dr's run state: $KDR_STATE_DIR, else <project>/.kafka-dr. Read at each call, so a test or
    a deployment can point it elsewhere after import."""
    return Path(os.environ.get(STATE_DIR_ENV) or PROJECT_ROOT / _STATE_DIR_NAME).absolute()
