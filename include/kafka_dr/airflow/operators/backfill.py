"""Backfill a window of one flow with spark_jobs/backfill.py (kafka_dr.backfill.window says what it copies)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from airflow.sdk import Context

from ...paths import SPARK_JOBS
from ...topology import load_topology
from .. import topology_path
from .spark_job import SparkJobOperator

BACKFILL_JOB = SPARK_JOBS / "backfill.py"


class BackfillOperator(SparkJobOperator):
    """Copy the window's source records the target topic lacks, then verify the window; the job's summary is the
    XCom. A window is `window_start`/`window_end` (ISO, end exclusive) or `offsets` (JSON
    {"topic:partition": [first, last]}, inclusive).

    :param flow: flow name in the topology
    :param topics: regex (full match) of the flow's source topics; default all of them
    :param target_topic: format such as "{topic}.backfill"; default the flow's rename
    :param dry_run: plan and report only
    :param topology: topology file; default $KDR_TOPOLOGY, else include/topology.yaml
    """

    template_fields: Sequence[str] = (
        "flow",
        "topology",
        "window_start",
        "window_end",
        "offsets",
        "topics",
        "target_topic",
        "dry_run",
    )
    ui_color = "#f0e6d7"

    def __init__(
        self,
        *,
        flow: str,
        window_start: str | None = None,
        window_end: str | None = None,
        offsets: str | Mapping[str, Any] | None = None,
        topics: str | None = None,
        target_topic: str | None = None,
        dry_run: bool | str = False,
        topology: str | None = None,
        application: str = str(BACKFILL_JOB),
        **kwargs: Any,
    ) -> None:
        super().__init__(application=application, **kwargs)
        self.flow = flow
        self.window_start = window_start
        self.window_end = window_end
        self.offsets = offsets
        self.topics = topics
        self.target_topic = target_topic
        self.dry_run = dry_run
        self.topology = topology

    def execute(self, context: Context) -> dict[str, Any]:
        path = topology_path(self.topology)
        topology = load_topology(path)
        flow = topology.flow(self.flow)
        args = ["--topology", str(path), "--flow", flow.name]
        for option, value in (
            ("--window-start", self.window_start),
            ("--window-end", self.window_end),
            ("--offsets", self.offsets if isinstance(self.offsets, str | None) else json.dumps(self.offsets)),
            ("--topics", self.topics),
            ("--target-topic", self.target_topic),
        ):
            if value:
                args.append(f"{option}={value}")
        dry_run = self.dry_run is True or str(self.dry_run).lower() == "true"  # rendered from a template
        if dry_run:
            args.append("--dry-run")
        env = self.cluster_access(topology).child_environ((flow.source, flow.target))
        summary = self.run_job(f"kdr-backfill-{flow.name}", args, env, f"flow {flow.name}: backfill")
        for gone in summary.get("unavailable", []):
            self.log.warning(
                "%s[%s]: offsets %s-%s deleted by retention at the source before the backfill",
                gone["topic"],
                gone["partition"],
                "?" if gone["from_offset"] is None else gone["from_offset"],
                gone["to_offset"],
            )
        self.log.info(
            "flow %s backfill: %s copied, %s already present%s",
            flow.name,
            summary.get("copied"),
            summary.get("already_present"),
            " (dry run)" if dry_run else "",
        )
        return summary
