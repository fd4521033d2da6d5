"""What kafka-dr puts on the wire that applications, Spark jobs and tools all read: the headers it adds to records and
the names of its internal topics. No import of its own, so that the client library (follower.py) and anything else
can name them without pulling in replication or failback code.
"""

from __future__ import annotations

# Headers kafka-dr adds to the records it writes.
PROVENANCE_HEADER = "__kdr_prov"  # one entry per hop a copy took (replication.provenance): the cycle rule reads it
REPUBLISHED_HEADER = "__kdr_republished"  # a failback's copy of a record that never left its cluster (failback)

# Internal topics, prefixed `_kdr.` and never replicated as data but for the two that flows copy by name.
INTERNAL_TOPIC_PREFIX = "_kdr."
HEARTBEATS_TOPIC = f"{INTERNAL_TOPIC_PREFIX}heartbeats"  # copied: their copies' provenance measures the latency
DRILL_TOPIC = f"{INTERNAL_TOPIC_PREFIX}drill"  # copied: dr_drill's probe records, data to the drill
PROGRESS_TOPIC = f"{INTERNAL_TOPIC_PREFIX}progress"  # per flow and partition: how far copies went; drivers' claims
CHECKPOINTS_TOPIC = f"{INTERNAL_TOPIC_PREFIX}checkpoints"  # translated consumer-group offsets
HEALTH_TOPIC = f"{INTERNAL_TOPIC_PREFIX}health"  # dr_replication_health's samples and evaluations
CONTROL_TOPIC = f"{INTERNAL_TOPIC_PREFIX}control"  # stop requests for a flow's replicator
