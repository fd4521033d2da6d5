"""Translate (and optionally apply) the consumer-group offsets of one flow with spark_jobs/translate_offsets.py."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from airflow.sdk import Context

from ...paths import SPARK_JOBS
from ...topology import load_topology
from ...translation.summary import for_xcom
from .. import topology_path
from ..common import timed
from .spark_job import SparkJobOperator

TRANSLATE_JOB = SPARK_JOBS / "translate_offsets.py"


class TranslateOffsetsOperator(SparkJobOperator):
    """Translate the flow's group offsets into its target; the job's summary is the XCom.

    :param flow: flow name in the topology
    :param groups: only groups fully matching this regex (within the flow's groups filter)
    :param apply: commit the offsets to target groups without active members
    :param from_checkpoints: the source is gone: use the checkpoints kept in the target
    :param reset_to_datetime: ISO-8601 time: commit the offsets of that time instead
    :param unseen_from: {"topic:partition": offset} of the target from which records that are not copies were never
        seen by the source's groups (dr_failback's restored cluster); groups resume no later than the first
    :param topology: topology file; default $KDR_TOPOLOGY, else include/topology.yaml
    :param kafka_conn_ids: cluster name -> connection id, for clusters not using `kafka_dr_<cluster>`
    """

    template_fields: Sequence[str] = ("flow", "groups", "topology", "reset_to_datetime")
    ui_color = "#e8f0d7"

    def __init__(
        self,
        *,
        flow: str,
        groups: str | None = None,
        apply: bool = False,
        from_checkpoints: bool = False,
        reset_to_datetime: str | None = None,
        unseen_from: dict[str, int] | None = None,
        topology: str | None = None,
        application: str = str(TRANSLATE_JOB),
        **kwargs: Any,
    ) -> None:
        super().__init__(application=application, **kwargs)
        self.flow = flow
        self.groups = groups
        self.apply = apply
        self.from_checkpoints = from_checkpoints
        self.reset_to_datetime = reset_to_datetime
        self.unseen_from = unseen_from
        self.topology = topology

    @timed  # the step's start and end for the failover and failback reports, subprocess start included
    def execute(self, context: Context) -> dict[str, Any]:
        path = topology_path(self.topology)
        topology = load_topology(path)
        flow = topology.flow(self.flow)
        env = self.cluster_access(topology).child_environ(
            (flow.target,) if self.from_checkpoints else (flow.source, flow.target)
        )
        args = ["--topology", str(path), "--flow", flow.name]
        if self.groups:
            args += ["--groups", self.groups]
        if self.apply:
            args.append("--apply")
        if self.from_checkpoints:
            args.append("--from-checkpoints")
        if self.reset_to_datetime:
            args += ["--reset-to-datetime", self.reset_to_datetime]
        if self.unseen_from:
            args += ["--unseen-from", json.dumps(self.unseen_from)]
        what = f"flow {flow.name}: offset translation"
        if self.from_checkpoints:
            # Read from the target's checkpoints, translated already: the job starts no Spark context.
            summary = self.run_in_python(args, env, what)
        else:
            summary = self.run_job(f"kdr-translate-{flow.name}", args, env, what)
        self.log.info(
            "flow %s: %s groups, %s group-partitions translated from %s; applied %s, skipped %s",
            flow.name,
            summary.get("group_count"),
            summary.get("partition_count"),
            summary.get("origin"),
            len(summary.get("applied", [])),
            len(summary.get("skipped", [])),
        )
        for skipped in summary.get("skipped", []):
            self.log.warning("group %s left alone: %s", skipped["group"], skipped["reason"])
        return for_xcom(summary)
