"""The embedded local stack: settings, process identity, the CLI, and a full disaster cycle.

Tests without the `integration` mark need no server (settings, pid files, CLI input errors). The
integration ones run the real broker and registry processes on free ports in a temporary data
dir, so they never collide with a demo stack running on the default ports.
"""

from __future__ import annotations

import dataclasses
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from support.ports import free_ports
from support.stack import free_stack_config, tear_down

from kafka_dr_dev import cli
from kafka_dr_dev.local.config import EMBEDDED, DcConfig, StackConfig, StackInputError
from kafka_dr_dev.local.stack import BROKER, REGISTRY, LocalStack, ProcessStatus, StackError

TOPIC = "kdr-stack-test"
GROUP = "kdr-stack-test-group"


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def redirect_dc2_registry(capsys: pytest.CaptureFixture[str], stack: LocalStack) -> tuple[int, str, str]:
    """`kafka-dr-dev local restart-registry dc2 --kafkastore dc2 --leader-eligible true`: the DR redirect."""
    argv = ["local", "restart-registry", "dc2", "--kafkastore", "dc2", "--leader-eligible", "true"]
    return run_cli(capsys, *argv, "--data-dir", str(stack.data_dir))


# --- settings and process identity (no servers needed) -------------------------------------------


def test_default_layout_is_designs() -> None:
    config = StackConfig.default()
    dc1, dc2 = config.dc("dc1"), config.dc("dc2")
    assert (dc1.broker_address, dc1.registry_url) == ("127.0.0.1:9091", "http://127.0.0.1:8081")
    assert (dc2.broker_address, dc2.registry_url) == ("127.0.0.1:9092", "http://127.0.0.1:8082")
    # dc2's registry follows dc1's store and may not lead.
    assert (dc1.registry_kafkastore, dc1.registry_leader_eligible) == ("127.0.0.1:9091", True)
    assert (dc2.registry_kafkastore, dc2.registry_leader_eligible) == ("127.0.0.1:9091", False)


def test_commands_follow_the_server_contract(tmp_path: Path) -> None:
    """Apache Kafka: the JVM runs kafka.Kafka on the node's server.properties; the embedded broker and the registry:
    their modules' options."""
    apache_stack = LocalStack(tmp_path / "apache")
    command = apache_stack.command("dc1", BROKER)
    assert command[0] == "java" and command[-2:] == ["kafka.Kafka", str(tmp_path / "apache/dc1/server.properties")]
    assert f"-Dlog4j2.configurationFile={tmp_path}/apache/log4j2.yaml" in command
    stack = LocalStack(tmp_path, StackConfig.default(kafka=EMBEDDED))  # paths without spaces: each command its words
    broker = f"-m kafka_dr_dev.local.broker --host 127.0.0.1 --port 9091 --data-dir {tmp_path}/dc1/broker --node-id 1"
    broker += " --config group.initial.rebalance.delay.ms=0"
    assert stack.command("dc1", BROKER) == [sys.executable, *broker.split()]
    registry = (
        "-m kafka_dr_dev.local.registry --host 127.0.0.1 --port 8082 --kafkastore-bootstrap-servers 127.0.0.1:9091 "
        f"--leader-eligibility false --data-dir {tmp_path}/dc2/registry"
    )
    assert stack.command("dc2", REGISTRY) == [sys.executable, *registry.split()]


def test_config_round_trips_through_stack_json(tmp_path: Path) -> None:
    config = free_stack_config()
    config = config.with_dc(DcConfig("dc2", config.dcs[1].broker_port, config.dcs[1].registry_port, "h:1", True))
    assert StackConfig.from_json(config.to_json(), "stack.json") == config

    (tmp_path / "stack.json").write_text(config.to_json())
    assert json.loads((tmp_path / "stack.json").read_text())["version"] == 1
    assert LocalStack(tmp_path).config == config  # later commands reuse the saved settings
    assert LocalStack(tmp_path / "elsewhere").config == StackConfig.default()


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("{", "stack.json: not valid JSON: "),
        ("[]", "stack.json: not a version 1 stack file"),
        ('{"version": 1, "dcs": {}}', "stack.json: dcs: must be a list"),
        ('{"version": 1, "dcs": []}', "stack.json: no DCs defined"),
        ('{"version": 1, "dcs": [{"name": "dc1"}]}', "stack.json: dcs[0]: must be a mapping with keys name, "),
    ],
)
def test_bad_stack_json_is_refused(tmp_path: Path, text: str, expected: str) -> None:
    (tmp_path / "stack.json").write_text(text)
    with pytest.raises(StackInputError) as info:
        LocalStack(tmp_path)
    assert str(info.value).startswith(f"{tmp_path / 'stack.json'}: {expected.removeprefix('stack.json: ')}")
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"broker_port": 0}, "dcs[1].broker_port: must be a port number 1-65535, got 0"),
        ({"registry_port": "8082"}, "dcs[1].registry_port: must be a port number 1-65535, got '8082'"),
        ({"broker_port": 9091}, "dcs[1].broker_port: port 9091 is also dc1 broker_port"),
        ({"name": "dc1"}, "dcs[1].name: duplicate DC 'dc1'"),
        ({"name": "../x"}, "dcs[1].name: bad DC name '../x'"),
        ({"registry_kafkastore": "nohost"}, "dcs[1].registry_kafkastore: bad address list 'nohost'"),
        ({"registry_leader_eligible": "yes"}, "dcs[1].registry_leader_eligible: must be true or false"),
    ],
)
def test_bad_settings_are_refused(change: dict[str, object], expected: str) -> None:
    config = StackConfig.default()
    dc2 = dataclasses.replace(config.dcs[1], **change)
    with pytest.raises(StackInputError, match="^stack config: " + expected.replace("[", r"\[").replace("]", r"\]")):
        LocalStack("unused", StackConfig(dcs=(config.dcs[0], dc2)))


def test_unknown_dc_is_refused_before_anything_changes(tmp_path: Path) -> None:
    stack = LocalStack(tmp_path / "data")
    for action in (stack.stop, stack.start, stack.wipe, stack.restart_registry):
        with pytest.raises(StackInputError, match=r"^unknown DC 'dc3' \(known: dc1, dc2\)$"):
            action("dc3")
    assert not (tmp_path / "data").exists()


def test_pid_file_of_a_foreign_or_dead_process_is_not_ours(tmp_path: Path) -> None:
    stack = LocalStack(tmp_path, StackConfig.default(kafka=EMBEDDED))
    pid_file = stack.pid_file("dc1", BROKER)
    pid_file.parent.mkdir(parents=True)
    assert stack.pid("dc1", BROKER) is None  # no pid file

    pid_file.write_text(f"{os.getpid()}\n")  # a live process, but not a broker (a recycled pid)
    assert stack.pid("dc1", BROKER) is None

    pid_file.write_text("not a pid\n")
    assert stack.pid("dc1", BROKER) is None

    # A live process whose command line names the module and this data dir is ours ...
    fake = [sys.executable, "-c", "import time; time.sleep(60)", "kafka_dr_dev.local.broker", "--data-dir"]
    with subprocess.Popen([*fake, str(stack.server_dir("dc1", BROKER))], start_new_session=True) as proc:
        try:
            pid_file.write_text(f"{proc.pid}\n")
            assert stack.pid("dc1", BROKER) == proc.pid
            assert stack.pid("dc2", BROKER) is None
            # ... but not another stack's (same module, other data dir).
            assert LocalStack(tmp_path / "other").pid("dc1", BROKER) is None
            # stop() kills it (SIGKILL: a disaster, no shutdown hook) and removes the pid file.
            assert stack.stop("dc1") == ["dc1 broker"]
            assert proc.wait(5) == -9
            assert not pid_file.exists()
        finally:
            proc.kill()
    # A dead process is not running either.
    pid_file.write_text(f"{proc.pid}\n")
    assert stack.pid("dc1", BROKER) is None


def test_down_escalates_to_sigkill(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`down` asks politely (SIGTERM) and kills what is still there after STOP_GRACE; `stop DC`, a disaster, kills at
    once (test_pid_file_of_a_foreign_or_dead_process_is_not_ours)."""
    import kafka_dr_dev.local.stack as stack_module

    monkeypatch.setattr(stack_module, "STOP_GRACE", 0.5)
    stack = LocalStack(tmp_path)
    stubborn = (
        "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('ready', flush=True); time.sleep(60)"
    )
    argv = [sys.executable, "-c", stubborn, "kafka_dr_dev.local.registry", "--data-dir"]
    with subprocess.Popen(
        [*argv, str(stack.server_dir("dc2", REGISTRY))], stdout=subprocess.PIPE, start_new_session=True
    ) as proc:
        try:
            assert proc.stdout is not None and proc.stdout.readline() == b"ready\n"
            stack.pid_file("dc2", REGISTRY).parent.mkdir(parents=True)
            stack.pid_file("dc2", REGISTRY).write_text(str(proc.pid))
            assert stack.down() == ["dc2 registry"]
            assert proc.wait(5) == -9
        finally:
            proc.kill()


def test_status_of_a_stack_never_started(tmp_path: Path) -> None:
    stack = LocalStack(tmp_path, free_stack_config())
    statuses = stack.status(timeout=0.5)
    assert [(s.dc, s.kind) for s in statuses] == [
        ("dc1", "broker"),
        ("dc1", "registry"),
        ("dc2", "broker"),
        ("dc2", "registry"),
    ]
    assert not any(s.alive or s.healthy or s.pid for s in statuses)


def test_up_refuses_a_port_used_by_another_process(tmp_path: Path) -> None:
    config = free_stack_config()
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", config.dcs[0].broker_port))
        squatter.listen()
        stack = LocalStack(tmp_path, config)
        with pytest.raises(StackError) as info:
            stack.up()
        port = config.dcs[0].broker_port
        assert str(info.value) == f"cannot start dc1 broker: 127.0.0.1:{port} is already used by another process"
        assert stack.status(timeout=0.5)[0].detail == f"port {port} is used by another process"
    assert not stack.pid_file("dc1", BROKER).exists()


# --- CLI input errors: one line, exit 2 ----------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        ([], "the following arguments are required: COMMAND"),
        (["local"], "the following arguments are required: ACTION"),
        (["local", "explode"], "argument ACTION: invalid choice: 'explode'"),
        (["local", "stop"], "the following arguments are required: DC"),
        (["local", "up", "--broker-ports", "9091"], "argument --broker-ports: expected two port numbers"),
        (["local", "up", "--broker-ports", "9091,9091"], "ports: dcs[1].broker_port: port 9091 is also dc1"),
        (["local", "restart-registry", "dc2", "--leader-eligible", "maybe"], "expected true or false, got 'maybe'"),
        (["local", "stop", "dc3"], "unknown DC 'dc3' (known: dc1, dc2)"),
        (["local", "wipe", "dc3"], "unknown DC 'dc3' (known: dc1, dc2)"),
        (["local", "restart-registry", "dc9"], "unknown DC 'dc9' (known: dc1, dc2)"),
        (["local", "restart-registry", "dc2", "--kafkastore", "dc9"], "--kafkastore: bad address list 'dc9'"),
    ],
)
def test_cli_bad_input_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], expected: str
) -> None:
    data = ["--data-dir", str(tmp_path / "data")] if len(argv) > 2 else []
    with pytest.raises(SystemExit) as info:
        raise SystemExit(cli.main([*argv, *data]))
    err = capsys.readouterr().err
    assert info.value.code == 2
    assert err.startswith("kafka-dr-dev: error: ")
    assert expected in err
    assert err.count("\n") == 1
    assert not (tmp_path / "data" / "stack.json").exists()


def test_cli_status_of_a_stopped_stack_exits_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, "local", "status", "--data-dir", str(tmp_path))
    assert code == 1
    assert out.splitlines()[0].split() == ["DC", "PROCESS", "PID", "STATE", "ADDRESS", "DETAIL"]
    assert [line.split()[3] for line in out.splitlines()[1:5]] == ["stopped"] * 4


def test_console_scripts_are_installed_the_stack_apart_from_the_product() -> None:
    bin_dir = Path(sys.executable).parent
    product = subprocess.run([bin_dir / "kafka-dr", "--help"], capture_output=True, text=True, timeout=30)
    dev = subprocess.run([bin_dir / "kafka-dr-dev", "--help"], capture_output=True, text=True, timeout=30)
    assert product.returncode == 0 and dev.returncode == 0
    listed = [line.split()[0] for line in product.stdout.splitlines() if line.startswith("    ") and line[4] != " "]
    assert listed[:3] == ["lag", "health", "readiness"] and not {"local", "airflow", "demo"} & set(listed), listed
    dev_listed = [line.split()[0] for line in dev.stdout.splitlines() if line.startswith("    ") and line[4] != " "]
    assert dev_listed == ["local", "airflow", "demo"], dev_listed


# --- the real processes --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def module_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalStack]:
    local = LocalStack(tmp_path_factory.mktemp("kdr") / "data", free_stack_config())
    try:
        yield local
    finally:
        tear_down(local)


@pytest.fixture
def stack(module_stack: LocalStack) -> LocalStack:
    """The module's stack, fully up: a failed test's stopped DC does not cascade into the next."""
    module_stack.up()
    return module_stack


def cluster_id(bootstrap: str, timeout: float = 10) -> str | None:
    return AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=timeout).cluster_id


def by_key(statuses: list[ProcessStatus], dc: str, kind: str) -> ProcessStatus:
    return next(s for s in statuses if (s.dc, s.kind) == (dc, kind))


def kill_and_wait(local: LocalStack, dc: str, kind: str) -> int:
    """SIGKILL a running process (a crash, nothing cleans up) and wait until the stack sees it gone."""
    pid = local.pid(dc, kind)
    assert pid is not None
    os.killpg(pid, 9)
    deadline = time.monotonic() + 5
    while local.pid(dc, kind) is not None and time.monotonic() < deadline:
        time.sleep(0.1)
    return pid


def registry_settings(local: LocalStack, dc: str) -> tuple[str, str]:
    """(kafkastore, leader eligibility) on the command line of the DC's running registry."""
    pid = local.pid(dc, REGISTRY)
    assert pid is not None, f"{dc} registry is not running"
    args = Path(f"/proc/{pid}/cmdline").read_text().split("\0")
    return args[args.index("--kafkastore-bootstrap-servers") + 1], args[args.index("--leader-eligibility") + 1]


def saved_dc(local: LocalStack, dc: str) -> DcConfig:
    """The DC's settings as stack.json has them, read the way a later CLI call reads them."""
    assert json.loads(local.config_file.read_text())["dcs"] == [dataclasses.asdict(d) for d in local.config.dcs]
    return LocalStack(local.data_dir).config.dc(dc)


@pytest.mark.integration
def test_up_reports_every_process_healthy(stack: LocalStack, capsys: pytest.CaptureFixture[str]) -> None:
    statuses = stack.status()
    assert all(s.alive and s.healthy and s.pid for s in statuses), statuses
    ids = {s.dc: s.cluster_id for s in statuses if s.kind == BROKER}
    assert ids["dc1"] and ids["dc2"] and ids["dc1"] != ids["dc2"]
    for dc in ("dc1", "dc2"):
        assert (stack.data_dir / dc / "broker" / "meta.properties").exists()
        assert by_key(statuses, dc, BROKER).log == stack.data_dir / dc / "broker.log"
        assert (stack.data_dir / dc / "registry.log").exists()
    assert LocalStack(stack.data_dir).config == stack.config  # settings persisted for later commands

    code, out, _ = run_cli(capsys, "local", "status", "--data-dir", str(stack.data_dir))
    assert code == 0
    assert [line.split()[3] for line in out.splitlines()[1:5]] == ["healthy"] * 4
    assert ids["dc1"] in out and ids["dc2"] in out


@pytest.mark.integration
def test_up_is_idempotent(stack: LocalStack, capsys: pytest.CaptureFixture[str]) -> None:
    before = {(s.dc, s.kind): s.pid for s in stack.status()}
    assert stack.up() == []
    code, out, _ = run_cli(capsys, "local", "up", "--data-dir", str(stack.data_dir))
    assert code == 0
    assert out.startswith("already running")
    assert {(s.dc, s.kind): s.pid for s in stack.status()} == before


@pytest.mark.integration
def test_up_with_other_ports_while_running_is_refused(stack: LocalStack) -> None:
    with pytest.raises(StackInputError, match=r"runs with other settings .*kafka-dr-dev local down --data-dir"):
        LocalStack(stack.data_dir, free_stack_config()).up()


@pytest.mark.integration
def test_up_restarts_a_dead_process(stack: LocalStack) -> None:
    pid = kill_and_wait(stack, "dc2", BROKER)
    assert stack.up() == ["dc2 broker"]
    assert stack.pid("dc2", BROKER) not in (None, pid)
    assert all(s.healthy for s in stack.status())


@pytest.mark.integration
def test_stop_start_keeps_records_and_committed_offsets(
    stack: LocalStack, capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    dc1 = stack.config.dc("dc1").broker_address
    old_id = cluster_id(dc1)
    sent = [(f"k{i}".encode(), f"v{i}".encode(), [("h", str(i).encode())]) for i in range(10)]
    producer = Producer({"bootstrap.servers": dc1, "acks": "all"})
    for key, value, headers in sent:
        producer.produce(TOPIC, key=key, value=value, headers=headers, partition=0)
    assert producer.flush(15) == 0
    consumer = Consumer({"bootstrap.servers": dc1, "group.id": GROUP, "enable.auto.commit": False})
    consumer.commit(offsets=[TopicPartition(TOPIC, 0, 7)], asynchronous=False)
    consumer.close()

    code, out, _ = run_cli(capsys, "local", "stop", "dc1", "--data-dir", str(stack.data_dir))
    assert code == 0 and out.split() == ["stopped:", "dc1", "registry,", "dc1", "broker"]
    started = time.monotonic()
    with pytest.raises(KafkaException):
        AdminClient({"bootstrap.servers": dc1}).list_topics(timeout=3)
    assert time.monotonic() - started < 5
    statuses = stack.status()
    assert not by_key(statuses, "dc1", BROKER).alive and not by_key(statuses, "dc1", REGISTRY).alive
    assert by_key(statuses, "dc2", BROKER).healthy  # the other DC survives the disaster
    code, out, _ = run_cli(capsys, "local", "status", "--data-dir", str(stack.data_dir))
    assert code == 1
    assert [line.split()[3] for line in out.splitlines()[1:5]] == ["stopped", "stopped", "healthy", "healthy"]

    # Back as a drill's dr.bring_back_command brings it (include/topology.yaml), from an Airflow task's working
    # directory: the stack found by its registry's URL.
    monkeypatch.chdir(tmp_path)
    code, _, err = run_cli(capsys, "local", "start", "dc1", "--registry-url", stack.config.dc("dc1").registry_url)
    assert code == 0, err
    assert all(s.healthy for s in stack.status())
    assert cluster_id(dc1) == old_id
    consumer = Consumer({"bootstrap.servers": dc1, "group.id": GROUP, "enable.auto.commit": False})
    try:
        assert consumer.committed([TopicPartition(TOPIC, 0)], timeout=10)[0].offset == 7
        consumer.assign([TopicPartition(TOPIC, 0, 0)])
        received = []
        deadline = time.monotonic() + 15
        while len(received) < len(sent) and time.monotonic() < deadline:
            msg = consumer.poll(1)
            if msg is not None and not msg.error():
                received.append((msg.key(), msg.value(), list(msg.headers() or [])))
    finally:
        consumer.close()
    assert received == sent


@pytest.mark.integration
def test_restart_registry_redirects_and_persists(stack: LocalStack, capsys: pytest.CaptureFixture[str]) -> None:
    dc2 = stack.config.dc("dc2")
    code, out, _ = redirect_dc2_registry(capsys, stack)
    assert code == 0, out
    assert f"store {dc2.broker_address}, leader-eligible" in out
    saved = LocalStack(stack.data_dir).config.dc("dc2")
    assert (saved.registry_kafkastore, saved.registry_leader_eligible) == (dc2.broker_address, True)
    pid = LocalStack(stack.data_dir).pid("dc2", REGISTRY)
    assert pid is not None
    assert f"--kafkastore-bootstrap-servers\0{dc2.broker_address}\0" in Path(f"/proc/{pid}/cmdline").read_text()

    # And back, through the API; the fixture's stack object then agrees with stack.json again.
    restored = stack.restart_registry("dc2", dc2.registry_kafkastore, leader_eligibility=False)
    assert restored == dc2
    assert LocalStack(stack.data_dir).config == stack.config
    assert by_key(stack.status(), "dc2", REGISTRY).healthy


@pytest.mark.integration
def test_failed_restart_registry_keeps_the_saved_settings(stack: LocalStack) -> None:
    before = stack.config
    old = before.dc("dc2")
    dead_store = f"127.0.0.1:{free_ports(1)[0]}"  # nothing listens there
    # timeout=0: the new registry cannot answer before the deadline, a real refusal of the restart.
    with pytest.raises(StackError) as info:
        stack.restart_registry("dc2", dead_store, leader_eligibility=True, timeout=0)
    message = str(info.value)
    assert message.startswith(f"dc2 registry did not answer on {old.registry_url} within 0 s ")
    assert f"(its store {dead_store} does not answer)" in message
    assert message.endswith(
        f"; dc2 registry runs again with its previous settings (store {old.registry_kafkastore}, follower)"
    )
    assert "\n" not in message

    # The old settings, in memory, in stack.json and for any later command ...
    assert stack.config == before
    assert saved_dc(stack, "dc2") == old
    # ... and in the registry that runs again.
    assert registry_settings(stack, "dc2") == (old.registry_kafkastore, "false")
    assert by_key(stack.status(), "dc2", REGISTRY).healthy

    # A later `up` starts it the old way, not the refused one.
    kill_and_wait(stack, "dc2", REGISTRY)
    assert LocalStack(stack.data_dir).up() == ["dc2 registry"]
    assert registry_settings(stack, "dc2") == (old.registry_kafkastore, "false")


@pytest.mark.integration
def test_cli_restart_registry_that_cannot_come_back_exits_1_keeping_the_settings(
    stack: LocalStack, capsys: pytest.CaptureFixture[str]
) -> None:
    old = stack.config.dc("dc2")
    # A directory where the registry writes its own pid file: any registry of dc2, new settings
    # or old, crashes at startup, so bringing the old one back fails too.
    own_pid_file = stack.server_dir("dc2", REGISTRY) / "schema-registry.pid"
    own_pid_file.unlink(missing_ok=True)
    own_pid_file.mkdir()
    try:
        code, out, err = redirect_dc2_registry(capsys, stack)
        assert (code, out) == (1, "")
        assert err.startswith("kafka-dr-dev: error: dc2 registry exited during startup (exit code 1: IsADirectoryError")
        assert f"; {stack.config_file} keeps the previous settings (store {old.registry_kafkastore}, follower) " in err
        assert "but the registry did not come back: dc2 registry exited during startup" in err
        assert err.count("\n") == 1
        assert saved_dc(stack, "dc2") == old
        assert stack.pid("dc2", REGISTRY) is None
    finally:
        own_pid_file.rmdir()
    assert LocalStack(stack.data_dir).up() == ["dc2 registry"]
    assert registry_settings(stack, "dc2") == (old.registry_kafkastore, "false")


@pytest.mark.integration
def test_wipe_gives_an_empty_cluster_with_a_new_id(stack: LocalStack, capsys: pytest.CaptureFixture[str]) -> None:
    dc1 = stack.config.dc("dc1").broker_address
    old_id = cluster_id(dc1)
    assert TOPIC in AdminClient({"bootstrap.servers": dc1}).list_topics(timeout=10).topics

    code, out, _ = run_cli(capsys, "local", "wipe", "dc1", "--data-dir", str(stack.data_dir))
    assert code == 0 and "dc1 wiped" in out
    assert not (stack.data_dir / "dc1" / "broker").exists()
    assert stack.pid("dc1", BROKER) is None
    stack.start("dc1")

    new_id = cluster_id(dc1)
    assert new_id and new_id != old_id
    assert TOPIC not in AdminClient({"bootstrap.servers": dc1}).list_topics(timeout=10).topics
    consumer = Consumer({"bootstrap.servers": dc1, "group.id": GROUP})
    try:
        assert consumer.committed([TopicPartition(TOPIC, 0)], timeout=10)[0].offset < 0
    finally:
        consumer.close()


@pytest.mark.integration
def test_down_stops_everything(stack: LocalStack, capsys: pytest.CaptureFixture[str]) -> None:
    pids = [s.pid for s in stack.status()]
    code, out, _ = run_cli(capsys, "local", "down", "--data-dir", str(stack.data_dir))
    assert code == 0 and out.startswith("stopped: ")
    for pid in pids:
        assert not Path(f"/proc/{pid}").exists() or not Path(f"/proc/{pid}/cmdline").read_bytes()
    assert not any(s.alive for s in stack.status())
    assert stack.down() == []
