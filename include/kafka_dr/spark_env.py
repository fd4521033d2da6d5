"""Run the project's PySpark jobs with the pyspark installed next to kafka_dr (local mode).

spark-submit finds its home and Python through SPARK_HOME, PATH and PYSPARK_PYTHON; a virtual
environment's pyspark needs all three pointed at it. SPARK_LOCAL_IP keeps the driver's ports on 127.0.0.1.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from .paths import SPARK_JOBS


def spark_env(base: dict[str, str] | None = None) -> dict[str, str]:
    import pyspark

    env = dict(os.environ if base is None else base)
    bin_dir = str(Path(sys.executable).parent)
    env.update(
        SPARK_HOME=str(Path(pyspark.__file__).parent),
        PYSPARK_PYTHON=sys.executable,
        PYSPARK_DRIVER_PYTHON=sys.executable,
        PATH=f"{bin_dir}{os.pathsep}{env.get('PATH', '')}",
    )
    env.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # local mode: driver and block manager listen on loopback only
    return env


def spark_submit_command(job: str, args: list[str], master: str = "local[2]") -> list[str]:
    """spark-submit for spark_jobs/<job>.py with quiet, local-friendly settings."""
    return [
        str(Path(sys.executable).parent / "spark-submit"),
        "--master",
        master,
        "--conf",
        "spark.ui.enabled=false",
        "--conf",
        "spark.ui.showConsoleProgress=false",
        str(SPARK_JOBS / f"{job}.py"),
        *args,
    ]
