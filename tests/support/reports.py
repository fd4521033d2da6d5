"""DR reports as kafka_dr's report tasks write them, for the tests of what reads them (the dashboard, the metrics,
the dr_report alert)."""

from __future__ import annotations

from typing import Any


def failover_report(rpo_records: int, rto_seconds: float, **fields: Any) -> dict[str, Any]:
    """A disaster failover dc1 -> dc2 with an estimated RPO, all of it on topic `orders`; `fields` added or
    replaced."""
    return {
        "failed_cluster": "dc1",
        "target_cluster": "dc2",
        "mode": "disaster",
        "run_started": "2026-11-24T10:00:00+00:00",
        "rpo": {"records": rpo_records, "per_topic": {"orders": rpo_records}, "exact": False, "flows": {}},
        "rto_seconds": rto_seconds,
        **fields,
    }
