"""The embedded schema registry without Kafka: record format, state machine, compatibility, the
REST layer (in-process, and over HTTP with confluent-kafka's own client and Avro serdes)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.error import SchemaRegistryError
from confluent_kafka.serialization import MessageField, SerializationContext

from kafka_dr.local.registry import errors
from kafka_dr.local.registry.api import RegistryApi, RegistryHttpServer, Request
from kafka_dr.local.registry.compat import can_read, check
from kafka_dr.local.registry.election import Member, elect
from kafka_dr.local.registry.errors import RegistryError
from kafka_dr.local.registry.schemas import AVRO, JSON, PROTOBUF, Reference, parse
from kafka_dr.local.registry.state import (
    LATEST,
    NOOP_KEY,
    RegistryState,
    config_key,
    encode,
    schema_key,
)


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


def test_levels_compare_in_the_right_direction():
    v1, v2_no_default = parse(AVRO, V1), parse(AVRO, V2_NO_DEFAULT)
    assert check("BACKWARD", v2_no_default, [v1])  # new reader misses data for "email"
    assert not check("FORWARD", v2_no_default, [v1])  # old reader ignores the new field
    assert check("FULL", v2_no_default, [v1])
    assert not check("NONE", v2_no_default, [v1])


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


# ---- election -----------------------------------------------------------------------------


def test_election_picks_earliest_started_live_eligible_member():
    a = Member("http://127.0.0.1:1", True, "a", started_at=10.0, ts=100.0)
    b = Member("http://127.0.0.1:2", True, "b", started_at=5.0, ts=94.0)
    c = Member("http://127.0.0.1:3", False, "c", started_at=1.0, ts=100.0)
    assert elect([a, b, c], now=100.0) is a  # b's heartbeat is stale
    assert elect([a, b, c], now=98.0) is b
    assert elect([c], now=100.0) is None
    twin = Member("http://127.0.0.1:0", True, "t", started_at=10.0, ts=100.0)
    assert elect([a, twin], now=100.0) is twin


# ---- REST layer without Kafka -------------------------------------------------------------


class FakeStore:
    """Applies writes to the state at once, as the log would after read-back."""

    bootstrap = "127.0.0.1:0"
    last_error = None

    def __init__(self, state: RegistryState) -> None:
        self.state = state
        self.loaded = threading.Event()

    def sync(self) -> None:
        pass

    def wait_loaded(self) -> None:
        pass

    def write(self, records: list[Any]) -> None:
        apply(self.state, records)


class FakeElector:
    def __init__(self, leader: bool) -> None:
        self.me = Member("http://127.0.0.1:0", leader, "me", 0.0, 0.0)
        self._leader = leader

    def is_leader(self) -> bool:
        return self._leader

    def leader(self) -> Member | None:
        return self.me if self._leader else None

    def members(self) -> list[Member]:
        return [self.me]


def make_api(leader: bool = True) -> RegistryApi:
    state = RegistryState()
    return RegistryApi("http://127.0.0.1:0", state, FakeStore(state), FakeElector(leader))  # type: ignore[arg-type]


def call(api: RegistryApi, method: str, target: str, body: Any = None) -> tuple[int, Any]:
    raw = b"" if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
    response = api.dispatch(Request(method, target, raw, {}))
    assert response.content_type == "application/vnd.schemaregistry.v1+json"
    return response.status, json.loads(response.body)


def test_rest_flow_in_process():
    api = make_api()
    assert call(api, "GET", "/") == (200, {})
    assert call(api, "POST", "/subjects/a%2Fb-value/versions?normalize=False", {"schema": V1}) == (200, {"id": 1})
    assert call(api, "GET", "/subjects") == (200, ["a/b-value"])
    status, body = call(api, "GET", "/subjects/a%2Fb-value/versions/latest")
    assert status == 200 and body["id"] == 1 and body["version"] == 1 and "schemaType" not in body
    assert call(api, "GET", "/schemas/ids/1/subjects") == (200, ["a/b-value"])
    assert call(api, "GET", "/schemas/ids/1/versions") == (200, [{"subject": "a/b-value", "version": 1}])
    assert call(api, "GET", "/schemas/types") == (200, ["JSON", "PROTOBUF", "AVRO"])
    assert call(api, "POST", "/compatibility/subjects/a%2Fb-value/versions/latest", {"schema": V2_NO_DEFAULT}) == (
        200,
        {"is_compatible": False},
    )
    assert call(api, "PUT", "/config/a%2Fb-value", {"compatibility": "NONE"}) == (200, {"compatibility": "NONE"})
    assert call(api, "GET", "/config/a%2Fb-value") == (200, {"compatibilityLevel": "NONE"})
    assert call(api, "GET", "/config") == (200, {"compatibilityLevel": "BACKWARD"})
    assert call(api, "POST", "/subjects/a%2Fb-value/versions", {"schema": V2_NO_DEFAULT})[1] == {"id": 2}
    assert call(api, "DELETE", "/subjects/a%2Fb-value") == (200, [1, 2])
    assert call(api, "DELETE", "/subjects/a%2Fb-value?permanent=true") == (200, [1, 2])
    assert call(api, "GET", "/mode") == (200, {"mode": "READWRITE"})


def test_rest_errors_are_confluent_shaped():
    api = make_api()
    assert call(api, "GET", "/subjects/x/versions") == (
        404,
        {"error_code": 40401, "message": "Subject 'x' not found."},
    )
    assert call(api, "GET", "/schemas/ids/9")[1]["error_code"] == 40403
    assert call(api, "GET", "/subjects/x/versions/zero")[1]["error_code"] == 42202
    assert call(api, "POST", "/subjects/x/versions", b"{oops")[0] == 400
    assert call(api, "POST", "/subjects/x/versions", {"schema": 5})[1]["error_code"] == 42201
    assert call(api, "POST", "/subjects/x/versions", {"schema": "{}", "schemaType": "XML"})[1]["error_code"] == 42201
    assert call(api, "PUT", "/config", {"compatibility": "SOMETIMES"})[1]["error_code"] == 42203
    assert call(api, "GET", "/config/x")[1]["error_code"] == 40408
    assert call(api, "GET", "/config/x?defaultToGlobal=true") == (200, {"compatibilityLevel": "BACKWARD"})
    assert call(api, "GET", "/nowhere") == (404, {"error_code": 404, "message": "HTTP 404 Not Found"})
    assert call(api, "PATCH", "/subjects")[0] == 405


def test_follower_without_leader_refuses_writes_but_serves_reads():
    api = make_api(leader=False)
    status, body = call(api, "POST", "/subjects/x/versions", {"schema": V1})
    assert status == 500 and body["error_code"] == errors.UNKNOWN_LEADER
    assert body["message"].startswith("Leader not known")
    assert call(api, "GET", "/subjects") == (200, [])
    assert call(api, "GET", "/kdr/leader")[1]["leader"] is None
    forwarded = api.dispatch(Request("DELETE", "/subjects/x", b"", {"x-kdr-forwarded-by": "http://127.0.0.1:1"}))
    assert json.loads(forwarded.body)["error_code"] == errors.REQUEST_FORWARDING_FAILED  # never forwarded twice


# ---- over HTTP with confluent-kafka's client and serdes ----------------------------------


@pytest.fixture
def http_registry() -> Iterator[str]:
    api = make_api()
    server = RegistryHttpServer("127.0.0.1", 0, api)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        api.close()


def test_confluent_client_and_avro_serdes(http_registry: str):
    client = SchemaRegistryClient({"url": http_registry})
    serializer = AvroSerializer(client, V2)
    deserializer = AvroDeserializer(SchemaRegistryClient({"url": http_registry}))
    ctx = SerializationContext("users", MessageField.VALUE)
    payload = serializer({"id": 7, "email": "a@b.c"}, ctx)
    assert payload[0] == 0 and int.from_bytes(payload[1:5], "big") == 1
    assert deserializer(payload, ctx) == {"id": 7, "email": "a@b.c"}
    assert client.get_subjects() == ["users-value"]
    assert client.lookup_schema("users-value", Schema(V2, "AVRO")).version == 1
    assert client.get_latest_version("users-value").schema_id == 1
    assert client.test_compatibility("users-value", Schema(V1, "AVRO"))
    assert client.set_compatibility("users-value", "FULL") == {"compatibility": "FULL"}
    assert client.get_compatibility("users-value") == "FULL"
    assert client.register_schema("orders-value", Schema('{"type":"object"}', "JSON")) == 2
    assert client.get_schema(2).schema_type == "JSON"
    assert client.get_schema_types() == ["JSON", "PROTOBUF", "AVRO"]
    assert client.update_global_mode("READWRITE") == "READWRITE"
    with pytest.raises(SchemaRegistryError) as excinfo:
        client.register_schema("users-value", Schema(V2_NO_DEFAULT, "AVRO"))
    assert excinfo.value.http_status_code == 409 and excinfo.value.error_code == 409
    with pytest.raises(SchemaRegistryError) as excinfo:
        client.get_version("nope", 1)
    assert excinfo.value.error_code == 40401
    assert client.delete_subject("orders-value") == [1]
