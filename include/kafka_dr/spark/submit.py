"""spark-submit for the project's PySpark jobs: its command, and its environment, with the pyspark installed next to
kafka_dr.

spark-submit finds its home and Python through SPARK_HOME, PATH and PYSPARK_PYTHON; a virtual
environment's pyspark needs all three pointed at it. SPARK_LOCAL_IP keeps the driver's ports on 127.0.0.1.

On a cluster master (anything but local[...]) the executors are other processes, maybe on other hosts, whose
Python has the jobs' dependencies but not kafka_dr: `package_zip` is the package as --py-files, which Spark puts
on the executors' path, so they import the very code the driver runs.
"""

from __future__ import annotations

import hashlib
import os
import sys
import zipfile
from collections.abc import Mapping
from pathlib import Path

from ..paths import SPARK_JOBS
from ..state import subdir
from .driver_jvm import with_driver_jvm

PACKAGE_DIR = Path(__file__).resolve().parents[1]  # kafka_dr/, whose files the zip holds


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


def is_local(master: str) -> bool:
    """A local[...] master: the executors are threads of the driver, which imports kafka_dr itself."""
    return master == "local" or master.startswith("local[")


def package_zip() -> Path:
    """kafka_dr's Python files as a zip for --py-files: STATE_DIR/spark/kafka_dr-<content hash>.zip, made once
    per content (a changed package gets a new file; jobs already running keep theirs)."""
    sources = sorted(p for p in PACKAGE_DIR.rglob("*.py") if "__pycache__" not in p.parts)
    digest = hashlib.sha256()
    for path in sources:
        digest.update(str(path.relative_to(PACKAGE_DIR)).encode() + b"\0" + path.read_bytes() + b"\0")
    target = subdir("spark") / f"kafka_dr-{digest.hexdigest()[:16]}.zip"
    if not target.exists():
        partial = target.with_suffix(f".{os.getpid()}.tmp")
        with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as archive:
            for path in sources:
                archive.write(path, Path("kafka_dr") / path.relative_to(PACKAGE_DIR))
        partial.replace(target)  # atomic: a concurrent job reads a whole zip or makes its own
    return target


def spark_submit_command(
    job: str, args: list[str], master: str = "local[2]", conf: Mapping[str, str] | None = None
) -> list[str]:
    """spark-submit for spark_jobs/<job>.py with quiet settings and `conf`; the package as --py-files on a cluster
    master."""
    return submit_command(SPARK_JOBS / f"{job}.py", args, master, conf)


def submit_command(
    application: Path, args: list[str], master: str = "local[2]", conf: Mapping[str, str] | None = None
) -> list[str]:
    """spark-submit for any Python application (spark_submit_command's, for files outside spark_jobs/)."""
    settings = with_driver_jvm({"spark.ui.enabled": "false", "spark.ui.showConsoleProgress": "false", **(conf or {})})
    return [
        str(Path(sys.executable).parent / "spark-submit"),
        "--master",
        master,
        *[part for key, value in settings.items() for part in ("--conf", f"{key}={value}")],
        *([] if is_local(master) else ["--py-files", str(package_zip())]),
        str(application),
        *args,
    ]
