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
