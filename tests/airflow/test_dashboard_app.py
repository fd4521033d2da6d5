"""The Kafka DR dashboard inside Airflow: the plugin in plugins/ loads without import errors, Airflow's api-server app
(create_app, as `airflow api-server` builds it) mounts it at /kafka-dr/ and lists its nav entry, and both its page
and its JSON refuse anyone Airflow's auth manager has not logged in. Logged in, the page shows the session stack's
clusters, a flow's health with its lag chart read back from `_kdr.health`, the client aliases and the reports; a
drill's evidence is served behind the same login, from the drills folder only."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from confluent_kafka.admin import AdminClient
from support.drill_evidence import drill_evidence
from support.reports import failover_report
from support.stack import Stack

from kafka_dr.drill.evidence import write_evidence
from kafka_dr.health.check import save_evaluation
from kafka_dr.health.rules import FlowHealth, PartitionStatus
from kafka_dr.replication.internal import HEALTH, ensure_internal_topics

FLOW = "dashboard-dc1-to-dc2"  # a flow of this test's own: other tests' records in the session stack never match it


@pytest.fixture(scope="module")
def client(airflow_db: Path) -> Iterator[Any]:
    """Airflow's whole api-server app, plugins included, on FastAPI's test client, signing its JWTs with a key of
    the length that SHA512 wants (as the harness's execution API does)."""
    from airflow.api_fastapi.app import create_app, purge_cached_app
    from fastapi.testclient import TestClient

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("AIRFLOW__API_AUTH__JWT_SECRET", os.urandom(48).hex())
        with TestClient(create_app()) as test_client:
            yield test_client
        purge_cached_app()


@pytest.fixture(scope="module")
def token(client: Any) -> str:
    """A JWT for the admin user, made by the auth manager as its login does."""
    from airflow.api_fastapi.app import get_auth_manager
    from airflow.api_fastapi.auth.managers.simple.user import SimpleAuthManagerUser

    return get_auth_manager().generate_jwt(SimpleAuthManagerUser(username="admin", role="admin"))


@pytest.mark.integration
def test_airflow_loads_the_plugin_without_import_errors(client: Any, token: str) -> None:
    from airflow import plugins_manager

    from kafka_dr.dashboard.asgi import dashboard

    assert plugins_manager.get_import_errors() == {}
    apps, _ = plugins_manager.get_fastapi_plugins()
    assert {"app": dashboard, "url_prefix": "/kafka-dr", "name": "Kafka DR"} in apps
    listed = client.get("/api/v2/plugins", headers={"Authorization": f"Bearer {token}"}).json()["plugins"]
    (entry,) = [p for p in listed if p["name"] == "kafka_dr"]  # what the UI builds its navigation from
    views = [(v["name"], v["href"], v["destination"], v["url_route"]) for v in entry["external_views"]]
    assert views == [("Kafka DR", "kafka-dr/", "nav", "kafka-dr")]  # a url_route: the UI links it (see the plugin)


def test_a_task_process_loads_the_plugin_without_the_dashboard() -> None:
    """Task processes load plugins/ for its macros: the dashboard (FastAPI, Airflow's API) waits for the api-server."""
    probe = (
        "import sys; from airflow.sdk.plugins_manager import _get_plugins, integrate_macros_plugins; "
        "integrate_macros_plugins(); assert not _get_plugins()[1], _get_plugins()[1]; "
        "assert 'kafka_dr_plugin' in sys.modules; print(sorted(m for m in sys.modules if m.startswith("
        "('kafka_dr.dashboard.app', 'airflow.api_fastapi', 'fastapi'))))"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().splitlines()[-1] == "[]"


@pytest.mark.integration
def test_no_page_nor_json_without_a_login(client: Any, state: Path) -> None:
    page = client.get("/kafka-dr/", follow_redirects=False)
    assert page.status_code == 307
    assert page.headers["location"] == f"/auth/login?next={quote('http://testserver/kafka-dr/', safe='')}"
    assert client.get("/kafka-dr/api/state").status_code == 401
    client.cookies.set("_token", "not-a-jwt")
    try:
        assert client.get("/kafka-dr/", follow_redirects=False).headers["location"].startswith("/auth/login?next=")
        assert client.get("/kafka-dr/api/state").status_code == 403
    finally:
        client.cookies.clear()
    assert client.get("/kafka-dr/api/state", headers={"Authorization": "Bearer not-a-jwt"}).status_code == 403


@pytest.mark.integration
def test_the_logged_in_page_and_its_json(
    client: Any, token: str, stack: Stack, state: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    topology = stack.write_topology(
        "dashboard",
        f"  - {{name: {FLOW}, source: dc1, target: dc2, topics: {{include: [orders]}}}}\n",
        extra="clients:\n  orders-app: {cluster: dc1, role: producer}\n",
    )
    monkeypatch.setenv("KDR_TOPOLOGY", str(topology))
    target = {"bootstrap.servers": stack.bootstrap("dc2")}
    ensure_internal_topics(AdminClient(target), (HEALTH,))
    now_ms = int(time.time() * 1000)
    for i, lag in enumerate((120, 80, 5)):  # three health runs, written where dr_replication_health keeps them
        partition = PartitionStatus("orders", 0, "OK", lag, lag / 10, "")
        save_evaluation(target, FlowHealth(FLOW, "OK", (), (partition,)), now_ms - (2 - i) * 300_000, [])
    failover = failover_report(1234, 21.5, dag_id="dr_failover", run_id="manual__2026-11-24T10:00:00+00:00")
    (state / "health" / f"{FLOW}.json").unlink()  # as on an api-server host without the workers' state dir
    (state / "reports").mkdir(parents=True)
    (state / "reports" / "dr_failover-manual__2026-11-24T10_00_00_00_00.json").write_text(json.dumps(failover))

    client.cookies.set("_token", token)  # the cookie Airflow's login sets in the browser
    try:
        page = client.get("/kafka-dr/")
    finally:
        client.cookies.clear()
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    html = page.text
    for shown in ("dc1", "dc2", stack.bootstrap("dc1"), FLOW, "orders-app", "1,234 records (estimate)", "21.5 s"):
        assert shown in html, shown
    assert "href='/dags/dr_failover/runs/manual__2026-11-24T10%3A00%3A00%2B00%3A00'" in html
    assert "href='/dags/dr_failover'" in html and "href='/dags/dr_failback'" in html
    assert "<svg" in html and html.count("<circle") == 3
    assert "<script" not in html and not re.search(r"""(src|href)=['"]?(https?:)?//""", html)

    answer = client.get("/kafka-dr/api/state", headers={"Authorization": f"Bearer {token}"})
    assert answer.status_code == 200
    data = answer.json()
    assert [(c["name"], c["reachable"], c["schema_registry"]["role"]) for c in data["clusters"]] == [
        ("dc1", True, "leader"),
        ("dc2", True, "follower"),
    ]
    assert all(c["cluster_id"] for c in data["clusters"])
    (flow,) = data["flows"]
    assert (flow["status"], flow["lag_records"], flow["history_error"]) == ("OK", 5, None)
    assert [p["lag_records"] for p in flow["history"]] == [120, 80, 5]
    assert data["clients"][0]["active"] == "dc1" and data["reports"]["dr_failover"]["rto_seconds"] == 21.5
    assert data["collected_in_s"] < 5


@pytest.mark.integration
def test_the_clusters_are_asked_with_their_airflow_connections(
    client: Any, token: str, stack: Stack, state: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As the DAGs' tasks do: `kafka_dr_dc1` says SSL, which the embedded broker does not speak, so dc1 is
    unreachable through it while dc2, without a connection, answers in plaintext."""
    flow = f"  - {{name: {FLOW}, source: dc1, target: dc2, topics: {{include: [orders]}}}}\n"
    topology = stack.write_topology("dashboard-conn", flow)
    monkeypatch.setenv("KDR_TOPOLOGY", str(topology))
    conn = {"conn_type": "generic", "extra": {"security.protocol": "SSL"}}
    monkeypatch.setenv("AIRFLOW_CONN_KAFKA_DR_DC1", json.dumps(conn))
    answer = client.get("/kafka-dr/api/state", headers={"Authorization": f"Bearer {token}"})
    assert answer.status_code == 200
    assert {c["name"]: c["reachable"] for c in answer.json()["clusters"]} == {"dc1": False, "dc2": True}


@pytest.mark.integration
def test_metrics_take_their_own_bearer_token_and_are_off_without_one(
    client: Any, token: str, state: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Prometheus cannot log in to Airflow: /kafka-dr/metrics takes $KDR_METRICS_TOKEN as a bearer token, not an
    Airflow login; 404 while no token is set, 401 without it or with another one (an Airflow JWT included)."""
    monkeypatch.delenv("KDR_METRICS_TOKEN", raising=False)
    assert client.get("/kafka-dr/metrics", headers={"Authorization": f"Bearer {token}"}).status_code == 404
    monkeypatch.setenv("KDR_METRICS_TOKEN", "s3cret-scrape-token")
    for headers in ({}, {"Authorization": f"Bearer {token}"}, {"Authorization": "Bearer s3cret-scrape-toke"}):
        refused = client.get("/kafka-dr/metrics", headers=headers)
        assert refused.status_code == 401 and refused.headers["www-authenticate"] == "Bearer", headers
    monkeypatch.setenv("KDR_TOPOLOGY", str(state / "missing.yaml"))
    answer = client.get("/kafka-dr/metrics", headers={"Authorization": "Bearer s3cret-scrape-token"})
    assert answer.status_code == 200 and answer.headers["content-type"].startswith("text/plain; version=0.0.4")
    assert "kafka_dr_topology_valid 0.0" in answer.text.splitlines()
    # A container's secret: the token read from the file $KDR_METRICS_TOKEN_FILE names, as Prometheus reads it.
    monkeypatch.delenv("KDR_METRICS_TOKEN")
    state.mkdir(parents=True, exist_ok=True)
    (state / "token").write_text("t0ken-from-a-file\n")
    monkeypatch.setenv("KDR_METRICS_TOKEN_FILE", str(state / "token"))
    assert client.get("/kafka-dr/metrics", headers={"Authorization": "Bearer t0ken-from-a-file"}).status_code == 200
    assert client.get("/kafka-dr/metrics", headers={"Authorization": "Bearer s3cret-scrape-token"}).status_code == 401


@pytest.mark.integration
def test_a_drills_evidence_is_served_behind_the_login_from_the_drills_folder_only(
    client: Any, token: str, state: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The page's DR drills section links each drill's evidence at /kafka-dr/drills/<file>: behind the page's login
    (a browser without one goes to the login page, whether the file exists or not), and only an HTML or PDF file
    directly in STATE_DIR/drills; any other name is 404, one that leads out of the folder included."""
    html = Path(write_evidence(drill_evidence(), pdf=False)["html"])
    html.with_suffix(".pdf").write_bytes(b"%PDF-1.4 evidence")
    (state / "outside.html").write_text("not evidence")  # beside the drills folder
    login = {"Authorization": f"Bearer {token}"}

    page = client.get(f"/kafka-dr/drills/{html.name}", headers=login)
    assert (page.status_code, page.headers["content-type"]) == (200, "text/html; charset=utf-8")
    assert page.text == html.read_text()
    pdf = client.get(f"/kafka-dr/drills/{html.stem}.pdf", headers=login)
    assert (pdf.status_code, pdf.headers["content-type"], pdf.content) == (200, "application/pdf", b"%PDF-1.4 evidence")
    refused = ("../outside.html", "..%2Foutside.html", "%2E%2E", "a%00.html", "outside.html", "missing.html")
    for name in (*refused, f"{html.stem}.json"):  # the JSON is summed up on the page, not served
        assert client.get(f"/kafka-dr/drills/{name}", headers=login).status_code == 404, name

    for name in (html.name, "missing.html"):
        away = client.get(f"/kafka-dr/drills/{name}", follow_redirects=False)
        assert away.status_code == 307 and away.headers["location"].startswith("/auth/login?next="), name
    forged = client.get(f"/kafka-dr/drills/{html.name}", headers={"Authorization": "Bearer x"}, follow_redirects=False)
    assert forged.status_code == 307

    monkeypatch.setenv("KDR_TOPOLOGY", str(state / "missing.yaml"))  # no cluster to ask
    (drill,) = client.get("/kafka-dr/api/state", headers=login).json()["drills"]
    assert (drill["run_id"], drill["html"], drill["pdf"]) == (drill_evidence()["run_id"], html.name, f"{html.stem}.pdf")


@pytest.mark.integration
def test_the_docs_site_is_served_behind_the_login_from_its_folder_only(
    client: Any, token: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every DAG's doc_md links its runbook at /kafka-dr/docs/runbooks/<dag>/: the site `make docs` built, a folder's
    index.html, behind the login; nothing outside the site, and a line saying so when it is not built."""
    import kafka_dr.dashboard.app as app_module

    site = tmp_path / "site"
    monkeypatch.setattr(app_module, "DOCS_SITE", site)
    login = {"Authorization": f"Bearer {token}"}
    missing = client.get("/kafka-dr/docs/", headers=login)
    assert missing.status_code == 404 and "run make docs" in missing.json()["detail"]

    (site / "runbooks" / "dr_failover").mkdir(parents=True)
    (site / "index.html").write_text("home")
    (site / "runbooks" / "dr_failover" / "index.html").write_text("the failover runbook")
    (tmp_path / "outside.html").write_text("not docs")
    assert client.get("/kafka-dr/docs/", headers=login).text == "home"
    assert client.get("/kafka-dr/docs/runbooks/dr_failover/", headers=login).text == "the failover runbook"
    slashless = client.get("/kafka-dr/docs/runbooks/dr_failover", headers=login, follow_redirects=False)
    assert (slashless.status_code, slashless.headers["location"]) == (307, "dr_failover/")
    for name in ("../outside.html", "..%2Foutside.html", "%2E%2E/outside.html", "runbooks/missing/"):
        assert client.get(f"/kafka-dr/docs/{name}", headers=login).status_code == 404, name
    away = client.get("/kafka-dr/docs/runbooks/dr_failover/", follow_redirects=False)
    assert away.status_code == 307 and away.headers["location"].startswith("/auth/login?next=")
