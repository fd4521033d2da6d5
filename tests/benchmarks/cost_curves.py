"""Cost curves: how each cost grows as the work grows, on embedded clusters (target: nothing worse than linear).

replication: a bounded copy, in process, of one new topic of 10, 100 and 1,000 partitions (--records records of
  --size bytes per partition); the planning round and the copy are timed apart, per partition.
translation: the in-process checkpoint pass (what a continuous replicator's checkpoint thread runs) over 100, 1,000
  and 10,000 groups of 6 partitions, every group checked against the ground truth read from the destination.
health: one `kafka-dr health` run (median of --health-runs, after a window of untimed runs: each run reads the
  window's samples back) over a replicated flow of one topic of 10, 100 and 1,000 partitions.
latency: continuous replication's p50/p99 at 2,000, 10,000 and 20,000 records/s for --seconds each
  (replication_benchmark.py's latency run, on a new pair of brokers per rate).

Per curve, a row per size: seconds, ms per unit and the growth factor, the time's factor over the size's factor
against the previous size (1.0 = linear, < 1 sublinear). Printed as Markdown tables (for the README) and one JSON
line; the four curves are drawn in a PNG (--plot). Exit 1 if a translation is not exact or a latency run received
fewer records than it sent. --quick shrinks every size to try the script out.

    make bench-curves
    PYTHONPATH=tests .venv/bin/python tests/benchmarks/cost_curves.py [--only replication,translation,health,latency]
        [--quick] [--plot docs/cost_curves.png] [--seconds 20]
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# This script's folder is on sys.path when it runs as a script (tests/benchmarks is no package).
import replication_benchmark as replication
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import NullFormatter
from support.drills import FLEET_PARTITIONS, FLEET_TOPIC, copy_flow, replicate_fleet
from support.fleet import commit_random_groups, ground_truth
from support.servers import BrokerProcess, temporary_brokers
from support.topology import write_topology

from kafka_dr.access import ClusterAccess
from kafka_dr.health.check import check_flow
from kafka_dr.health.rules import WINDOW
from kafka_dr.paths import PROJECT_ROOT
from kafka_dr.replication.copier import close_clients, copy_ranges
from kafka_dr.replication.flow_clients import FlowClients
from kafka_dr.replication.rounds import CopyRounds
from kafka_dr.topology import Topology, load_topology
from kafka_dr.translation.checkpoints import checkpoint_groups
from kafka_dr.translation.offsets import close_readers

CURVES = ("replication", "translation", "health", "latency")
SIZES = {"replication": [10, 100, 1000], "translation": [100, 1000, 10_000], "health": [10, 100, 1000]}
QUICK_SIZES = {"replication": [10, 20], "translation": [10, 20], "health": [10, 20]}
RATES, QUICK_RATES, QUICK_SECONDS = [2000, 10_000, 20_000], [500], 3
GROWTH = "growth (1.0 = linear, < 1 sublinear)"
LATENCY_TARGET_MS = 1000


@dataclass
class Curve:
    """One cost measured at growing sizes: what a table and a plot show."""

    title: str
    unit: str  # what the size counts, singular ("partition")
    points: list[tuple[int, float, dict[str, Any]]] = field(default_factory=list)  # size, seconds, other figures

    def rows(self) -> list[dict[str, Any]]:
        """Each size with its seconds per unit and growth factor against the previous size."""
        rows = []
        for i, (size, seconds, extra) in enumerate(self.points):
            growth = None
            if i and self.points[i - 1][1] > 0:
                previous_size, previous_s, _ = self.points[i - 1]
                growth = round((seconds / previous_s) / (size / previous_size), 2)
            rows.append(
                {"size": size, "seconds": round(seconds, 4), "ms_per_unit": round(1000 * seconds / size, 3)}
                | {"growth": growth}
                | extra
            )
        return rows

    def markdown(self) -> str:
        lines = [
            f"{self.title}:",
            "",
            f"| {self.unit}s | seconds | ms per {self.unit} | {GROWTH} |",
            "|---:|---:|---:|---:|",
        ]
        for row in self.rows():
            growth = "–" if row["growth"] is None else f"{row['growth']:.2f}"
            lines.append(f"| {row['size']:,} | {row['seconds']:.3f} | {row['ms_per_unit']:.3f} | {growth} |")
        return "\n".join(lines)


def flow_topology(root: Path, dc1: BrokerProcess, dc2: BrokerProcess, flow: str, topic: str) -> Topology:
    """A topology whose one flow copies just `topic` from dc1 to dc2 under the same name."""
    path = write_topology(
        root / f"{flow}.yaml",
        {"dc1": dc1.bootstrap, "dc2": dc2.bootstrap},
        f"  - {{name: {flow}, source: dc1, target: dc2, topics: {{include: ['{topic}']}}}}",
    )
    return load_topology(path)


def replication_curves(sizes: list[int], records: int, size: int) -> tuple[Curve, Curve]:
    """Planning and copy of a new flow per size: each run starts with no progress, as a first replication does."""
    planning = Curve("Replication planning", "partition")
    copying = Curve("Replication copy", "partition")
    with temporary_brokers("dc1", "dc2") as (root, brokers):
        dc1, dc2 = brokers["dc1"], brokers["dc2"]
        # Untimed: the brokers' first transactional copy pays one-off set-up that the first size would carry.
        replication.create(dc1, "warm-up", 1)
        replication.fill(dc1, "warm-up", 10, size, 1)
        copy_flow(flow_topology(root, dc1, dc2, "warm-up", "warm-up"), "warm-up")
        for partitions in sizes:
            print(f"replication: {partitions} partitions x {records} records...", flush=True)
            name = f"curve-{partitions}"
            replication.create(dc1, name, partitions)
            replication.fill(dc1, name, partitions * records, size, partitions)
            topology = flow_topology(root, dc1, dc2, name, name)
            with FlowClients(ClusterAccess.from_environ(topology), topology.flow(name)) as clients:
                rounds = CopyRounds(clients)
                rounds.prepare_target()
                started = time.perf_counter()
                copy_round = rounds.next()
                planned = time.perf_counter()
            results = copy_ranges(copy_round.tasks)
            copied = time.perf_counter()
            close_clients()
            count = sum(r.records for r in results if r.topic == name)
            if count != partitions * records:
                raise RuntimeError(f"replication of {partitions} partitions copied {count} of {partitions * records}")
            planning.points.append((partitions, planned - started, {}))
            copying.points.append((partitions, copied - planned, {"records": count}))
            print(
                f"replication: {partitions} partitions: planning {planned - started:.3f} s, "
                f"copy {copied - planned:.3f} s",
                flush=True,
            )
    return planning, copying


def translation_curve(sizes: list[int], records: int) -> tuple[Curve, bool]:
    """The checkpoint pass per number of groups, on one replicated topic; each size commits its own groups (its
    own prefix) and translates only those. Also says whether every group was translated exactly."""
    curve = Curve("Offset translation (6 partitions per group)", "group")
    exact_everywhere = True
    topic = flow = FLEET_TOPIC
    with temporary_brokers("dc1", "dc2") as (root, brokers):
        dc1, dc2 = brokers["dc1"], brokers["dc2"]
        print(f"translation: replicating {FLEET_PARTITIONS} partitions x {records} records...", flush=True)
        topology = flow_topology(root, dc1, dc2, flow, topic)
        replicate_fleet(dc1.config, dc2.config, topology, flow, records, local=500, late=200)
        truth = ground_truth(dc2.config, topic, FLEET_PARTITIONS, dc1.cluster_id)
        for groups in sizes:
            print(f"translation: {groups} groups...", flush=True)
            prefix = f"curve{groups}"
            commits = commit_random_groups(dc1.config, topic, FLEET_PARTITIONS, groups, records + 200, prefix)
            started = time.perf_counter()
            translated = checkpoint_groups(
                ClusterAccess.from_environ(topology), topology.flow(flow), re.compile(prefix + "-.*")
            )
            seconds = time.perf_counter() - started
            close_readers()
            exact, partitions_exact = truth.score(
                commits, {g: {t.partition: t.dest_offset for t in ts} for g, ts in translated.items()}
            )
            exact_everywhere &= exact == groups
            curve.points.append((groups, seconds, {"groups_exact": exact, "group_partitions_exact": partitions_exact}))
            print(f"translation: {groups} groups: {seconds:.3f} s, {exact}/{groups} groups exact", flush=True)
    return curve, exact_everywhere


def health_curve(sizes: list[int], runs: int) -> Curve:
    """One health run per size, over a flow that is caught up, after WINDOW untimed runs (the state a scheduled
    check meets: each run reads the samples of the window back)."""
    curve = Curve(f"Health run (median of {runs})", "partition")
    with temporary_brokers("dc1", "dc2") as (root, brokers):
        dc1, dc2 = brokers["dc1"], brokers["dc2"]
        for partitions in sizes:
            print(f"health: {partitions} partitions...", flush=True)
            name = f"health-{partitions}"
            replication.create(dc1, name, partitions)
            replication.fill(dc1, name, 20 * partitions, 100, partitions)
            topology = flow_topology(root, dc1, dc2, name, name)
            copy_flow(topology, name)
            for _ in range(WINDOW):  # steady state: each timed run reads a full window of earlier samples
                check_flow(ClusterAccess.from_environ(topology), name)
            seconds = []
            for _ in range(runs):
                started = time.perf_counter()
                health = check_flow(ClusterAccess.from_environ(topology), name)
                seconds.append(time.perf_counter() - started)
                if health.status != "OK":
                    raise RuntimeError(f"health of {partitions} partitions: {health.status} {health.problems}")
            median = statistics.median(seconds)
            curve.points.append((partitions, median, {"runs_s": [round(s, 3) for s in seconds]}))
            print(f"health: {partitions} partitions: {median:.3f} s", flush=True)
    return curve


def latency_runs(rates: list[int], seconds: int) -> list[dict[str, Any]]:
    """replication_benchmark's latency run per rate, each on new brokers: its topic, flow and continuous job are
    fixed names, and a run must not find the previous one's records or progress."""
    results = []
    for rate in rates:
        print(f"latency: {rate:,} records/s for {seconds} s...", flush=True)
        with temporary_brokers("dc1", "dc2") as (root, brokers):
            try:
                result = replication.latency(brokers["dc1"], brokers["dc2"], root, rate, seconds)
            except statistics.StatisticsError:  # nothing arrived: no median to take
                result = {"rate": rate, "seconds": seconds, "received": 0, "sent": rate * seconds}
        results.append(result)
        if result["received"]:
            print(replication.describe_latency(result), flush=True)
        else:
            print(f"latency at {rate} records/s: no record arrived", flush=True)
    return results


def latency_markdown(results: list[dict[str, Any]]) -> str:
    lines = [
        "Continuous replication latency:",
        "",
        "| records/s | p50 ms | p99 ms | max ms | source topic p50 / p99 ms (baseline) | received / sent |",
        "|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        figures = " | ".join(str(r.get(key, "–")) for key in ("p50_ms", "p99_ms", "max_ms"))
        figures += f" | {r.get('source_p50_ms', '–')} / {r.get('source_p99_ms', '–')}"
        lines.append(f"| {r['rate']:,} | {figures} | {r['received']:,} / {r['sent']:,} |")
    return "\n".join(lines)


def draw_costs(ax: Axes, curves: list[Curve], xlabel: str, title: str) -> None:
    """Seconds against size on log-log axes, each curve with a dashed linear reference through its first point."""
    ax.set_title(title)
    if not curves:
        ax.text(0.5, 0.5, "not run", ha="center", va="center", transform=ax.transAxes)
        return
    for curve in curves:
        sizes = [p[0] for p in curve.points]
        seconds = [max(p[1], 1e-6) for p in curve.points]  # a log axis takes no zero
        (line,) = ax.plot(sizes, seconds, marker="o", label=curve.title)
        ax.plot(
            sizes,
            [seconds[0] * s / sizes[0] for s in sizes],
            linestyle="--",
            color=line.get_color(),
            alpha=0.6,
            label="linear",
        )
    ax.set_xscale("log")
    ax.set_yscale("log")
    sizes = sorted({p[0] for curve in curves for p in curve.points})
    ax.set_xticks(sizes, labels=[f"{s:,}" for s in sizes])  # the sizes measured, not powers of ten
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel(xlabel)
    ax.set_ylabel("seconds")
    ax.legend(fontsize="small")
    ax.grid(True, which="both", alpha=0.3)


def draw_latency(ax: Axes, results: list[dict[str, Any]]) -> None:
    ax.set_title("Continuous replication latency")
    measured = [r for r in results if "p50_ms" in r]
    if not measured:
        ax.text(0.5, 0.5, "not run", ha="center", va="center", transform=ax.transAxes)
        return
    rates = [r["rate"] for r in measured]
    ax.plot(rates, [r["p50_ms"] for r in measured], marker="o", label="p50")
    ax.plot(rates, [r["p99_ms"] for r in measured], marker="o", label="p99")
    ax.plot(rates, [r["source_p99_ms"] for r in measured], marker=".", linestyle=":", label="p99, source topic")
    ax.axhline(LATENCY_TARGET_MS, linestyle="--", color="grey", label="1 s target")
    ax.set_xlabel("records/s")
    ax.set_ylabel("ms")
    ax.set_ylim(bottom=0)
    ax.legend(fontsize="small")
    ax.grid(True, alpha=0.3)


def plot(path: Path, curves: dict[str, list[Curve]], latencies: list[dict[str, Any]]) -> None:
    """The four panels in one PNG, drawn with the Agg canvas (no display, no pyplot state)."""
    figure = Figure(figsize=(12, 9), layout="constrained")
    FigureCanvasAgg(figure)
    axes = figure.subplots(2, 2)
    draw_costs(axes[0][0], curves.get("replication", []), "partitions", "Replication (planning, copy)")
    draw_costs(axes[0][1], curves.get("translation", []), "groups", "Offset translation")
    draw_costs(axes[1][0], curves.get("health", []), "partitions", "Health run")
    draw_latency(axes[1][1], latencies)
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=100)


def selected(values: list[str] | None) -> list[str]:
    """--only's curves, repeated or comma-separated; all of them when not given."""
    if not values:
        return list(CURVES)
    names = [name.strip() for value in values for name in value.split(",") if name.strip()]
    unknown = sorted(set(names) - set(CURVES))
    if unknown:
        raise SystemExit(f"--only: unknown {', '.join(unknown)} (choose from {', '.join(CURVES)})")
    return [name for name in CURVES if name in names]


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", action="append", metavar="CURVE", help=f"repeatable or comma list: {CURVES}")
    parser.add_argument("--quick", action="store_true", help="tiny sizes, to try the script out")
    parser.add_argument("--records", type=int, default=200, help="records per partition (replication)")
    parser.add_argument("--size", type=int, default=200, help="value bytes (replication)")
    parser.add_argument("--translation-records", type=int, default=2000, help="source records per partition")
    parser.add_argument("--health-runs", type=int, default=5)
    parser.add_argument("--seconds", type=int, default=20, help="producing time per latency rate")
    parser.add_argument("--plot", type=Path, default=PROJECT_ROOT / "docs" / "cost_curves.png")
    return parser.parse_args()


def measure(args: argparse.Namespace) -> tuple[dict[str, list[Curve]], list[dict[str, Any]], bool]:
    """The selected curves, the latency runs (if selected) and whether every translation was exact."""
    which = selected(args.only)
    sizes = QUICK_SIZES if args.quick else SIZES
    curves: dict[str, list[Curve]] = {}
    exact = True
    if "replication" in which:
        curves["replication"] = list(replication_curves(sizes["replication"], args.records, args.size))
    if "translation" in which:
        translation, exact = translation_curve(sizes["translation"], args.translation_records)
        curves["translation"] = [translation]
    if "health" in which:
        curves["health"] = [health_curve(sizes["health"], args.health_runs)]
    rates, seconds = (QUICK_RATES, QUICK_SECONDS) if args.quick else (RATES, args.seconds)
    latencies = latency_runs(rates, seconds) if "latency" in which else []
    return curves, latencies, exact


def summary(
    args: argparse.Namespace, curves: dict[str, list[Curve]], latencies: list[dict[str, Any]]
) -> dict[str, Any]:
    """The JSON line: each measured curve's rows with the settings it ran with."""
    result: dict[str, Any] = {"quick": args.quick}
    if "replication" in curves:
        planning, copying = curves["replication"]
        result["replication"] = {
            "records_per_partition": args.records,
            "record_bytes": args.size,
            "planning": planning.rows(),
            "copy": copying.rows(),
        }
    if "translation" in curves:
        result["translation"] = {
            "partitions_per_group": FLEET_PARTITIONS,
            "records_per_partition": args.translation_records,
            "rows": curves["translation"][0].rows(),
        }
    if "health" in curves:
        result["health"] = {"runs": args.health_runs, "rows": curves["health"][0].rows()}
    if latencies:
        result["latency"] = latencies
    return result


def main() -> int:
    args = arguments()
    curves, latencies, exact = measure(args)
    print()
    for curve in (c for group in curves.values() for c in group):
        print(curve.markdown() + "\n")
    if latencies:
        print(latency_markdown(latencies) + "\n")
    plot(args.plot, curves, latencies)
    print(f"plot: {args.plot}")
    print(json.dumps(summary(args, curves, latencies)))
    lost = [r["rate"] for r in latencies if r["received"] < r["sent"]]
    if not exact:
        print("FAILED: a translation was not exact", file=sys.stderr)
    if lost:
        print(f"FAILED: records missing at {lost} records/s", file=sys.stderr)
    return 0 if exact and not lost else 1


if __name__ == "__main__":
    sys.exit(main())
