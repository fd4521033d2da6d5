"""The embedded schema registry's state without Kafka: record format, registrations and ids, the compatibility
level it enforces, deletes, configs and modes."""

from __future__ import annotations

import json

import pytest
from support.registry import V1, V2, V2_NO_DEFAULT, apply, avro, code_of, register

from kafka_dr_dev.local.registry import errors
from kafka_dr_dev.local.registry.errors import RegistryError
from kafka_dr_dev.local.registry.schema_log import (
    LATEST,
    NOOP_KEY,
    RegistryState,
    config_key,
    encode,
    schema_key,
)
from kafka_dr_dev.local.registry.schemas import AVRO, JSON, Reference, parse

# ---- record format ------------------------------------------------------------------------


def test_keys_are_confluents_compact_json():
    assert encode(schema_key("t-value", 3)) == b'{"keytype":"SCHEMA","subject":"t-value","version":3,"magic":1}'
    assert encode(config_key(None)) == b'{"keytype":"CONFIG","subject":null,"magic":0}'
    assert encode(NOOP_KEY) == b'{"keytype":"NOOP","magic":0}'
    assert encode(None) is None


def test_schema_value_omits_avro_type_and_names_others():
    state = RegistryState()
    _, records = state.plan_register("s", parse(AVRO, V1), ())
    assert records[0][1] == {
        "subject": "s",
        "version": 1,
        "id": 1,
        "references": [],
        "schema": json.dumps(json.loads(V1), separators=(",", ":")),
        "deleted": False,
    }
    _, records = state.plan_register("j", parse(JSON, '{"type": "object"}'), ())
    assert records[0][1]["schemaType"] == "JSON"


def test_applies_records_written_by_confluent():
    state = RegistryState()
    state.apply(
        b'{"keytype":"SCHEMA","subject":"orders-value","version":1,"magic":1}',
        b'{"subject":"orders-value","version":1,"id":7,"schema":"\\"string\\"","deleted":false}',
    )
    state.apply(b'{"keytype":"CONFIG","subject":"orders-value","magic":0}', b'{"compatibilityLevel":"FULL"}')
    state.apply(b'{"keytype":"MODE","subject":null,"magic":0}', b'{"mode":"READONLY"}')
    state.apply(b'{"keytype":"NOOP","magic":0}', None)
    assert state.subjects() == ["orders-value"]
    assert state.schema_by_id(7).schema == '"string"'
    assert state.compatibility("orders-value") == "FULL"
    assert state.mode("other") == "READONLY"
    state.apply(b'{"keytype":"CONFIG","subject":"orders-value","magic":0}', None)
    assert state.compatibility("orders-value") == "BACKWARD"


def test_malformed_records_are_skipped():
    state = RegistryState()
    state.apply(b"not json", b"{}")
    state.apply(b'{"keytype":"SCHEMA","subject":"x","version":1,"magic":1}', b'{"subject":"x"}')
    state.apply(b'{"keytype":"SOMETHING_NEW","magic":0}', b"{}")
    assert state.subjects() == [] and state.max_id == 0


# ---- registration and ids -----------------------------------------------------------------


def test_register_same_schema_returns_same_id_and_no_records():
    state = RegistryState()
    first = register(state, "s", V1)
    record, records = state.plan_register("s", parse(AVRO, json.dumps(json.loads(V1), indent=4)), ())
    assert (record.id, record.version, records) == (first, 1, [])


def test_same_schema_in_another_subject_reuses_the_id():
    state = RegistryState()
    assert register(state, "a", V1) == register(state, "b", V1) == 1
    assert register(state, "a", V2) == 2
    assert [r.version for r in state.versions("a")] == [1, 2]
    assert sorted(r.subject for r in state.usages_of_id(1)) == ["a", "b"]


def test_new_ids_follow_the_highest_id_ever_in_the_log():
    """A registry taking over a replicated _schemas never reuses an id registered before."""
    state = RegistryState()
    apply(
        state,
        [
            (schema_key("old", 1), {"subject": "old", "version": 1, "id": 41, "schema": V1, "deleted": False}),
            (schema_key("old", 2), {"subject": "old", "version": 2, "id": 100, "schema": V2, "deleted": False}),
        ],
    )
    assert register(state, "new", '"string"') == 101
    apply(state, [(schema_key("old", 2), {**state.get_version("old", 2).to_value(), "deleted": True})])
    apply(state, [(schema_key("old", 2), None)])
    assert register(state, "new2", '"int"') == 102  # a hard-deleted id is not reused either


def test_references_resolve_named_types_from_other_subjects():
    state = RegistryState()
    register(state, "address", avro([{"name": "city", "type": "string"}], name="Address"))
    refs = state.resolve_references([Reference("kdr.test.Address", "address", 1)])
    user = parse(AVRO, avro([{"name": "home", "type": "kdr.test.Address"}]), refs)
    record, _ = state.plan_register("user", user, (Reference("kdr.test.Address", "address", 1),))
    assert record.id == 2
    with pytest.raises(RegistryError) as excinfo:
        state.resolve_references([Reference("kdr.test.Address", "address", 9)])
    assert code_of(excinfo) == errors.INVALID_SCHEMA


# ---- compatibility ------------------------------------------------------------------------


def test_backward_default_refuses_a_field_without_default():
    state = RegistryState()
    register(state, "s", V1)
    with pytest.raises(RegistryError) as excinfo:
        register(state, "s", V2_NO_DEFAULT)
    assert (excinfo.value.status, code_of(excinfo)) == (409, errors.INCOMPATIBLE_SCHEMA)
    assert "email" in excinfo.value.message
    assert register(state, "s", V2) == 2


def test_transitive_checks_every_version():
    state = RegistryState()
    a = avro([{"name": "a", "type": "int"}])
    ab = avro([{"name": "a", "type": "int", "default": 0}, {"name": "b", "type": "int", "default": 0}])
    b = avro([{"name": "b", "type": "int"}])
    apply(state, state.plan_config("s", "forward")[1])
    register(state, "s", a)
    register(state, "s", ab)
    assert register(state, "s", b) == 3  # FORWARD: ab can read b (a has a default)
    apply(state, state.plan_config("s", "FORWARD_TRANSITIVE")[1])
    with pytest.raises(RegistryError):
        register(state, "s", avro([{"name": "c", "type": "int"}]))


# ---- deletes, configs, modes --------------------------------------------------------------


def test_soft_then_hard_delete_of_a_subject():
    state = RegistryState()
    register(state, "s", V1)
    register(state, "s", V2)
    with pytest.raises(RegistryError) as excinfo:
        state.plan_delete_subject("s", permanent=True)
    assert code_of(excinfo) == errors.SUBJECT_NOT_SOFT_DELETED
    versions, records = state.plan_delete_subject("s", permanent=False)
    assert versions == [1, 2] and records[0][0]["keytype"] == "DELETE_SUBJECT"
    apply(state, records)
    assert state.subjects() == [] and state.subjects(deleted=True) == ["s"]
    assert state.schema_by_id(1).deleted  # ids of soft-deleted versions still resolve
    with pytest.raises(RegistryError) as excinfo:
        state.plan_delete_subject("s", permanent=False)
    assert code_of(excinfo) == errors.SUBJECT_SOFT_DELETED
    versions, records = state.plan_delete_subject("s", permanent=True)
    assert all(value is None for _, value in records)
    apply(state, records)
    with pytest.raises(RegistryError) as excinfo:
        state.schema_by_id(1)
    assert code_of(excinfo) == errors.SCHEMA_NOT_FOUND
    assert register(state, "s", V1) == 3


def test_version_delete_and_lookup_of_deleted():
    state = RegistryState()
    register(state, "s", V1)
    register(state, "s", V2)
    version, records = state.plan_delete_version("s", LATEST, permanent=False)
    apply(state, records)
    assert version == 2 and state.get_version("s", LATEST).version == 1
    assert state.get_version("s", 2, deleted=True).deleted
    with pytest.raises(RegistryError) as excinfo:
        state.get_version("s", 2)
    assert code_of(excinfo) == errors.VERSION_NOT_FOUND
    assert register(state, "s", V2) == 2  # same id, new version
    assert state.get_version("s", LATEST).version == 3


def test_not_found_codes():
    state = RegistryState()
    with pytest.raises(RegistryError) as excinfo:
        state.versions("missing")
    assert (excinfo.value.status, code_of(excinfo)) == (404, errors.SUBJECT_NOT_FOUND)
    assert excinfo.value.message == "Subject 'missing' not found."
    register(state, "s", V1)
    with pytest.raises(RegistryError) as excinfo:
        state.lookup("s", parse(AVRO, V2), (), deleted=False)
    assert code_of(excinfo) == errors.SCHEMA_NOT_FOUND


def test_modes_guard_writes_and_import_keeps_given_ids():
    state = RegistryState()
    apply(state, state.plan_mode(None, "READONLY", force=False)[1])
    with pytest.raises(RegistryError) as excinfo:
        register(state, "s", V1)
    assert code_of(excinfo) == errors.OPERATION_NOT_PERMITTED
    apply(state, state.plan_mode(None, "IMPORT", force=False)[1])
    assert register(state, "s", V1, schema_id=42, version=5) == 42
    assert state.get_version("s", LATEST).version == 5
    with pytest.raises(RegistryError) as excinfo:
        register(state, "t", V2, schema_id=42)
    assert code_of(excinfo) == errors.ID_DOES_NOT_MATCH
    with pytest.raises(RegistryError) as excinfo:
        state.plan_mode("x", "IMPORT_ALL", force=False)
    assert code_of(excinfo) == errors.INVALID_MODE
    apply(state, state.plan_mode(None, "READWRITE", force=False)[1])
    with pytest.raises(RegistryError) as excinfo:
        state.plan_mode(None, "IMPORT", force=False)  # subjects exist
    assert code_of(excinfo) == errors.OPERATION_NOT_PERMITTED


def test_config_levels_are_validated():
    state = RegistryState()
    with pytest.raises(RegistryError) as excinfo:
        state.plan_config(None, "SIDEWAYS")
    assert code_of(excinfo) == errors.INVALID_COMPATIBILITY_LEVEL
    assert state.plan_config(None, "full_transitive")[0] == "FULL_TRANSITIVE"
