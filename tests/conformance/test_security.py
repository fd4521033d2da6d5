"""SASL (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512) and TLS on the embedded broker, checked with two independent clients.

For each mechanism, with confluent-kafka (librdkafka) and kafka-python: the right password produces and consumes a
record, a wrong one gets Kafka's authentication error (SASL_AUTHENTICATION_FAILED and Kafka's message), and a client
that does not authenticate gets no metadata while the broker logs that it refused it. Then the wire itself (what is
refused before authentication, the legacy SaslHandshake v0 exchange), RFC 7677's SCRAM test vector, no password in
any log, and `kafka-dr-dev local up --security sasl_ssl` end to end (brokers, registries, status, stop/start).

What the clients do on the wire (seen in the broker's DEBUG log): librdkafka 2.16 sends ApiVersions v3, SaslHandshake
v1 and SaslAuthenticate v1, even with api.version.request=false; kafka-python 3.0.12 sends SaslHandshake v1 and
SaslAuthenticate v2, and the legacy v0 exchange (raw tokens) when pinned to api_version=(0, 11).
"""

from __future__ import annotations

import base64
import json
import logging
import socket
import struct
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import kafka.errors as KafkaErrors
import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KafkaPythonPartition
from kafka.protocol.sasl import (
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeRequest,
    SaslHandshakeResponse,
)
from support.ports import free_port, free_ports
from support.retry import eventually
from support.servers import SecuredBrokerProcess, stop_all
from support.stack import tear_down

from kafka_dr_dev import cli
from kafka_dr_dev.local.broker.security import (
    SCRAM_SHA_256,
    AuthenticationFailed,
    PlainServer,
    ScramCredential,
    ScramServer,
    ensure_certificates,
    scram_credential,
)
from kafka_dr_dev.local.stack import BROKER, LocalStack

from . import kafka_wire as wire
from .clients import unique
from .conftest import external_mode

pytestmark = pytest.mark.integration

USERS = {"alice": "s3cret-alice-Zq81", "bob": "s3cret-bob-Wm42"}
WRONG = "wr0ng-guess-Kp57"
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
ENABLED = list(MECHANISMS)
CLIENTS = ("confluent", "kafka-python")
PLAIN_FAILED = "Authentication failed: Invalid username or password"
SCRAM_FAILED = "Authentication failed during authentication due to invalid credentials with SASL mechanism {}"
AUTH_WAIT_S = 1.5  # kafka-python's bootstrap_timeout_ms in the failure checks
CLIENT_TIMEOUTS = (KafkaErrors.KafkaTimeoutError, KafkaErrors.RequestTimedOutError)  # kafka-python's own deadlines


def kafka_message(mechanism: str) -> str:
    """Kafka's SaslAuthenticate error message for a wrong password (PlainSaslServer, or the generic SaslException
    text for SCRAM)."""
    return PLAIN_FAILED if mechanism == "PLAIN" else SCRAM_FAILED.format(mechanism)


# --- brokers -----------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def users_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("users") / "users.json"
    path.write_text(json.dumps(USERS))
    path.chmod(0o600)
    return path


@pytest.fixture(scope="module")
def brokers(conformance_root: Path, users_file: Path) -> Iterator[dict[str, SecuredBrokerProcess]]:
    """One broker per security protocol; the SASL_PLAINTEXT one logs every request (DEBUG), so the log check at the
    end covers the most verbose output."""
    if external_mode():
        pytest.skip(
            "needs embedded brokers started with SASL and TLS; an external cluster is not configured by the suite"
        )
    root = conformance_root / "security"
    started: dict[str, SecuredBrokerProcess] = {}
    try:
        for protocol, users, level in (
            ("SASL_PLAINTEXT", users_file, "DEBUG"),
            ("SASL_SSL", users_file, "INFO"),
            ("SSL", None, "INFO"),
        ):
            name = protocol.lower()
            started[protocol] = SecuredBrokerProcess(
                f"broker-{name}", root / name, protocol, users, log_level=level, log_dir=root
            ).start()
        yield started
    finally:
        stop_all(started.values())


def confluent_settings(broker: SecuredBrokerProcess, mechanism: str | None, user: str, password: str) -> dict:
    settings: dict = {"bootstrap.servers": broker.bootstrap, "security.protocol": broker.protocol}
    if mechanism:
        settings.update({"sasl.mechanism": mechanism, "sasl.username": user, "sasl.password": password})
    if broker.tls:
        settings["ssl.ca.location"] = str(broker.ca_file)
    return settings


def kafka_python_settings(broker: SecuredBrokerProcess, mechanism: str | None, user: str, password: str) -> dict:
    settings: dict = {"bootstrap_servers": broker.bootstrap, "security_protocol": broker.protocol}
    if mechanism:
        settings.update({"sasl_mechanism": mechanism, "sasl_plain_username": user, "sasl_plain_password": password})
    if broker.tls:
        settings["ssl_cafile"] = str(broker.ca_file)
    return settings


def confluent_round_trip(settings: dict, topic: str) -> bytes:
    """Produce one record and read it back; the value read."""
    value = f"via librdkafka {topic}".encode()
    delivered: list = []
    producer = Producer({**settings, "log_level": 0})
    producer.produce(topic, value, on_delivery=lambda err, msg: delivered.append(err))
    assert producer.flush(15) == 0 and delivered == [None], delivered
    consumer = Consumer({**settings, "group.id": unique("sec"), "enable.auto.commit": False, "log_level": 0})
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                return message.value()
        raise AssertionError(f"nothing consumed from {topic}")
    finally:
        consumer.close()


def kafka_python_round_trip(settings: dict, topic: str) -> bytes:
    value = f"via kafka-python {topic}".encode()
    producer = KafkaProducer(**settings)
    try:
        producer.send(topic, value).get(timeout=15)
    finally:
        producer.close()
    consumer = KafkaConsumer(**settings, enable_auto_commit=False)
    try:
        partition = KafkaPythonPartition(topic, 0)
        consumer.assign([partition])
        consumer.seek_to_beginning(partition)
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500).values():
                return records[0].value
        raise AssertionError(f"nothing consumed from {topic}")
    finally:
        consumer.close()


def round_trip(client: str, broker: SecuredBrokerProcess, mechanism: str | None, user: str, password: str) -> None:
    topic = unique(f"sec-{client}")
    if client == "confluent":
        got = confluent_round_trip(confluent_settings(broker, mechanism, user, password), topic)
    else:
        got = kafka_python_round_trip(kafka_python_settings(broker, mechanism, user, password), topic)
    assert got.endswith(topic.encode())


def confluent_auth_error(settings: dict) -> KafkaError:
    """The error librdkafka reports (error_cb) for a connection whose SASL authentication the broker refused."""
    errors: list[KafkaError] = []
    producer = Producer({**settings, "error_cb": errors.append, "log_level": 0})
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        producer.poll(0.1)
        found = [e for e in errors if e.code() == KafkaError._AUTHENTICATION]
        if found:
            return found[0]
    raise AssertionError(f"no authentication error reported; errors: {[e.str() for e in errors]}")


def kafka_python_auth_failures(settings: dict, caplog: pytest.LogCaptureFixture) -> list[Exception]:
    """kafka-python 3.0.12 retries the bootstrap connection until bootstrap_timeout_ms, then raises
    KafkaTimeoutError('Unable to bootstrap ...'); each refused attempt is logged with the broker's error as a
    SaslAuthenticationFailedError (what a user sees). Returns those errors. The client's own deadlines can cut an
    attempt short, mid-exchange ('SASL Authentication timed out') or before a request is even sent ('Request timed
    out after 0 ms'), at the end or, on loaded cores, between two refusals (CI, 2026-11-28): those are not answers
    of the broker and are left out. A broker that hung leaves only timeouts, so no failure at all."""
    caplog.clear()
    with (
        caplog.at_level(logging.WARNING, logger="kafka.net.manager"),
        pytest.raises(KafkaErrors.KafkaTimeoutError, match="Unable to bootstrap"),
    ):
        KafkaAdminClient(**settings, bootstrap_timeout_ms=int(AUTH_WAIT_S * 1000))
    failures = [
        arg
        for record in caplog.records
        if record.name == "kafka.net.manager" and str(record.msg).startswith("Bootstrap connection to")
        for arg in record.args or ()
        if isinstance(arg, Exception)
    ]
    return [failure for failure in failures if not isinstance(failure, CLIENT_TIMEOUTS)]


def wait_for_log(broker: SecuredBrokerProcess, since: int, needle: str, timeout: float = 5.0) -> str:
    """The first line the broker logged after byte `since` that holds `needle`."""
    deadline = time.monotonic() + timeout
    while True:
        with open(broker.log_path, "rb") as log:
            log.seek(since)
            for line in log.read().decode(errors="replace").splitlines():
                if needle in line:
                    return line
        if time.monotonic() > deadline:
            raise AssertionError(f"{broker.name} logged no line with {needle!r}:\n{broker.log_tail(20)}")
        time.sleep(0.05)


# --- the right password, a wrong one, none -----------------------------------------------------------------------


@pytest.mark.parametrize("client", CLIENTS)
@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_right_password_produces_and_consumes(brokers, client: str, mechanism: str) -> None:
    round_trip(client, brokers["SASL_PLAINTEXT"], mechanism, "alice", USERS["alice"])


@pytest.mark.parametrize("client", CLIENTS)
@pytest.mark.parametrize("mechanism", ("SCRAM-SHA-512", "PLAIN"))
def test_right_password_over_sasl_ssl(brokers, client: str, mechanism: str) -> None:
    round_trip(client, brokers["SASL_SSL"], mechanism, "bob", USERS["bob"])


@pytest.mark.parametrize("client", CLIENTS)
def test_ssl_without_sasl_produces_and_consumes(brokers, client: str) -> None:
    round_trip(client, brokers["SSL"], None, "", "")


@pytest.mark.parametrize("protocol", ("SASL_PLAINTEXT", "SASL_SSL"))
@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_wrong_password_gets_kafkas_authentication_error_confluent(brokers, protocol: str, mechanism: str) -> None:
    broker = brokers[protocol]
    since = broker.log_path.stat().st_size
    error = confluent_auth_error(confluent_settings(broker, mechanism, "alice", WRONG))
    assert error.code() == KafkaError._AUTHENTICATION
    assert f"SASL authentication error: {kafka_message(mechanism)}" in error.str()
    line = wait_for_log(broker, since, f"SASL/{mechanism} authentication failed")
    assert "'alice'" in line  # a known user is named; what the client sent never is


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_wrong_password_gets_kafkas_authentication_error_kafka_python(
    brokers, caplog: pytest.LogCaptureFixture, mechanism: str
) -> None:
    settings = kafka_python_settings(brokers["SASL_PLAINTEXT"], mechanism, "bob", WRONG)
    failures = kafka_python_auth_failures(settings, caplog)
    assert failures, "kafka-python logged no refused bootstrap connection"
    assert all(isinstance(f, KafkaErrors.SaslAuthenticationFailedError) for f in failures), failures
    assert failures[0].errno == 58
    assert str(failures[0]).endswith(kafka_message(mechanism)), str(failures[0])


def test_wrong_password_over_sasl_ssl_kafka_python(brokers, caplog: pytest.LogCaptureFixture) -> None:
    failures = kafka_python_auth_failures(
        kafka_python_settings(brokers["SASL_SSL"], "SCRAM-SHA-256", "bob", WRONG), caplog
    )
    assert failures and all(isinstance(f, KafkaErrors.SaslAuthenticationFailedError) for f in failures)
    assert str(failures[0]).endswith(kafka_message("SCRAM-SHA-256"))


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_unknown_user_is_refused_like_a_wrong_password(brokers, mechanism: str) -> None:
    error = confluent_auth_error(confluent_settings(brokers["SASL_PLAINTEXT"], mechanism, "mallory", USERS["alice"]))
    assert kafka_message(mechanism) in error.str()


@pytest.mark.parametrize("client", CLIENTS)
def test_unauthenticated_client_gets_no_metadata(brokers, client: str) -> None:
    """A PLAINTEXT client on a SASL port: ApiVersions is answered, its Metadata request closes the connection."""
    broker = brokers["SASL_PLAINTEXT"]
    since = broker.log_path.stat().st_size
    if client == "confluent":
        admin = AdminClient({"bootstrap.servers": broker.bootstrap, "log_level": 0})
        with pytest.raises(KafkaException) as info:
            admin.list_topics(timeout=2)
        assert info.value.args[0].code() in (KafkaError._TRANSPORT, KafkaError._TIMED_OUT)
    else:
        with pytest.raises(KafkaErrors.KafkaTimeoutError, match="Unable to bootstrap"):
            KafkaAdminClient(bootstrap_servers=broker.bootstrap, bootstrap_timeout_ms=int(AUTH_WAIT_S * 1000))
    line = wait_for_log(broker, since, "Metadata request before SASL authentication")
    assert "WARNING" in line and "disconnected" in line


@pytest.mark.parametrize("client", CLIENTS)
def test_client_without_tls_gets_nothing_from_a_tls_port(brokers, client: str) -> None:
    broker = brokers["SSL"]
    since = broker.log_path.stat().st_size
    if client == "confluent":
        with pytest.raises(KafkaException):
            AdminClient({"bootstrap.servers": broker.bootstrap, "log_level": 0}).list_topics(timeout=2)
    else:
        with pytest.raises(KafkaErrors.KafkaTimeoutError):
            KafkaAdminClient(bootstrap_servers=broker.bootstrap, bootstrap_timeout_ms=int(AUTH_WAIT_S * 1000))
    assert "TLS handshake failed" in wait_for_log(broker, since, "TLS handshake failed")


def test_users_from_the_environment(brokers, conformance_root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without --users-file the broker takes its users from $KDR_BROKER_USERS (the same JSON), read at start."""
    password = "s3cret-carol-Tv63"
    monkeypatch.setenv("KDR_BROKER_USERS", json.dumps({"carol": password}))
    root = conformance_root / "security"
    broker = SecuredBrokerProcess("broker-env-users", root / "env-users", "SASL_PLAINTEXT", log_dir=root).start()
    try:
        round_trip("confluent", broker, "SCRAM-SHA-512", "carol", password)
        error = confluent_auth_error(confluent_settings(broker, "PLAIN", "alice", USERS["alice"]))  # not a user here
        assert PLAIN_FAILED in error.str()
    finally:
        broker.stop()
    assert password not in broker.log_path.read_text()


def test_kafka_python_legacy_handshake_v0(brokers) -> None:
    """Pinned to Kafka 0.11 (before KIP-152), kafka-python sends SaslHandshake v0 and then raw SASL tokens, framed
    without a Kafka header; the broker answers them the same way."""
    broker = brokers["SASL_PLAINTEXT"]
    since = broker.log_path.stat().st_size
    settings = kafka_python_settings(broker, "SCRAM-SHA-256", "bob", USERS["bob"])
    topic = unique("sec-legacy")
    assert kafka_python_round_trip({**settings, "api_version": (0, 11)}, topic).endswith(topic.encode())
    assert "SaslHandshakeRequest v0" in wait_for_log(broker, since, "SaslHandshakeRequest v0")


# --- the wire ---------------------------------------------------------------------------------------------------


def _send(sock: socket.socket, request, correlation_id: int) -> None:
    request.with_header(correlation_id=correlation_id, client_id="kdr-security-test")
    sock.sendall(bytes(request.encode(header=True, framed=True)))


def _handshake(sock: socket.socket, mechanism: str, version: int = 1) -> tuple[int, list[str]]:
    _send(sock, SaslHandshakeRequest[version](mechanism=mechanism), 2)
    response = SaslHandshakeResponse.decode(wire.recv_frame(sock), version=version, header=True)
    assert response.header.correlation_id == 2
    return response.error_code, list(response.mechanisms)


def _authenticate(sock: socket.socket, token: bytes) -> tuple[int, str | None, bytes]:
    _send(sock, SaslAuthenticateRequest[1](auth_bytes=token), 3)
    response = SaslAuthenticateResponse.decode(wire.recv_frame(sock), version=1, header=True)
    return response.error_code, response.error_message, bytes(response.auth_bytes)


def _metadata_v0(sock: socket.socket, correlation_id: int) -> None:
    sock.sendall(wire.frame(wire.request_header(wire.METADATA, 0, correlation_id) + struct.pack(">i", 0)))


@pytest.fixture
def sasl_socket(brokers) -> Iterator[socket.socket]:
    with wire.connect(brokers["SASL_PLAINTEXT"].bootstrap, timeout=5) as sock:
        yield sock


def test_api_versions_advertise_the_sasl_apis(sasl_socket: socket.socket) -> None:
    sasl_socket.sendall(wire.api_versions_request(0, 1))
    _, error, keys, _ = wire.parse_api_versions_v0(wire.recv_frame(sasl_socket))
    assert error == 0
    assert keys[17] == (0, 1) and keys[36] == (0, 2)  # what kafka-python's SASL classes (and Kafka) define


def test_requests_before_authentication_close_the_connection(brokers) -> None:
    bootstrap = brokers["SASL_PLAINTEXT"].bootstrap
    with wire.connect(bootstrap, timeout=5) as sock:  # Metadata first: no answer, disconnected
        _metadata_v0(sock, 1)
        assert wire.is_closed_by_peer(sock, 5)
    with wire.connect(bootstrap, timeout=5) as sock:  # one ApiVersions, then only SaslHandshake
        sock.sendall(wire.api_versions_request(0, 1))
        wire.recv_frame(sock)
        sock.sendall(wire.api_versions_request(0, 2))
        assert wire.is_closed_by_peer(sock, 5)
    with wire.connect(bootstrap, timeout=5) as sock:  # SaslAuthenticate before the handshake
        _send(sock, SaslAuthenticateRequest[1](auth_bytes=b"\0alice\0x"), 1)
        assert wire.is_closed_by_peer(sock, 5)
    with wire.connect(bootstrap, timeout=5) as sock:  # after the handshake, only SaslAuthenticate
        assert _handshake(sock, "PLAIN") == (0, ENABLED)
        _metadata_v0(sock, 3)
        assert wire.is_closed_by_peer(sock, 5)
    with wire.connect(bootstrap, timeout=5) as sock:  # sasl.server.max.receive.size: 512 KiB before authentication
        sock.sendall(struct.pack(">i", 524289))
        assert wire.is_closed_by_peer(sock, 5)


def test_unknown_mechanism_gets_the_enabled_ones_then_the_connection_closes(sasl_socket: socket.socket) -> None:
    assert _handshake(sasl_socket, "GSSAPI") == (33, ENABLED)  # UNSUPPORTED_SASL_MECHANISM
    assert wire.is_closed_by_peer(sasl_socket, 5)


def test_sasl_authenticate_v1_right_then_wrong(brokers) -> None:
    with wire.connect(brokers["SASL_PLAINTEXT"].bootstrap, timeout=5) as sock:
        sock.sendall(wire.api_versions_request(0, 1))
        wire.recv_frame(sock)
        assert _handshake(sock, "PLAIN") == (0, ENABLED)
        assert _authenticate(sock, f"\0alice\0{USERS['alice']}".encode()) == (0, None, b"")
        _metadata_v0(sock, 4)
        assert struct.unpack_from(">i", wire.recv_frame(sock))[0] == 4  # authenticated: served
        _send(sock, SaslHandshakeRequest[1](mechanism="PLAIN"), 5)  # no re-authentication here: ILLEGAL_SASL_STATE
        assert SaslHandshakeResponse.decode(wire.recv_frame(sock), version=1, header=True).error_code == 34
    with wire.connect(brokers["SASL_PLAINTEXT"].bootstrap, timeout=5) as sock:
        assert _handshake(sock, "PLAIN") == (0, ENABLED)
        assert _authenticate(sock, f"alice\0alice\0{WRONG}".encode()) == (58, PLAIN_FAILED, b"")
        assert wire.is_closed_by_peer(sock, 5)
    with wire.connect(brokers["SASL_PLAINTEXT"].bootstrap, timeout=5) as sock:  # authzid must be the user
        assert _handshake(sock, "PLAIN") == (0, ENABLED)
        code, message, _ = _authenticate(sock, f"bob\0alice\0{USERS['alice']}".encode())
        assert code == 58
        assert message == "Authentication failed: Client requested an authorization id that is different from username"


def test_legacy_v0_raw_tokens(brokers) -> None:
    """SaslHandshake v0: the token goes as a bare size-prefixed frame and the answer comes back the same way; a
    refused token can only be answered by closing the connection."""
    with wire.connect(brokers["SASL_PLAINTEXT"].bootstrap, timeout=5) as sock:
        assert _handshake(sock, "PLAIN", version=0) == (0, ENABLED)
        sock.sendall(wire.frame(f"\0bob\0{USERS['bob']}".encode()))
        assert wire.recv_frame(sock) == b""
        _metadata_v0(sock, 9)
        assert struct.unpack_from(">i", wire.recv_frame(sock))[0] == 9
    with wire.connect(brokers["SASL_PLAINTEXT"].bootstrap, timeout=5) as sock:
        assert _handshake(sock, "PLAIN", version=0) == (0, ENABLED)
        sock.sendall(wire.frame(f"\0bob\0{WRONG}".encode()))
        assert wire.is_closed_by_peer(sock, 5)


def test_plaintext_listener_answers_sasl_with_illegal_state(bootstrap: str) -> None:
    """Kafka's answer on a listener without SASL (also a real Kafka's: this runs in external mode too)."""
    with wire.connect(bootstrap, timeout=5) as sock:
        assert _handshake(sock, "PLAIN")[0] == 34  # ILLEGAL_SASL_STATE, the connection stays usable
        _metadata_v0(sock, 3)
        assert struct.unpack_from(">i", wire.recv_frame(sock))[0] == 3


# --- SCRAM and PLAIN servers, certificates (no broker) -----------------------------------------------------------

RFC7677_NONCE = "rOprNGfwEbeRWgbNEkqO"
RFC7677_SERVER_NONCE = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
RFC7677_SALT = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
RFC7677_FINAL = f"c=biws,r={RFC7677_NONCE}{RFC7677_SERVER_NONCE},p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="


class _OneUser:
    """Credentials for user "user", password "pencil", with RFC 7677's salt."""

    def __init__(self) -> None:
        self.credential = scram_credential(SCRAM_SHA_256, "pencil", RFC7677_SALT, 4096)

    def scram(self, mechanism: str, user: str) -> ScramCredential | None:
        return self.credential if user == "user" else None


def _rfc7677_server() -> ScramServer:
    return ScramServer(SCRAM_SHA_256, _OneUser(), nonce=lambda: RFC7677_SERVER_NONCE)  # type: ignore[arg-type]


def test_scram_server_verifies_rfc7677_test_vector() -> None:
    server = _rfc7677_server()
    first = server.evaluate(f"n,,n=user,r={RFC7677_NONCE}".encode())
    assert first == f"r={RFC7677_NONCE}{RFC7677_SERVER_NONCE},s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096".encode()
    assert not server.complete
    assert server.evaluate(RFC7677_FINAL.encode()) == b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
    assert server.complete and server.principal == "user"


@pytest.mark.parametrize(
    ("first", "final", "reason"),
    [
        (f"n,,n=user,r={RFC7677_NONCE}", RFC7677_FINAL.replace("p=dHzb", "p=dHzc"), "wrong password for user 'user'"),
        (f"n,,n=user,r={RFC7677_NONCE}", RFC7677_FINAL.replace("r=rOpr", "r=xOpr"), "another nonce"),
        (f"n,,n=user,r={RFC7677_NONCE}", RFC7677_FINAL.replace("c=biws", "c=eSws"), "channel binding differs"),
        (f"n,,n=eve,r={RFC7677_NONCE}", None, "unknown user"),
        (f"p=tls-unique,,n=user,r={RFC7677_NONCE}", None, "channel binding"),
        ("n,,r=abc", None, "must start with n=USER,r=NONCE"),
    ],
)
def test_scram_server_refuses_with_kafkas_message(first: str, final: str | None, reason: str) -> None:
    server = _rfc7677_server()
    with pytest.raises(AuthenticationFailed) as info:
        server.evaluate(first.encode())
        assert final is not None
        server.evaluate(final.encode())
    assert info.value.client_message == SCRAM_FAILED.format("SCRAM-SHA-256")
    assert reason in info.value.reason
    assert "pencil" not in info.value.reason and not server.complete


def test_plain_server_checks_the_password_against_scram_credentials() -> None:
    from kafka_dr_dev.local.broker.security import Credentials

    credentials = Credentials(USERS)
    assert USERS["alice"] not in repr(credentials)
    server = PlainServer(credentials)
    assert server.evaluate(f"\0alice\0{USERS['alice']}".encode()) == b"" and server.principal == "alice"
    for token in (f"\0alice\0{WRONG}", f"\0nobody\0{WRONG}", "no-nul-at-all", "\0alice\0"):
        with pytest.raises(AuthenticationFailed) as info:
            PlainServer(credentials).evaluate(token.encode())
        assert WRONG not in info.value.reason and "no-nul" not in info.value.reason


def test_certificates_are_private_and_reused(tmp_path: Path) -> None:
    files = ensure_certificates(tmp_path / "tls")
    assert (files.key.stat().st_mode & 0o777, files.ca_key.stat().st_mode & 0o777) == (0o600, 0o600)
    assert files.directory.stat().st_mode & 0o777 == 0o700
    first = files.cert.read_bytes()
    assert ensure_certificates(tmp_path / "tls").cert.read_bytes() == first  # reused while valid
    files.key.write_text("not a key")
    assert ensure_certificates(tmp_path / "tls").cert.read_bytes() != first  # a broken pair is made anew


# --- flags, and no secret in any log ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ('{"alice": ', "not JSON (Expecting value at line 1 column 11)"),
        ('["alice"]', 'must be a non-empty JSON object {"user": "password", ...}'),
        ('{"alice": ""}', "the password of user 'alice' must be a non-empty string without NUL"),
    ],
)
def test_broker_refuses_a_malformed_users_file(tmp_path: Path, content: str, expected: str) -> None:
    users = tmp_path / "users.json"
    users.write_text(content)
    port = free_port()
    command = [
        sys.executable,
        "-m",
        "kafka_dr_dev.local.broker",
        "--port",
        str(port),
        "--data-dir",
        str(tmp_path / "d"),
    ]
    result = subprocess.run(
        [*command, "--security-protocol", "sasl_ssl", "--users-file", str(users)],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode == 2
    assert result.stderr == f"kafka-dr broker: error: users {users}: {expected}\n"
    assert not (tmp_path / "d").exists()  # nothing started, nothing written


def test_no_password_in_any_broker_log(brokers) -> None:
    """Runs after every other check of this module has authenticated, failed and been refused against these
    brokers (the SASL_PLAINTEXT one logging every request)."""
    assert "SaslAuthenticateRequest" in brokers["SASL_PLAINTEXT"].log_path.read_text()  # DEBUG output is there
    for broker in brokers.values():
        text = broker.log_path.read_text(errors="replace")
        for secret in (*USERS.values(), WRONG):
            assert secret not in text, f"{broker.name} logged a password"


# --- the stack: kafka-dr-dev local up --security sasl_ssl ------------------------------------------------------------


def test_local_up_with_sasl_ssl(tmp_path: Path, users_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = tmp_path / "data"
    ports = free_ports(4)

    def run(*argv: str) -> int:
        return cli.main(["local", *argv, "--data-dir", str(data)])

    try:
        up = ["up", "--broker-ports", f"{ports[0]},{ports[1]}", "--registry-ports", f"{ports[2]},{ports[3]}"]
        assert run(*up, "--security", "sasl_ssl", "--users-file", str(users_file)) == 0
        out = capsys.readouterr().out
        assert out.count(", SASL_SSL") == 2 and out.count(", as alice") == 2  # brokers' protocol, registries' user
        printed = json.loads(out.split("client settings: ", 1)[1].splitlines()[0])
        assert printed == {
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "SCRAM-SHA-256",
            "sasl.username": "alice",
            "sasl.password": "<password of alice>",
            "ssl.ca.location": str(data / "tls" / "ca.pem"),
        }
        assert USERS["alice"] not in out

        stack = LocalStack(data)
        for dc in ("dc1", "dc2"):
            address = stack.config.dc(dc).broker_address
            settings = {**printed, "sasl.password": USERS["alice"], "bootstrap.servers": address}
            topic = unique(f"stack-{dc}")
            assert confluent_round_trip(settings, topic).endswith(topic.encode())
        # The registries' store is the SASL_SSL dc1 broker: a registration is a write to its _schemas topic.
        registry = SchemaRegistryClient({"url": stack.config.dc("dc1").registry_url})
        schema = Schema('{"type": "record", "name": "Order", "fields": [{"name": "id", "type": "long"}]}', "AVRO")
        schema_id = registry.register_schema("orders-value", schema)
        follower = SchemaRegistryClient({"url": stack.config.dc("dc2").registry_url})
        # A follower serves what it has read of the store so far: the registration reaches it a moment later (a
        # read at once lost that race once under the whole suite's load).
        served = eventually(lambda: follower.get_schema(schema_id), f"dc2's registry to serve id {schema_id}", 10)
        assert json.loads(served.schema_str) == json.loads(schema.schema_str)

        # A disaster and back: `start` restarts the broker as `up` configured it.
        assert run("stop", "dc1") == 0 and run("start", "dc1") == 0
        assert "cluster id" in capsys.readouterr().out
        pid = stack.pid("dc1", BROKER)
        assert pid is not None
        assert str(stack.broker_properties("dc1")) in Path(f"/proc/{pid}/cmdline").read_text().split("\0")
        assert "listeners=SASL_SSL://" in stack.broker_properties("dc1").read_text()
        assert all(s.healthy for s in stack.status())
        with pytest.raises(KafkaException):  # and it still refuses a client without credentials
            AdminClient({"bootstrap.servers": stack.config.dc("dc1").broker_address, "log_level": 0}).list_topics(
                timeout=1
            )
    finally:
        tear_down(LocalStack(data))
    for log in data.glob("*/*.log"):
        text = log.read_text(errors="replace")
        assert all(secret not in text for secret in USERS.values()), f"{log} holds a password"


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        (
            ["--security", "sasl_plaintext", "--users-file", "{bad}"],
            "SASL_PLAINTEXT: users {bad}: the password of user 'alice' must be a non-empty string without NUL",
        ),
        (["--security", "sasl_ssl"], "SASL_SSL: no SASL users: give a users file or set KDR_BROKER_USERS to JSON"),
        (["--security", "ssl", "--users-file", "{bad}"], "--users-file needs --security sasl_plaintext or sasl_ssl"),
        (["--sasl-mechanism", "PLAIN"], "--sasl-mechanism needs --security sasl_plaintext or sasl_ssl"),
        (["--security", "tls"], "argument --security: invalid choice: 'tls'"),
        (["--security", "sasl_ssl", "--sasl-mechanism", "GSSAPI"], "argument --sasl-mechanism: invalid choice"),
    ],
)
def test_local_up_refuses_bad_security_input(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, flags: list[str], expected: str
) -> None:
    """One line, exit code 2, nothing started and no settings saved."""
    monkeypatch.delenv("KDR_BROKER_USERS", raising=False)
    bad = tmp_path / "users.json"
    bad.write_text('{"alice": 1}')
    data = tmp_path / "data"
    argv = ["local", "up", "--data-dir", str(data), *(f.format(bad=bad) for f in flags)]
    with pytest.raises(SystemExit) as info:
        raise SystemExit(cli.main(argv))
    err = capsys.readouterr().err
    assert info.value.code == 2
    assert err.startswith("kafka-dr-dev: error: ") and err.count("\n") == 1
    assert expected.format(bad=bad) in err
    assert not (data / "stack.json").exists() and not (data / "dc1").exists()
