"""The dashboard's ASGI app as plugins/kafka_dr_plugin.py hands it to Airflow, imported at its first request.

Every Airflow process loads the plugins folder (each task process does, to add plugins' macros), and only the
api-server serves the page: importing FastAPI and Airflow's API with the plugin cost every task about a second.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from starlette.types import Receive, Scope, Send


class LazyDashboard:
    """Passes each request to kafka_dr.dashboard.app's FastAPI app, imported on the first one."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        from .app import app

        await app(scope, receive, send)


dashboard = LazyDashboard()
