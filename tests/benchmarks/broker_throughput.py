"""Embedded broker produce and fetch throughput with 1 KB records.

Prints records/s and MB/s for produce (acks=all) and fetch with confluent-kafka, and each as a
ratio to a baseline measured in the same run: the same bytes sent over a plain loopback socket into a
Python thread that only discards them (what a Python server costs before any Kafka work).

    make bench-broker
    PYTHONPATH=tests .venv/bin/python tests/benchmarks/broker_throughput.py [--records N] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import tempfile
import threading
import time
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from support.kafka import create_topic
from support.servers import BrokerProcess

RECORD = os.urandom(1024)
PARTITIONS = 4


def produce(bootstrap: str, topic: str, count: int) -> float:
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "linger.ms": 5,
            "batch.size": 1_000_000,
            "queue.buffering.max.messages": 1_000_000,
        }
    )
    start = time.perf_counter()
    for i in range(count):
        while True:
            try:
                producer.produce(topic, RECORD, partition=i % PARTITIONS)
                break
            except BufferError:
                producer.poll(0.01)
        if i % 10000 == 0:
            producer.poll(0)
    if producer.flush(120):
        raise RuntimeError("produce did not complete")
    elapsed = time.perf_counter() - start
    del producer  # close its connections before the broker stops
    return elapsed


def fetch(bootstrap: str, topic: str, count: int) -> float:
    fetch_sizes = {"fetch.max.bytes": 52_428_800, "max.partition.fetch.bytes": 10_485_760}
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "bench", "enable.auto.commit": False, **fetch_sizes}
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    start = time.perf_counter()
    seen = 0
    while seen < count:
        for message in consumer.consume(10000, timeout=5):
            if message.error() is None:
                seen += 1
        if time.perf_counter() - start > 300:
            raise RuntimeError(f"fetched only {seen} of {count}")
    elapsed = time.perf_counter() - start
    consumer.close()
    return elapsed


def raw_sink_baseline(total_bytes: int) -> float:
    """Seconds to push total_bytes through loopback TCP into a Python thread that discards them."""
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]

    def sink() -> None:
        conn, _ = server.accept()
        with conn:
            received = 0
            while received < total_bytes:
                chunk = conn.recv(1 << 20)
                if not chunk:
                    break
                received += len(chunk)
            conn.sendall(b"k")

    thread = threading.Thread(target=sink)
    thread.start()
    payload = memoryview(RECORD * 1024)
    start = time.perf_counter()
    with socket.create_connection(("127.0.0.1", port)) as client:
        sent = 0
        while sent < total_bytes:
            chunk = payload[: total_bytes - sent]
            client.sendall(chunk)
            sent += len(chunk)
        client.recv(1)
    elapsed = time.perf_counter() - start
    thread.join()
    server.close()
    return elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--json", action="store_true", help="print one JSON line only")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        broker = BrokerProcess("bench", Path(tmp) / "data").start()
        try:
            create_topic(broker.config, "bench", PARTITIONS)
            produce_s = produce(broker.bootstrap, "bench", args.records)
            fetch_s = fetch(broker.bootstrap, "bench", args.records)
            size = sum(f.stat().st_size for f in broker.data_dir.glob("bench-*/*.log"))
        finally:
            broker.stop()
    megabytes = args.records * len(RECORD) / 1e6
    baseline_s = raw_sink_baseline(args.records * len(RECORD))
    result = {
        "records": args.records,
        "record_bytes": len(RECORD),
        "log_bytes": size,
        "produce_records_per_s": round(args.records / produce_s),
        "produce_mb_per_s": round(megabytes / produce_s, 1),
        "fetch_records_per_s": round(args.records / fetch_s),
        "fetch_mb_per_s": round(megabytes / fetch_s, 1),
        "raw_socket_mb_per_s": round(megabytes / baseline_s, 1),
        "produce_vs_raw_socket": round(baseline_s / produce_s, 3),
        "fetch_vs_raw_socket": round(baseline_s / fetch_s, 3),
    }
    if not args.json:
        print(
            f"produce: {result['produce_records_per_s']:>9,} records/s  {result['produce_mb_per_s']:>7} MB/s  "
            f"({result['produce_vs_raw_socket']} x raw socket)"
        )
        print(
            f"fetch:   {result['fetch_records_per_s']:>9,} records/s  {result['fetch_mb_per_s']:>7} MB/s  "
            f"({result['fetch_vs_raw_socket']} x raw socket)"
        )
        print(f"raw loopback socket baseline: {result['raw_socket_mb_per_s']} MB/s")
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
