"""The embedded registry's REST layer without Kafka: in-process, and over HTTP with confluent-kafka's own client and
Avro serdes."""

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
from support.registry import V1, V2, V2_NO_DEFAULT, apply

from kafka_dr_dev.local.registry import errors
from kafka_dr_dev.local.registry.api import RegistryApi, RegistryHttpServer, Request
from kafka_dr_dev.local.registry.election import Member
from kafka_dr_dev.local.registry.schema_log import RegistryState

# ---- in process ----------------------------------------------------------------------------


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
