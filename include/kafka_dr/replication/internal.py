"""Internal topics of kafka-dr, prefixed `_kdr.` and never replicated as data.

They live in the target cluster of a flow, so that they survive the loss of the source:
- `_kdr.progress`: per flow and source partition, the next source offset copied and the
  destination offset reached (compacted; a checkpoint that bounds the resume search);
- `_kdr.offset-syncs`: source offset -> destination offset pairs (one per copied chunk);
- `_kdr.checkpoints`: translated consumer-group offsets (written by offset translation);
- `_kdr.heartbeats`: heartbeat records; the one internal topic a flow copies, so that the
  end-to-end latency can be measured from the provenance of the copies.
"""

from __future__ import annotations

from confluent_kafka.admin import AdminClient, NewTopic

from ..topology import INTERNAL_TOPIC_PREFIX

PROGRESS = f"{INTERNAL_TOPIC_PREFIX}progress"
OFFSET_SYNCS = f"{INTERNAL_TOPIC_PREFIX}offset-syncs"
CHECKPOINTS = f"{INTERNAL_TOPIC_PREFIX}checkpoints"
HEARTBEATS = f"{INTERNAL_TOPIC_PREFIX}heartbeats"

TOPIC_CONFIGS = {
    PROGRESS: {"cleanup.policy": "compact"},
    OFFSET_SYNCS: {"cleanup.policy": "compact"},
    CHECKPOINTS: {"cleanup.policy": "compact"},
    HEARTBEATS: {"retention.ms": str(24 * 3600 * 1000)},
}


def progress_key(flow: str, topic: str, partition: int) -> bytes:
    return f"{flow}/{topic}/{partition}".encode()


def ensure_internal_topics(admin: AdminClient, topics: tuple[str, ...] = tuple(TOPIC_CONFIGS),
                           timeout: float = 15.0) -> list[str]:
    """Create the missing internal topics (one partition each); returns the ones created."""
    existing = admin.list_topics(timeout=timeout).topics
    missing = [t for t in topics if t not in existing]
    if not missing:
        return []
    futures = admin.create_topics([NewTopic(t, 1, config=TOPIC_CONFIGS[t]) for t in missing],
                                  operation_timeout=timeout)
    created = []
    for topic, future in futures.items():
        try:
            future.result(timeout)
            created.append(topic)
        except Exception as exc:  # noqa: BLE001 - a concurrent creator is fine, anything else is not
            if "already exists" not in str(exc).lower():
                raise
    return created
