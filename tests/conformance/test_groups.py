"""Classic consumer-group protocol: members share partitions and the group rebalances when a member
leaves (LeaveGroup on close) or dies (session timeout).  Also commit / fetch of group offsets."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from . import kafka_wire as wire
from .clients import make_client, unique, wait_until

pytestmark = pytest.mark.integration

HERE = Path(__file__).resolve().parent
SESSION_TIMEOUT_MS = 6000  # Kafka's default group.min.session.timeout.ms
UNKNOWN_MEMBER_ID = 25


def all_partitions(topic: str, n: int = 4) -> frozenset:
    return frozenset((topic, p) for p in range(n))


def balanced(topic, *assignments) -> bool:
    sizes = [len(a) for a in assignments]
    union = frozenset().union(*assignments)
    return union == all_partitions(topic) and sum(sizes) == 4 and max(sizes) - min(sizes) <= 1 and min(sizes) > 0


def test_members_share_partitions_and_rebalance_on_leave(client):
    topic, group = unique("grp"), unique("group")
    client.create_topic(topic, 4)
    m1 = client.group_member(group, topic, session_timeout_ms=SESSION_TIMEOUT_MS)
    m2 = None
    try:
        wait_until(lambda: m1.assignment == all_partitions(topic), 30, message="m1 to own all 4 partitions")
        m2 = client.group_member(group, topic, session_timeout_ms=SESSION_TIMEOUT_MS)
        wait_until(lambda: balanced(topic, m1.assignment, m2.assignment), 30, message="2 + 2 split between the members")
        assert m1.assignment.isdisjoint(m2.assignment)
        assert client.describe_group(group) == ("STABLE", 2)
        m2.close()
        t0 = time.monotonic()
        wait_until(
            lambda: m1.assignment == all_partitions(topic), 15, message="m1 to get all partitions back after m2 left"
        )
        # A clean leave triggers the rebalance at once; it must not wait for the session timeout.
        assert time.monotonic() - t0 < SESSION_TIMEOUT_MS / 1000, "rebalance waited for the session timeout"
        assert not m1.errors and not m2.errors, (m1.errors, m2.errors)
    finally:
        m1.close()
        if m2 is not None:
            m2.close()


class SubprocessMember:
    """A group member in another process, so it can be SIGKILLed (no LeaveGroup, no more heartbeats)."""

    def __init__(self, client_name, bootstrap, group, topic):
        cmd = [
            sys.executable,
            str(HERE / "clients.py"),
            "--client",
            client_name,
            "--bootstrap",
            bootstrap,
            "--group",
            group,
            "--topic",
            topic,
            "--session-timeout-ms",
            str(SESSION_TIMEOUT_MS),
        ]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.assignment: frozenset = frozenset()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self):
        for line in self.proc.stdout:
            with contextlib.suppress(ValueError, KeyError):
                self.assignment = frozenset(tuple(tp) for tp in json.loads(line)["assignment"])

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(10)


def wait_balanced(topic, a, b, who: str) -> None:
    wait_until(lambda: balanced(topic, a.assignment, b.assignment), 40, message=f"2 + 2 split between {who}")


def test_session_timeout_moves_partitions_of_a_dead_member(client, bootstrap):
    topic, group = unique("grp-dead"), unique("group")
    client.create_topic(topic, 4)
    local = client.group_member(group, topic, session_timeout_ms=SESSION_TIMEOUT_MS)
    remote = SubprocessMember(client.name, bootstrap, group, topic)
    try:
        wait_balanced(topic, local, remote, "the local and the subprocess member")
        remote.kill()
        t0 = time.monotonic()
        wait_until(
            lambda: local.assignment == all_partitions(topic),
            SESSION_TIMEOUT_MS / 1000 + 15,
            message="the survivor to get all partitions after the session timeout",
        )
        elapsed = time.monotonic() - t0
        # Kafka only expires a member when its session times out (a closed TCP connection is not a leave).
        assert elapsed >= SESSION_TIMEOUT_MS / 1000 - 1.5, f"member expired after {elapsed:.1f}s"
        assert not local.errors, local.errors
    finally:
        remote.kill()
        local.close()


def test_mixed_client_group(bootstrap):
    """A librdkafka member and a kafka-python member agree on the 'range' protocol in one group."""
    a, b = make_client("confluent", bootstrap), make_client("kafka-python", bootstrap)
    topic, group = unique("grp-mixed"), unique("group")
    a.create_topic(topic, 4)
    ma = a.group_member(group, topic, session_timeout_ms=SESSION_TIMEOUT_MS)
    mb = b.group_member(group, topic, session_timeout_ms=SESSION_TIMEOUT_MS)
    try:
        wait_balanced(topic, ma, mb, "a confluent and a kafka-python member")
        ma.close()
        wait_until(lambda: mb.assignment == all_partitions(topic), 15, message="kafka-python member to get all")
    finally:
        ma.close()
        mb.close()
        a.close()
        b.close()


def test_commit_and_fetch_offsets(client, all_clients):
    topic, group = unique("commit"), unique("group")
    client.create_topic(topic, 3)
    tps = [(topic, p) for p in range(3)]
    for name, c in all_clients.items():
        assert c.committed(group, tps) == {tp: None for tp in tps}, name
    client.commit(group, {(topic, 0): 5, (topic, 2): 17}, metadata="meta")
    for name, c in all_clients.items():
        assert c.committed(group, tps) == {(topic, 0): 5, (topic, 1): None, (topic, 2): 17}, name
    for name, c in all_clients.items():
        assert group in c.list_groups(), name
        offsets = c.group_offsets(group)
        assert {tp: off for tp, (off, _) in offsets.items()} == {(topic, 0): 5, (topic, 2): 17}, name
        if name == client.name:
            # (Only compared within one client: confluent-kafka's Python binding sends metadata with a
            # trailing NUL and reads it back as a C string, so it does not round-trip across clients.)
            assert {md.rstrip("\x00") for _, md in offsets.values()} == {"meta"}, (name, offsets)
        assert c.describe_group(group) == ("EMPTY", 0), name
    client.commit(group, {(topic, 0): 6})
    for name, c in all_clients.items():
        assert c.committed(group, tps) == {(topic, 0): 6, (topic, 1): None, (topic, 2): 17}, name


def test_outside_commit_refused_while_group_is_active(client, all_clients, bootstrap):
    """A commit without member id / generation (an admin or offset-sync tool) is accepted only while the
    group is Empty; with a live member Kafka answers UNKNOWN_MEMBER_ID and keeps the offsets."""
    topic, group = unique("grp-active"), unique("group")
    client.create_topic(topic, 4)
    client.commit(group, {(topic, 0): 3})
    member = client.group_member(group, topic, session_timeout_ms=SESSION_TIMEOUT_MS)
    try:
        wait_until(lambda: member.assignment == all_partitions(topic), 30, message="member to own all partitions")
        for name, c in all_clients.items():
            assert c.describe_group(group) == ("STABLE", 1), name
            with pytest.raises(Exception):  # noqa: B017 - each client raises its own exception type
                c.commit(group, {(topic, 0): 99})
            assert c.committed(group, [(topic, 0)]) == {(topic, 0): 3}, name
        # The exact answer on the wire: no member id, generation -1, group not Empty -> UNKNOWN_MEMBER_ID.
        with wire.connect(bootstrap) as sock:
            resp = wire.call(sock, wire.offset_commit_v2(group, -1, "", topic, 0, 99, 5))
        raw_answer = wire.parse_offset_commit_v2(resp)
        assert client.committed(group, [(topic, 0)]) == {(topic, 0): 3}
    finally:
        member.close()
    for name, c in all_clients.items():
        wait_until(lambda c=c: c.describe_group(group) == ("EMPTY", 0), 15, message=f"{name}: group Empty")
    client.commit(group, {(topic, 0): 99})
    assert client.committed(group, [(topic, 0)]) == {(topic, 0): 99}
    assert raw_answer == (5, UNKNOWN_MEMBER_ID), "OffsetCommit(generation -1, member '') to an active group"


def test_delete_group(client, all_clients):
    """DeleteGroups: refused while the group has members (NON_EMPTY_GROUP), then removes the group and
    its committed offsets."""
    topic, group = unique("grp-del"), unique("group")
    client.create_topic(topic, 2)
    client.commit(group, {(topic, 0): 4, (topic, 1): 8})
    member = client.group_member(group, topic, session_timeout_ms=SESSION_TIMEOUT_MS)
    try:
        wait_until(lambda: len(member.assignment) == 2, 30, message="member to own both partitions")
        with pytest.raises(Exception, match="(?i)NON_EMPTY_GROUP|NonEmptyGroup|not empty"):
            client.delete_group(group)
    finally:
        member.close()
    wait_until(lambda: client.describe_group(group) == ("EMPTY", 0), 15, message="group Empty")
    client.delete_group(group)
    for name, c in all_clients.items():
        assert group not in c.list_groups(), name
        assert c.committed(group, [(topic, 0), (topic, 1)]) == {(topic, 0): None, (topic, 1): None}, name
    with pytest.raises(Exception, match="(?i)GROUP_ID_NOT_FOUND|GroupIdNotFound|does not exist"):
        client.delete_group(group)
