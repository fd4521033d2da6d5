"""Failback resync benchmark: the `data_lost` resync of a restored, empty cluster, against a plain copy of the same
records between the same brokers in the same run.

Three embedded clusters: `lost` (the cluster that is gone), `serving` and `restored` (empty, a new cluster id). The
serving cluster's topic holds --records records in --partitions partitions, half produced there and half copied
from the lost cluster before the loss (their provenance names it). The resync is the bounded replication job
dr_failback's resync task runs (spark-submit spark_jobs/replicate.py) of the flow serving -> restored, which copies
them all, those that first came from the lost cluster included; the baseline is a plain confluent-kafka
consume-then-produce loop (replication_benchmark.plain_copy) of the same records into another topic.

    make bench-failback
    PYTHONPATH=tests .venv/bin/python tests/benchmarks/failback_benchmark.py [--records 500000] [--partitions 8]
"""

from __future__ import annotations

import argparse
import json
import sys

from benchmarks.replication_benchmark import create, fill, plain_copy
from support.servers import temporary_brokers
from support.spark import submit, topic_total
from support.topology import write_topology


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=500_000)
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--size", type=int, default=200, help="value bytes")
    args = parser.parse_args()
    half = args.records // 2
    with temporary_brokers("lost", "serving", "restored") as (root, brokers):
        lost, serving, restored = brokers["lost"], brokers["serving"], brokers["restored"]
        path = write_topology(
            root / "topology.yaml",
            {name: broker.bootstrap for name, broker in brokers.items()},
            "  - {name: before-loss, source: lost, target: serving, topics: {include: ['orders']}}\n"
            "  - {name: resync, source: serving, target: restored, topics: {include: ['orders']}}",
        )
        create(lost, "orders", args.partitions)
        fill(lost, "orders", half, args.size, args.partitions)
        code, summary, err = submit("replicate", "--topology", str(path), "--flow", "before-loss", timeout=900)
        assert code == 0 and summary["records"] == half, (summary, err[-3000:])
        fill(serving, "orders", args.records - half, args.size, args.partitions)  # produced after the failover
        create(restored, "orders.plain", args.partitions)
        plain_s = plain_copy(serving, restored, "orders", "orders.plain", args.records, args.partitions)
        code, summary, err = submit("replicate", "--topology", str(path), "--flow", "resync", timeout=900)
        copied = topic_total(summary, "orders") if summary else None
        assert code == 0 and copied == args.records, (summary, err[-3000:])
    result = {
        "records": args.records,
        "partitions": args.partitions,
        "from_the_lost_cluster": half,
        "plain_copy_records_per_s": round(args.records / plain_s),
        "resync_copy_records_per_s": round(args.records / summary["copy_seconds"]),
        "resync_job_records_per_s": round(args.records / summary["seconds"]),
        "ratio_copy_phase": round(plain_s / summary["copy_seconds"], 3),
        "ratio_job": round(plain_s / summary["seconds"], 3),
    }
    print(
        f"failback resync ({args.records:,} records, {args.partitions} partitions, {half:,} first from the lost "
        f"cluster): copy phase {result['resync_copy_records_per_s']:,} rec/s, whole job "
        f"{result['resync_job_records_per_s']:,} rec/s vs plain copy {result['plain_copy_records_per_s']:,} rec/s "
        f"-> ratio {result['ratio_copy_phase']} (copy phase), {result['ratio_job']} (job)"
    )
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
