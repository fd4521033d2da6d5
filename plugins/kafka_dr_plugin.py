"""Airflow plugin: the "Kafka DR" dashboard (kafka_dr.dashboard) at /kafka-dr/, linked from the UI's navigation."""

from __future__ import annotations

from airflow.plugins_manager import AirflowPlugin

from kafka_dr.dashboard.asgi import dashboard


class KafkaDrPlugin(AirflowPlugin):
    name = "kafka_dr"
    fastapi_apps = [{"app": dashboard, "url_prefix": "/kafka-dr", "name": "Kafka DR"}]
    # An entry of its own in the UI's navigation bar (top level: in the plugins menu the UI draws it as a button
    # that opens nothing). No url_route: with one the UI shows the page in an
    # iframe whose sandbox keeps the page's links to DAG runs and trigger forms inside the frame; without, the entry
    # opens the page in a tab of its own. The href is relative to the UI's <base href> ([api] base_url).
    external_views = [{"name": "Kafka DR", "href": "kafka-dr/", "destination": "nav", "nav_top_level": True}]
