"""Verify one flow with spark_jobs/verify.py: every source record it must copy is in its destination exactly once."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from airflow.sdk import Context

from ...paths import SPARK_JOBS
from ...topology import load_topology
from .. import topology_path
from .spark_job import SparkJobOperator, force_args

VERIFY_JOB = SPARK_JOBS / "verify.py"


class VerifyFlowOperator(SparkJobOperator):
    """The flow's verification; a missing, duplicated or changed record fails the task with the counts and the
    first offsets, and the job's summary is the XCom.

    :param flow: flow name in the topology
    :param topology: topology file; default $KDR_TOPOLOGY, else include/topology.yaml
    :param skip: source ranges the flow was moved past on purpose, "topic:partition:first-last" (inclusive)
    :param settle: seconds a running replicator has to copy records before they count as missing
    :param force: the filter override the flow was copied with (ReplicationOperator's)
    """

    template_fields: Sequence[str] = ("flow", "topology")
    ui_color = "#e0f0e0"

    def __init__(
        self,
        *,
        flow: str,
        topology: str | None = None,
        skip: Sequence[str] = (),
        settle: float = 0.0,
        force: Mapping[str, str | None] | None = None,
        application: str = str(VERIFY_JOB),
        **kwargs: Any,
    ) -> None:
        super().__init__(application=application, **kwargs)
        self.flow = flow
        self.topology = topology
        self.skip = list(skip)
        self.settle = settle
        self.force = dict(force or {})

    def execute(self, context: Context) -> dict[str, Any]:
        path = topology_path(self.topology)
        topology = load_topology(path)
        flow = topology.flow(self.flow)
        env = self.cluster_access(topology).child_environ((flow.source, flow.target))
        args = ["--topology", str(path), "--flow", flow.name, "--settle", str(self.settle), *force_args(self.force)]
        args += [f"--skip={one}" for one in self.skip]
        summary = self.run_job(f"kdr-verify-{flow.name}", args, env, f"flow {flow.name}: verify")
        self.log.info(
            "flow %s verified: %s records expected, %s copied once, %s filtered by the cycle rule, %s skipped",
            flow.name,
            summary.get("expected"),
            summary.get("copied"),
            summary.get("filtered"),
            summary.get("skipped"),
        )
        return summary
