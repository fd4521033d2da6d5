"""Airflow plugin: the "Kafka DR" dashboard (kafka_dr.dashboard) at /kafka-dr/, linked from the UI's navigation."""

from __future__ import annotations

from airflow.plugins_manager import AirflowPlugin

from kafka_dr.dashboard.asgi import dashboard


class KafkaDrPlugin(AirflowPlugin):
    name = "kafka_dr"
    fastapi_apps = [{"app": dashboard, "url_prefix": "/kafka-dr", "name": "Kafka DR"}]
    # An entry of its own in the UI's navigation bar. With a url_route the UI shows the page inside itself (an
    # iframe at /plugin/kafka-dr); Airflow 3.3.2 draws an entry without one as a button that opens nothing. Links on
    # the page then open inside that frame; /kafka-dr/ is the page alone, in a tab of its own.
    external_views = [
        {"name": "Kafka DR", "href": "kafka-dr/", "destination": "nav", "url_route": "kafka-dr", "nav_top_level": True}
    ]
