"""Apache Kafka as a local DC's broker: one KRaft node (broker and controller in one JVM) from the jars Maven fetched.

The jars come from Maven Central through include/kafka/pom.xml (`python -m kafka_dr_dev.local.apache fetch`, run by
`make venv`; Maven's cache in ~/.m2 makes a second fetch download nothing) into the venv, never from a tarball. A node
is a server.properties written from the stack's settings, its log dir formatted once by Kafka's StorageTool, and
`java kafka.Kafka server.properties`. Passwords go into that file (mode 0600) and to the running broker through the
Admin API, never onto a command line, which any local user can read.

Every Kafka JVM here maps its classes from a class-data-sharing archive (`python -m kafka_dr_dev.local.apache archive`,
also run by `make venv`): loading and verifying a node's classes from 94 jars is most of the CPU a start costs, and the
test suite starts dozens of nodes on two cores.
"""

from __future__ import annotations

import base64
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kafka_dr.paths import PROJECT_ROOT

from .ports import free_port

KAFKA_VERSION = "4.2.0"  # include/kafka/pom.xml's kafka.version: what cp-kafka:8.2.0 ships
POM = PROJECT_ROOT / "include" / "kafka" / "pom.xml"
LIBS_ENV = "KDR_KAFKA_LIBS"  # a folder of Kafka's jars to use instead of the venv's
SERVER_CLASS = "kafka.Kafka"
STORAGE_TOOL = "kafka.tools.StorageTool"
# A small heap and the serial collector: a local node holds little, and two of them share two cores with Spark.
JVM_OPTIONS = ("-Xms64m", "-Xmx512m", "-XX:+UseSerialGC", "-Djava.awt.headless=true")
KAFKA_OPTS = "KAFKA_OPTS"  # more JVM options for every Kafka JVM, as kafka-run-class.sh takes them
ARCHIVE = "kafka-node.jsa"  # the class-data-sharing archive, beside the jars it was made from
STARTED_LINE = "Kafka Server started"  # what a node logs once it answers
SCRAM_ITERATIONS = 4096  # Kafka's minimum for both SCRAM mechanisms
# Broker settings of a one-node cluster: internal topics with one replica, and a group's first member assigned at once
# (Confluent's single-broker compose files set the same).
SINGLE_NODE = {
    # The first group and the first transaction make __consumer_offsets and __transaction_state, whose every partition
    # the node's coordinators then load: 10 each instead of 50 make that (and a restart's reload) 5x less work, which
    # kept a DescribeGroups on a node just started unanswered for 15 s under the suite's load.
    "offsets.topic.num.partitions": "10",
    "transaction.state.log.num.partitions": "10",
    "offsets.topic.replication.factor": "1",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "share.coordinator.state.topic.replication.factor": "1",
    "share.coordinator.state.topic.min.isr": "1",
    "group.initial.rebalance.delay.ms": "0",
    # A node killed and started again (`local stop`, then `start`) registers anew only once the controller has
    # expired its old session: 9 s by default, 3 s here (the heartbeats never leave the JVM).
    "broker.heartbeat.interval.ms": "500",
    "broker.session.timeout.ms": "3000",
    # The controller's no-op record every 500 ms shows followers that the metadata log advances; a one-node cluster
    # has none, and each record is applied by the node's every metadata publisher: an idle node spent 2.0 CPU-s a
    # minute with them, 1.3 without (a stack's two nodes beside a laptop's work, a test run's dozens of nodes).
    "metadata.max.idle.interval.ms": "0",
}
_LOG4J = """Configuration:
  Appenders:
    Console:
      name: STDOUT
      PatternLayout:
        pattern: "[%d] %p %m (%c)%n"
  Loggers:
    Root:
      level: INFO
      AppenderRef:
        - ref: STDOUT
    Logger:
      - name: kafka.request.logger
        level: WARN
      - name: org.apache.kafka.controller
        level: WARN
"""


class KafkaJarsMissing(RuntimeError):
    """Apache Kafka's jars are not there (or Maven could not fetch them): one line naming what is missing."""


def libs_dir() -> Path:
    """Where Kafka's jars are: $KDR_KAFKA_LIBS, else the venv's copy of this version."""
    return Path(os.environ.get(LIBS_ENV) or PROJECT_ROOT / ".venv" / "kafka" / KAFKA_VERSION)


def classpath(libs: Path | None = None) -> str:
    """The JVM classpath of Kafka's jars; KafkaJarsMissing when they were never fetched."""
    libs = libs or libs_dir()
    if not (libs / f"kafka_2.13-{KAFKA_VERSION}.jar").is_file():
        raise KafkaJarsMissing(
            f"Apache Kafka {KAFKA_VERSION}'s jars are not in {libs}: run `make venv` "
            f"(or `python -m kafka_dr_dev.local.apache fetch`), which has Maven fetch them"
        )
    return f"{libs}/*"


def fetch(libs: Path | None = None) -> Path:
    """Have Maven copy the POM's jars into `libs`: offline first (everything in ~/.m2 already), online when something
    is missing. A failure is a KafkaJarsMissing naming what Maven could not fetch."""
    libs = libs or libs_dir()
    if shutil.which("mvn") is None:
        raise KafkaJarsMissing("cannot fetch Apache Kafka's jars: no `mvn` on PATH (Maven 3 is needed)")
    partial = libs.with_name(f".{libs.name}.partial")
    shutil.rmtree(partial, ignore_errors=True)
    goal = ["dependency:copy-dependencies", f"-DoutputDirectory={partial}", "-DincludeScope=runtime"]
    base = ["mvn", "-B", "-q", "-f", str(POM), *goal]
    done = subprocess.run([*base, "-o"], capture_output=True, text=True)
    if done.returncode != 0:
        done = subprocess.run(base, capture_output=True, text=True)
    if done.returncode != 0:
        reason = _maven_reason(done.stdout)
        raise KafkaJarsMissing(f"Maven could not fetch Apache Kafka {KAFKA_VERSION}'s jars: {reason}")
    shutil.rmtree(libs, ignore_errors=True)
    libs.parent.mkdir(parents=True, exist_ok=True)
    partial.replace(libs)
    return libs


def _maven_reason(output: str) -> str:
    """The line of Maven's output that names what failed, without its `[ERROR]` and advice."""
    for line in output.splitlines():
        text = line.replace("[ERROR]", "").strip()
        if "Could not" in text or "not found" in text or "Failed to" in text:
            return text[:400]
    return (output.strip().splitlines() or ["mvn failed without output"])[-1][:400]


def version() -> str:
    return f"Apache Kafka {KAFKA_VERSION}"


@dataclass(frozen=True)
class KafkaNode:
    """One local DC's node: what its server.properties say. `users` are the SASL users (PLAIN from the file, SCRAM
    through the Admin API once it runs); `tls_pem` is the PEM file holding the server's key and certificate chain."""

    log_dir: Path
    host: str
    port: int
    controller_port: int
    protocol: str = "PLAINTEXT"
    users: Mapping[str, str] = field(default_factory=dict)
    tls_pem: Path | None = None
    ca_file: Path | None = None
    configs: Mapping[str, str] = field(default_factory=dict)

    @property
    def sasl(self) -> bool:
        return self.protocol.startswith("SASL_")

    def properties(self) -> dict[str, str]:
        listener = self.protocol  # the client listener is named after what it speaks
        props = {
            "process.roles": "broker,controller",
            "node.id": "1",
            "controller.quorum.voters": f"1@{self.host}:{self.controller_port}",
            "controller.listener.names": "CONTROLLER",
            "listeners": f"{listener}://{self.host}:{self.port},CONTROLLER://{self.host}:{self.controller_port}",
            "advertised.listeners": f"{listener}://{self.host}:{self.port}",
            "listener.security.protocol.map": f"{listener}:{self.protocol},CONTROLLER:PLAINTEXT",
            "inter.broker.listener.name": listener,
            "log.dirs": str(self.log_dir),
            **SINGLE_NODE,
        }
        if self.sasl:
            user, password = next(iter(self.users.items()))
            plain_users = " ".join(f"user_{name}={_quoted(secret)}" for name, secret in self.users.items())
            prefix = f"listener.name.{listener.lower()}"
            props |= {
                "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
                # The node talks to itself (inter-broker) as the first user, over PLAIN: SCRAM credentials live in
                # the cluster's metadata, which a starting node has not read yet.
                "sasl.mechanism.inter.broker.protocol": "PLAIN",
                f"{prefix}.plain.sasl.jaas.config": "org.apache.kafka.common.security.plain.PlainLoginModule "
                f"required username={_quoted(user)} password={_quoted(password)} {plain_users};",
                f"{prefix}.scram-sha-256.sasl.jaas.config": _SCRAM_MODULE,
                f"{prefix}.scram-sha-512.sasl.jaas.config": _SCRAM_MODULE,
            }
        if self.tls_pem is not None:
            props |= {
                "ssl.keystore.type": "PEM",
                "ssl.keystore.location": str(self.tls_pem),
                "ssl.truststore.type": "PEM",
                "ssl.truststore.location": str(self.ca_file),
                "ssl.endpoint.identification.algorithm": "",
            }
        return props | dict(self.configs)

    def write(self, path: Path) -> Path:
        """server.properties at `path`, readable by its owner only (it holds the users' passwords)."""
        text = "".join(f"{key}={_escaped(value)}\n" for key, value in self.properties().items())
        return _write_private(path, text.encode())


_SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule required;"


def _quoted(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _escaped(value: str) -> str:
    """A java.util.Properties value: backslashes doubled, line breaks escaped."""
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r")


def write_keystore(cert: Path, key: Path, path: Path) -> Path:
    """The PEM keystore Kafka reads (ssl.keystore.type=PEM): the server's PKCS#8 key, then its certificate."""
    return _write_private(path, key.read_bytes() + cert.read_bytes())


def _write_private(path: Path, data: bytes) -> Path:
    """Readable by its owner only from the start (it holds secrets), then renamed into place."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.unlink(missing_ok=True)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(data)
    tmp.replace(path)
    return path


def write_log_config(path: Path) -> Path:
    """log4j2's configuration: INFO to standard output (the stack's log file), request and controller chatter off."""
    if not path.exists() or path.read_text() != _LOG4J:
        path.write_text(_LOG4J)
    return path


META_PROPERTIES = "meta.properties"
BOOTSTRAP_CHECKPOINT = "bootstrap.checkpoint"  # written by StorageTool format: the log dir is formatted


def cluster_id_of(log_dir: Path) -> str | None:
    """The cluster id in the log dir's meta.properties, None when there is none."""
    try:
        lines = (log_dir / META_PROPERTIES).read_text().splitlines()
    except FileNotFoundError:
        return None
    for line in lines:
        key, _, value = line.partition("=")
        if key.strip() == "cluster.id":
            return value.strip()
    return None


def new_cluster_id() -> str:
    """A KRaft cluster id as `kafka-storage random-uuid` prints it: 22 characters of URL-safe base64, never starting
    with '-' (Kafka's Uuid.randomUuid draws again: a command line would read it as an option)."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not text.startswith("-"):
            return text


def java(libs: Path | None = None) -> list[str]:
    """`java` with the class archive of these jars when there is one (a JVM that finds it stale, say after a JDK
    upgrade, warns and loads its classes as usual), and $KAFKA_OPTS, the JVM options Kafka's own start scripts add."""
    archive = (libs or libs_dir()) / ARCHIVE
    extra = shlex.split(os.environ.get(KAFKA_OPTS, ""))
    return ["java", f"-XX:SharedArchiveFile={archive}", *extra] if archive.is_file() else ["java", *extra]


def ensure_formatted(properties: Path, log_dir: Path, libs: Path | None = None) -> str:
    """Format the log dir once (StorageTool), keeping the cluster id a meta.properties left there (a cluster rebuilt
    on empty disks with its old id); returns the cluster id. A formatted dir is left as it is."""
    cluster_id = cluster_id_of(log_dir)
    if (log_dir / BOOTSTRAP_CHECKPOINT).exists() and cluster_id:
        return cluster_id
    cluster_id = cluster_id or new_cluster_id()
    (log_dir / META_PROPERTIES).unlink(missing_ok=True)
    log_dir.mkdir(parents=True, exist_ok=True)
    tool = [*java(libs), "-Xmx128m", "-cp", classpath(libs), STORAGE_TOOL]
    command = [*tool, "format", f"--cluster-id={cluster_id}", "--config", str(properties)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    if done.returncode != 0:
        last = (done.stdout + done.stderr).strip().splitlines() or [f"exit code {done.returncode}"]
        raise RuntimeError(f"kafka-storage format of {log_dir} failed: {last[-1]}")
    return cluster_id


def server_command(properties: Path, log_config: Path, libs: Path | None = None) -> list[str]:
    """`java ... kafka.Kafka server.properties`: the command a node runs as."""
    return [*java(libs), *_node_arguments(properties, log_config, libs)]


def _node_arguments(properties: Path, log_config: Path, libs: Path | None) -> list[str]:
    return [
        *JVM_OPTIONS,
        f"-Dlog4j2.configurationFile={log_config}",
        "-cp",
        classpath(libs),
        SERVER_CLASS,
        str(properties),
    ]


def ensure_scram_users(settings: dict[str, Any], users: Mapping[str, str], timeout: float = 10.0) -> None:
    """Give every user SCRAM-SHA-256 and -512 credentials with its password (as `kafka-configs --alter
    --add-config SCRAM-...` does), through the Admin API as `settings` connect (PLAIN): idempotent, so each start
    makes the cluster's credentials those of the users file."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import (
        AdminClient,
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialUpsertion,
    )

    admin = AdminClient({**settings, "log_level": 0})
    # One request per mechanism: Kafka refuses two alterations of one user in a request.
    for mechanism in (ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512):
        upserts = [
            UserScramCredentialUpsertion(user, ScramCredentialInfo(mechanism, SCRAM_ITERATIONS), password.encode())
            for user, password in users.items()
        ]
        try:
            for future in admin.alter_user_scram_credentials(upserts, request_timeout=timeout).values():
                future.result()
        except KafkaException as exc:
            raise RuntimeError(f"cannot set the users' {mechanism.name} credentials: {exc.args[0].str()}") from None


def archive(libs: Path | None = None, timeout: float = 120.0) -> Path:
    """Write the class-data-sharing archive of a node's classes into `libs` (the JDK's dynamic AppCDS): a throw-away
    node started with -XX:ArchiveClassesAtExit until it answers, then stopped, which writes the archive as it exits.
    Every later node and StorageTool run maps those classes: a node's start costs about 2.3 CPU-seconds less (of 6.9).
    A RuntimeError names what failed; without an archive Kafka runs as well, only starts slower."""
    libs = libs or libs_dir()
    target = libs / ARCHIVE
    partial = target.with_name(f".{ARCHIVE}.partial")
    partial.unlink(missing_ok=True)
    with tempfile.TemporaryDirectory(prefix="kdr-archive-") as tmp:
        port = free_port("127.0.0.1")
        node = KafkaNode(Path(tmp) / "data", "127.0.0.1", port, free_port("127.0.0.1", frozenset({port})))
        properties = node.write(Path(tmp) / "server.properties")
        ensure_formatted(properties, node.log_dir, libs)
        log_config = write_log_config(Path(tmp) / "log4j2.yaml")
        command = ["java", f"-XX:ArchiveClassesAtExit={partial}", *_node_arguments(properties, log_config, libs)]
        with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) as node_process:
            assert node_process.stdout is not None
            deadline = time.monotonic() + timeout
            for line in node_process.stdout:
                if STARTED_LINE in line or time.monotonic() > deadline:
                    break
            node_process.terminate()  # an orderly exit: the JVM writes the archive then
            try:
                rest, _ = node_process.communicate(timeout=timeout)
            except subprocess.TimeoutExpired:
                node_process.kill()
                raise RuntimeError(f"the node making the class archive did not stop within {timeout:g} s") from None
    if not partial.is_file():
        last = [line for line in rest.splitlines() if line.strip()][-1:] or ["no output"]
        raise RuntimeError(f"no class archive written: {last[0][:300]}")
    partial.replace(target)
    return target


def main(argv: list[str]) -> int:
    """`fetch`: the jars from Maven, then their class archive; `archive`: the archive alone."""
    if argv not in (["fetch"], ["archive"]):
        print("usage: python -m kafka_dr_dev.local.apache fetch|archive", file=sys.stderr)
        return 2
    try:
        libs = fetch() if argv == ["fetch"] else libs_dir()
        classpath(libs)  # KafkaJarsMissing before a node is tried
    except KafkaJarsMissing as exc:
        print(f"kafka-dr: {exc}", file=sys.stderr)
        return 1
    print(f"{version()}: {len(list(libs.glob('*.jar')))} jars in {libs}")
    started = time.monotonic()
    try:
        made = archive(libs)
    except (OSError, RuntimeError, subprocess.SubprocessError) as exc:
        print(f"kafka-dr: Kafka's class archive not made, nodes start slower: {exc}", file=sys.stderr)
        return 0
    print(f"class archive {made} ({made.stat().st_size // 2**20} MiB, {time.monotonic() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
