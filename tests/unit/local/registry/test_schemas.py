"""Schema parsing of the embedded registry: every invalid schema is error 42201."""

from __future__ import annotations

import pytest
from support.registry import code_of

from kafka_dr_dev.local.registry import errors
from kafka_dr_dev.local.registry.errors import RegistryError
from kafka_dr_dev.local.registry.schemas import AVRO, JSON, PROTOBUF, parse


def test_invalid_schemas_are_42201():
    for schema_type, text in [
        (AVRO, '{"type": "record", "name": "X", "fields": [{"name": "a", "type": "nope"}]}'),
        (AVRO, "{not json"),
        (AVRO, ""),
        (JSON, "[1, 2]"),
    ]:
        with pytest.raises(RegistryError) as excinfo:
            parse(schema_type, text)
        assert code_of(excinfo) == errors.INVALID_SCHEMA
    assert parse(PROTOBUF, 'syntax = "proto3"; message M {}').text.startswith("syntax")
