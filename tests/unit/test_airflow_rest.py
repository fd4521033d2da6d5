"""kafka_dr_dev.airflow_rest against a small HTTP server that answers as a busy api-server does: a trigger asked again
after HTTP 500 or no answer makes one run, and a refusal is one line."""

from __future__ import annotations

import contextlib
import json
import threading
import urllib.parse
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from kafka_dr_dev import airflow_rest
from kafka_dr_dev.airflow_rest import AirflowRest, AirflowRestError


class BusyAirflow(ThreadingHTTPServer):
    """`/auth/token` and a DAG's dagRuns; the first `busy` POSTs to dagRuns fail as `how` says after (when
    `commit_first`) storing the run, as an api-server whose answer was lost after its commit would."""

    def __init__(self, busy: int, how: str, commit_first: bool) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.busy, self.how, self.commit_first = busy, how, commit_first
        self.runs: dict[str, dict[str, Any]] = {}
        self.posts = 0


class Handler(BaseHTTPRequestHandler):
    server: BusyAirflow

    def log_message(self, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if self.path == "/auth/token":
            return self._answer(201, {"access_token": "t"})
        self.server.posts += 1
        run_id = body["dag_run_id"]
        if run_id in self.server.runs:
            return self._answer(409, {"detail": f"run {run_id} exists"})
        if self.server.commit_first or self.server.posts > self.server.busy:
            self.server.runs[run_id] = {"dag_run_id": run_id, "conf": body["conf"], "state": "queued"}
        if self.server.posts <= self.server.busy:
            if self.server.how == "500":
                return self._answer(500, {"detail": "database is locked"})
            self.server.busy_wait.wait(5)  # longer than the client's timeout: no answer
            return None
        return self._answer(200, self.server.runs[run_id])

    def do_GET(self) -> None:
        run_id = urllib.parse.unquote(self.path.rsplit("/", 1)[1])
        self._answer(200, self.server.runs[run_id])

    def _answer(self, code: int, body: Any) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@pytest.fixture(autouse=True)
def _no_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(airflow_rest, "BUSY_BACKOFF_S", 0.01)


@contextlib.contextmanager
def serve(busy: int, how: str = "500", commit_first: bool = False) -> Iterator[BusyAirflow]:
    server = BusyAirflow(busy, how, commit_first)
    server.busy_wait = threading.Event()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.busy_wait.set()
        server.shutdown()
        server.server_close()


def client(server: BusyAirflow) -> AirflowRest:
    return AirflowRest(f"http://127.0.0.1:{server.server_address[1]}", "admin", "admin", timeout=0.5)


@pytest.mark.parametrize(
    ("how", "commit_first", "posts"),
    [
        ("500", False, 3),  # refused twice, made by the third
        ("500", True, 2),  # made by the first, whose answer was an error: the second finds it (409)
        ("silent", True, 2),  # made by the first, which never answered
    ],
)
def test_a_trigger_asked_again_makes_one_run(how: str, commit_first: bool, posts: int) -> None:
    with serve(busy=2, how=how, commit_first=commit_first) as server:
        run = client(server).trigger("dr_failover", {"mode": "disaster"})
        assert list(server.runs) == [run["dag_run_id"]] and run["conf"] == {"mode": "disaster"}
        assert server.posts == posts


def test_a_busy_server_past_the_retries_is_one_line() -> None:
    with serve(busy=10) as server:
        with pytest.raises(
            AirflowRestError, match=r"^POST /api/v2/dags/dr_failover/dagRuns: HTTP 500 database is locked$"
        ):
            client(server).trigger("dr_failover", {})
        assert server.posts == airflow_rest.BUSY_RETRIES + 1 and server.runs == {}
