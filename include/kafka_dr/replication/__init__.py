"""Replication between clusters: provenance, planning, copying, resume, lag. No Airflow imports,
so Spark executors, the CLI and tests use it directly."""
