"""ISO-8601 times as the Kafka protocol wants them: epoch milliseconds (UTC when no zone is given)."""

from __future__ import annotations

from datetime import UTC, datetime


def epoch_ms(text: str, what: str) -> int:
    """Epoch milliseconds of an ISO-8601 time; a bad value raises ValueError with one line naming `what`."""
    try:
        moment = datetime.fromisoformat(text)
    except (TypeError, ValueError):
        raise ValueError(f"{what}: not an ISO-8601 time: {text!r} (e.g. 2026-11-21T10:00:00Z)") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return int(moment.timestamp() * 1000)


def iso_from_ms(at_ms: int) -> str:
    """An epoch-milliseconds time as ISO-8601 UTC, to the second."""
    return datetime.fromtimestamp(at_ms / 1000, UTC).isoformat(timespec="seconds")
