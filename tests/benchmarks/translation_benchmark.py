"""Offset translation benchmark: 1,000 groups x 6 partitions, each at its own offset, on two embedded clusters.

The destination topic starts with local records of its own, so destination offsets differ from source
offsets. spark_jobs/translate_offsets.py translates every group; each result is compared with the ground
truth read from the destination (the offset of the first copy whose origin offset is >= the committed one).
Printed: groups and group-partitions translated exactly, the job's time (its driver translates partitions while
Spark's context and workers start, Spark tasks take what is left: the split is printed), and the ratio of that time
to the baseline that any exact translation without an index needs: one plain read of every destination partition.
The same translation is also run in process (what a continuous replicator's checkpoint thread does), which
shows how much of the job is Spark start-up.

    make bench-translation
    PYTHONPATH=tests .venv/bin/python tests/benchmarks/translation_benchmark.py [--groups N] [--json]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from pathlib import Path
from typing import Any

from support.drills import FLEET_PARTITIONS, FLEET_TOPIC, replicate_fleet
from support.fleet import commit_random_groups, ground_truth
from support.servers import temporary_brokers
from support.spark import submit
from support.topology import write_topology

from kafka_dr.access import ClusterAccess
from kafka_dr.topology import Topology, load_topology
from kafka_dr.translation.checkpoints import checkpoint_groups
from kafka_dr.translation.offsets import Translated, close_readers


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--groups", type=int, default=1000)
    parser.add_argument("--records", type=int, default=20_000, help="records per source partition")
    parser.add_argument("--json", action="store_true")
    return parser.parse_args()


def spark_job(topology_file: Path) -> tuple[dict[str, Any], float] | None:
    """translate_offsets' summary and spark-submit's wall time; None (its stderr printed) when it failed."""
    started = time.perf_counter()
    code, summary, err = submit(
        "translate_offsets",
        "--topology",
        str(topology_file),
        "--flow",
        "fleet-flow",
        "--groups",
        "fleet-.*",
        timeout=1200,
    )
    wall = time.perf_counter() - started
    if code != 0 or not summary:
        print(err[-3000:], file=sys.stderr)
        return None
    return summary, wall


def translated_in_process(topology: Topology) -> tuple[dict[str, list[Translated]], float]:
    """The checkpoint pass a continuous replicator's thread runs, and its seconds."""
    started = time.perf_counter()
    in_process = checkpoint_groups(
        ClusterAccess.from_environ(topology), topology.flow("fleet-flow"), re.compile("fleet-.*")
    )
    seconds = time.perf_counter() - started
    close_readers()
    return in_process, seconds


def main() -> int:
    args = arguments()
    with temporary_brokers("dc1", "dc2") as (root, brokers):
        dc1, dc2 = brokers["dc1"], brokers["dc2"]
        topology_file = write_topology(
            root / "topology.yaml",
            {"dc1": dc1.bootstrap, "dc2": dc2.bootstrap},
            f"  - {{name: fleet-flow, source: dc1, target: dc2, topics: {{include: ['{FLEET_TOPIC}']}}}}",
        )
        topology = load_topology(topology_file)
        replicate_fleet(dc1.config, dc2.config, topology, "fleet-flow", args.records, local=500, late=200)
        below = args.records + 200  # the late records included
        commits = commit_random_groups(dc1.config, FLEET_TOPIC, FLEET_PARTITIONS, args.groups, below, "fleet")
        job = spark_job(topology_file)
        if job is None:
            return 1
        summary, wall = job
        in_process, in_process_s = translated_in_process(topology)
        truth = ground_truth(dc2.config, FLEET_TOPIC, FLEET_PARTITIONS, dc1.cluster_id)
        baseline_s = truth.read_seconds
        exact, partitions_ok = truth.score(
            commits, {g: {t["partition"]: t["dest_offset"] for t in ts} for g, ts in summary["groups"].items()}
        )
        exact_in_process, _ = truth.score(
            commits, {g: {t.partition: t.dest_offset for t in ts} for g, ts in in_process.items()}
        )
    result = {
        "groups": args.groups,
        "partitions_per_group": FLEET_PARTITIONS,
        "records_per_partition": args.records,
        "groups_translated_exactly": exact,
        "group_partitions_exact": partitions_ok,
        "job_seconds": summary["seconds"],
        "partitions_translated_by": summary["partitions_translated_by"],
        "spark_submit_seconds": round(wall, 2),
        "baseline_read_seconds": round(baseline_s, 2),
        "ratio_read_over_job": round(baseline_s / summary["seconds"], 3),
        "in_process_seconds": round(in_process_s, 2),
        "groups_exact_in_process": exact_in_process,
        "ratio_read_over_in_process": round(baseline_s / in_process_s, 3),
    }
    print(
        f"translation: {exact}/{args.groups} groups ({partitions_ok}/{args.groups * FLEET_PARTITIONS} "
        "group-partitions) "
        f"exact; job {summary['seconds']} s (spark-submit {wall:.1f} s incl. JVM start; partitions translated by "
        f"{summary['partitions_translated_by']}); one plain read of the "
        f"destination {baseline_s:.2f} s -> ratio {result['ratio_read_over_job']}; in process "
        f"{in_process_s:.2f} s ({exact_in_process}/{args.groups} exact) -> ratio "
        f"{result['ratio_read_over_in_process']}"
    )
    if args.json:
        print(json.dumps(result))
    return 0 if exact == exact_in_process == args.groups else 1


if __name__ == "__main__":
    sys.exit(main())
