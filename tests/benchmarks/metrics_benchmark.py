"""Scrape cost of GET /kafka-dr/metrics at --flows x --partitions partitions (1,000 by default), against a baseline
measured in the same run: reading and parsing the same health evaluations from disk, the least any scrape that
serves them must do. The route is the plugin's app (kafka_dr.dashboard.app) served by uvicorn in a process of its
own on 127.0.0.1 and asked over HTTP with the bearer token, as Prometheus asks it; no cluster exists (a scrape asks
none).

    make bench-metrics
    PYTHONPATH=tests .venv/bin/python tests/benchmarks/metrics_benchmark.py [--flows 10] [--partitions 100]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
from support.ports import free_port
from support.retry import eventually
from support.topology import write_topology

from kafka_dr.health.check import save_evaluation
from kafka_dr.health.rules import FlowFindings, FlowHealth, PartitionStatus

SCRAPES = 50
TOKEN = "bench-token"


def write_state(root: Path, flows: int, partitions: int) -> Path:
    """`flows` evaluations of `partitions` partitions each, as health runs leave them, and their topology."""
    now_ms = int(time.time() * 1000)
    lines = []
    for f in range(flows):
        name = f"bench-flow-{f}"
        lines.append(f"  - {{name: {name}, source: dc1, target: dc2, topics: {{include: ['bench-{f}']}}}}")
        statuses = tuple(PartitionStatus(f"bench-{f}", p, "OK", p * 7, p / 10, "") for p in range(partitions))
        findings = FlowFindings(name, now_ms, heartbeat_latency_ms=120.0, replicator_alive=True, checkpoint_ms=now_ms)
        save_evaluation(None, FlowHealth(name, "OK", (), statuses), now_ms, [], findings=findings)
    clusters = {"dc1": "127.0.0.1:1", "dc2": "127.0.0.1:2"}
    flows_text = "\n".join(lines) + "\n"
    return write_topology(root / "topology.yaml", clusters, flows_text, extra="health: {max_lag_seconds: 60}\n")


def read_evaluations(state: Path) -> float:
    """The baseline: every evaluation file read and parsed."""
    started = time.perf_counter()
    for path in sorted((state / "health").glob("*.json")):
        json.loads(path.read_text(encoding="utf-8"))
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--flows", type=int, default=10)
    parser.add_argument("--partitions", type=int, default=100)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="kdr-metrics-bench-"))
    os.environ.update({"KDR_STATE_DIR": str(root / "state"), "KDR_METRICS_TOKEN": TOKEN})
    os.environ["KDR_TOPOLOGY"] = str(write_state(root, args.flows, args.partitions))

    port = free_port()
    app = "kafka_dr.dashboard.app:app"
    command = [sys.executable, "-m", "uvicorn", app, "--host", "127.0.0.1", "--port", str(port)]
    server = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}/metrics"
    try:
        with httpx.Client(headers={"Authorization": f"Bearer {TOKEN}"}) as client:
            eventually(lambda: _answers(client, url), "the app answers", 60)
            first = client.get(url)
            first.raise_for_status()
            samples = sum(1 for line in first.text.splitlines() if line and not line.startswith("#"))
            scrapes, baselines = [], []
            for _ in range(SCRAPES):  # interleaved, so both see the same machine
                started = time.perf_counter()
                client.get(url).raise_for_status()
                scrapes.append(time.perf_counter() - started)
                baselines.append(read_evaluations(root / "state"))
    finally:
        server.terminate()
        server.wait(30)
    scrape, baseline = statistics.median(scrapes), statistics.median(baselines)
    print(
        f"{args.flows * args.partitions} partitions, {samples} samples, {len(first.content)} bytes: "
        f"scrape median {scrape * 1000:.1f} ms (p90 {statistics.quantiles(scrapes, n=10)[-1] * 1000:.1f} ms), "
        f"reading the evaluations {baseline * 1000:.1f} ms; ratio {scrape / baseline:.1f}x"
    )


def _answers(client: httpx.Client, url: str) -> bool:
    try:
        return client.get(url).status_code == 200
    except httpx.TransportError:
        return False


if __name__ == "__main__":
    main()
