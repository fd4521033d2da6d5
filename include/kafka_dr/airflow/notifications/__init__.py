"""Airflow notifiers of kafka-dr (the provider layout's notifications/)."""
