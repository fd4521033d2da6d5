"""How every Spark job of kafka-dr ends (DESIGN.md's CLI contract): the error, if any, as one line on
standard error; the JSON summary as the last line of standard output and, with --report, in that file."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any


def emit_summary(job: str, summary: dict[str, Any], report: Path | None) -> None:
    if summary.get("error"):
        print(f"{job}: error: {summary['error']}", file=sys.stderr, flush=True)
    line = json.dumps(summary)
    if report:
        report.parent.mkdir(parents=True, exist_ok=True)
        report.write_text(line + "\n")
    print(line, flush=True)


def task_error(exc: BaseException, raised_in_tasks: tuple[str, ...]) -> str:
    """The one line that matters from a Spark job failure: the message of the first of the Python exceptions
    the tasks raise (`raised_in_tasks`, class names) found in the Java-wrapped text, else its first line."""
    text = str(exc)
    for name in raised_in_tasks:
        marker = f"{name}: "
        if marker in text:
            return text.split(marker, 1)[1].splitlines()[0]
    return text.splitlines()[0] if text else type(exc).__name__
