"""The classic consumer-group protocol: membership, rebalances, session expiry and offsets.

States and transitions follow Kafka's GroupMetadata: Empty -> PreparingRebalance ->
CompletingRebalance -> Stable, and back to PreparingRebalance when a member joins, leaves or
misses its session timeout. Committed offsets are durable (an append-only file replayed at start,
playing the part of __consumer_offsets); membership is not, so after a restart members rejoin.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import kafka.errors as Errors

from kafka_dr.processes import write_atomic

log = logging.getLogger(__name__)

EMPTY, PREPARING, COMPLETING, STABLE, DEAD = ("Empty", "PreparingRebalance", "CompletingRebalance", "Stable", "Dead")
OFFSETS_FILE = "__consumer_offsets.jsonl"
MIN_SESSION_TIMEOUT_MS = 1000  # group.min.session.timeout.ms is 6000 in Kafka; lower eases tests
MAX_SESSION_TIMEOUT_MS = 1800000


def now_ms() -> int:
    return int(time.time() * 1000)


@dataclass
class OffsetAndMetadata:
    offset: int
    metadata: str | None
    leader_epoch: int
    commit_timestamp: int


@dataclass
class JoinResult:
    error: int
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    member_id: str = ""
    members: list[tuple[str, str | None, bytes]] = field(default_factory=list)


@dataclass
class Member:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    assignment: bytes = b""
    last_heartbeat: float = field(default_factory=time.monotonic)
    join_future: asyncio.Future | None = None
    sync_future: asyncio.Future | None = None

    def metadata_for(self, protocol: str) -> bytes:
        return next(meta for name, meta in self.protocols if name == protocol)


@dataclass
class Group:
    group_id: str
    state: str = EMPTY
    generation_id: int = 0
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str | None = None
    members: dict[str, Member] = field(default_factory=dict)
    pending_members: set[str] = field(default_factory=set)  # issued ids awaiting their first join
    offsets: dict[tuple[str, int], OffsetAndMetadata] = field(default_factory=dict)
    rebalance_task: asyncio.Task | None = None

    def common_protocols(self) -> set[str]:
        """The protocol names every member supports (the group must have members)."""
        return set.intersection(*({name for name, _ in m.protocols} for m in self.members.values()))

    def accepts(self, protocol_type: str, protocols: list[tuple[str, bytes]]) -> bool:
        """Whether a joining member's protocols fit: some, and with members already there, the group's type and one
        name they all support."""
        if not protocols:
            return False
        if not self.members:
            return True
        return protocol_type == self.protocol_type and bool({name for name, _ in protocols} & self.common_protocols())

    def select_protocol(self) -> str:
        """The protocol every member supports, preferring the members' first choices (votes)."""
        common = self.common_protocols()
        votes: dict[str, int] = {}
        for member in self.members.values():
            choice = next(name for name, _ in member.protocols if name in common)
            votes[choice] = votes.get(choice, 0) + 1
        return max(sorted(votes), key=lambda name: votes[name])

    def subscribed_topics(self) -> set[str] | None:
        """Topics the members subscribe to (consumer protocol only); None when unknown."""
        if self.protocol_type != "consumer" or not self.protocol_name or not self.members:
            return None
        from kafka.protocol.consumer.metadata import ConsumerProtocolSubscription

        topics: set[str] = set()
        for member in self.members.values():
            try:
                meta = member.metadata_for(self.protocol_name)
                topics.update(ConsumerProtocolSubscription.decode(meta, version=0).topics)
            except Exception:  # noqa: BLE001 - unparsable metadata: be conservative
                return None
        return topics


class GroupCoordinator:
    def __init__(self, data_dir: Path, initial_rebalance_delay_ms: int = 3000) -> None:
        self.groups: dict[str, Group] = {}
        self.initial_rebalance_delay_ms = initial_rebalance_delay_ms
        self._path = data_dir / OFFSETS_FILE
        self._load_offsets()
        self._fd = os.open(self._path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    # ---- durable offsets -------------------------------------------------------------------
    def _load_offsets(self) -> None:
        if not self._path.exists():
            return
        for line in self._path.read_text().splitlines():
            try:
                entry = json.loads(line)
            except json.JSONDecodeError:
                continue  # a torn last line after a crash
            group = self.group(entry["g"])
            key = (entry["t"], entry["p"])
            if entry.get("o") is None:
                group.offsets.pop(key, None)
            else:
                group.offsets[key] = OffsetAndMetadata(entry["o"], entry["m"], entry["e"], entry["ts"])
        for group_id in [g for g, grp in self.groups.items() if not grp.offsets]:
            del self.groups[group_id]
        self._compact()

    def _compact(self) -> None:
        write_atomic(
            self._path,
            "".join(
                self._entry(group.group_id, topic, partition, om)
                for group in self.groups.values()
                for (topic, partition), om in group.offsets.items()
            ),
        )

    @staticmethod
    def _entry(group_id: str, topic: str, partition: int, om: OffsetAndMetadata | None) -> str:
        body = {"g": group_id, "t": topic, "p": partition}
        if om is not None:
            body.update(o=om.offset, m=om.metadata, e=om.leader_epoch, ts=om.commit_timestamp)
        return json.dumps(body) + "\n"

    def store_offsets(self, group: Group, offsets: dict[tuple[str, int], OffsetAndMetadata]) -> None:
        os.write(self._fd, "".join(self._entry(group.group_id, t, p, om) for (t, p), om in offsets.items()).encode())
        group.offsets.update(offsets)

    def delete_offsets(self, group: Group, keys: list[tuple[str, int]]) -> None:
        os.write(self._fd, "".join(self._entry(group.group_id, t, p, None) for t, p in keys).encode())
        for key in keys:
            group.offsets.pop(key, None)

    def close(self) -> None:
        for group in self.groups.values():
            if group.rebalance_task:
                group.rebalance_task.cancel()
        os.close(self._fd)

    # ---- lookup ----------------------------------------------------------------------------
    def group(self, group_id: str) -> Group:
        if group_id not in self.groups:
            self.groups[group_id] = Group(group_id)
        return self.groups[group_id]

    def existing(self, group_id: str) -> Group | None:
        group = self.groups.get(group_id)
        if group is None or (group.state == EMPTY and not group.offsets and not group.members):
            return None
        return group

    # ---- join / sync -----------------------------------------------------------------------
    async def join(
        self,
        group_id: str,
        member_id: str,
        group_instance_id: str | None,
        client_id: str,
        client_host: str,
        session_timeout_ms: int,
        rebalance_timeout_ms: int,
        protocol_type: str,
        protocols: list[tuple[str, bytes]],
        require_known_member_id: bool,
    ) -> JoinResult:
        """JoinGroup: the member joins (a new, known or static member) and waits for the rebalance its join starts,
        unless its metadata is unchanged and the group is settled (Kafka's shortcut)."""
        error = self._join_error(group_id, session_timeout_ms, protocol_type, protocols)
        if error:
            return JoinResult(error)
        group = self.group(group_id)
        admitted = self._admit(group, member_id, group_instance_id, client_id, require_known_member_id)
        if isinstance(admitted, JoinResult):
            return admitted
        member, changed = self._upsert_member(
            group,
            Member(
                admitted,
                group_instance_id,
                client_id,
                client_host,
                session_timeout_ms,
                rebalance_timeout_ms,
                protocol_type,
                protocols,
            ),
        )
        if not changed and (group.state == COMPLETING or (group.state == STABLE and admitted != group.leader_id)):
            # Kafka's shortcut: a rejoin with unchanged metadata needs no new generation.
            return self._join_result(group, member)
        return await self._await_rebalance(group, member)

    def _join_error(
        self, group_id: str, session_timeout_ms: int, protocol_type: str, protocols: list[tuple[str, bytes]]
    ) -> int:
        """The error code that refuses a join outright, 0 when there is none."""
        if not group_id:
            return Errors.InvalidGroupIdError.errno
        if not MIN_SESSION_TIMEOUT_MS <= session_timeout_ms <= MAX_SESSION_TIMEOUT_MS:
            return Errors.InvalidSessionTimeoutError.errno
        group = self.group(group_id)
        if group.state == DEAD:
            return Errors.CoordinatorNotAvailableError.errno
        if not group.accepts(protocol_type, protocols):
            return Errors.InconsistentGroupProtocolError.errno
        return 0

    def _admit(
        self,
        group: Group,
        member_id: str,
        group_instance_id: str | None,
        client_id: str,
        require_known_member_id: bool,
    ) -> str | JoinResult:
        """The joining member's id (issued when it has none), or the result that turns it away."""
        if group_instance_id and not self._static_rejoin(group, member_id, group_instance_id):
            return JoinResult(Errors.FencedInstanceIdError.errno)
        if not member_id:
            member_id = f"{client_id}-{uuid.uuid4()}"
            if require_known_member_id and not group_instance_id:
                group.pending_members.add(member_id)
                return JoinResult(Errors.MemberIdRequiredError.errno, member_id=member_id)
        elif member_id not in group.members and member_id not in group.pending_members:
            return JoinResult(Errors.UnknownMemberIdError.errno, member_id=member_id)
        group.pending_members.discard(member_id)
        return member_id

    def _static_rejoin(self, group: Group, member_id: str, group_instance_id: str) -> bool:
        """Static membership: the instance id owns its member; a rejoin without a member id replaces the old one.
        False when member_id is not the one the instance id owns (fenced)."""
        old = next((m for m in group.members.values() if m.group_instance_id == group_instance_id), None)
        if old is None:
            return True
        if member_id and member_id != old.member_id:
            return False
        if not member_id:
            self._remove_member(group, old.member_id, cancel=True)
        return True

    @staticmethod
    def _upsert_member(group: Group, joining: Member) -> tuple[Member, bool]:
        """The group's member, added or updated from the joining one; True when its metadata changed (or it is new)."""
        member = group.members.get(joining.member_id)
        if member is None:
            member, changed = joining, True
            group.members[member.member_id] = member
            group.protocol_type = member.protocol_type
        else:
            changed = member.protocols != joining.protocols
            member.protocols = joining.protocols
            member.session_timeout_ms = joining.session_timeout_ms
            member.rebalance_timeout_ms = joining.rebalance_timeout_ms
        member.last_heartbeat = time.monotonic()
        return member, changed

    async def _await_rebalance(self, group: Group, member: Member) -> JoinResult:
        """Wait for the rebalance to complete (starting one unless it is preparing); an earlier join of the same
        member waiting still is cancelled."""
        future = asyncio.get_running_loop().create_future()
        if member.join_future and not member.join_future.done():
            member.join_future.cancel()
        member.join_future = future
        if group.state != PREPARING:
            self._prepare_rebalance(group, f"member {member.member_id} joined")
        try:
            return await future
        except asyncio.CancelledError:
            return JoinResult(Errors.UnknownMemberIdError.errno, member_id=member.member_id)

    def _prepare_rebalance(self, group: Group, reason: str) -> None:
        log.info("group %s: preparing rebalance (%s)", group.group_id, reason)
        for member in group.members.values():
            if member.sync_future and not member.sync_future.done():
                member.sync_future.set_result((Errors.RebalanceInProgressError.errno, b""))
        initial = group.state == EMPTY
        group.state = PREPARING
        if group.rebalance_task:
            group.rebalance_task.cancel()
        timeout = max((m.rebalance_timeout_ms for m in group.members.values()), default=0)
        delay = self.initial_rebalance_delay_ms if initial else 0
        group.rebalance_task = asyncio.get_running_loop().create_task(
            self._complete_join_after(group, delay / 1000, timeout / 1000)
        )

    async def _complete_join_after(self, group: Group, initial_delay: float, timeout: float) -> None:
        await asyncio.sleep(initial_delay)
        deadline = time.monotonic() + max(timeout - initial_delay, 0)
        while time.monotonic() < deadline and not self._all_joined(group):
            await asyncio.sleep(0.05)
        group.rebalance_task = None
        self._complete_join(group)

    @staticmethod
    def _all_joined(group: Group) -> bool:
        return all(m.join_future is not None and not m.join_future.done() for m in group.members.values())

    def _complete_join(self, group: Group) -> None:
        if group.state != PREPARING:
            return
        for member_id in [m.member_id for m in group.members.values() if m.join_future is None or m.join_future.done()]:
            log.info("group %s: member %s did not rejoin in time", group.group_id, member_id)
            self._remove_member(group, member_id, cancel=False)
        group.generation_id += 1
        if not group.members:
            group.state = EMPTY
            group.protocol_name = None
            group.leader_id = None
            return
        group.state = COMPLETING
        group.protocol_name = group.select_protocol()
        if group.leader_id not in group.members:
            group.leader_id = next(iter(group.members))
        for member in group.members.values():
            member.assignment = b""
            member.last_heartbeat = time.monotonic()
            future, member.join_future = member.join_future, None
            future.set_result(self._join_result(group, member))
        log.info("group %s: generation %d with %d members", group.group_id, group.generation_id, len(group.members))

    def _join_result(self, group: Group, member: Member) -> JoinResult:
        members = []
        if member.member_id == group.leader_id:
            members = [
                (m.member_id, m.group_instance_id, m.metadata_for(group.protocol_name)) for m in group.members.values()
            ]
        return JoinResult(
            0,
            group.generation_id,
            group.protocol_type,
            group.protocol_name,
            group.leader_id or "",
            member.member_id,
            members,
        )

    async def sync(
        self, group_id: str, generation_id: int, member_id: str, assignments: dict[str, bytes]
    ) -> tuple[int, bytes]:
        group = self.groups.get(group_id)
        if group is None or member_id not in group.members:
            return Errors.UnknownMemberIdError.errno, b""
        if generation_id != group.generation_id:
            return Errors.IllegalGenerationError.errno, b""
        member = group.members[member_id]
        member.last_heartbeat = time.monotonic()
        if group.state == PREPARING:
            return Errors.RebalanceInProgressError.errno, b""
        if group.state == STABLE:
            return 0, member.assignment
        if member_id == group.leader_id:
            for m in group.members.values():
                m.assignment = assignments.get(m.member_id, b"")
            group.state = STABLE
            for m in group.members.values():
                if m.sync_future and not m.sync_future.done():
                    m.sync_future.set_result((0, m.assignment))
                m.sync_future = None
            return 0, member.assignment
        member.sync_future = asyncio.get_running_loop().create_future()
        return await member.sync_future

    def heartbeat(self, group_id: str, generation_id: int, member_id: str) -> int:
        group = self.groups.get(group_id)
        if group is None or member_id not in group.members:
            return Errors.UnknownMemberIdError.errno
        member = group.members[member_id]
        member.last_heartbeat = time.monotonic()
        if group.state == PREPARING:
            return Errors.RebalanceInProgressError.errno
        if generation_id != group.generation_id:
            return Errors.IllegalGenerationError.errno
        return 0

    def leave(self, group_id: str, member_id: str, group_instance_id: str | None = None) -> int:
        group = self.groups.get(group_id)
        if group is None:
            return Errors.UnknownMemberIdError.errno
        if group_instance_id:
            member = next((m for m in group.members.values() if m.group_instance_id == group_instance_id), None)
            if member is None or (member_id and member.member_id != member_id):
                return Errors.UnknownMemberIdError.errno if member is None else Errors.FencedInstanceIdError.errno
            member_id = member.member_id
        if member_id in group.pending_members:
            group.pending_members.discard(member_id)
            return 0
        if member_id not in group.members:
            return Errors.UnknownMemberIdError.errno
        self._remove_member(group, member_id, cancel=True)
        self._membership_changed(group, f"member {member_id} left")
        return 0

    def _remove_member(self, group: Group, member_id: str, cancel: bool) -> None:
        member = group.members.pop(member_id)
        for future in (member.join_future, member.sync_future):
            if cancel and future and not future.done():
                future.set_result(
                    JoinResult(Errors.UnknownMemberIdError.errno)
                    if future is member.join_future
                    else (Errors.UnknownMemberIdError.errno, b"")
                )

    def _membership_changed(self, group: Group, reason: str) -> None:
        if group.state in (STABLE, COMPLETING):
            if group.members:
                self._prepare_rebalance(group, reason)
            else:
                group.state = EMPTY
                group.generation_id += 1
                group.leader_id = None
                group.protocol_name = None
        elif group.state == PREPARING and not group.members:
            self._complete_join(group)

    def expire_sessions(self) -> None:
        """Drop members that stopped heart-beating (members blocked in a join are exempt)."""
        now = time.monotonic()
        for group in list(self.groups.values()):
            expired = [
                m.member_id
                for m in group.members.values()
                if (m.join_future is None or m.join_future.done())
                and (now - m.last_heartbeat) * 1000 > m.session_timeout_ms
            ]
            for member_id in expired:
                log.info("group %s: member %s session expired", group.group_id, member_id)
                self._remove_member(group, member_id, cancel=True)
            if expired:
                self._membership_changed(group, "session timeout")

    # ---- offsets ---------------------------------------------------------------------------
    def validate_commit(
        self, group_id: str, generation_id: int, member_id: str, group_instance_id: str | None = None
    ) -> tuple[Group | None, int]:
        """Kafka's checks, in its order: anyone may commit to an empty group with generation -1;
        otherwise only a member of the current generation, and not while the group is syncing."""
        group = self.group(group_id)
        if generation_id < 0 and group.state == EMPTY:
            return group, 0
        if group.state == COMPLETING:
            return None, Errors.RebalanceInProgressError.errno
        member = group.members.get(member_id)
        if group_instance_id and member is not None and member.group_instance_id != group_instance_id:
            return None, Errors.FencedInstanceIdError.errno
        if member is None:
            return None, Errors.UnknownMemberIdError.errno
        if generation_id != group.generation_id:
            return None, Errors.IllegalGenerationError.errno
        return group, 0

    def describe(self, group_id: str) -> Group | None:
        return self.existing(group_id)

    def delete(self, group_id: str) -> int:
        group = self.existing(group_id)
        if group is None:
            return Errors.GroupIdNotFoundError.errno
        if group.members:
            return Errors.NonEmptyGroupError.errno
        self.delete_offsets(group, list(group.offsets))
        del self.groups[group_id]
        return 0
