"""The only code that relies on private parts of the apache-spark provider's SparkSubmitHook, which has no
public way to get either: the command line it builds (continuous replicators run it detached, outliving the
task) and the spark-submit process it keeps (whose exit code tells a failed job from bad input).
tests/airflow/test_spark_submit_adapter.py fails, naming the part, when a provider release changes them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the provider's module imports requests: about 60 ms of every task process that parses a DAG file
    from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook


def submit_command(hook: SparkSubmitHook, application: str) -> list[str]:
    """The spark-submit command `hook.submit(application)` would run: master, deploy mode and conf from the
    Spark connection, then the application and its arguments."""
    return hook._build_spark_submit_command(application)


def master(hook: SparkSubmitHook) -> str:
    """The master the hook submits to, as its command line says it (no public attribute has it)."""
    command = submit_command(hook, "")
    return command[command.index("--master") + 1] if "--master" in command else "(none)"


def exit_code(hook: SparkSubmitHook) -> int | None:
    """spark-submit's exit code once `hook.submit` returned or raised (None before): the provider's exception
    only has it inside its message, its Popen keeps it."""
    process = getattr(hook, "_submit_sp", None)
    return process.returncode if process is not None else None
