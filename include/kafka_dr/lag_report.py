"""`kafka-dr lag`: replication lag of each flow as a table, or JSON for scripts.

One unreachable cluster must not hide the lag of the other flows: each flow is measured on its own, a
failure is one line on stderr, and the exit code (1) reports it at the end.
"""

from __future__ import annotations

import json
import sys
from typing import TextIO

from .access import ClusterAccess
from .replication.lag import FlowLag, LagError, flow_lag

HEADER = ("FLOW", "TOPIC", "PARTITION", "DEST TOPIC", "NEXT", "END", "LAG RECORDS", "LAG SECONDS")


def lag_report(
    access: ClusterAccess,
    flow_name: str | None = None,
    *,
    as_json: bool = False,
    timeout: float = 10.0,
    out: TextIO | None = None,
    err: TextIO | None = None,
) -> int:
    """Print the lag of `flow_name` (None: every flow); returns the exit code."""
    out, err = out or sys.stdout, err or sys.stderr
    topology = access.topology
    names = [topology.flow(flow_name).name] if flow_name else [f.name for f in topology.flows]
    results: list[FlowLag] = []
    failed = False
    for name in names:
        try:
            results.append(flow_lag(access, name, timeout=timeout))
        except LagError as exc:
            print(f"kafka-dr: error: {exc}", file=err)
            failed = True
    if as_json:
        print(json.dumps([lag.to_json() for lag in results], indent=2), file=out)
    elif results:
        print(render_table(results), file=out)
    return 1 if failed else 0


def render_table(results: list[FlowLag]) -> str:
    """Aligned table, one row per source partition ("~" marks an estimated count), then a line per flow."""
    rows = [HEADER]
    for lag in results:
        for p in lag.partitions:
            records = f"~{p.lag_records}" if p.estimated else str(p.lag_records)
            rows.append(
                (
                    lag.flow,
                    p.topic,
                    str(p.partition),
                    p.dest_topic,
                    str(p.next_offset),
                    str(p.end_offset),
                    records,
                    f"{p.lag_seconds:.3f}",
                )
            )
    numeric = {2, 4, 5, 6, 7}
    widths = [max(len(row[i]) for row in rows) for i in range(len(HEADER))]
    lines = [
        "  ".join(
            cell.rjust(w) if i in numeric else cell.ljust(w)
            for i, (cell, w) in enumerate(zip(row, widths, strict=True))
        ).rstrip()
        for row in rows
    ]
    for lag in results:
        latency = "no heartbeat copied yet" if lag.heartbeat_latency_s is None else f"{lag.heartbeat_latency_s:.3f} s"
        lines.append(
            f"flow {lag.flow} ({lag.source} -> {lag.target}): {len(lag.partitions)} partitions, "
            f"{lag.total_records} records behind, oldest uncopied {lag.max_seconds:.3f} s, "
            f"heartbeat latency {latency}"
        )
    return "\n".join(lines)
