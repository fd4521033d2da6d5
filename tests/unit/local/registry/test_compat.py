"""Schema compatibility of the embedded registry: levels in the right direction, Avro's resolution rules, and JSON
Schema's subset rules."""

from __future__ import annotations

import json
from typing import Any

import pytest
from support.registry import V1, V2_NO_DEFAULT

from kafka_dr_dev.local.registry.compat import can_read, check
from kafka_dr_dev.local.registry.schemas import AVRO, JSON, parse


def test_levels_compare_in_the_right_direction():
    v1, v2_no_default = parse(AVRO, V1), parse(AVRO, V2_NO_DEFAULT)
    assert check("BACKWARD", v2_no_default, [v1])  # new reader misses data for "email"
    assert not check("FORWARD", v2_no_default, [v1])  # old reader ignores the new field
    assert check("FULL", v2_no_default, [v1])
    assert not check("NONE", v2_no_default, [v1])


@pytest.mark.parametrize(
    ("reader", "writer", "ok"),
    [
        ("long", "int", True),
        ("int", "long", False),
        ("double", "float", True),
        ("string", "bytes", True),
        (["null", "string"], "string", True),
        ("string", ["null", "string"], False),
        (["null", "long"], ["null", "int"], True),
        ({"type": "array", "items": "long"}, {"type": "array", "items": "int"}, True),
        ({"type": "map", "values": "int"}, {"type": "map", "values": "string"}, False),
        ({"type": "enum", "name": "E", "symbols": ["A", "B"]}, {"type": "enum", "name": "E", "symbols": ["A"]}, True),
        ({"type": "enum", "name": "E", "symbols": ["A"]}, {"type": "enum", "name": "E", "symbols": ["A", "B"]}, False),
        (
            {"type": "enum", "name": "E", "symbols": ["A", "U"], "default": "U"},
            {"type": "enum", "name": "E", "symbols": ["A", "B"]},
            True,
        ),
        ({"type": "fixed", "name": "F", "size": 4}, {"type": "fixed", "name": "F", "size": 8}, False),
        ({"type": "int", "logicalType": "date"}, "int", True),
    ],
)
def test_avro_resolution_rules(reader: Any, writer: Any, ok: bool):
    problems = can_read(parse(AVRO, json.dumps(reader)), parse(AVRO, json.dumps(writer)))
    assert (not problems) == ok, problems


def test_avro_recursive_types_and_aliases():
    node = {
        "type": "record",
        "name": "Node",
        "fields": [{"name": "v", "type": "int"}, {"name": "next", "type": ["null", "Node"], "default": None}],
    }
    renamed = {
        "type": "record",
        "name": "Node",
        "fields": [
            {"name": "value", "type": "long", "aliases": ["v"]},
            {"name": "next", "type": ["null", "Node"], "default": None},
        ],
    }
    assert not can_read(parse(AVRO, json.dumps(renamed)), parse(AVRO, json.dumps(node)))
    other = {"type": "record", "name": "Other", "fields": [{"name": "v", "type": "int"}]}
    assert can_read(parse(AVRO, json.dumps(other)), parse(AVRO, json.dumps(node)))


def test_json_schema_subset_rules():
    old = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}
    more_required = {**old, "properties": {**old["properties"], "b": {"type": "string"}}, "required": ["a", "b"]}
    wider = {"type": "object", "properties": {"a": {"type": "number"}}}
    assert can_read(parse(JSON, json.dumps(more_required)), parse(JSON, json.dumps(old)))
    assert not can_read(parse(JSON, json.dumps(wider)), parse(JSON, json.dumps(old)))
    assert can_read(parse(JSON, json.dumps(old)), parse(JSON, json.dumps(wider)))
    assert can_read(parse(AVRO, '"string"'), parse(JSON, "{}"))  # a type change never is
