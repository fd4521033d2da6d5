"""The dashboard's state (and the page of it) without Airflow or a broker: clusters that do not answer, a topology
that does not load, reports and health evaluations in a temporary state dir, `_kdr.health` records as fakes, a fake
registry."""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from support.drill_evidence import drill_evidence, failed_drill_evidence
from support.fakes import FakeMessage
from support.ports import free_ports
from support.reports import failover_report
from support.topology import write_topology

from kafka_dr.dashboard.page import render_page
from kafka_dr.dashboard.view import collect_view, evaluations
from kafka_dr.drill.evidence import write_evidence
from kafka_dr.health.check import save_evaluation
from kafka_dr.health.rules import FlowHealth, PartitionStatus
from kafka_dr.health.sampler import evaluation_key
from kafka_dr.replication.internal import HEALTH
from kafka_dr.schema_registry import registry_role


@pytest.fixture(autouse=True)
def state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("KDR_STATE_DIR", str(tmp_path / "state"))
    return tmp_path / "state"


def write_report(state_dir: Path, dag_id: str, run_id: str, body: dict | str, age_s: float = 0) -> Path:
    path = state_dir / "reports" / f"{dag_id}-{run_id}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(body if isinstance(body, str) else json.dumps({"dag_id": dag_id, "run_id": run_id, **body}))
    os.utime(path, (time.time() - age_s, time.time() - age_s))
    return path


FAILOVER = failover_report(42, 17.5)


def test_unreachable_clusters_are_shown_quickly_with_their_error(tmp_path: Path) -> None:
    kafka1, kafka2, registry = free_ports(3)  # nothing listens there
    topology = write_topology(
        tmp_path / "topology.yaml",
        {"dc1": f"127.0.0.1:{kafka1}", "dc2": f"127.0.0.1:{kafka2}"},
        "  - {name: dc1-to-dc2, source: dc1, target: dc2, topics: {include: [orders]}}\n",
        {"dc1": f"http://127.0.0.1:{registry}"},
        "clients:\n  orders-app: {cluster: dc1, role: both}\n",
    )
    health = FlowHealth(
        "dc1-to-dc2", "WARN", ("orders[0]: lag growing",), (PartitionStatus("orders", 0, "WARN", 7, 2.5, "x"),)
    )
    save_evaluation(None, health, 1_795_000_000_000, [])  # what a health run writes while the target is down

    started = time.monotonic()
    state = collect_view(topology, timeout=0.5)
    assert time.monotonic() - started < 3

    dc1, dc2 = state["clusters"]
    assert (dc1["reachable"], dc1["cluster_id"], dc2["reachable"]) == (False, None, False)
    assert "Timed out" in dc1["error"] or "refused" in dc1["error"]
    assert dc1["schema_registry"]["role"] == "unreachable" and "refused" in dc1["schema_registry"]["error"]
    assert dc2["schema_registry"]["role"] is None
    (flow,) = state["flows"]
    assert (flow["status"], flow["lag_records"], flow["lag_seconds"]) == ("WARN", 7, 2.5)
    assert flow["problems"] == ["orders[0]: lag growing"] and flow["history"] == []
    assert flow["history_error"] == "no history: dc2 unreachable"
    assert state["clients"] == [
        {"alias": "orders-app", "role": "both", "home": "dc1", "active": "dc1", "since": None, "reason": None}
    ]
    json.dumps(state)  # the JSON of /kafka-dr/api/state

    page = render_page(state)
    assert page.count("unreachable") >= 3 and "orders-app" in page and "No health history yet." in page


def test_a_topology_that_does_not_load_still_gives_a_page(tmp_path: Path) -> None:
    write_report(tmp_path / "state", "dr_failover", "manual__1", FAILOVER)
    state = collect_view(tmp_path / "missing.yaml")
    assert state["topology"]["error"].endswith("missing.yaml: file not found")
    assert state["clusters"] == state["flows"] == state["clients"] == []
    assert state["reports"]["dr_failover"]["rpo_records"] == 42
    page = render_page(state)
    assert "The topology does not load" in page and "No clusters: the topology does not load." in page
    assert "No drill yet" in page


def test_latest_reports_summed_up_and_a_broken_one_said_so(state_dir: Path) -> None:
    write_report(state_dir, "dr_failover", "old", {**FAILOVER, "rto_seconds": 99.0}, age_s=60)
    write_report(state_dir, "dr_failover", "manual__2026-11-24T10_00_00", FAILOVER)
    failback = {
        "restored_cluster": "dc1",
        "serving_cluster": "dc2",
        "mode": "planned",
        "dry_run": False,
        "run_started": "2026-11-24T11:00:00+00:00",
        "unreplicated": {"records": 40, "per_topic": {"orders": 40}, "action": "republish"},
        "rto_seconds": 8.25,
    }
    write_report(state_dir, "dr_failback", "fb1", failback)
    write_report(state_dir, "dr_backfill", "bf1", "{not json")

    reports = collect_view(state_dir / "no-topology.yaml")["reports"]
    failover = reports["dr_failover"]
    assert failover["run_id"] == "manual__2026-11-24T10_00_00" and failover["title"] == "dc1 -> dc2 (disaster)"
    assert (failover["rpo_records"], failover["rpo_exact"], failover["rto_seconds"]) == (42, False, 17.5)
    failback_summary = reports["dr_failback"]
    assert (failback_summary["rpo_records"], failback_summary["rpo_exact"], failback_summary["rto_seconds"]) == (
        40,
        True,
        8.25,
    )
    assert reports["dr_backfill"]["error"].startswith("unreadable: JSONDecodeError")

    page = render_page({**collect_view(state_dir / "no-topology.yaml"), "reports": reports}, ui_root="/airflow/")
    assert "42 records (estimate)" in page and "17.5 s" in page and "40 records (exact)" in page
    assert "href='/airflow/dags/dr_failover/runs/manual__2026-11-24T10_00_00'" in page
    assert "href='/airflow/dags/dr_failover'" in page and "href='/airflow/dags/dr_failback'" in page

    write_report(state_dir, "dr_backfill", "bf2", {"flow": "f", "copied": "lots"})
    backfill = collect_view(state_dir / "no-topology.yaml")["reports"]["dr_backfill"]
    assert (backfill["run_id"], backfill["error"]) == (None, "unreadable: TypeError: not a number: 'lots'")


def test_the_drills_newest_first_with_their_evidence_and_an_rto_chart_per_scenario(state_dir: Path) -> None:
    write_evidence(drill_evidence(), pdf=False)
    write_evidence(failed_drill_evidence(), pdf=False)
    later = drill_evidence(run_id="manual__2026-12-04", started="2026-12-04T14:00:00+00:00", rto_seconds=9.5)
    write_evidence(later, pdf=False)
    (state_dir / "drills" / "manual__2026-12-04.pdf").write_bytes(b"%PDF-1.4")
    (state_dir / "drills" / "torn.json").write_text("{")

    state = collect_view(state_dir / "no-topology.yaml")

    drills = state["drills"]
    assert [d["run_id"] for d in drills if not d["error"]] == [
        "manual__2026-11-27T14:00:00+00:00",
        "manual__2026-11-28T09:00:00+00:00",
        "manual__2026-12-04",
    ]
    assert [d["error"] for d in drills if d["error"]] == [
        "torn.json: unreadable: JSONDecodeError: Expecting property name enclosed in double quotes: line 1 column 2 "
        "(char 1)"
    ]
    page = render_page(state)
    section = page[page.index("<h2>DR drills</h2>") : page.index("<h2>Last alerts sent</h2>")]
    rows = section[: section.index("</table>")].split("<tr>")[2:]
    assert [row[: row.index("</td>")] for row in rows if "torn.json" not in row] == [
        "<td>2026-12-04 14:00:00 UTC",
        "<td>2026-11-28 09:00:00 UTC",
        "<td>2026-11-27 14:00:00 UTC",
    ]
    newest = next(row for row in rows if "2026-12-04" in row)
    assert "<td>disaster_round_trip</td><td>dc1 → dc2</td><td class='num'>0</td><td class='num'>9.5</td>" in newest
    assert "<span class='badge ok'>PASSED</span>" in newest
    assert (
        "<a href='drills/manual__2026-12-04.html'>HTML</a> · <a href='drills/manual__2026-12-04.pdf'>PDF</a>" in newest
    )
    failed = next(row for row in rows if "2026-11-28" in row)
    assert "<span class='badge err'>FAILED</span> <span class='error'>RTO objective missed: 21.0 s &gt; 0.5 s" in failed
    assert "<a href='drills/manual__2026-11-28T09_00_00_00_00.html'>HTML</a></td>" in failed
    assert "torn.json: unreadable" in section
    assert section.count("<svg") == 2  # one chart per scenario: a planned and a disaster RTO are not alike
    assert "disaster_round_trip: RTO of each drill" in section and "planned_round_trip: RTO of each drill" in section
    assert section.count("width='8' height='8'") == 1  # the failed drill's square


def test_history_points_come_from_the_flows_evaluations_only() -> None:
    def evaluation(at_ms: int, status: str, lags: list[tuple[int, float]], problems: tuple[str, ...] = ()) -> bytes:
        partitions = [{"topic": "t", "partition": i, "status": status, "lag_records": r, "lag_seconds": s}
                      for i, (r, s) in enumerate(lags)]  # fmt: skip
        return json.dumps(
            {"name": "f", "status": status, "problems": problems, "partitions": partitions, "at_ms": at_ms}
        )

    records = [
        FakeMessage(HEALTH, 0, 0, b"f", b'{"time_ms": 1, "columns": [], "rows": []}'),  # a run's samples
        FakeMessage(HEALTH, 0, 1, evaluation_key("f"), evaluation(1000, "OK", [(3, 1.0), (4, 2.5)]).encode()),
        FakeMessage(HEALTH, 0, 2, evaluation_key("other"), evaluation(1500, "OK", [(9, 9.0)]).encode()),
        FakeMessage(HEALTH, 0, 3, evaluation_key("f"), b"{broken"),
        FakeMessage(HEALTH, 0, 4, evaluation_key("f"), evaluation(2000, "ERR", [], ("dc1 down",)).encode()),
    ]
    assert evaluations(records, ["f"]) == {
        "f": [
            {
                "at_ms": 1000,
                "status": "OK",
                "problems": [],
                "lag_records": 7,
                "lag_seconds": 2.5,
                "stalled_seconds": None,
            },
            {"at_ms": 2000, "status": "ERR", "problems": ["dc1 down"], "lag_records": None, "lag_seconds": None}
            | {"stalled_seconds": None},
        ]
    }


class _Registry(BaseHTTPRequestHandler):
    """GET /kdr/leader as the local stack's registry answers it, per port; 404 like Confluent's elsewhere."""

    answers: dict[int, dict] = {}

    def do_GET(self) -> None:
        answer = self.answers.get(self.server.server_address[1])
        body = json.dumps(answer or {"error_code": 404}).encode()
        self.send_response(200 if answer and self.path == "/kdr/leader" else 404)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def registries() -> Iterator[list[str]]:
    servers = [ThreadingHTTPServer(("127.0.0.1", 0), _Registry) for _ in range(3)]
    urls = [f"http://127.0.0.1:{s.server_address[1]}" for s in servers]
    _Registry.answers = {
        servers[0].server_address[1]: {"leader": urls[0], "is_leader": True},
        servers[1].server_address[1]: {"leader": urls[0], "is_leader": False},
    }
    for server in servers:
        threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    yield urls
    for server in servers:
        server.shutdown()
        server.server_close()


def test_registry_roles(registries: list[str]) -> None:
    leader, follower, confluent = registries
    assert registry_role(f"{leader}/,{follower}") == {"url": leader, "role": "leader", "leader": leader, "error": None}
    assert registry_role(follower)["role"] == "follower" and registry_role(follower)["leader"] == leader
    assert registry_role(confluent) == {
        "url": confluent,
        "role": "unknown",
        "leader": None,
        "error": "answers, role not exposed (HTTP 404)",
    }
