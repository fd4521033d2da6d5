"""kafka-dr against MirrorMaker 2 on the same two Apache Kafka clusters, with the same data, in the same run (`make
bench-peers`). MirrorMaker 2 runs twice: with its defaults and tuned as its users tune it (support.mirrormaker says
which settings and why); kafka-dr with its defaults, and for latency also tuned (TUNED_EPOCH_S).

throughput: a bounded copy of --records records of --size bytes over 8 partitions, in --rounds rounds; each round
  kafka-dr's job (the whole spark-submit), MirrorMaker 2 with its defaults, then tuned, one after the other, each into
  topics of its own. Per tool: records/s from its start until every record is in the target and over its copy phase,
  and CPU-seconds per million records of all its processes (read from /proc); the brokers' CPU-seconds beside them.
  Medians of the rounds.
latency: continuous replication while a producer writes --rate records/s (and ten times that) for --seconds, each
  tool alone on the brokers: p50/p99/max of arrival time in the target minus CreateTime, and the tool's CPU.
active-active: both directions on, the topic's name the same in both clusters (MirrorMaker 2 with its
  IdentityReplicationPolicy, kafka-dr with two flows and no rename); --active-records records written in each DC,
  then --seconds of replication: the records each cluster holds (each should hold both DCs' records once).
offsets: --groups consumer groups at varied lags while every tool replicates the same topic at once; dc1 killed at
  a random moment; each tool's translations (kafka-dr's checkpoints, MirrorMaker 2's as RemoteClusterUtils reads
  them) against the records' origin: records each group would read again or skip, and the translations' age. Last:
  it kills dc1.
failover: each tool on two clusters of its own: --failover-rate records/s into dc1 and an application consuming them
  there (at least once: it commits each batch it processed); dc1 killed at a random moment (the same for every
  tool); then the tool's failover as a person runs it (kafka-dr: dr_failover; MirrorMaker 2: its documented procedure,
  scripted) and the application in dc2 on the copy. Per tool: each step's seconds, the wall time from the kill to
  the application's first record in dc2, records lost, delivered twice and skipped.

One JSON line with every figure at the end.

    make bench-peers
    PYTHONPATH=tests .venv/bin/python tests/benchmarks/peers_benchmark.py
        [throughput|latency|active-active|offsets|failover|all]
"""

from __future__ import annotations

import argparse
import bisect
import contextlib
import json
import os
import random
import signal
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from benchmarks.replication_benchmark import create, fill, first_copy, send_and_measure, warm_up, write_topology
from confluent_kafka import Consumer, Message, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec
from support.cpu import TreeCpu, cpu_seconds
from support.drills import fail_over, states_of
from support.mirrormaker import DEFAULTS, IDENTITY_POLICY, TUNED, MirrorMaker, properties
from support.servers import BrokerProcess, temporary_brokers
from support.spark import last_json_line
from support.topology import write_topology as write_clusters_topology

from kafka_dr.clients import offsets_of
from kafka_dr.replication import replicators
from kafka_dr.replication.internal import CHECKPOINTS, read_records
from kafka_dr.spark.submit import spark_env, spark_submit_command
from kafka_dr.translation.checkpoints import dated_checkpoints_in
from kafka_dr.translation.groups import apply_offsets
from kafka_dr_dev.local.apache import KAFKA_VERSION

PARTITIONS = 8
TOPIC = "peers"
ROUNDS = 3
COPY_TIMEOUT_S = 600.0
SETTLE_S = 3.0  # between two measured runs: what the last one left (a JVM exiting, a broker's flush) settles
MM2_CONFIGS = {"mm2-defaults": DEFAULTS, "mm2-tuned": TUNED}
# kafka-dr tuned for latency: a continuous replicator's Spark job hands over to the next every epoch (half a second
# when nothing copies); a minute between hand-overs instead of the default 5 s.
TUNED_EPOCH_S = 60
CONTINUOUS = ("kafka-dr", "kafka-dr-tuned", *MM2_CONFIGS)


def brokers_cpu(dc1: BrokerProcess, dc2: BrokerProcess) -> float:
    return sum(cpu_seconds(broker.proc.pid) for broker in (dc1, dc2) if broker.proc is not None)


class Watermarks:
    """The records a topic holds in one cluster: its partitions' high watermarks summed (0 before it exists), asked
    through one open client (a benchmark that asks every 0.1 s should not connect every 0.1 s)."""

    def __init__(self, broker: BrokerProcess) -> None:
        self.admin = AdminClient(broker.config)

    def total(self, topic: str) -> int:
        # All topics' metadata: asking for one by name makes a broker with auto.create.topics.enable (Kafka's default)
        # create it, with one partition, before the tool does.
        metadata = self.admin.list_topics(timeout=10).topics.get(topic)
        if metadata is None or metadata.error is not None:
            return 0
        partitions = [(topic, p) for p in metadata.partitions]
        return sum(offsets_of(self.admin, partitions, OffsetSpec.latest()).values())


def kafka_dr_copy(dc1: BrokerProcess, dc2: BrokerProcess, root: Path, records: int, n: int) -> dict:
    """kafka-dr's bounded copy into `peers.copy-N`: the whole spark-submit, timed and charged with every process it
    starts (the driver JVM and Python, the worker daemon and its workers)."""
    topology = write_topology(root / f"kdr-{n}.yaml", dc1, dc2, TOPIC, f"bench-{n}")
    command = spark_submit_command("replicate", ["--topology", str(topology), "--flow", f"bench-{n}"])
    brokers_before = brokers_cpu(dc1, dc2)
    started = time.perf_counter()
    proc = subprocess.Popen(command, env=spark_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    cpu = TreeCpu(proc.pid)
    out, err = proc.communicate(timeout=COPY_TIMEOUT_S)
    seconds = time.perf_counter() - started
    used = cpu.stop()
    summary = last_json_line(out)
    assert proc.returncode == 0 and summary.get("records", 0) >= records, (summary, err[-3000:])
    return figures(records, seconds, summary["copy_seconds"], used, brokers_cpu(dc1, dc2) - brokers_before)


def mm2_copy(dc1: BrokerProcess, dc2: BrokerProcess, root: Path, records: int, n: int, name: str) -> dict:
    """MirrorMaker 2's copy, from its start until every record is in the target (`from-{name}-{N}.peers`, its default
    policy's name for the topic of the cluster aliased from-{name}-{N}: new aliases each run, so that it keeps no
    offsets of an earlier run); its JVM's CPU at that moment."""
    aliases = (f"from-{name}-{n}", f"to-{name}-{n}")
    copy = f"{aliases[0]}.{TOPIC}"
    text = properties(dc1, dc2, TOPIC, MM2_CONFIGS[name], aliases)
    target = Watermarks(dc2)
    brokers_before = brokers_cpu(dc1, dc2)
    started = time.perf_counter()
    with mirror_maker(root, f"{name}-{n}", text) as mm2:
        deadline = time.monotonic() + COPY_TIMEOUT_S
        first = None  # when the first copy was there: MirrorMaker 2's copy phase starts
        while (held := target.total(copy)) < records:
            if held and first is None:
                first = time.perf_counter()
            mm2.check_alive()
            assert time.monotonic() < deadline, f"{name}: {held} of {records} in {copy}; see {mm2.log_path}"
            time.sleep(0.1)
        ended = time.perf_counter()
        used = mm2.cpu_seconds()
        brokers = brokers_cpu(dc1, dc2) - brokers_before
    copying = ended - (first or ended)
    # At least once: a record sent twice (a retried batch) would show as more than `records`.
    return {**figures(records, ended - started, copying, used, brokers), "records_in_target": target.total(copy)}


@contextmanager
def mirror_maker(root: Path, name: str, text: str) -> Iterator[MirrorMaker]:
    """A MirrorMaker 2 process, started without waiting (the copy starts whenever it does), stopped at the end."""
    mm2 = MirrorMaker(name, root, text)
    mm2.start(wait=False)
    try:
        yield mm2
    finally:
        mm2.stop(timeout=60)


def figures(records: int, seconds: float, copy_seconds: float, cpu: float, brokers_cpu_s: float) -> dict:
    """A bounded copy's figures: from the tool's start, and over its copy phase (the first copy to the last, as
    kafka-dr's job counts its copy tasks; for MirrorMaker 2 sampled every 0.1 s)."""
    return {
        "seconds": round(seconds, 2),
        "records_per_s": round(records / seconds),
        "copy_seconds": round(copy_seconds, 2),
        "copy_records_per_s": round(records / copy_seconds) if copy_seconds else None,
        "cpu_s": round(cpu, 2),
        "cpu_s_per_million": round(cpu * 1_000_000 / records, 2),
        "records_per_cpu_s": round(records / cpu),
        "brokers_cpu_s": round(brokers_cpu_s, 2),
    }


def throughput(dc1: BrokerProcess, dc2: BrokerProcess, root: Path, records: int, size: int, rounds: int) -> dict:
    create(dc1, TOPIC, PARTITIONS)
    fill(dc1, TOPIC, records, size, PARTITIONS)
    runs: dict[str, list[dict]] = {"kafka-dr": [], **{name: [] for name in MM2_CONFIGS}}
    for n in range(1, rounds + 1):
        for tool, found in runs.items():
            time.sleep(SETTLE_S)
            if tool == "kafka-dr":
                found.append(kafka_dr_copy(dc1, dc2, root, records, n))
            else:
                found.append(mm2_copy(dc1, dc2, root, records, n, tool))
            print(f"round {n}/{rounds} {tool}: {found[-1]}", flush=True)
    medians = {
        tool: {key: statistics.median(run[key] for run in found) for key in found[0]} for tool, found in runs.items()
    }
    kdr = medians["kafka-dr"]
    return {
        "records": records,
        "record_bytes": size,
        "partitions": PARTITIONS,
        "rounds": rounds,
        **medians,
        "ratios": {
            name: {
                "records_per_s": round(kdr["records_per_s"] / medians[name]["records_per_s"], 3),
                "copy_records_per_s": round(kdr["copy_records_per_s"] / medians[name]["copy_records_per_s"], 3),
                "records_per_cpu_s": round(kdr["records_per_cpu_s"] / medians[name]["records_per_cpu_s"], 3),
            }
            for name in MM2_CONFIGS
        },
        "runs": runs,
    }


def latency(dc1: BrokerProcess, dc2: BrokerProcess, root: Path, rates: list[int], seconds: int) -> dict:
    """Each tool alone, at each rate: a topic of its own, the tool started, its first copy awaited, then measured;
    its CPU-seconds over the measured part (the warm-up's traffic and the measured records)."""
    found: dict[str, dict] = {}
    for rate in rates:
        for tool in CONTINUOUS:
            topic = f"live-{tool}-{rate}"
            create(dc1, topic, PARTITIONS)
            time.sleep(SETTLE_S)
            with replicating(tool, dc1, dc2, root, topic) as running:
                first_copy(dc1, dc2, topic, running.copy, running.alive, running.log)
                before = running.cpu()
                figures = send_and_measure(dc1, dc2, topic, running.copy, rate, seconds, PARTITIONS)
                figures["cpu_s_per_minute"] = round(
                    60 * (running.cpu() - before) / (figures["warm_seconds"] + seconds), 1
                )
            found[f"{tool}@{rate}"] = figures
            print(f"latency {tool} at {rate}/s: {figures}", flush=True)
    return found


@dataclass
class Running:
    """A tool replicating continuously: the copy's name in dc2, whether the tool still runs, its CPU-seconds so far,
    and its logs."""

    copy: str
    alive: Callable[[], bool]
    cpu: Callable[[], float]
    logs: list[Path]

    @property
    def log(self) -> str:
        return f"see {', '.join(map(str, self.logs))}"

    def log_lines(self, containing: str = "", last: int = 30) -> str:
        """The last `last` lines of its logs that contain `containing`."""
        found = [line for path in self.logs if path.exists() for line in path.read_text(errors="replace").splitlines()]
        return "\n".join([line for line in found if containing in line][-last:])


@contextmanager
def replicating(
    tool: str, dc1: BrokerProcess, dc2: BrokerProcess, root: Path, topic: str, both_ways: bool = False
) -> Iterator[Running]:
    """`tool` replicating `topic` continuously from dc1 to dc2 (and back when `both_ways`, the name kept)."""
    if tool.startswith("kafka-dr"):
        epoch = f", epoch_seconds: {TUNED_EPOCH_S}" if tool == "kafka-dr-tuned" else ""
        rename = "" if both_ways else ', rename: {".*": "{topic}.copy"}'
        flows = f'  - {{name: {topic}, source: dc1, target: dc2, topics: {{include: ["{topic}"]}}{rename}{epoch}}}\n'
        if both_ways:
            flows += f'  - {{name: {topic}-back, source: dc2, target: dc1, topics: {{include: ["{topic}"]}}{epoch}}}\n'
        topology = write_clusters_topology(root / f"{topic}.yaml", {"dc1": dc1.bootstrap, "dc2": dc2.bootstrap}, flows)
        names = [topic, f"{topic}-back"] if both_ways else [topic]
        logs = [root / f"kafka-dr-{name}.log" for name in names]
        procs = [
            subprocess.Popen(
                spark_submit_command(
                    "replicate", ["--topology", str(topology), "--flow", name, "--mode", "continuous"]
                ),
                env=spark_env(),
                stdout=log.open("w"),
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
            for name, log in zip(names, logs, strict=True)
        ]
        trees = [TreeCpu(proc.pid) for proc in procs]
        try:
            yield Running(
                topic if both_ways else f"{topic}.copy",
                lambda: all(p.poll() is None for p in procs),
                lambda: sum(tree.seconds for tree in trees),
                logs,
            )
        finally:
            for proc in procs:
                with contextlib.suppress(ProcessLookupError):  # one that died is reported by the caller
                    os.killpg(proc.pid, signal.SIGTERM)
            for proc in procs:
                proc.wait(60)
            for tree in trees:
                tree.stop()
    else:
        settings = {**MM2_CONFIGS[tool], **({"replication.policy.class": IDENTITY_POLICY} if both_ways else {})}
        # New aliases, new internal topics: nothing of an earlier run, nor of another MirrorMaker 2 beside this one.
        aliases = (f"{tool}-{topic}-from", f"{tool}-{topic}-to")
        text = properties(dc1, dc2, topic, settings, aliases, both_ways)
        with mirror_maker(root, f"{tool}-{topic}", text) as mm2:
            copy = topic if both_ways else f"{aliases[0]}.{topic}"
            yield Running(copy, mm2.running, mm2.cpu_seconds, [mm2.log_path])


def active_active(dc1: BrokerProcess, dc2: BrokerProcess, root: Path, records: int, seconds: int) -> dict:
    """Both directions on, the same topic name on both sides: `records` written in each DC first, then `seconds`
    of replication; what each cluster then holds (each should hold 2 x `records`: its own and the other's once)."""
    found = {}
    for tool in ("kafka-dr", "mm2-tuned"):  # MirrorMaker 2 tuned: its IdentityReplicationPolicy is the tuning here
        topic = f"aa-{tool}"
        for broker in (dc1, dc2):
            create(broker, topic, PARTITIONS)
            fill(broker, topic, records, 200, PARTITIONS)
        time.sleep(SETTLE_S)
        with replicating(tool, dc1, dc2, root, topic, both_ways=True):
            time.sleep(seconds)
        # kafka-dr's copies are written in transactions, whose commit markers take offsets: records are counted.
        counted = {name: count_records(broker, topic) for name, broker in (("dc1", dc1), ("dc2", dc2))}
        found[tool] = {
            "written_in_each_dc": records,
            "expected_in_each_dc": 2 * records,
            "records": counted,
            "copied_back_and_forth": sum(counted.values()) - 4 * records,
        }
        print(f"active-active {tool}: {found[tool]}", flush=True)
    return found


# --- offsets after a disaster ----------------------------------------------------------------------------------------

GROUPS = 1000
BEHIND = (1000, 5000)  # records a lagging group stays behind its partitions' ends
MOVE_EVERY_S = 5.0  # the live and lagging groups commit again this often
FILL_PER_PARTITION = 20_000  # before the groups' first commits: room to be thousands behind
# The cut, seconds after every tool copies: past MirrorMaker 2's first checkpoints at its default 60 s interval, and
# the idle groups idle for minutes by then.
CUT_AFTER_S = (90.0, 180.0)


def wait_for_copies(dc2: BrokerProcess, running: Running, timeout: float = 180.0) -> None:
    """Until the tool's copy holds records."""
    held, deadline = Watermarks(dc2), time.monotonic() + timeout
    while not held.total(running.copy):
        if not running.alive() or time.monotonic() > deadline:
            raise AssertionError(f"nothing copied into {running.copy}; {running.log}:\n{running.log_lines()}")
        time.sleep(0.5)


def mm2_checkpoints(dc2: BrokerProcess, source_alias: str, copy: str) -> dict[str, dict[int, tuple[int, int, int]]]:
    """What `RemoteClusterUtils.translateOffsets` returns, with what each translation came from and when: the last
    record per group and partition of `copy` in MirrorMaker 2's `{source alias}.checkpoints.internal`, as
    {group: {partition: (upstream offset, downstream offset, epoch ms)}}. Key: group, topic, partition; value: version,
    upstream offset, downstream offset, metadata (Kafka's Struct encoding: int16-prefixed strings, big-endian)."""
    found: dict[str, dict[int, tuple[int, int, int]]] = {}
    for message in read_records(dc2.config, f"{source_alias}.checkpoints.internal"):
        key = message.key()
        group_len = struct.unpack_from(">h", key)[0]
        group = key[2 : 2 + group_len].decode()
        topic_len = struct.unpack_from(">h", key, 2 + group_len)[0]
        topic = key[4 + group_len : 4 + group_len + topic_len].decode()
        (partition,) = struct.unpack_from(">i", key, 4 + group_len + topic_len)
        _, upstream, downstream = struct.unpack_from(">hqq", message.value())
        if topic == copy:
            found.setdefault(group, {})[partition] = (upstream, downstream, message.timestamp()[1])
    return found


def kafka_dr_checkpoints(dc2: BrokerProcess, flow: str) -> dict[str, dict[int, tuple[int, int, int]]]:
    """kafka-dr's checkpoints of `flow` in dc2 (what a disaster failover applies) in mm2_checkpoints' shape."""
    dated, _ = dated_checkpoints_in(read_records(dc2.config, CHECKPOINTS), flow)
    return {
        group: {t.partition: (t.source_offset, t.dest_offset, at_ms) for t, at_ms in found}
        for group, found in dated.items()
    }


@dataclass
class Copies:
    """One partition of a copy in log order: each record's offset there and its origin offset (a copy written twice,
    at least once, shows twice), searchable by bisection."""

    offsets: list[int]
    reached: list[int]  # the highest origin offset copied up to each record: non-decreasing, even with duplicates

    def between(self, start: int, stop: int) -> int:
        """Records at offsets start <= offset < stop."""
        return max(0, bisect.bisect_left(self.offsets, stop) - bisect.bisect_left(self.offsets, start))

    def resume_offset(self, source_offset: int) -> int:
        """Where a group that committed `source_offset` at the source resumes exactly: at the first copy of a record at
        or past it, or at the copy's end when none was copied (those records are the disaster's RPO)."""
        at = bisect.bisect_left(self.reached, source_offset)
        if at < len(self.offsets):
            return self.offsets[at]
        return self.offsets[-1] + 1 if self.offsets else 0


def copies_by_origin(broker: BrokerProcess, copy: str) -> dict[int, Copies]:
    """Each partition of `copy`, read_committed: the origin offset of a record is the sequence the benchmark's only
    producer wrote into its value, the source offset of an idempotent producer's record."""
    found: dict[int, Copies] = {}
    for message in read_records(broker.config, copy):
        part = found.setdefault(message.partition(), Copies([], []))
        part.offsets.append(message.offset())
        part.reached.append(max(int(message.value()), part.reached[-1] if part.reached else -1))
    return found


def score(
    translations: dict[str, dict[int, tuple[int, int, int]]],
    copies: dict[int, Copies],
    commits: dict[str, dict[int, int]],
    cut_ms: int,
) -> dict:
    """Each group's translation against the copy's provenance: records it would read again or skip, against the
    source offset the translation was made from (its accuracy) and against the group's last commit before the cut
    (what the group lives through: also what it committed after the translation was made); and the age of the
    translation at the cut. A partition without a translation starts where the group's auto.offset.reset says."""
    exact = untranslated = reread = skipped = stale_reread = stale_skipped = 0
    per_group: list[int] = []
    ages: list[float] = []
    translated_groups = 0
    for group, committed in commits.items():
        found = translations.get(group, {})
        translated_groups += set(committed) <= set(found)
        group_reread = 0
        for partition, last in committed.items():
            if partition not in found:
                untranslated += 1
                continue
            upstream, downstream, at_ms = found[partition]
            part = copies.get(partition, Copies([], []))
            right = part.resume_offset(upstream)
            exact += right == downstream
            reread += part.between(downstream, right)
            skipped += part.between(right, downstream)
            now = part.resume_offset(last)
            group_reread += part.between(downstream, now)
            stale_skipped += part.between(now, downstream)
            # A pass that read the source just before the cut stamps its checkpoints as it writes them, after it.
            ages.append(max(0.0, (cut_ms - at_ms) / 1000))
        stale_reread += group_reread
        per_group.append(group_reread)
    return {
        "groups": len(commits),
        "groups_translated": translated_groups,
        "partitions_untranslated": untranslated,
        "partitions_exact": exact,
        "reread_vs_translated_offset": reread,
        "skipped_vs_translated_offset": skipped,
        "reread_vs_last_commit": stale_reread,
        "skipped_vs_last_commit": stale_skipped,
        "reread_per_group_median": statistics.median(per_group) if per_group else None,
        "reread_per_group_max": max(per_group) if per_group else None,
        "age_s_median": round(statistics.median(ages), 1) if ages else None,
        "age_s_max": round(max(ages), 1) if ages else None,
    }


class Groups:
    """`count` groups committing in dc1 as applications do: a third at their partitions' ends, a third 1,000-5,000
    records behind them (each its own lag; both kinds committing again every MOVE_EVERY_S, never backwards), a third
    committed once at the start and idle since; the last commit of each that dc1 acknowledged is kept (the ground
    truth once dc1 is gone)."""

    def __init__(self, dc1: BrokerProcess, topic: str, count: int) -> None:
        self.admin = AdminClient(dc1.config)
        self.topic = topic
        self.count = count
        chosen = random.Random(49)
        self.lag = {i: chosen.randint(*BEHIND) for i in range(count)}
        self.idle_at = {i: chosen.random() for i in range(count)}  # where in the log an idle group stopped
        self.committed: dict[str, dict[int, int]] = {}

    def commit(self, ends: dict[int, int], moving_only: bool) -> None:
        offsets = {}
        for i in range(self.count):
            kind = i % 3
            if kind == 0:
                wanted = dict(ends)
            elif kind == 1:
                wanted = {p: max(0, end - self.lag[i]) for p, end in ends.items()}
            elif moving_only:
                continue
            else:
                wanted = {p: int(end * self.idle_at[i]) for p, end in ends.items()}
            offsets[f"peers-group-{i:04d}"] = wanted
        groups = {g: [TopicPartition(self.topic, p, o) for p, o in w.items()] for g, w in offsets.items()}
        for applied in apply_offsets(self.admin, groups, 30):
            if applied.applied:
                self.committed[applied.group] = offsets[applied.group]


class Orders:
    """One idempotent producer writing each of `topic`'s partitions in turn, a record's value the partition's sequence
    (the offset it gets at the source, with one idempotent producer); `acked` counts per partition the records the
    broker acknowledged (a prefix of the sequence: one producer, in order)."""

    def __init__(self, broker: BrokerProcess, topic: str) -> None:
        self.topic = topic
        self.sequence = {p: 0 for p in range(PARTITIONS)}
        self.acked = {p: 0 for p in range(PARTITIONS)}
        self.producer = Producer({**broker.config, "enable.idempotence": True, "linger.ms": 5})
        self.stopped = threading.Event()
        self.writer: threading.Thread | None = None

    def _delivered(self, err: object, message: Message) -> None:
        if err is None:
            self.acked[message.partition()] = max(self.acked[message.partition()], int(message.value()) + 1)

    def send(self) -> None:
        """One record to each partition."""
        for partition in range(PARTITIONS):
            value = b"%d" % self.sequence[partition]
            while True:
                try:
                    self.producer.produce(self.topic, value, partition=partition, on_delivery=self._delivered)
                    break
                except BufferError:
                    self.producer.poll(0.05)
            self.sequence[partition] += 1
        self.producer.poll(0)

    def fill(self, per_partition: int) -> None:
        for _ in range(per_partition):
            self.send()
        assert self.producer.flush(60) == 0

    def start(self, rate: int) -> None:
        """`rate` records a second from a thread of its own until stop()."""

        def produce() -> None:
            start, rounds = time.monotonic(), 0
            while not self.stopped.is_set():
                self.send()
                rounds += 1
                time.sleep(max(0.0, start + rounds * PARTITIONS / rate - time.monotonic()))

        self.writer = threading.Thread(target=produce, daemon=True)
        self.writer.start()

    def stop(self) -> None:
        """No more records (what is in flight stays in flight: a producer whose cluster is gone)."""
        self.stopped.set()
        if self.writer is not None:
            self.writer.join(10)


def disaster_offsets(dc1: BrokerProcess, dc2: BrokerProcess, root: Path, rate: int, count: int) -> dict:
    """`count` groups at varied lags, kafka-dr and MirrorMaker 2 (defaults, tuned) replicating at once (the same
    records, the same commits, the same cut), the source node killed at a random moment CUT_AFTER_S after every tool
    copied its first record; each tool's translations scored against the copies."""
    topic = "orders"
    create(dc1, topic, PARTITIONS)
    orders = Orders(dc1, topic)
    orders.fill(FILL_PER_PARTITION)
    groups = Groups(dc1, topic, count)
    groups.commit(dict(orders.sequence), moving_only=False)
    with contextlib.ExitStack() as tools:
        kdr = tools.enter_context(replicating("kafka-dr", dc1, dc2, root, topic))
        mm2 = {name: tools.enter_context(replicating(name, dc1, dc2, root, topic)) for name in MM2_CONFIGS}
        orders.start(rate)
        for running in (kdr, *mm2.values()):  # each tool up and copying: the clock of the cut starts
            wait_for_copies(dc2, running)
        cut_after = random.Random().uniform(*CUT_AFTER_S)
        started = time.monotonic()
        while time.monotonic() - started < cut_after:
            time.sleep(MOVE_EVERY_S)
            groups.commit(dict(orders.sequence), moving_only=True)
        alive = {name: running.alive() for name, running in (("kafka-dr", kdr), *mm2.items())}
        dc1.kill()  # the disaster: SIGKILL, nothing flushed, no goodbye
        cut_ms = int(time.time() * 1000)
        orders.stop()
        time.sleep(5)  # what each tool had in flight lands (or not) in dc2
        print(f"dc1 killed {cut_after:.0f} s into the traffic", flush=True)
        found = {}
        for name, running in (("kafka-dr", kdr), *mm2.items()):
            copies = copies_by_origin(dc2, running.copy)
            if name == "kafka-dr":
                translations = kafka_dr_checkpoints(dc2, topic)
            else:
                translations = mm2_checkpoints(dc2, running.copy.rsplit(".", 1)[0], running.copy)
            found[name] = {"running_at_the_cut": alive[name], **score(translations, copies, groups.committed, cut_ms)}
            print(f"offsets {name}: {found[name]}", flush=True)
            if found[name]["groups_translated"] < found[name]["groups"]:  # why not: its checkpoint passes, as logged
                print(running.log_lines("heckpoint", 10), flush=True)
    return {"cut_after_s": round(cut_after), "rate": rate, **found}


# --- a failover a person runs ---------------------------------------------------------------------------------------

APP_GROUP = "orders-app"
APP_BATCH = 500
FAILOVER_RATE = 2000
# The cut, seconds after the tool copies: past MirrorMaker 2's first checkpoints at its default 60 s interval.
FAILOVER_CUT_S = (60.0, 120.0)
IDLE_S = 5.0  # a consumer in dc2 that read nothing for this long has read all there is
# kafka-dr's flow settings per configuration: its defaults (a checkpoint every 30 s), and checkpoints every second as
# MirrorMaker 2's tuned configuration emits them.
KAFKA_DR_FAILOVER = {"kafka-dr": "", "kafka-dr-checkpoints-1s": ", checkpoint_seconds: 1"}


class Application:
    """A consumer application of APP_GROUP as at-least-once applications are written: it processes each batch it
    polled, then commits it synchronously. `processed` holds (partition, origin sequence) in the order processed;
    `first_at` is when its first record came (monotonic clock)."""

    def __init__(self, broker: BrokerProcess, topic: str) -> None:
        settings = {"group.id": APP_GROUP, "enable.auto.commit": False, "auto.offset.reset": "earliest"}
        self.consumer = Consumer({**broker.config, **settings})
        self.consumer.subscribe([topic])
        self.processed: list[tuple[int, int]] = []
        self.first_at: float | None = None

    def poll_batch(self) -> int:
        batch = [message for message in self.consumer.consume(APP_BATCH, 0.5) if message.error() is None]
        if batch:
            self.first_at = self.first_at if self.first_at is not None else time.monotonic()
            self.processed.extend((message.partition(), int(message.value())) for message in batch)
            self.consumer.commit(asynchronous=False)
        return len(batch)

    def run_until(self, stop: threading.Event) -> None:
        while not stop.is_set():
            self.poll_batch()
        self.consumer.close()

    def read_all(self, timeout: float = 120.0) -> None:
        """Until nothing came for IDLE_S (the copy holds no more), or `timeout`."""
        deadline, last = time.monotonic() + timeout, time.monotonic()
        while time.monotonic() - last < IDLE_S and time.monotonic() < deadline:
            if self.poll_batch():
                last = time.monotonic()
        self.consumer.close()


def timed(steps: list[tuple[str, float]], name: str, step: Callable[[], object]) -> None:
    started = time.perf_counter()
    step()
    steps.append((name, round(time.perf_counter() - started, 2)))


@contextmanager
def kafka_dr_flow(
    dc1: BrokerProcess, dc2: BrokerProcess, root: Path, topic: str, settings: str
) -> Iterator[tuple[Path, Running]]:
    """`topic` replicated into dc2 under its own name by a continuous replicator started as dr_bringup starts it
    (tracked in the state directory, so that dr_failover stops it), the flow's further `settings` (YAML) given; the
    topology file and the copy."""
    flow = f'  - {{name: {topic}, source: dc1, target: dc2, topics: {{include: ["{topic}"]}}{settings}}}\n'
    topology = write_clusters_topology(root / "failover.yaml", {"dc1": dc1.bootstrap, "dc2": dc2.bootstrap}, flow)
    command = spark_submit_command("replicate", ["--topology", str(topology), "--flow", topic, "--mode", "continuous"])
    replicator, _ = replicators.start(topic, command, env=spark_env())
    try:
        yield topology, Running(topic, lambda: replicators.is_running(topic), lambda: 0.0, [Path(replicator.log)])
    finally:
        with contextlib.suppress(replicators.ReplicatorError):
            replicators.stop(topic)


def mm2_procedure(mm2: MirrorMaker, dc2: BrokerProcess, source_alias: str, copy: str, synced: bool) -> list:
    """MirrorMaker 2's documented consumer failover, scripted: stop MirrorMaker 2 (its source is gone); where it does
    not sync the groups' offsets itself, translate them as `RemoteClusterUtils.translateOffsets` does (the newest
    checkpoint per partition in `{source}.checkpoints.internal`) and commit them in dc2 for the remote topic, as
    `kafka-consumer-groups --reset-offsets --from-file` would. Its steps and their seconds."""
    steps: list[tuple[str, float]] = []
    timed(steps, "stop MirrorMaker 2", lambda: mm2.stop(timeout=60))
    if synced:
        return steps
    translated: dict[int, int] = {}

    def translate() -> None:
        found = mm2_checkpoints(dc2, source_alias, copy).get(APP_GROUP, {})
        translated.update({partition: downstream for partition, (_, downstream, _) in found.items()})

    def commit() -> None:
        offsets = {APP_GROUP: [TopicPartition(copy, p, offset) for p, offset in translated.items()]}
        assert all(applied.applied for applied in apply_offsets(AdminClient(dc2.config), offsets, 30)) or not translated

    timed(steps, "translate the group's offsets (RemoteClusterUtils)", translate)
    timed(steps, "commit them in dc2 (kafka-consumer-groups --reset-offsets)", commit)
    return steps


def failover_by(tool: str, dags: dict, rate: int, cut_after: float) -> dict:
    """One tool on two new clusters: `rate` records a second into `orders` in dc1, an application consuming them there;
    after `cut_after` seconds of copies the application stops at a commit and dc1 is killed; the tool's failover
    procedure, then the application in dc2 on the copy. Records lost (acknowledged by dc1, not in the copy),
    delivered twice, skipped (in the copy, never delivered), and the wall time to the first record in dc2."""
    topic = "orders"
    with temporary_brokers("dc1", "dc2") as (root, brokers), contextlib.ExitStack() as tool_running:
        dc1, dc2 = brokers["dc1"], brokers["dc2"]
        create(dc1, topic, PARTITIONS)
        orders, app, app_stop = Orders(dc1, topic), Application(dc1, topic), threading.Event()
        consuming = threading.Thread(target=app.run_until, args=(app_stop,), daemon=True)
        orders.start(rate)
        consuming.start()
        while not app.processed:  # the group committed: it exists when the tool starts, as production groups do
            time.sleep(0.1)
        if tool in KAFKA_DR_FAILOVER:
            os.environ["KDR_STATE_DIR"] = str(root / "state")
            flow = kafka_dr_flow(dc1, dc2, root, topic, KAFKA_DR_FAILOVER[tool])
            topology, running = tool_running.enter_context(flow)
        else:
            source_alias = f"{tool}-from"
            text = properties(dc1, dc2, topic, MM2_CONFIGS[tool], (source_alias, f"{tool}-to"))
            mm2 = tool_running.enter_context(mirror_maker(root, tool, text))
            running = Running(f"{source_alias}.{topic}", mm2.running, mm2.cpu_seconds, [mm2.log_path])
        wait_for_copies(dc2, running)
        time.sleep(cut_after)
        app_stop.set()  # the application's last batch processed and committed, then its DC goes
        consuming.join(30)
        dc1.kill()
        killed = time.monotonic()
        orders.stop()
        if tool in KAFKA_DR_FAILOVER:
            steps: list[tuple[str, float]] = []
            timed(steps, "dr_failover (disaster)", lambda: failed_over(dags, topology))
        else:
            steps = mm2_procedure(mm2, dc2, source_alias, running.copy, MM2_CONFIGS[tool] is TUNED)
        again = Application(dc2, running.copy)
        again.read_all()
        copied = [(message.partition(), int(message.value())) for message in read_records(dc2.config, running.copy)]
    return {
        "cut_after_s": round(cut_after),
        "steps": steps,
        "to_first_record_in_dc2_s": None if again.first_at is None else round(again.first_at - killed, 2),
        **failover_score(orders.acked, copied, app.processed, again.processed),
    }


def failed_over(dags: dict, topology: Path) -> None:
    run = fail_over(dags, topology, "disaster", groups=APP_GROUP)
    assert str(run.state) == "success", states_of(run)


def failover_score(
    acked: dict[int, int],
    copied: list[tuple[int, int]],
    before: list[tuple[int, int]],
    after: list[tuple[int, int]],
) -> dict:
    """What the application lived through: records dc1 acknowledged that the copy lacks (the RPO), records it was
    given twice (in dc1 and again in dc2, or twice in dc2: a record copied twice included), and records of the copy
    it was never given. Records are (partition, origin sequence)."""
    given = before + after
    copies = set(copied)
    return {
        "records_acknowledged_by_dc1": sum(acked.values()),
        "processed_in_dc1": len(before),
        "processed_in_dc2": len(after),
        "copied_twice": len(copied) - len(copies),
        "lost": sum(1 for p, count in acked.items() for sequence in range(count) if (p, sequence) not in copies),
        "delivered_twice": len(given) - len(set(given)),
        "skipped": len(copies - set(given)),
    }


def failovers(rate: int) -> dict:
    """Each tool's failover on clusters of its own, the same moment of the cut for all."""
    from benchmarks.failover_benchmark import warm_up as warm_up_airflow
    from support.airflow import configure_environment, load_dag, migrate_db

    session = Path(tempfile.mkdtemp(prefix="kdr-peers-failover-"))
    configure_environment(session)
    migrate_db(session)
    dags = {"dr_failover": load_dag("dr_failover")}
    warm_up_airflow(None, dags["dr_failover"], session)  # a deployed Airflow has built its execution API long before
    cut_after = random.Random().uniform(*FAILOVER_CUT_S)
    found = {}
    for tool in (*KAFKA_DR_FAILOVER, *MM2_CONFIGS):
        found[tool] = failover_by(tool, dags, rate, cut_after)
        print(f"failover {tool}: {found[tool]}", flush=True)
    return found


def count_records(broker: BrokerProcess, topic: str) -> int:
    """The records `topic` holds, read to its end (read_committed: copies of aborted transactions do not count)."""
    return sum(1 for _ in read_records(broker.config, topic))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parts = ["throughput", "latency", "active-active", "offsets", "failover", "all"]
    parser.add_argument("which", choices=parts, nargs="?", default="all")
    parser.add_argument("--records", type=int, default=500_000)
    parser.add_argument("--size", type=int, default=200, help="value bytes")
    parser.add_argument("--rounds", type=int, default=ROUNDS, help="throughput: rounds, medians reported")
    parser.add_argument("--rate", type=int, default=2000, help="latency: the lower rate (the higher is 10x)")
    parser.add_argument("--seconds", type=int, default=30)
    parser.add_argument("--active-records", type=int, default=10_000)
    parser.add_argument("--offsets-rate", type=int, default=1000, help="offsets: records/s while the groups commit")
    parser.add_argument("--groups", type=int, default=GROUPS, help="offsets: consumer groups")
    parser.add_argument("--failover-rate", type=int, default=FAILOVER_RATE, help="failover: records/s")
    args = parser.parse_args()
    result: dict = {"kafka": KAFKA_VERSION, "date": time.strftime("%Y-%m-%d %H:%M")}
    chosen = {part for part in parts if args.which in (part, "all")}
    if chosen - {"failover"}:  # the parts that share one pair of clusters
        with temporary_brokers("dc1", "dc2") as (root, brokers):
            dc1, dc2 = brokers["dc1"], brokers["dc2"]
            warm_up(dc1, dc2, args.records)  # both tools measured on brokers whose JIT is done with these paths
            if "throughput" in chosen:
                result["throughput"] = throughput(dc1, dc2, root, args.records, args.size, args.rounds)
            if "latency" in chosen:
                result["latency"] = latency(dc1, dc2, root, [args.rate, 10 * args.rate], args.seconds)
            if "active-active" in chosen:
                result["active_active"] = active_active(dc1, dc2, root, args.active_records, args.seconds)
            if "offsets" in chosen:  # last: it kills dc1
                result["offsets"] = disaster_offsets(dc1, dc2, root, args.offsets_rate, args.groups)
    if "failover" in chosen:  # each tool on clusters of its own: each kills its dc1
        result["failover"] = failovers(args.failover_rate)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
