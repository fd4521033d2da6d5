"""HTTP Basic authentication on the embedded schema registry, as Confluent's ``authentication.method=BASIC``.

With confluent-kafka's SchemaRegistryClient: the right ``basic.auth.user.info`` registers and reads, a wrong
password or none gets Confluent's 401 (``{"error_code": 401, "message": "Unauthorized"}`` and a ``WWW-Authenticate``
challenge). A follower forwards a write with the caller's own credentials: its users include one the leader does
not know, whose write the leader refuses. Then ``kafka-dr-dev local up --registry-auth`` end to end (status, stop/start,
restart-registry keep it on), bad input (one line, exit code 2), and no password in any log.

The module's processes (one broker, a leader-eligible registry and a follower on its ``_schemas``) run on free ports
and are stopped by the fixture.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.error import SchemaRegistryError
from support.ports import free_port, free_ports
from support.retry import eventually
from support.servers import ApacheBroker, BasicAuthRegistryProcess, ServerProcess, stop_all
from support.stack import tear_down

from kafka_dr_dev import cli
from kafka_dr_dev.local.registry.auth import AuthConfigError, BasicAuthenticator, authorization_header, load_users
from kafka_dr_dev.local.stack import REGISTRY, LocalStack

pytestmark = pytest.mark.integration

USERS = {"alice": "right-7c1e", "bob": "bob-secret-92d4"}
CAROL = {"carol": "carol-secret-5b0a"}  # known to the follower only
WRONG = "wrong-3f8b"
SECRETS = (*USERS.values(), *CAROL.values(), WRONG)
# What the clients sent, base64-encoded: no more loggable than the passwords.
HEADERS = tuple(
    authorization_header(user, password).split()[1]
    for user, password in [*USERS.items(), *CAROL.items(), ("alice", WRONG)]
)


def record(name: str) -> str:
    return json.dumps({"type": "record", "name": name, "fields": [{"name": "id", "type": "long"}]})


def client(url: str, user_info: str | None = None) -> SchemaRegistryClient:
    conf: dict[str, object] = {"url": url, "max.retries": 0}
    if user_info is not None:
        conf["basic.auth.user.info"] = user_info
    return SchemaRegistryClient(conf)


def assert_unauthorized(call: Callable[[], object]) -> None:
    with pytest.raises(SchemaRegistryError) as info:
        call()
    assert (info.value.http_status_code, info.value.error_code) == (401, 401)
    assert info.value.error_message == "Unauthorized"


class Registries:
    def __init__(self, root: Path) -> None:
        users_file, follower_users = root / "users.json", root / "follower-users.json"
        users_file.write_text(json.dumps(USERS))
        follower_users.write_text(json.dumps({**USERS, **CAROL}))
        self.broker = ApacheBroker("broker", root / "broker")
        self.leader = BasicAuthRegistryProcess("leader", root, self.broker.bootstrap, True, users_file, "alice")
        self.follower = BasicAuthRegistryProcess(
            "follower", root, self.broker.bootstrap, False, follower_users, "alice"
        )
        self.servers: list[ServerProcess] = [self.broker, self.leader, self.follower]


@pytest.fixture(scope="module")
def registries(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Registries]:
    registries = Registries(tmp_path_factory.mktemp("registry-auth"))
    try:
        for server in registries.servers:
            server.start()
        eventually(lambda: registries.leader.leader()["is_leader"], "the leader-eligible registry to lead")
        eventually(lambda: registries.follower.leader()["leader"] == registries.leader.url, "the follower's leader")
        yield registries
    finally:
        stop_all(reversed(registries.servers))


# --- one registry --------------------------------------------------------------------------------------------------


def test_right_password_registers_and_reads(registries: Registries) -> None:
    registry = client(registries.leader.url, f"alice:{USERS['alice']}")
    schema_id = registry.register_schema("auth-orders-value", Schema(record("Order"), "AVRO"))
    assert json.loads(registry.get_schema(schema_id).schema_str) == json.loads(record("Order"))
    assert registry.get_latest_version("auth-orders-value").schema_id == schema_id
    assert "auth-orders-value" in client(registries.leader.url, f"bob:{USERS['bob']}").get_subjects()


def test_wrong_password_gets_401(registries: Registries) -> None:
    registry = client(registries.leader.url, f"alice:{WRONG}")
    assert_unauthorized(registry.get_subjects)
    assert_unauthorized(lambda: registry.register_schema("auth-wrong-value", Schema(record("Wrong"), "AVRO")))
    assert_unauthorized(client(registries.leader.url, f"mallory:{WRONG}").get_subjects)  # unknown user: the same


def test_no_credentials_get_401_with_confluents_body_and_challenge(registries: Registries) -> None:
    assert_unauthorized(client(registries.leader.url).get_subjects)
    for headers in ({}, {"Authorization": "Basic !!not-base64"}, {"Authorization": "Bearer abc"}):
        answer = httpx.get(f"{registries.leader.url}/kdr/leader", headers=headers)
        assert answer.status_code == 401
        assert answer.json() == {"error_code": 401, "message": "Unauthorized"}
        assert answer.headers["www-authenticate"] == 'Basic realm="SchemaRegistry"'
    assert "auth-none-value" not in client(registries.leader.url, f"alice:{USERS['alice']}").get_subjects()


# --- forwarding ----------------------------------------------------------------------------------------------------


def test_follower_forwards_a_registration_with_the_callers_credentials(registries: Registries) -> None:
    as_bob = client(registries.follower.url, f"bob:{USERS['bob']}")
    schema_id = as_bob.register_schema("auth-forwarded-value", Schema(record("Forwarded"), "AVRO"))
    leader = client(registries.leader.url, f"alice:{USERS['alice']}")
    assert leader.get_latest_version("auth-forwarded-value").schema_id == schema_id

    # carol passes the follower, which serves her reads, but her forwarded write reaches the leader with her own
    # credentials, which it refuses: its 401 and challenge come back through the follower.
    as_carol = client(registries.follower.url, f"carol:{CAROL['carol']}")
    assert "auth-forwarded-value" in as_carol.get_subjects()
    assert_unauthorized(lambda: as_carol.register_schema("auth-carol-value", Schema(record("Carol"), "AVRO")))
    token = authorization_header("carol", CAROL["carol"])
    answer = httpx.post(
        f"{registries.follower.url}/subjects/auth-carol-value/versions",
        json={"schema": record("Carol")},
        headers={"Authorization": token},
    )
    assert answer.status_code == 401 and answer.headers["www-authenticate"] == 'Basic realm="SchemaRegistry"'
    assert "wrong credentials for user 'carol'" in registries.leader.log_path.read_text()
    assert "auth-carol-value" not in leader.get_subjects()


def test_refusals_are_logged_with_peer_and_user_and_no_password(registries: Registries) -> None:
    """Runs after every check of the module against these registries: right, wrong and missing credentials."""
    text = registries.leader.log_path.read_text()
    assert "refused a request from 127.0.0.1:" in text and "wrong credentials for user 'alice'" in text
    assert "no credentials" in text and "malformed Basic credentials" in text
    for server in registries.servers:
        log = server.log_path.read_text(errors="replace")
        assert not [s for s in (*SECRETS, *HEADERS) if s in log], f"{server.name} logged a password"


# --- the registry's own input --------------------------------------------------------------------------------------


def test_users_from_the_environment_and_bad_users() -> None:
    assert load_users(None, {"KDR_REGISTRY_USERS": json.dumps(USERS)}) == USERS
    for text, expected in (
        ("", "basic authentication without users"),
        ('{"a:b": "x"}', "a name must be non-empty, without ':'"),
        ('{"alice": ""}', "the password of user 'alice' must be a non-empty string"),
        ("[1]", "must be a non-empty JSON object"),
    ):
        with pytest.raises(AuthConfigError, match=expected):
            load_users(None, {"KDR_REGISTRY_USERS": text})
    auth = BasicAuthenticator({"alice": "pa:ss"})  # a password may hold ':'
    assert auth.authenticate(authorization_header("alice", "pa:ss"), "peer") == "alice"
    assert auth.authenticate(authorization_header("alice", "pa"), "peer") is None


@pytest.mark.parametrize(
    ("args", "env", "expected"),
    [
        (["--authentication-method", "BASIC"], {}, "basic authentication without users: give --basic-auth-users-file"),
        (["--basic-auth-users-file", "/nonexistent.json"], {}, "--basic-auth-users-file needs --authentication-method"),
        (["--authentication-method", "BASIC"], {"KDR_REGISTRY_USERS": "{"}, "users $KDR_REGISTRY_USERS: not JSON"),
    ],
)
def test_registry_refuses_bad_auth_input(args: list[str], env: dict[str, str], expected: str) -> None:
    command = [sys.executable, "-m", "kafka_dr_dev.local.registry", "--port", str(free_port())]
    command += ["--kafkastore-bootstrap-servers", "127.0.0.1:1", *args]
    result = subprocess.run(command, capture_output=True, text=True, env={"PATH": "", **env}, timeout=30)
    assert result.returncode == 2
    assert result.stderr.startswith("schema registry: error: ") and result.stderr.count("\n") == 1
    assert expected in result.stderr


# --- the stack: kafka-dr-dev local up --registry-auth --------------------------------------------------------------


def test_local_up_with_registry_auth(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data, users_file = tmp_path / "data", tmp_path / "users.json"
    users_file.write_text(json.dumps(USERS))
    ports = free_ports(4)
    alice, bob = f"alice:{USERS['alice']}", f"bob:{USERS['bob']}"

    def run(*argv: str) -> int:
        return cli.main(["local", *argv, "--data-dir", str(data)])

    try:
        up = ["up", "--broker-ports", f"{ports[0]},{ports[1]}", "--registry-ports", f"{ports[2]},{ports[3]}"]
        assert run(*up, "--registry-auth", "--users-file", str(users_file)) == 0
        out = capsys.readouterr().out
        assert out.count(", basic auth") == 2
        assert f"schema registries: basic auth required (users from {users_file})" in out
        printed = json.loads(out.split("schema registry client settings: ", 1)[1].splitlines()[0])
        assert printed == {"basic.auth.user.info": "alice:<password of alice>"}
        assert not [s for s in SECRETS if s in out]
        assert json.loads((data / "stack.json").read_text())["security"]["registry_auth"] is True

        stack = LocalStack(data)
        dc1, dc2 = (stack.config.dc(dc).registry_url for dc in ("dc1", "dc2"))
        schema_id = client(dc1, alice).register_schema("stack-value", Schema(record("Stack"), "AVRO"))
        assert eventually(lambda: client(dc2, bob).get_latest_version("stack-value"), "dc2").schema_id == schema_id
        forwarded = client(dc2, bob).register_schema("stack-forwarded-value", Schema(record("Fwd"), "AVRO"))
        assert client(dc1, alice).get_latest_version("stack-forwarded-value").schema_id == forwarded
        assert_unauthorized(client(dc1).get_subjects)
        assert_unauthorized(client(dc2, f"alice:{WRONG}").get_subjects)

        # A disaster and back: `start` brings the registry back with authentication on, as `up` configured it.
        assert run("stop", "dc1") == 0 and run("start", "dc1") == 0
        assert capsys.readouterr().out.count(", basic auth") == 2
        pid = stack.pid("dc1", REGISTRY)
        assert pid is not None and "BASIC" in Path(f"/proc/{pid}/cmdline").read_text().split("\0")
        assert_unauthorized(client(dc1).get_subjects)
        assert "stack-value" in client(dc1, alice).get_subjects()

        # The schema redirect's restart: dc2 on its own store, leader-eligible, still requiring credentials.
        assert run("restart-registry", "dc2", "--kafkastore", "dc2", "--leader-eligible", "true") == 0
        assert_unauthorized(client(dc2).get_subjects)
        as_bob = client(dc2, bob)
        redirected = eventually(  # once it leads its own store's election
            lambda: as_bob.register_schema("stack-redirected-value", Schema(record("Redir"), "AVRO")), "a write"
        )
        assert as_bob.get_latest_version("stack-redirected-value").schema_id == redirected
        assert all(s.healthy for s in stack.status())
    finally:
        tear_down(LocalStack(data))
    logs = list(data.glob("*/*.log"))
    assert {log.name for log in logs} == {"broker.log", "registry.log"}
    for log in logs:
        text = log.read_text(errors="replace")
        assert not [s for s in (*SECRETS, *HEADERS) if s in text], f"{log} holds a password"


@pytest.mark.parametrize(
    ("flags", "users", "expected"),
    [
        (["--registry-auth"], None, "--registry-auth: no users: give --users-file or set KDR_BROKER_USERS to JSON"),
        (["--registry-auth", "--users-file", "{file}"], {"a:b": "x"}, "--registry-auth: users {file}: user 'a:b'"),
        (["--users-file", "{file}"], USERS, "--users-file needs --security sasl_plaintext or sasl_ssl, or --registry"),
    ],
)
def test_local_up_refuses_registry_auth_without_usable_users(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    flags: list[str],
    users: dict[str, str] | None,
    expected: str,
) -> None:
    """One line, exit code 2, nothing started and no settings saved."""
    monkeypatch.delenv("KDR_BROKER_USERS", raising=False)
    users_file, data = tmp_path / "users.json", tmp_path / "data"
    if users is not None:
        users_file.write_text(json.dumps(users))
    argv = ["local", "up", "--data-dir", str(data), *(f.format(file=users_file) for f in flags)]
    with pytest.raises(SystemExit) as info:
        raise SystemExit(cli.main(argv))
    err = capsys.readouterr().err
    assert info.value.code == 2
    assert err.startswith("kafka-dr-dev: error: ") and err.count("\n") == 1
    assert expected.format(file=users_file) in err
    assert not (data / "stack.json").exists() and not (data / "dc1").exists()
