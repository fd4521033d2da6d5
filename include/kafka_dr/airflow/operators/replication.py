"""Run the replication job of one flow through the apache-spark provider.

bounded: spark-submit runs `spark_jobs/replicate.py --mode bounded` to the end; its JSON summary is the
task's XCom. continuous: the same spark-submit command line (master, deploy mode and conf from the Spark
connection) is started detached and registered with kafka_dr.replication.replicators, so it outlives the
task and later DAGs can stop or restart it; a flow already running is not started twice.

Cluster security settings reach the job through its environment (KDR_CLUSTER_<NAME>_CONFIG), never its
command line.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

from airflow.sdk import Context
from airflow.sdk.exceptions import AirflowException
from confluent_kafka import KafkaException

from ... import processes
from ...clients import error_text
from ...paths import SPARK_JOBS
from ...replication import activity, replicators
from ...replication.liveness import liveness
from ...state import state_dir
from ...topology import load_topology
from .. import topology_path
from ..hooks.spark_submit import submit_command
from .spark_job import SparkJobOperator, force_args

MODES = ("bounded", "continuous")
EXIT_WAIT_S = 10.0  # a replicator that failed at start: from its last owner record to its exit, its reason logged
REPLICATE_JOB = SPARK_JOBS / "replicate.py"


class ReplicationOperator(SparkJobOperator):
    """Replicate one flow of the topology with spark_jobs/replicate.py (bounded run or continuous job).

    :param flow: flow name in the topology
    :param mode: "bounded" (copy up to the end offsets taken at start) or "continuous" (start and track)
    :param topology: topology file; default $KDR_TOPOLOGY, else include/topology.yaml
    :param spark_conn_id: Spark connection giving master and deploy mode
    :param kafka_conn_ids: cluster name -> connection id, for clusters not using `kafka_dr_<cluster>`
    :param application: the replicate job (a path or URL the Spark master can read)
    :param conf: extra Spark configuration
    :param py_files: --py-files; by default the kafka_dr package on a cluster master, nothing in local mode
    :param startup_timeout: continuous mode: seconds a started job has to claim its flow in the target (its first
        epoch began) before the task fails; the task succeeds as soon as it has
    :param force: filter override of a failback restore, {"cluster", "topic", "from", "to"} (regexes, ISO times):
        copy the records the cycle rule refuses because of a provenance entry matching it
    :param until_quiet: bounded mode: once at the ends taken at start, copy again what arrived meanwhile until this
        many seconds pass with nothing new (a catch-up after producers moved away from the source)
    """

    template_fields: Sequence[str] = ("flow", "topology")
    ui_color = "#d7e8f7"

    def __init__(
        self,
        *,
        flow: str,
        mode: str = "bounded",
        topology: str | None = None,
        application: str = str(REPLICATE_JOB),
        startup_timeout: float = 180.0,
        force: Mapping[str, str | None] | None = None,
        until_quiet: float = 0.0,
        **kwargs: Any,
    ) -> None:
        super().__init__(application=application, **kwargs)
        if mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
        self.flow = flow
        self.mode = mode
        self.topology = topology
        self.startup_timeout = startup_timeout
        self.force = dict(force or {})
        self.until_quiet = until_quiet

    def execute(self, context: Context) -> dict[str, Any]:
        path = topology_path(self.topology)
        topology = load_topology(path)
        flow = topology.flow(self.flow)
        access = self.cluster_access(topology)
        env = access.child_environ((flow.source, flow.target))
        args = ["--topology", str(path), "--flow", flow.name, "--mode", self.mode, *force_args(self.force)]
        if self.mode == "bounded":
            if self.until_quiet:
                args += ["--until-quiet", str(self.until_quiet)]
            return self._run_bounded(args, env)
        return self._start_continuous(args, env, access.config(flow.target))

    def _run_bounded(self, args: list[str], env: dict[str, str]) -> dict[str, Any]:
        summary = self.run_job(f"kdr-replicate-{self.flow}", args, env, f"flow {self.flow}: bounded replication")
        if summary.get("lost"):
            self.log.warning(
                "flow %s: %s source records were deleted by retention before they were copied: %s",
                self.flow,
                summary["lost"],
                summary.get("lost_ranges"),
            )
        self.log.info(
            "flow %s: copied %s records (%s bytes, %s filtered) in %s s",
            self.flow,
            summary.get("records"),
            summary.get("bytes"),
            summary.get("filtered"),
            summary.get("seconds"),
        )
        return summary

    def _start_continuous(self, args: list[str], env: dict[str, str], target_config: dict[str, Any]) -> dict[str, Any]:
        report = state_dir() / "replicators" / f"{self.flow}.summary.json"
        hook = self.spark_hook(f"kdr-replicate-{self.flow}", [*args, "--report", str(report)])
        command = submit_command(hook, self.application)
        try:
            since = activity.progress_end(target_config)  # its claim will be appended after this
            tracked = replicators.status(self.flow)
            # Started by another worker (another host, PID namespace, container): its target says whether it runs.
            if tracked is not None and not tracked.here and liveness(self.flow, target_config).running:
                elsewhere = tracked
            else:
                elsewhere = None
        except KafkaException as exc:
            raise AirflowException(f"flow {self.flow}: its target does not answer: {error_text(exc)}") from None
        if elsewhere is not None:
            self.log.info("flow %s: replicator already running on %s; not started again", self.flow, elsewhere.host)
            return {
                "flow": self.flow,
                "pid": elsewhere.pid,
                "log": elsewhere.log,
                "started_at": elsewhere.started_at,
                "started": False,
            }
        replicator, started = replicators.start(self.flow, command, env)
        if not started:
            self.log.info(
                "flow %s: replicator already running (pid %s since %s); not started again",
                self.flow,
                replicator.pid,
                replicator.started_at,
            )
            if list(replicator.command) != command:
                self.log.warning(
                    "flow %s: the running replicator has another command line; stop it to apply "
                    "the new settings (it runs: %s)",
                    self.flow,
                    " ".join(replicator.command[-8:]),
                )
        else:
            self.log.info("flow %s: replicator started (pid %s), log %s", self.flow, replicator.pid, replicator.log)
            self._wait_for_claim(replicator, target_config, since)
        return {
            "flow": self.flow,
            "pid": replicator.pid,
            "log": replicator.log,
            "started_at": replicator.started_at,
            "started": started,
        }

    def _wait_for_claim(
        self, replicator: replicators.ReplicatorProcess, target_config: dict[str, Any], since: int
    ) -> None:
        """Until the started job claims its flow in the target; its own error if it exits first."""
        started = time.monotonic()
        try:
            claimed = activity.wait_for_claim(
                target_config, self.flow, since, lambda: replicators.is_running(self.flow), self.startup_timeout
            )
        except TimeoutError:
            raise AirflowException(
                f"flow {self.flow}: replicator (pid {replicator.pid}) did not begin copying within "
                f"{self.startup_timeout:g} s; see {replicator.log}"
            ) from None
        if not claimed:
            # Its last owner record comes just before it prints why and exits: the reason is in the log once it ends.
            processes.wait_gone(processes.tree(replicator.pid), EXIT_WAIT_S)
            raise AirflowException(
                f"flow {self.flow}: replicator exited during startup: "
                f"{replicators.last_error(self.flow)}; see {replicator.log}"
            )
        self.log.info(
            "flow %s: replicator copying (claimed the flow after %.1f s)", self.flow, time.monotonic() - started
        )
