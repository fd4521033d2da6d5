"""A translation job's summary (spark_jobs/translate_offsets.py's JSON), kept small where it travels as an XCom.

The job's summary lists every translated partition of every group in full (`groups`: source and destination topic,
partition and offset, method): 0.8 MB for 1,000 groups x 6 partitions, which Airflow serializes, sends and stores
as an XCom in about half a second. What the tasks after it need of a group is only where it was applied:
`offsets`, destination topic -> partition -> offset."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def for_xcom(summary: Mapping[str, Any]) -> dict[str, Any]:
    """The summary with `groups` replaced by `offsets` (destination topic -> partition (a string: JSON) -> offset)."""
    offsets: dict[str, dict[str, dict[str, int]]] = {}
    for group, translations in (summary.get("groups") or {}).items():
        by_topic = offsets.setdefault(group, {})
        for t in translations:
            by_topic.setdefault(t["dest_topic"], {})[str(t["partition"])] = t["dest_offset"]
    return {**{k: v for k, v in summary.items() if k != "groups"}, "offsets": offsets}


def applied_offsets(summary: Mapping[str, Any], group: str) -> dict[tuple[str, int], int]:
    """Where `group` was set in the target, per (destination topic, partition), from a `for_xcom` summary."""
    return {
        (topic, int(partition)): offset
        for topic, partitions in summary["offsets"].get(group, {}).items()
        for partition, offset in partitions.items()
    }
