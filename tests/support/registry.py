"""Schemas and registrations for the embedded schema registry's tests: Avro records of one User, and writes applied
to a RegistryState as the registry's log would apply them."""

from __future__ import annotations

import json
from typing import Any

import pytest

from kafka_dr_dev.local.registry.errors import RegistryError
from kafka_dr_dev.local.registry.schema_log import RegistryState, encode
from kafka_dr_dev.local.registry.schemas import AVRO, parse


def avro(fields: list[dict[str, Any]], name: str = "User") -> str:
    return json.dumps({"type": "record", "name": name, "namespace": "kdr.test", "fields": fields})


V1 = avro([{"name": "id", "type": "long"}])
V2 = avro([{"name": "id", "type": "long"}, {"name": "email", "type": ["null", "string"], "default": None}])
V2_NO_DEFAULT = avro([{"name": "id", "type": "long"}, {"name": "email", "type": "string"}])


def register(state: RegistryState, subject: str, text: str, schema_type: str = AVRO, **kwargs: Any) -> int:
    """Plan a registration and apply its records as the log would; return the id."""
    record, records = state.plan_register(subject, parse(schema_type, text), (), **kwargs)
    for key, value in records:
        state.apply(encode(key), encode(value))
    return record.id


def apply(state: RegistryState, records: list[tuple[dict[str, Any], dict[str, Any] | None]]) -> None:
    for key, value in records:
        state.apply(encode(key), encode(value))


def code_of(excinfo: pytest.ExceptionInfo[RegistryError]) -> int:
    return excinfo.value.error_code
