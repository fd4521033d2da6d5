"""MirrorMaker 2, the peer the benchmarks measure kafka-dr against: Apache Kafka's own replicator in dedicated mode
(`org.apache.kafka.connect.mirror.MirrorMaker mm2.properties`), from the jars `make venv` fetched
(include/kafka/pom.xml carries `connect-mirror` beside the broker), run as `connect-mirror-maker.sh` runs it.

Two configurations: `DEFAULTS`, MirrorMaker 2 as shipped, and `TUNED`, as its users tune it for speed and accurate
offsets (each setting's reason beside it). Both carry `SINGLE_NODE`: the one-node clusters of the benchmarks hold
one replica of every topic, where MirrorMaker 2 asks for three of its internal ones.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from kafka_dr_dev.local import apache

from .cpu import cpu_seconds
from .servers import BrokerProcess, ServerProcess

MAIN_CLASS = "org.apache.kafka.connect.mirror.MirrorMaker"
# kafka-run-class.sh's JVM settings for MirrorMaker (connect-mirror-maker.sh sets the heap): what a user runs.
JVM_OPTIONS = (
    "-Xms256m",
    "-Xmx2g",
    "-server",
    "-XX:+UseG1GC",
    "-XX:MaxGCPauseMillis=20",
    "-XX:InitiatingHeapOccupancyPercent=35",
    "-XX:+ExplicitGCInvokesConcurrent",
    "-Djava.awt.headless=true",
)
STARTED_LINE = "Kafka MirrorMaker started"

SINGLE_NODE = {
    "replication.factor": "1",
    "checkpoints.topic.replication.factor": "1",
    "heartbeats.topic.replication.factor": "1",
    "offset-syncs.topic.replication.factor": "1",
    "config.storage.replication.factor": "1",
    "offset.storage.replication.factor": "1",
    "status.storage.replication.factor": "1",
}
DEFAULTS: dict[str, str] = {}
IDENTITY_POLICY = "org.apache.kafka.connect.mirror.IdentityReplicationPolicy"
TUNED = {
    # One task per core, as kafka-dr's job has one Spark task per core (Connect's default is one task).
    "tasks.max": "2",
    # Checkpoints, and the group offsets written from them, every second instead of every minute: a disaster's
    # consumers resume from the newest translation.
    "emit.checkpoints.interval.seconds": "1",
    "sync.group.offsets.enabled": "true",
    "sync.group.offsets.interval.seconds": "1",
    # An offset sync for every record rather than every 100: the translation is exact instead of up to 100 behind.
    "offset.lag.max": "0",
    # The offset syncs in the target, the DC that survives a disaster of the source.
    "offset-syncs.topic.location": "target",
    # New groups and topics found every 10 s instead of every 10 minutes.
    "refresh.groups.interval.seconds": "10",
    "refresh.topics.interval.seconds": "10",
    # Batches of up to 1 MB, as kafka-dr's writers and the plain loop send them (the records' producer is the Connect
    # worker's, configured through the target cluster's `producer.` settings; linger.ms stays 5 ms, for latency).
    "{target}.producer.batch.size": "1000000",
}


def properties(
    source: BrokerProcess,
    target: BrokerProcess,
    topics: str,
    settings: Mapping[str, str],
    aliases: tuple[str, str] = ("dc1", "dc2"),
    both_ways: bool = False,
) -> str:
    """mm2.properties replicating `topics` (a regex) from `source` to `target`, and back when `both_ways`. A new pair
    of `aliases` is a new replication: MirrorMaker 2 names its internal topics, and with its default policy the
    remote topics, after them (`{source alias}.{topic}`). `{source}` and `{target}` in a setting's key are the
    aliases."""
    a, b = aliases
    lines = {
        "clusters": f"{a}, {b}",
        f"{a}.bootstrap.servers": source.bootstrap,
        f"{b}.bootstrap.servers": target.bootstrap,
        f"{a}->{b}.enabled": "true",
        f"{a}->{b}.topics": topics,
        f"{b}->{a}.enabled": "true" if both_ways else "false",
        **({f"{b}->{a}.topics": topics} if both_ways else {}),
        **SINGLE_NODE,
        **{key.format(source=a, target=b): value for key, value in settings.items()},
    }
    return "".join(f"{key} = {value}\n" for key, value in lines.items())


class MirrorMaker(ServerProcess):
    """One dedicated MirrorMaker 2 process over `mm2.properties` text; ready once it says it started."""

    def __init__(self, name: str, log_dir: Path, text: str) -> None:
        super().__init__(name, log_dir)
        self.config_path = log_dir / f"{name}.properties"
        self.text = text

    def command(self) -> list[str]:
        self.config_path.write_text(self.text)
        log_config = apache.write_log_config(self.config_path.with_name(f"{self.name}-log4j2.yaml"))
        return [
            *apache.java(),
            *JVM_OPTIONS,
            f"-Dlog4j2.configurationFile={log_config}",
            "-cp",
            apache.classpath(),
            MAIN_CLASS,
            str(self.config_path),
        ]

    def ready(self) -> bool:
        return STARTED_LINE in self.log_path.read_text(errors="replace")

    def cpu_seconds(self) -> float:
        """What the JVM used so far (every thread: MirrorMaker 2 runs its connectors and tasks in one process)."""
        assert self.proc is not None
        return cpu_seconds(self.proc.pid)
