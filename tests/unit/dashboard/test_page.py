"""The dashboard page's parts that take no state: the lag chart of a flow's history."""

from __future__ import annotations

from kafka_dr.dashboard.page import lag_chart


def test_lag_chart_is_inline_svg_with_escaped_tooltips() -> None:
    chart = lag_chart(
        [
            {"at_ms": 1000, "status": "OK", "problems": [], "lag_records": 0, "lag_seconds": 0.0},
            {"at_ms": 2000, "status": "WARN", "problems": ["<b>"], "lag_records": 1200, "lag_seconds": 3.0},
            {"at_ms": 3000, "status": "ERR", "problems": ["dc1 down"], "lag_records": None, "lag_seconds": None},
        ]
    )
    assert chart.startswith("<svg") and chart.count("<circle") == 2 and chart.count("<rect") == 1
    assert "<polyline" in chart and "1,200" in chart and "&lt;b&gt;" in chart and "<b>" not in chart
