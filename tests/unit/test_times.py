"""ISO-8601 times to and from epoch milliseconds (times.py): UTC when no zone is given, one line for a bad value."""

from __future__ import annotations

import time

import pytest

from kafka_dr.times import epoch_ms, iso_from_ms

NOON_MS = 1_795_608_000_000  # 2026-11-25T12:00:00Z


@pytest.mark.parametrize(
    "text",
    [
        "2026-11-25T12:00:00Z",
        "2026-11-25T12:00:00+00:00",
        "2026-11-25T13:00:00+01:00",
        "2026-11-25T12:00:00",
        "2026-11-25 12:00",
    ],
)
def test_a_time_with_or_without_zone_is_epoch_milliseconds_utc(text: str) -> None:
    assert epoch_ms(text, "at") == NOON_MS


def test_a_time_without_zone_is_utc_whatever_the_machines_zone(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TZ", "America/New_York")
    time.tzset()
    try:
        assert epoch_ms("2026-11-25T12:00:00", "at") == NOON_MS
    finally:
        monkeypatch.undo()
        time.tzset()


def test_milliseconds_are_kept() -> None:
    assert epoch_ms("2026-11-25T12:00:00.250Z", "at") == NOON_MS + 250


@pytest.mark.parametrize("text", ["yesterday", "", "2026-13-01T00:00:00Z", None])
def test_a_bad_time_is_one_line_naming_what_it_is(text) -> None:
    with pytest.raises(ValueError) as excinfo:
        epoch_ms(text, "window_start")
    assert str(excinfo.value) == f"window_start: not an ISO-8601 time: {text!r} (e.g. 2026-11-21T10:00:00Z)"


def test_epoch_milliseconds_read_back_as_utc_to_the_second() -> None:
    assert iso_from_ms(NOON_MS + 999) == "2026-11-25T12:00:00+00:00"
    assert epoch_ms(iso_from_ms(NOON_MS), "at") == NOON_MS
