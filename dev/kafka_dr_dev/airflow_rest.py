"""Airflow's public REST API (v2) as a user drives it: log in, trigger a DAG run with params, follow it to its end.

The demo triggers every DR step this way, as an operator's script would. Standard library only: no Airflow import,
so it runs anywhere that reaches the api-server. The token comes from `/auth/token` (Airflow's SimpleAuthManager
and FAB both serve it); the password is never printed.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

ENDED = ("success", "failed")
BUSY_RETRIES = 3
BUSY_BACKOFF_S = 2.0  # seconds before the first retry, doubled each time
ANSWER_SETTLE_S = 5.0  # a scripted answer to a task awaiting input waits this long (AirflowRest.answer)
POLL_S = 1.0  # between two looks at a run that is waited for: a run's end is seen half a second after it, on average


class AirflowRestError(RuntimeError):
    """A call the api-server refused or did not answer; one line with the method, path and reason."""


class AirflowRest:
    def __init__(self, url: str, username: str, password: str, timeout: float = 30.0) -> None:
        self.url = url.rstrip("/")
        self._credentials = {"username": username, "password": password}
        self.timeout = timeout
        self._token: str | None = None

    def call(self, method: str, path: str, body: Any = None) -> Any:
        """One API call with the bearer token (logging in first, and once more when the token has expired). A
        busy api-server (HTTP 5xx, no answer in time: a metadata DB on SQLite answers "database is locked" while
        another component writes) is asked again, BUSY_RETRIES times at most: callers make their calls
        repeatable (`trigger` names its run)."""
        expired_once = False
        for attempt in range(BUSY_RETRIES + 1):
            try:
                if self._token is None:
                    self._token = self._post_json("/auth/token", self._credentials, {})["access_token"]
                return self._request(method, path, body, {"Authorization": f"Bearer {self._token}"})
            except urllib.error.HTTPError as exc:
                if exc.code == 401 and not expired_once:
                    self._token, expired_once = None, True
                    continue
                if exc.code < 500 or attempt == BUSY_RETRIES:
                    raise AirflowRestError(f"{method} {path}: HTTP {exc.code} {_detail(exc)}") from None
            except _NoAnswer as exc:
                if attempt == BUSY_RETRIES:
                    raise AirflowRestError(f"{method} {path}: {self.url} does not answer ({exc})") from None
            time.sleep(BUSY_BACKOFF_S * 2**attempt)
        raise AssertionError("unreachable")

    def trigger(self, dag_id: str, conf: dict[str, Any]) -> dict[str, Any]:
        """A manual run of `dag_id` with `conf` as its params, now; returns the run (`dag_run_id`, `triggered_by`
        "rest_api", ...). The run id is chosen here, so a call asked again after no answer finds the run the first
        one made (HTTP 409) instead of making a second."""
        run_id = f"manual__{datetime.now(UTC).isoformat()}_{uuid.uuid4().hex[:6]}"
        body = {"dag_run_id": run_id, "logical_date": None, "conf": conf}
        try:
            return self.call("POST", f"/api/v2/dags/{dag_id}/dagRuns", body)
        except AirflowRestError as exc:
            if "HTTP 409" not in str(exc):
                raise
            return self.dag_run(dag_id, run_id)

    def runs(self, dag_id: str) -> list[dict[str, Any]]:
        """The DAG's newest runs, newest first."""
        return self.call("GET", f"/api/v2/dags/{dag_id}/dagRuns?order_by=-run_after&limit=100")["dag_runs"]

    def dag_run(self, dag_id: str, run_id: str) -> dict[str, Any]:
        return self.call("GET", f"/api/v2/dags/{dag_id}/dagRuns/{urllib.parse.quote(run_id, safe='')}")

    def task_instances(self, dag_id: str, run_id: str) -> list[dict[str, Any]]:
        quoted = urllib.parse.quote(run_id, safe="")
        return self.call("GET", f"/api/v2/dags/{dag_id}/dagRuns/{quoted}/taskInstances?limit=1000")["task_instances"]

    def answer(self, dag_id: str, run_id: str, task_id: str, option: str, map_index: int = -1) -> dict[str, Any]:
        """Answer a human-in-the-loop task as this user (`Approve` or `Reject` for an approval); returns what Airflow
        recorded (`responded_by` {"id", "name"}, `responded_at`, ...). HTTP 403 when the task does not name this user.

        Waits ANSWER_SETTLE_S first: an answer within a second of the task's parking in `awaiting_input` resumes it
        before the executor has reported the parking run's end, and Airflow 3.3's scheduler then takes that report
        for a queued task's and marks it failed (seen on the local stack). A person is never that quick; a script
        is."""
        time.sleep(ANSWER_SETTLE_S)
        quoted = urllib.parse.quote(run_id, safe="")
        path = f"/api/v2/dags/{dag_id}/dagRuns/{quoted}/taskInstances/{task_id}/{map_index}/hitlDetails"
        return self.call("PATCH", path, {"chosen_options": [option], "params_input": {}})

    def clear_failed(self, dag_id: str, run_id: str, note: str) -> list[str]:
        """Resume a run that failed part-way (a task killed, its worker lost): its failed and upstream-failed tasks
        cleared, as the UI's Clear does, so the scheduler runs them again and the run goes on; `note` is kept on the
        cleared task instances. Every task of the DR DAGs may run again (each leaves what an earlier try did as it
        was). Returns the cleared task instances as `task_id` or `task_id[map_index]`."""
        body = {
            "dry_run": False,
            "dag_run_id": run_id,
            "only_failed": True,
            "include_downstream": True,
            "reset_dag_runs": True,
            "note": note,
        }
        cleared = self.call("POST", f"/api/v2/dags/{dag_id}/clearTaskInstances", body)["task_instances"]
        return [t["task_id"] + (f"[{t['map_index']}]" if t.get("map_index", -1) >= 0 else "") for t in cleared]

    def wait(
        self,
        dag_id: str,
        run_id: str,
        timeout: float,
        progress: Callable[[str], None] | None = None,
        awaiting_input: Callable[[str, str, str], None] | None = None,
        related: Sequence[tuple[str, str]] = (),
        poll_s: float = POLL_S,
    ) -> dict[str, Any]:
        """Poll the run until it ends (or `timeout` seconds); each task's change of state goes to `progress` as
        one line, and (dag id, run id, task id) of a task that starts to await a person's input to `awaiting_input`.
        The `related` runs' tasks (a drill's failover and failback, by their known run ids) are followed the same
        way once they exist. `poll_s`: between two looks. Returns the run as the API last described it."""
        deadline = time.monotonic() + timeout
        seen: dict[tuple[str, str, str], str] = {}
        while True:
            run = self.dag_run(dag_id, run_id)
            if progress is not None or awaiting_input is not None:
                for watched_dag, watched_run in ((dag_id, run_id), *related):
                    try:
                        instances = self.task_instances(watched_dag, watched_run)
                    except AirflowRestError:
                        continue  # a related run not triggered yet
                    for ti in sorted(instances, key=lambda t: t.get("start_date") or "~"):
                        name = ti["task_id"] + (f"[{ti['map_index']}]" if ti.get("map_index", -1) >= 0 else "")
                        state = ti.get("state") or "none"
                        key = (watched_dag, watched_run, name)
                        if seen.get(key) != state and state not in ("none", "scheduled", "queued"):
                            seen[key] = state
                            if progress is not None:
                                progress(f"{watched_dag}: {name} {state}")
                            if awaiting_input is not None and state == "awaiting_input":
                                awaiting_input(watched_dag, watched_run, ti["task_id"])
            if run["state"] in ENDED or time.monotonic() >= deadline:
                return run
            time.sleep(poll_s)

    def _request(self, method: str, path: str, body: Any, headers: dict[str, str]) -> Any:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            self.url + path, data=data, method=method, headers={"Content-Type": "application/json", **headers}
        )
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                return json.loads(response.read() or b"null")
        except urllib.error.HTTPError:
            raise
        except (urllib.error.URLError, OSError) as exc:
            raise _NoAnswer(str(exc)) from None

    def _post_json(self, path: str, body: Any, headers: dict[str, str]) -> Any:
        try:
            return self._request("POST", path, body, headers)
        except urllib.error.HTTPError as exc:
            if exc.code >= 500:
                raise
            raise AirflowRestError(f"POST {path}: HTTP {exc.code} {_detail(exc)}") from None


class _NoAnswer(Exception):
    """No HTTP answer at all (refused, reset, timed out)."""


def _detail(exc: urllib.error.HTTPError) -> str:
    try:
        detail = json.loads(exc.read()).get("detail")
    except (ValueError, AttributeError, OSError):
        detail = None
    return str(detail or exc.reason)
