"""The dashboard as a FastAPI app that Airflow's api-server mounts under /kafka-dr/ (plugins/kafka_dr_plugin.py,
through asgi.py).

The page, its JSON, the drills' evidence pages and the documentation site (as `make docs` built it) are behind
Airflow's own authentication: `requires_authenticated` resolves the user as the api-server's own routes do, from the
`Authorization: Bearer` JWT or else the `_token` cookie that Airflow's login sets (scoped to the api-server's root
path, so the browser sends it here too). A browser without
a valid login is sent to the auth manager's login page and comes back after it; the JSON answers 401 or 403 as
Airflow's API does.
/kafka-dr/metrics is for Prometheus, which cannot log in: it takes a bearer token of its own.
"""

from __future__ import annotations

import hmac
from typing import Any

from airflow.api_fastapi.app import API_ROOT_PATH, get_auth_manager
from airflow.api_fastapi.core_api.security import requires_authenticated
from fastapi import Depends, FastAPI, Header, HTTPException, Request, status
from fastapi.exception_handlers import http_exception_handler
from fastapi.responses import FileResponse, HTMLResponse, RedirectResponse, Response

from .. import metrics
from ..airflow.hooks.kafka_cluster import cluster_access
from ..clients import ClientConfigError
from ..drill.history import evidence_file
from ..paths import DOCS_SITE
from ..topology import TopologyError, load_topology
from .page import render_page
from .view import collect_view

app = FastAPI(title="Kafka DR", docs_url=None, redoc_url=None, openapi_url=None)


# Plain `def` routes: FastAPI runs them in its thread pool, as collecting asks clusters and registries (seconds at
# worst) and must not hold the api-server's event loop.
@app.get("/", response_class=HTMLResponse, dependencies=[Depends(requires_authenticated())])
def page() -> HTMLResponse:
    """The dashboard."""
    return HTMLResponse(render_page(_state(), ui_root=API_ROOT_PATH))


@app.get("/api/state", dependencies=[Depends(requires_authenticated())])
def api_state() -> dict[str, Any]:
    """What the dashboard shows, as JSON."""
    return _state()


@app.get("/drills/{name}", dependencies=[Depends(requires_authenticated())])
def drill_evidence(name: str) -> FileResponse:
    """A drill's evidence page, HTML or PDF, as the page's DR drills section links it: only such a file directly in
    the drills folder (drill.history.evidence_file), 404 for any other name, so no path reaches outside it."""
    path = evidence_file(name)
    if path is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, "no such drill evidence")
    return FileResponse(path)  # its type from its suffix: text/html or application/pdf


@app.get("/docs", include_in_schema=False)
def docs_root() -> RedirectResponse:
    return RedirectResponse("docs/")  # the site's relative links need the trailing slash


@app.get("/docs/{path:path}", dependencies=[Depends(requires_authenticated())])
def docs_page(path: str) -> Response:
    """The documentation site built into DOCS_SITE by `make docs` (every DAG's doc_md links its runbook here): a file
    of the site, a folder's index.html, 404 for anything outside it."""
    site = DOCS_SITE.resolve()
    if not (site / "index.html").is_file():
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"the documentation site is not built: run make docs ({site})")
    target = (site / path).resolve()
    if not target.is_relative_to(site):
        raise HTTPException(status.HTTP_404_NOT_FOUND, "no such page")
    if target.is_dir():
        if path and not path.endswith("/"):
            return RedirectResponse(f"{path.rsplit('/', 1)[-1]}/")
        target = target / "index.html"
    if not target.is_file():
        raise HTTPException(status.HTTP_404_NOT_FOUND, "no such page")
    return FileResponse(target)


@app.get("/metrics")
def metrics_route(authorization: str | None = Header(default=None)) -> Response:
    """Prometheus metrics (kafka_dr.metrics), for a scraper that cannot log in to Airflow: `Authorization: Bearer`
    with the token of $KDR_METRICS_TOKEN (or of the file $KDR_METRICS_TOKEN_FILE names), compared in constant time;
    401 without it or with another one, 404 when no token is set (the endpoint is off)."""
    token = metrics.scrape_token()
    if not token:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"metrics are off: ${metrics.TOKEN_ENV} is not set")
    scheme, _, given = (authorization or "").partition(" ")
    if scheme.lower() != "bearer" or not hmac.compare_digest(given.strip().encode(), token.encode()):
        raise HTTPException(
            status.HTTP_401_UNAUTHORIZED, "a bearer token is required", headers={"WWW-Authenticate": "Bearer"}
        )
    return Response(metrics.render(), media_type=metrics.CONTENT_TYPE)


def _state() -> dict[str, Any]:
    """The state, each cluster asked with the security settings the DAGs' tasks use: its Airflow connection
    `kafka_dr_<cluster>`, else $KDR_CLUSTER_<NAME>_CONFIG (its registry: `kafka_dr_<cluster>_registry`, else
    $KDR_REGISTRY_<NAME>_USER_INFO). A topology or connection that does not load is shown
    by collect_view in its place (the clusters are then asked with the environment's settings)."""
    try:
        topology = load_topology()
        access = cluster_access(topology)
    except (TopologyError, ClientConfigError):
        access = None
    return collect_view(access=access)


@app.exception_handler(HTTPException)
async def _login_for_the_page(request: Request, exc: HTTPException) -> Response:
    """The page, a drill's evidence or a docs page without a valid login goes to the login page (and back after it);
    anything else answers as FastAPI does."""
    unauthenticated = exc.status_code in (status.HTTP_401_UNAUTHORIZED, status.HTTP_403_FORBIDDEN)
    if unauthenticated and request.scope.get("endpoint") in (page, drill_evidence, docs_page):
        return RedirectResponse(get_auth_manager().get_url_login(next_url=str(request.url)))
    return await http_exception_handler(request, exc)
