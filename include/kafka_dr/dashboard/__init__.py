"""The "Kafka DR" dashboard: the state of a deployment (state.py), its HTML page (page.py), and the FastAPI app that
Airflow's api-server mounts under /kafka-dr/ (app.py, the only module here that imports airflow; asgi.py hands it to
the plugin in plugins/ without importing it)."""
