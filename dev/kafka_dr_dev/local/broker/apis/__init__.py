"""Kafka API handlers, registered by API key with the version range this broker advertises.

Request and response classes come from kafka-python, generated from Kafka's own JSON message
definitions; handlers only translate between those and the broker's state. Version ranges stop
where a newer version would change semantics the broker does not implement (topic ids in Fetch
and Produce, transactions V2), which is what an older Kafka broker advertises too.
"""

from __future__ import annotations

from .dispatch import REGISTRY, Api


def load_all() -> dict[int, Api]:
    """Import the handler modules (they register themselves) and return the registry."""
    from . import admin, data, groups, metadata, sasl, txn  # noqa: F401

    return REGISTRY
