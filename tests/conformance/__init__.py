"""Kafka conformance suite for the embedded broker (see conftest.py)."""
