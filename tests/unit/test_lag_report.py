"""`kafka-dr lag`'s table of hand-built lag readings: estimates marked, heartbeat latency per flow."""

from __future__ import annotations

from support.lag import IDLE, P0, P1, lag_of

from kafka_dr.lag_report import render_table


def test_table_marks_estimates_and_reports_heartbeat() -> None:
    lines = render_table([lag_of(P0, P1), lag_of(IDLE, heartbeat=None)]).splitlines()
    assert lines[0].split() == [
        "FLOW",
        "TOPIC",
        "PARTITION",
        "DEST",
        "TOPIC",
        "NEXT",
        "END",
        "LAG",
        "RECORDS",
        "LAG",
        "SECONDS",
    ]
    assert lines[1].split() == ["dc1-to-dc2", "topic1", "0", "topic1", "100", "150", "40", "3.500"]
    assert lines[2].split() == ["dc1-to-dc2", "topic2", "3", "topic2.replica", "0", "90000", "~90000", "12.250"]
    assert lines[4] == (
        "flow dc1-to-dc2 (dc1 -> dc2): 2 partitions, 90040 records behind, oldest uncopied 12.250 s, "
        "heartbeat latency 0.250 s"
    )
    assert lines[5].endswith("heartbeat latency no heartbeat copied yet")
