"""How a job's Spark driver (session.py) and its local worker daemon (daemon.py) import pyspark: from its installed
files, not from the zip Spark puts first on their path."""

from __future__ import annotations

import sys
from pathlib import Path


def prefer_installed_pyspark(path: list[str] = sys.path) -> None:  # noqa: B006 - the interpreter's own list
    """Import pyspark from its installed files rather than from the pyspark.zip that Spark puts first on the Python
    path of its driver and workers, when that zip is the installed package's own copy (SPARK_HOME is a pip-installed
    pyspark, submit.spark_env): the same files, but zipimport compiles them at every import, about 0.5 s of each job's
    driver and of its worker daemon. A Spark distribution's zip (another SPARK_HOME) is left where it is."""
    for entry in list(path):
        zip_path = Path(entry)
        home = zip_path.parents[2] if len(zip_path.parents) > 2 else None
        if (
            zip_path.name == "pyspark.zip"
            and home is not None
            and home.name == "pyspark"
            and (home / "__init__.py").exists()
            and str(home.parent) in path
        ):
            path.remove(entry)
