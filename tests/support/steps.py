"""The run start and step times of a DAG run, as its tasks record them: for the report tests of each phase."""

from __future__ import annotations

from datetime import UTC, datetime

RUN_START = datetime(2026, 3, 1, 10, 0, 0, tzinfo=UTC)


def at(seconds: float) -> str:
    """A step time as the tasks record it (UTC ISO with milliseconds), `seconds` after the run started."""
    return datetime.fromtimestamp(RUN_START.timestamp() + seconds, UTC).isoformat(timespec="milliseconds")
