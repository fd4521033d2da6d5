"""Translated group offsets kept in the target's `_kdr.checkpoints`, so that they are there when the
source is gone (MirrorMaker 2 keeps its checkpoints the same way).

Key `flow/group/topic/partition` (source names), compacted; the value is the translation plus when
it was made. A continuous replicator keeps them current with a `CheckpointTask` (MirrorMaker 2's checkpoint task),
which writes a checkpoint again only when its translation moved: an idle group costs nothing per pass, so the topic
grows with what changes, not with the age of the flow. Two more keys per flow say what a pass confirmed:
- `flow`: the pass itself (when, how many groups, how many checkpoints it wrote, and the digest of its groups);
- `flow/__members__`: the groups of the last pass over all of the flow's groups, written when they change.
A checkpoint of a member group is as current as the newest pass whose digest matches the members' (it was confirmed
then, unchanged); any other (a group gone from the source, a pass over some groups only) is as old as it was made."""

from __future__ import annotations

import hashlib
import json
import logging
import re
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from confluent_kafka import IsolationLevel, Message
from confluent_kafka.admin import AdminClient

from ..access import ClusterAccess
from ..clients import end_offsets
from ..replication.flow_clients import with_retries
from ..replication.internal import CHECKPOINTS, newest_value, put_records, read_records
from ..replication.lag import LagError, flow_lag, save_snapshot
from ..topology import Flow
from .groups import by_group, committed_offsets, list_groups, plan_requests, select_groups
from .offsets import PartitionRequest, Translated, translate_partition

log = logging.getLogger(__name__)
TIMEOUT_S = 30.0
LAST_PASS_WAIT_S = 10.0  # a stopping run waits this long for the checkpoint pass under way before its last one
# A checkpoint task writes every checkpoint again this often, changed or not: should `_kdr.checkpoints` be deleted or
# its cluster rebuilt under a running replicator, the idle groups' checkpoints are back within this time.
FULL_PASS_S = 3600.0


def checkpoint_key(flow: str, group: str, topic: str, partition: int) -> bytes:
    return f"{flow}/{group}/{topic}/{partition}".encode()


def members_key(flow: str) -> bytes:
    """The key of the flow's member groups: a group name cannot end a checkpoint key, whose last two parts are a
    topic and a partition number."""
    return f"{flow}/__members__".encode()


def members_digest(groups: Iterable[str]) -> str:
    return hashlib.sha256("\n".join(sorted(groups)).encode()).hexdigest()[:16]


def write_checkpoints(
    target_config: dict[str, Any],
    flow: str,
    groups: dict[str, list[Translated]],
    at_ms: int,
    written: dict[bytes, dict[str, Any]] | None = None,
    all_groups: bool = False,
) -> int:
    """The groups' checkpoints, and the pass itself under the key `<flow>`: a flow whose source has no group to
    translate still shows its checkpoints are current (health's max_checkpoint_age_s). `written`: what this writer
    wrote before (key -> translation; updated once acknowledged): a checkpoint found there unchanged is not written
    again. `all_groups`: the pass covers every group of the flow, so its groups are the flow's members. Returns the
    checkpoints written."""
    known = {} if written is None else written
    current = {
        checkpoint_key(flow, group, t.topic, t.partition): {**t.to_dict(), "group": group}
        for group, translations in groups.items()
        for t in translations
    }
    changed = {key: value for key, value in current.items() if known.get(key) != value}
    digest = members_digest(groups) if all_groups else None
    records: list[tuple[bytes, Any]] = [(key, {**value, "at_ms": at_ms}) for key, value in changed.items()]
    if digest is not None and known.get(members_key(flow), {}).get("digest") != digest:
        records.append((members_key(flow), {"at_ms": at_ms, "digest": digest, "groups": sorted(groups)}))
    pass_record = {"at_ms": at_ms, "groups": len(groups), "written": len(changed), "members": digest}
    put_records(target_config, CHECKPOINTS, [*records, (flow.encode(), pass_record)])
    if written is not None:
        written.update(changed)
        if digest is not None:
            written[members_key(flow)] = {"digest": digest}
    return len(changed)


def load_checkpoints(target_config: dict[str, Any], flow: str) -> tuple[dict[str, list[Translated]], int | None]:
    """The flow's last checkpoint per group and partition, and when the newest was made (None: none)."""
    return checkpoints_in(read_records(target_config, CHECKPOINTS), flow)


def checkpointed_groups(
    access: ClusterAccess, flow: Flow, pattern: re.Pattern[str] | None
) -> tuple[dict[str, list[Translated]], int | None]:
    """The last checkpoints of the flow's groups (its groups filter, and `pattern` when given) kept in its target,
    and when the newest was made: what a disaster failover applies."""
    checkpoints, at_ms = load_checkpoints(access.config(flow.target), flow.name)
    selected = set(select_groups(checkpoints, flow, access.topology, pattern))
    return {g: ts for g, ts in checkpoints.items() if g in selected}, at_ms


def checkpoints_in(records: Iterable[Message], flow: str) -> tuple[dict[str, list[Translated]], int | None]:
    """The flow's last checkpoint per group and partition among `_kdr.checkpoints` records (in log order), and when
    the newest pass was made (None: none)."""
    dated, newest = dated_checkpoints_in(records, flow)
    groups = {group: [t for t, _ in checkpoints] for group, checkpoints in dated.items()}
    return groups, newest


def dated_checkpoints_in(
    records: Iterable[Message], flow: str
) -> tuple[dict[str, list[tuple[Translated, int]]], int | None]:
    """checkpoints_in, with when each checkpoint was last known current (epoch ms): made, or confirmed unchanged by
    the newest pass over all of the flow's groups (the module's docstring)."""
    prefix, pass_key, members = f"{flow}/".encode(), flow.encode(), members_key(flow)
    latest: dict[bytes, dict[str, Any] | None] = {}
    newest_pass: dict[str, Any] | None = None
    member_groups: dict[str, Any] | None = None
    for message in records:
        key = message.key() or b""
        if not key.startswith(prefix) and key != pass_key:
            continue  # another flow's
        value = None if message.value() is None else json.loads(message.value())
        if key == members:
            member_groups = value
        elif key != pass_key:
            latest[key] = value
        elif value is not None and (newest_pass is None or value["at_ms"] >= newest_pass["at_ms"]):
            newest_pass = value
    newest = None if newest_pass is None else newest_pass["at_ms"]
    confirmed: set[str] = set()
    if newest_pass and member_groups and newest_pass.get("members") == member_groups["digest"]:
        confirmed = set(member_groups["groups"])
    groups: dict[str, list[tuple[Translated, int]]] = {}
    for value in latest.values():
        if value is None:
            continue
        at_ms = value.pop("at_ms")
        group = value.pop("group")
        if group in confirmed:
            at_ms = max(at_ms, newest_pass["at_ms"])
        groups.setdefault(group, []).append((Translated(**value), at_ms))
        newest = at_ms if newest is None else max(newest, at_ms)
    return {g: sorted(ts, key=lambda t: (t[0].topic, t[0].partition)) for g, ts in sorted(groups.items())}, newest


def pass_time_in(records: Iterable[Message], flow: str) -> int | None:
    """When the flow's newest pass among `_kdr.checkpoints` records ran (None: none there). Every write of checkpoints
    ends with its pass record, so this is when the newest checkpoint was made or confirmed."""
    key, newest = flow.encode(), None
    for message in records:
        if message.key() == key and message.value() is not None:
            at_ms = json.loads(message.value())["at_ms"]
            newest = at_ms if newest is None else max(newest, at_ms)
    return newest


def load_pass_time(target_config: dict[str, Any], flow: str) -> int | None:
    """pass_time_in, read back from the end of the target's `_kdr.checkpoints` (a pass record is written each pass)."""
    value = newest_value(target_config, CHECKPOINTS, flow.encode())
    return None if value is None else json.loads(value)["at_ms"]


def translate_in_process(requests: list[PartitionRequest]) -> list[Translated]:
    """The per-partition translations one after the other (a continuous replicator's driver thread)."""
    return [t for request in requests for t in translate_partition(request)]


def checkpoint_groups(
    access: ClusterAccess,
    flow: Flow,
    pattern: re.Pattern[str] | None,
    translate: Callable[[list[PartitionRequest]], list[Translated]] = translate_in_process,
    retries: int = 3,
    unseen_from: Mapping[tuple[str, int], int] | None = None,
    written: dict[bytes, dict[str, Any]] | None = None,
) -> dict[str, list[Translated]]:
    """Translate the committed offsets of the flow's groups from the source, keep them as checkpoints in the
    target with a lag snapshot of the flow (the RPO estimate should the source be lost), and return them.
    `translate` runs the per-partition requests: in Spark tasks (translate_offsets.py) or in process. `written`:
    the writer's memory of what it wrote (write_checkpoints)."""
    # Stamped when the source's committed offsets are read, not when the pass ends: a pass slowed down (a loaded
    # source, many groups) would otherwise make its checkpoints look fresher than the commits they hold.
    read_at_ms = int(time.time() * 1000)
    groups = translate_from_source(access, flow, pattern, translate, retries, unseen_from)
    target_config = access.config(flow.target)
    write_checkpoints(target_config, flow.name, groups, read_at_ms, written, all_groups=pattern is None)
    try:
        save_snapshot(target_config, flow_lag(access, flow.name))
    except LagError as exc:  # the checkpoints are what matters; the snapshot only refines a later RPO estimate
        log.warning("lag snapshot of flow %s not saved: %s", flow.name, exc)
    return groups


class CheckpointTask:
    """While both sides are up, keep the flow's translated group offsets (and a lag snapshot) in the target, so that
    a disaster failover finds them there: a first pass at `start`, then every `interval` seconds until `stop` is set,
    on a daemon thread (0: none), and a `last_pass` when the run ends cleanly. A pass writes only the checkpoints
    that moved since the task wrote them, and all of them every FULL_PASS_S. A failed pass is logged, never
    raised: a source outage must not stop replication, and the last checkpoints stay."""

    def __init__(
        self,
        access: ClusterAccess,
        flow: Flow,
        interval: float,
        stop: threading.Event,
        checkpoint: Callable[..., dict[str, list[Translated]]] = checkpoint_groups,
    ) -> None:
        self.access, self.flow, self.interval, self.stop = access, flow, interval, stop
        self.checkpoint = checkpoint
        self.written: dict[bytes, dict[str, Any]] = {}
        self.full_pass_at = -FULL_PASS_S  # monotonic time of the last pass that wrote everything
        self.thread = threading.Thread(target=self.run, name="kdr-checkpoints", daemon=True)

    def start(self) -> None:
        if self.interval > 0:
            self.thread.start()

    def run(self) -> None:
        while True:
            self.run_pass()
            if self.stop.wait(self.interval):
                return

    def run_pass(self) -> None:
        if time.monotonic() - self.full_pass_at >= FULL_PASS_S:
            self.written.clear()
            self.full_pass_at = time.monotonic()
        started = time.monotonic()
        try:
            groups = self.checkpoint(self.access, self.flow, None, retries=1, written=self.written)
            log.info(
                "flow %s: checkpointed %d groups in %.1f s", self.flow.name, len(groups), time.monotonic() - started
            )
        except Exception as exc:  # noqa: BLE001 - a source outage must not stop replication; the last ones stay
            log.warning("flow %s: group offsets not checkpointed: %s", self.flow.name, exc)

    def last_pass(self, wait: float = LAST_PASS_WAIT_S) -> None:
        """A last pass after the last epoch of a stopped run (`stop` set): the target keeps the state at the stop (a
        planned failover stops the flow back; a later disaster's RPO starts from this snapshot), not one up to
        `interval` older. The periodic pass under way ends first; if it does not within `wait`, it is the last."""
        if self.interval <= 0:
            return
        self.thread.join(wait)
        if not self.thread.is_alive():
            self.run_pass()


def translate_from_source(
    access: ClusterAccess,
    flow: Flow,
    pattern: re.Pattern[str] | None,
    translate: Callable[[list[PartitionRequest]], list[Translated]] = translate_in_process,
    retries: int = 3,
    unseen_from: Mapping[tuple[str, int], int] | None = None,
) -> dict[str, list[Translated]]:
    """The committed offsets of the flow's groups (those `pattern` fully matches, when given) read from the source
    now and translated into the target, per group; nothing is written."""
    topology = access.topology
    source = topology.cluster(flow.source)
    source_config = access.config(flow.source)
    target_config = access.config(flow.target)
    admin = AdminClient(source_config)
    where = f"source cluster {source.name} ({source.bootstrap_servers})"
    cluster_id = with_retries(where, lambda: admin.describe_cluster(request_timeout=10).result().cluster_id, retries)
    names = with_retries(where, lambda: list_groups(admin, TIMEOUT_S), retries)
    committed = committed_offsets(admin, select_groups(names, flow, topology, pattern), flow, TIMEOUT_S)
    partitions = sorted({key for offsets in committed.values() for key in offsets})
    ends = end_offsets(admin, partitions, IsolationLevel.READ_COMMITTED, TIMEOUT_S) if partitions else {}
    requests = plan_requests(committed, flow, source_config, target_config, cluster_id, ends, unseen_from)
    return by_group(committed, translate(requests) if requests else [])
