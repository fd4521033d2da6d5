"""Replication benchmarks on two one-node clusters (Apache Kafka unless --kafka embedded), each with its baseline in
the same run.

throughput: bounded copy of --records records (--size bytes, 4 partitions) by spark_jobs/replicate.py,
  divided by a plain confluent-kafka consume-then-produce loop copying the same data between the same
  brokers, in --rounds pairs (the plain loop, then the job) one after the other; each figure the median of the
  rounds. Ratios: the copy phase (the Spark tasks), the whole job from the driver's start (connect, topic sync,
  planning, the Spark context and workers started beside them, copy), the same from the moment the Spark context
  was up, and the whole spark-submit wall time (JVM start included).
latency: continuous mode while a producer (linger.ms 5, Kafka 4.0's default) writes --rate records/s for --seconds;
  latency per record = arrival in the destination minus its CreateTime (which replication preserves); p50/p99
  printed, and beside them the same read from the source topic (the baseline: producer and source broker alone).
standalone: the same bounded copy twice, on a Spark standalone cluster (master and worker from pyspark's
  spark-class, 2 cores for the application, the package shipped as --py-files) and in local[2], in the same run;
  ratios cluster / local for the copy phase, the job and the whole spark-submit.

    make bench-replication       (throughput and latency)
    make bench-spark-cluster     (standalone)
    PYTHONPATH=tests .venv/bin/python tests/benchmarks/replication_benchmark.py throughput|latency|standalone|all
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from support.kafka import create_topic
from support.servers import BrokerProcess, temporary_brokers
from support.spark import standalone_spark, submit, submit_in_background
from support.topology import write_topology as write_clusters_topology

from kafka_dr.clients import next_batch
from kafka_dr_dev.local.config import APACHE, BROKER_KINDS

PARTITIONS = 4
WARM_UP_SETTLE_S = 10.0  # after the warm-up copy: the compile queues it left drain
ROUNDS = 9  # throughput: pairs of runs; one pair's whole-job ratio moves by 0.7-1.2, a median of five by 0.89-0.97
PAIR_SETTLE_S = 3.0  # before each measured side of a pair
WARM_SECONDS = 20  # latency: seconds of the same traffic, unmeasured, before the measured ones


def create(broker: BrokerProcess, topic: str, partitions: int = PARTITIONS) -> None:
    create_topic(broker.config, topic, partitions)


def fill(broker: BrokerProcess, topic: str, count: int, size: int, partitions: int = PARTITIONS) -> None:
    producer = Producer({**broker.config, "linger.ms": 20, "batch.size": 1_000_000})
    value = os.urandom(size)
    for i in range(count):
        while True:
            try:
                producer.produce(topic, value, key=str(i).encode(), partition=i % partitions)
                break
            except BufferError:
                producer.poll(0.05)
    assert producer.flush(120) == 0


def plain_copy(
    source: BrokerProcess,
    target: BrokerProcess,
    topic: str,
    dest: str,
    count: int,
    partitions: int = PARTITIONS,
    starts: dict[int, int] | None = None,
) -> float:
    """The baseline: one consumer, one producer, `count` records copied as they come, each partition read from its
    offset in `starts` (default 0)."""
    reading = {"group.id": "plain-copy", "enable.auto.commit": False, "isolation.level": "read_committed"}
    consumer = Consumer({**source.config, **reading, "fetch.max.bytes": 52_428_800})
    producer = Producer(
        {
            **target.config,
            "enable.idempotence": True,
            "linger.ms": 5,
            "batch.size": 1_000_000,
            "queue.buffering.max.messages": 500_000,
        }
    )
    consumer.assign([TopicPartition(topic, p, (starts or {}).get(p, 0)) for p in range(partitions)])
    start = time.perf_counter()
    copied = 0
    while copied < count:
        for m in consumer.consume(10_000, timeout=5):
            if m.error():
                continue
            while True:
                try:
                    producer.produce(
                        dest,
                        m.value(),
                        key=m.key(),
                        headers=m.headers(),
                        partition=m.partition(),
                        timestamp=m.timestamp()[1],
                    )
                    break
                except BufferError:
                    producer.poll(0.05)
            copied += 1
    assert producer.flush(120) == 0
    elapsed = time.perf_counter() - start
    consumer.close()
    return elapsed


def warm_up(dc1: BrokerProcess, dc2: BrokerProcess, records: int) -> None:
    """Brokers as a cluster in service has them, before either side is measured: their JIT compilers done with the
    paths each side takes (a node just started compiles for a minute after its first load, on the cores the measured
    side needs): a plain copy of the same size, and as many records with a header in transactions (kafka-dr's
    writes); and Kafka's internal topics for transactions and groups there (a real cluster made them long ago; a new
    one makes them at the first transactional producer and the first group)."""
    create(dc1, "warm")
    fill(dc1, "warm", records, 200)
    for broker in (dc1, dc2):
        create(broker, "warm.copy")
    plain_copy(dc1, dc2, "warm", "warm.copy", records)
    value = os.urandom(200)
    for broker in (dc1, dc2):
        producer = Producer({**broker.config, "transactional.id": "bench-warm-up", "linger.ms": 5})
        producer.init_transactions(60)
        for first in range(0, records, 50_000):
            producer.begin_transaction()
            for i in range(first, min(first + 50_000, records)):
                while True:
                    try:
                        producer.produce("warm.copy", value, key=b"%d" % i, headers=[("warm", b"%d" % i)])
                        break
                    except BufferError:
                        producer.poll(0.05)
            producer.commit_transaction(60)
        consumer = Consumer({**broker.config, "group.id": "bench-warm-up", "enable.auto.commit": False})
        consumer.commit(offsets=[TopicPartition("warm.copy", 0, 1)], asynchronous=False)
        consumer.close()
    time.sleep(WARM_UP_SETTLE_S)


def write_topology(path: Path, dc1: BrokerProcess, dc2: BrokerProcess, topic: str, flow: str = "bench") -> Path:
    """One flow `flow` copying `topic` from dc1 into `{topic}.copy` on dc2 (`{topic}.copy-N` for a flow `bench-N`)."""
    suffix = flow.removeprefix("bench")
    return write_clusters_topology(
        path,
        {"dc1": dc1.bootstrap, "dc2": dc2.bootstrap},
        f'  - {{name: {flow}, source: dc1, target: dc2, topics: {{include: ["{topic}"]}}, '
        f'rename: {{".*": "{{topic}}.copy{suffix}"}}}}',
    )


def throughput(dc1: BrokerProcess, dc2: BrokerProcess, root: Path, records: int, size: int, rounds: int) -> dict:
    """`rounds` pairs, each the plain loop then kafka-dr's job copying the same records into topics of their own
    (a new flow each round), one after the other on the same warmed brokers; the medians of each figure over the
    rounds, and every round's."""
    create(dc1, "bench")
    fill(dc1, "bench", records, size)
    warm_up(dc1, dc2, records)
    pairs = []
    for n in range(1, rounds + 1):
        pairs.append(_pair(dc1, dc2, root, records, n))
        print(f"round {n}/{rounds}: whole job {pairs[-1]['ratio_job']}, copy phase {pairs[-1]['ratio_copy_phase']}")
    medians = {key: statistics.median(pair[key] for pair in pairs) for key in pairs[0]}
    jobs = [pair["ratio_job"] for pair in pairs]
    return {
        "records": records,
        "record_bytes": size,
        **medians,
        "ratio_job_range": [min(jobs), max(jobs)],
        "rounds": pairs,
    }


def _pair(dc1: BrokerProcess, dc2: BrokerProcess, root: Path, records: int, n: int) -> dict:
    """Round `n`: the plain loop, then the job, each after PAIR_SETTLE_S of quiet (what the other left running, a
    JVM exiting or a broker's flush, does not land on it)."""
    create(dc2, f"bench.plain-{n}")
    time.sleep(PAIR_SETTLE_S)
    plain_s = plain_copy(dc1, dc2, "bench", f"bench.plain-{n}", records)
    topology = write_topology(root / f"topology-{n}.yaml", dc1, dc2, "bench", f"bench-{n}")
    time.sleep(PAIR_SETTLE_S)
    started = time.perf_counter()
    code, summary, err = submit("replicate", "--topology", str(topology), "--flow", f"bench-{n}", timeout=900)
    wall_s = time.perf_counter() - started
    assert code == 0 and summary["records"] == records, (summary, err[-3000:])
    copy_s, job_s = summary["copy_seconds"], summary["seconds"]
    startup = summary["spark_startup_seconds"]  # the context and the workers, started beside the planning
    return {
        "plain_copy_records_per_s": round(records / plain_s),
        "kdr_copy_records_per_s": round(records / copy_s),
        "kdr_job_records_per_s": round(records / job_s),
        "kdr_wall_records_per_s": round(records / wall_s),
        "ratio_copy_phase": round(plain_s / copy_s, 3),
        "ratio_job": round(plain_s / job_s, 3),
        "ratio_job_from_context_up": round(plain_s / (job_s - startup["context"]), 3),
        "spark_context_up_s": startup["context"],
        "spark_workers_up_s": startup.get("workers"),
        "ratio_wall": round(plain_s / wall_s, 3),
        "plain_s": round(plain_s, 2),
        "kdr_copy_s": copy_s,
        "kdr_job_s": job_s,
        "kdr_wall_s": round(wall_s, 2),
    }


def standalone(dc1: BrokerProcess, dc2: BrokerProcess, root: Path, records: int, size: int) -> dict:
    create(dc1, "bench-sa")
    fill(dc1, "bench-sa", records, size)
    flows = "\n".join(
        f'  - {{name: bench-{name}, source: dc1, target: dc2, topics: {{include: ["bench-sa"]}}, '
        f'rename: {{".*": "{{topic}}.{name}"}}}}'
        for name in ("local", "cluster")
    )
    clusters = {"dc1": dc1.bootstrap, "dc2": dc2.bootstrap}
    topology = write_clusters_topology(root / "standalone.yaml", clusters, flows)
    runs = {}
    with standalone_spark(root / "spark", cores=2) as cluster:
        for name, master, conf in (
            ("local", "local[2]", None),
            ("cluster", cluster.master_url, {"spark.cores.max": "2"}),  # the two cores local[2] has
        ):
            started = time.perf_counter()
            code, summary, err = submit(
                "replicate",
                "--topology",
                str(topology),
                "--flow",
                f"bench-{name}",
                timeout=900,
                master=master,
                conf=conf,
            )
            wall_s = time.perf_counter() - started
            assert code == 0 and summary["records"] == records, (name, summary, err[-3000:])
            runs[name] = {"copy_s": summary["copy_seconds"], "job_s": summary["seconds"], "wall_s": round(wall_s, 2)}
    local, on_cluster = runs["local"], runs["cluster"]
    return {
        "records": records,
        "record_bytes": size,
        **{f"{name}_{key}": value for name, run in runs.items() for key, value in run.items()},
        "cluster_copy_records_per_s": round(records / on_cluster["copy_s"]),
        "local_copy_records_per_s": round(records / local["copy_s"]),
        "ratio_copy_phase": round(local["copy_s"] / on_cluster["copy_s"], 3),
        "ratio_job": round(local["job_s"] / on_cluster["job_s"], 3),
        "ratio_wall": round(local["wall_s"] / on_cluster["wall_s"], 3),
    }


def latency(dc1: BrokerProcess, dc2: BrokerProcess, root: Path, rate: int, seconds: int) -> dict:
    create(dc1, "live")
    topology = write_topology(root / "live.yaml", dc1, dc2, "live")
    log = open(root / "continuous.log", "w")  # noqa: SIM115 - handed to the child
    proc = submit_in_background(
        "replicate",
        "--topology",
        str(topology),
        "--flow",
        "bench",
        "--mode",
        "continuous",
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        first_copy(dc1, dc2, "live", "live.copy", lambda: proc.poll() is None, f"see {root / 'continuous.log'}")
        figures = send_and_measure(dc1, dc2, "live", "live.copy", rate, seconds)
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(60)
    # Each epoch's Spark job minus its tasks' copying time: the hand-over between epochs, when nothing copies.
    epochs = [
        float(job) - float(tasks)
        for job, tasks in re.findall(
            r"epoch \d+ copied .* in ([0-9.]+)s \(tasks copying ([0-9.]+)s\)", (root / "continuous.log").read_text()
        )
    ]
    return {
        **figures,
        "epochs": len(epochs),
        "handover_ms_median": round(1000 * statistics.median(epochs)) if epochs else None,
        "handover_ms_max": round(1000 * max(epochs)) if epochs else None,
    }


def first_copy(
    dc1: BrokerProcess, dc2: BrokerProcess, topic: str, copy: str, alive: Callable[[], bool], hint: str
) -> None:
    """Wait until a replicator that was just started copies: `copy` made in dc2, then a record written to partition
    0 of `topic` read there. What comes after is steady state (a tool's start-up is not latency)."""
    deadline = time.monotonic() + 120
    admin = AdminClient(dc2.config)
    while copy not in admin.list_topics(timeout=5).topics:
        if time.monotonic() > deadline or not alive():
            raise RuntimeError(f"the replicator of {topic} did not start; {hint}")
        time.sleep(0.5)
    warm = Producer(dc1.config)
    warm.produce(topic, b"warm-up", partition=0)
    warm.flush(10)
    probe = Consumer({**dc2.config, "group.id": "warm-up"})
    probe.assign([TopicPartition(copy, 0, 0)])
    while probe.poll(1.0) is None:
        if time.monotonic() > deadline or not alive():
            raise RuntimeError(f"the warm-up record of {topic} never arrived in {copy}; {hint}")
    probe.close()


def send_and_measure(
    dc1: BrokerProcess,
    dc2: BrokerProcess,
    topic: str,
    copy: str,
    rate: int,
    seconds: int,
    partitions: int = PARTITIONS,
    warm_seconds: int = WARM_SECONDS,
) -> dict:
    """`rate` records a second into `topic` for `warm_seconds`, unmeasured, until they are all in `copy`: a node's JIT
    compiles its produce and fetch paths for seconds after such a load begins (records waited 0.4 s at first, 40 ms
    after 4 s), and a JVM tool's copy path too. Then `rate` records a second for `seconds`, each one's latency
    measured: its arrival in `copy` minus its CreateTime (which replication preserves); beside it the same read from
    `topic` (the baseline: the producer and the source broker alone)."""
    producer = Producer({**dc1.config, "linger.ms": 5})  # Kafka 4.0's default (KIP-1030)
    _send(producer, topic, rate, warm_seconds, partitions)
    starts = {
        copy: _read_through(dc2, copy, partitions, rate * warm_seconds),
        topic: _read_through(dc1, topic, partitions, rate * warm_seconds),
    }
    latencies: list[float] = []
    at_source: list[float] = []
    total = rate * seconds
    readers = [
        threading.Thread(target=_measure, args=(dc2, copy, total, latencies, starts[copy])),
        threading.Thread(target=_measure, args=(dc1, topic, total, at_source, starts[topic])),
    ]
    for reader in readers:
        reader.start()
    _send(producer, topic, rate, seconds, partitions)
    for reader in readers:
        reader.join(120)
    latencies.sort()
    at_source.sort()
    return {
        "rate": rate,
        "seconds": seconds,
        "warm_seconds": warm_seconds,
        "received": len(latencies),
        "sent": total,
        "p50_ms": round(statistics.median(latencies)),
        "p99_ms": round(latencies[int(len(latencies) * 0.99)]),
        "max_ms": round(latencies[-1]),
        "source_p50_ms": round(statistics.median(at_source)),
        "source_p99_ms": round(at_source[int(len(at_source) * 0.99)]),
    }


def _send(producer: Producer, topic: str, rate: int, seconds: int, partitions: int) -> None:
    """`rate` records a second for `seconds`, round robin over the partitions, each stamped as it is sent."""
    start = time.perf_counter()
    for i in range(rate * seconds):
        delay = start + i / rate - time.perf_counter()
        if delay > 0:
            time.sleep(delay)
        producer.produce(topic, b"x" * 200, partition=i % partitions, timestamp=int(time.time() * 1000))
        producer.poll(0)
    assert producer.flush(30) == 0


def _read_through(broker: BrokerProcess, topic: str, partitions: int, count: int) -> list[TopicPartition]:
    """Read `topic` from the first record after first_copy's until `count` records came (two minutes at most); the
    positions reached, where the measured records begin."""
    consumer = Consumer({**broker.config, "group.id": "latency-warm", "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, p, 1 if p == 0 else 0) for p in range(partitions)])
    read, deadline = 0, time.monotonic() + 120
    while read < count:
        assert time.monotonic() < deadline, f"{topic}: {read} of the {count} warm-up records arrived"
        read += sum(1 for m in consumer.consume(10_000, timeout=0.5) if m.error() is None)
    positions = consumer.position([TopicPartition(topic, p) for p in range(partitions)])
    consumer.close()
    return positions


def _measure(broker: BrokerProcess, topic: str, total: int, out: list[float], starts: list[TopicPartition]) -> None:
    consumer = Consumer({**broker.config, "group.id": "latency", "fetch.wait.max.ms": 10, "fetch.min.bytes": 1})
    consumer.assign(starts)
    deadline = time.monotonic() + total / 100 + 120
    while len(out) < total and time.monotonic() < deadline:
        for m in next_batch(consumer, wait=0.5):  # consume(n, timeout) would hold records until n arrive
            if m.error() is None:
                out.append(time.time() * 1000 - m.timestamp()[1])
            elif m.error().code() != KafkaError._PARTITION_EOF:
                raise RuntimeError(m.error().str())
    consumer.close()


def describe_throughput(t: dict) -> str:
    low, high = t["ratio_job_range"]
    return (
        f"throughput, medians of {len(t['rounds'])} rounds: kafka-dr {t['kdr_copy_records_per_s']:,} records/s in "
        f"its Spark tasks vs plain loop {t['plain_copy_records_per_s']:,} records/s -> ratio "
        f"{t['ratio_copy_phase']}; whole job from the driver's start {t['ratio_job']} (rounds {low}-{high}; Spark "
        f"context up at {t['spark_context_up_s']} s, workers at {t['spark_workers_up_s']} s, beside the planning), "
        f"from the context being up {t['ratio_job_from_context_up']}; whole spark-submit incl. JVM start "
        f"{t['ratio_wall']}"
    )


def describe_standalone(t: dict) -> str:
    return (
        f"standalone cluster: copy phase {t['cluster_copy_records_per_s']:,} records/s vs local[2] "
        f"{t['local_copy_records_per_s']:,} records/s -> ratio {t['ratio_copy_phase']}; job {t['ratio_job']} "
        f"({t['cluster_job_s']} s vs {t['local_job_s']} s); whole spark-submit {t['ratio_wall']} "
        f"({t['cluster_wall_s']} s vs {t['local_wall_s']} s)"
    )


def describe_latency(lat: dict) -> str:
    return (
        f"latency at {lat['rate']} records/s: p50 {lat['p50_ms']} ms, p99 {lat['p99_ms']} ms, "
        f"max {lat['max_ms']} ms ({lat['received']}/{lat['sent']} records; read from the source topic itself: p50 "
        f"{lat['source_p50_ms']} ms, p99 {lat['source_p99_ms']} ms); {lat['epochs']} epochs, "
        f"hand-over median {lat['handover_ms_median']} ms, max {lat['handover_ms_max']} ms"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("which", choices=["throughput", "latency", "standalone", "all"], nargs="?", default="all")
    parser.add_argument("--records", type=int, default=500_000)
    parser.add_argument("--size", type=int, default=200, help="value bytes")
    parser.add_argument("--rounds", type=int, default=ROUNDS, help="throughput: pairs of runs, medians reported")
    parser.add_argument("--rate", type=int, default=2000)
    parser.add_argument("--seconds", type=int, default=30)
    parser.add_argument("--kafka", choices=BROKER_KINDS, default=APACHE, help="the brokers (default apache)")
    args = parser.parse_args()
    results = {}
    with temporary_brokers("dc1", "dc2", kind=args.kafka) as (root, brokers):
        dc1, dc2 = brokers["dc1"], brokers["dc2"]
        if args.which in ("throughput", "all"):
            results["throughput"] = throughput(dc1, dc2, root, args.records, args.size, args.rounds)
            print(describe_throughput(results["throughput"]))
        if args.which == "standalone":
            results["standalone"] = standalone(dc1, dc2, root, args.records, args.size)
            print(describe_standalone(results["standalone"]))
        if args.which in ("latency", "all"):
            results["latency"] = latency(dc1, dc2, root, args.rate, args.seconds)
            print(describe_latency(results["latency"]))
    print(json.dumps(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
