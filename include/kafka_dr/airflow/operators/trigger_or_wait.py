"""TriggerOrWaitDagRunOperator: Airflow's TriggerDagRunOperator whose task, run again after it triggered its run (a
retry, a Clear), waits for that run instead of ending at once."""

from __future__ import annotations

import time
from typing import Any

from airflow.providers.standard.operators.trigger_dagrun import TriggerDagRunOperator
from airflow.sdk import Context
from airflow.sdk.exceptions import AirflowException


class TriggerOrWaitDagRunOperator(TriggerDagRunOperator):
    """Triggers `trigger_dag_id` as run `trigger_run_id` and waits for it, polling every `poke_interval` s. Airflow
    3.3's own operator fails on a run id that exists, or with `skip_when_already_exists` ends skipped without waiting:
    a cleared drill's `failover` would then let the drill go on while its failover still ran."""

    def execute(self, context: Context) -> Any:
        ti = context["ti"]
        if not ti.get_dr_count(dag_id=self.trigger_dag_id, run_ids=[self.trigger_run_id]):
            return super().execute(context)
        ti.xcom_push(key="trigger_run_id", value=self.trigger_run_id)  # the task's link to the run, as a trigger's
        self.log.info("%s run %s exists (an earlier try triggered it): waiting for it", self.trigger_dag_id,
                      self.trigger_run_id)  # fmt: skip
        while True:
            state = ti.get_dagrun_state(dag_id=self.trigger_dag_id, run_id=self.trigger_run_id)
            if state in self.failed_states:
                raise AirflowException(f"{self.trigger_dag_id} run {self.trigger_run_id} ended {state}")
            if state in self.allowed_states:
                self.log.info("%s run %s ended %s", self.trigger_dag_id, self.trigger_run_id, state)
                return None
            time.sleep(self.poke_interval)
