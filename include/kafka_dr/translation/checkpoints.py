"""Translated group offsets kept in the target's `_kdr.checkpoints`, so that they are there when the
source is gone (MirrorMaker 2 keeps its checkpoints the same way).

Key `flow/group/topic/partition` (source names), compacted; the value is the translation plus when
it was made."""

from __future__ import annotations

import json
from typing import Any

from ..replication.internal import CHECKPOINTS, put_records, read_records
from .offsets import Translated


def checkpoint_key(flow: str, group: str, topic: str, partition: int) -> bytes:
    return f"{flow}/{group}/{topic}/{partition}".encode()


def write_checkpoints(target_config: dict[str, Any], flow: str, groups: dict[str, list[Translated]],
                      at_ms: int) -> int:
    records = [(checkpoint_key(flow, group, t.topic, t.partition), {**t.to_dict(), "group": group, "at_ms": at_ms})
               for group, translations in groups.items() for t in translations]
    put_records(target_config, CHECKPOINTS, records)
    return len(records)


def load_checkpoints(target_config: dict[str, Any], flow: str) -> tuple[dict[str, list[Translated]], int | None]:
    """The flow's last checkpoint per group and partition, and when the newest was made (None: none)."""
    prefix = f"{flow}/".encode()
    latest: dict[bytes, dict[str, Any] | None] = {}
    for message in read_records(target_config, CHECKPOINTS):
        key = message.key() or b""
        if key.startswith(prefix):
            latest[key] = None if message.value() is None else json.loads(message.value())
    groups: dict[str, list[Translated]] = {}
    newest = None
    for value in latest.values():
        if value is None:
            continue
        at_ms = value.pop("at_ms")
        group = value.pop("group")
        groups.setdefault(group, []).append(Translated(**value))
        newest = at_ms if newest is None else max(newest, at_ms)
    return {g: sorted(ts, key=lambda t: (t.topic, t.partition)) for g, ts in sorted(groups.items())}, newest
