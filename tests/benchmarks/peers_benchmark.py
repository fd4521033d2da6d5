"""kafka-dr against MirrorMaker 2 on the same two Apache Kafka clusters, with the same data, in the same run (`make
bench-peers`). MirrorMaker 2 runs twice: with its defaults and tuned as its users tune it (support.mirrormaker says
which settings and why).

throughput: a bounded copy of --records records of --size bytes over 8 partitions, in --rounds rounds; each round
  kafka-dr's job (the whole spark-submit), MirrorMaker 2 with its defaults, then tuned, one after the other, each into
  topics of its own. Per tool: records/s from its start until every record is in the target, and CPU-seconds per
  million records of all its processes (read from /proc); the brokers' CPU-seconds beside them. Medians of the rounds.
latency: continuous replication while a producer writes --rate records/s (and ten times that) for --seconds, each
  tool alone on the brokers: p50/p99/max of arrival time in the target minus CreateTime.
active-active: both directions on, the topic's name the same in both clusters (MirrorMaker 2 with its
  IdentityReplicationPolicy, kafka-dr with two flows and no rename); --active-records records written in each DC,
  then --seconds of replication: the records each cluster holds (each should hold both DCs' records once).

One JSON line with every figure at the end.

    make bench-peers
    PYTHONPATH=tests .venv/bin/python tests/benchmarks/peers_benchmark.py [throughput|latency|active-active|all]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from benchmarks.replication_benchmark import create, fill, first_copy, send_and_measure, warm_up, write_topology
from confluent_kafka import Consumer, KafkaError, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec
from support.cpu import TreeCpu, cpu_seconds
from support.mirrormaker import DEFAULTS, IDENTITY_POLICY, TUNED, MirrorMaker, properties
from support.servers import BrokerProcess, temporary_brokers
from support.spark import last_json_line
from support.topology import write_topology as write_clusters_topology

from kafka_dr.clients import offsets_of
from kafka_dr.local.apache import KAFKA_VERSION
from kafka_dr.spark.submit import spark_env, spark_submit_command

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
        metadata = self.admin.list_topics(topic, timeout=10).topics.get(topic)
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
    return figures(records, seconds, used, brokers_cpu(dc1, dc2) - brokers_before)


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
        while (held := target.total(copy)) < records:
            mm2.check_alive()
            assert time.monotonic() < deadline, f"{name}: {held} of {records} in {copy}; see {mm2.log_path}"
            time.sleep(0.1)
        seconds = time.perf_counter() - started
        used = mm2.cpu_seconds()
        brokers = brokers_cpu(dc1, dc2) - brokers_before
    # At least once: a record sent twice (a retried batch) would show as more than `records`.
    return {**figures(records, seconds, used, brokers), "records_in_target": target.total(copy)}


@contextmanager
def mirror_maker(root: Path, name: str, text: str) -> Iterator[MirrorMaker]:
    """A MirrorMaker 2 process, started without waiting (the copy starts whenever it does), stopped at the end."""
    mm2 = MirrorMaker(name, root, text)
    mm2.start(wait=False)
    try:
        yield mm2
    finally:
        mm2.stop(timeout=60)


def figures(records: int, seconds: float, cpu: float, brokers_cpu_s: float) -> dict:
    return {
        "seconds": round(seconds, 2),
        "records_per_s": round(records / seconds),
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
    and where its log is."""

    copy: str
    alive: Callable[[], bool]
    cpu: Callable[[], float]
    log: str


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
        logs = [root / f"{name}.log" for name in names]
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
                f"see {', '.join(map(str, logs))}",
            )
        finally:
            for proc in procs:
                os.killpg(proc.pid, signal.SIGTERM)
            for proc in procs:
                proc.wait(60)
            for tree in trees:
                tree.stop()
    else:
        settings = {**MM2_CONFIGS[tool], **({"replication.policy.class": IDENTITY_POLICY} if both_ways else {})}
        aliases = (f"from-{topic}", f"to-{topic}")  # new aliases, new internal topics: nothing of an earlier run
        text = properties(dc1, dc2, topic, settings, aliases, both_ways)
        with mirror_maker(root, topic, text) as mm2:
            copy = topic if both_ways else f"{aliases[0]}.{topic}"
            yield Running(copy, mm2.running, mm2.cpu_seconds, f"see {mm2.log_path}")


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


def count_records(broker: BrokerProcess, topic: str) -> int:
    """The records `topic` holds, read to its end (read_committed: copies of aborted transactions do not count)."""
    consumer = Consumer(
        {
            **broker.config,
            "group.id": "peers-count",
            "isolation.level": "read_committed",
            "enable.partition.eof": True,
            "enable.auto.commit": False,
        }
    )
    partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
    consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
    count, ended = 0, set()
    deadline = time.monotonic() + 300
    while len(ended) < len(partitions) and time.monotonic() < deadline:
        for m in consumer.consume(10_000, timeout=1):
            if m.error() is None:
                count += 1
            elif m.error().code() == KafkaError._PARTITION_EOF:
                ended.add(m.partition())
    consumer.close()
    return count


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("which", choices=["throughput", "latency", "active-active", "all"], nargs="?", default="all")
    parser.add_argument("--records", type=int, default=500_000)
    parser.add_argument("--size", type=int, default=200, help="value bytes")
    parser.add_argument("--rounds", type=int, default=ROUNDS, help="throughput: rounds, medians reported")
    parser.add_argument("--rate", type=int, default=2000, help="latency: the lower rate (the higher is 10x)")
    parser.add_argument("--seconds", type=int, default=30)
    parser.add_argument("--active-records", type=int, default=10_000)
    args = parser.parse_args()
    result: dict = {"kafka": KAFKA_VERSION, "date": time.strftime("%Y-%m-%d %H:%M")}
    with temporary_brokers("dc1", "dc2") as (root, brokers):
        dc1, dc2 = brokers["dc1"], brokers["dc2"]
        warm_up(dc1, dc2, args.records)  # both tools measured on brokers whose JIT is done with these paths
        if args.which in ("throughput", "all"):
            result["throughput"] = throughput(dc1, dc2, root, args.records, args.size, args.rounds)
        if args.which in ("latency", "all"):
            result["latency"] = latency(dc1, dc2, root, [args.rate, 10 * args.rate], args.seconds)
        if args.which in ("active-active", "all"):
            result["active_active"] = active_active(dc1, dc2, root, args.active_records, args.seconds)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
