"""Consumer-group APIs: join/sync/heartbeat/leave, offsets, list/describe/delete."""

from __future__ import annotations

import time

import kafka.errors as Errors
from kafka.protocol.admin import (
    DeleteGroupsRequest,
    DeleteGroupsResponse,
    DescribeGroupsRequest,
    DescribeGroupsResponse,
    ListGroupsRequest,
    ListGroupsResponse,
)
from kafka.protocol.consumer import (
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetDeleteRequest,
    OffsetDeleteResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
    SyncGroupRequest,
    SyncGroupResponse,
)

from ..groups import DEAD, OffsetAndMetadata
from .dispatch import api

MAX_METADATA = 4096  # offset.metadata.max.bytes


@api(JoinGroupRequest, JoinGroupResponse, 0, 9)
async def join_group(broker, request, ctx):
    result = await broker.groups.join(
        request.group_id,
        request.member_id,
        request.group_instance_id,
        ctx.client_id,
        ctx.client_host,
        request.session_timeout_ms,
        request.rebalance_timeout_ms if request.rebalance_timeout_ms > 0 else request.session_timeout_ms,
        request.protocol_type,
        [(p.name, p.metadata) for p in request.protocols],
        require_known_member_id=ctx.version >= 4,
    )
    M = JoinGroupResponse.JoinGroupResponseMember
    return JoinGroupResponse[ctx.version](
        throttle_time_ms=0,
        error_code=result.error,
        generation_id=result.generation_id,
        protocol_type=result.protocol_type,
        protocol_name=result.protocol_name,
        leader=result.leader,
        skip_assignment=False,
        member_id=result.member_id,
        members=[M(member_id=m, group_instance_id=i, metadata=meta) for m, i, meta in result.members],
    )


@api(SyncGroupRequest, SyncGroupResponse, 0, 5)
async def sync_group(broker, request, ctx):
    code, assignment = await broker.groups.sync(
        request.group_id,
        request.generation_id,
        request.member_id,
        {a.member_id: a.assignment for a in request.assignments},
    )
    group = broker.groups.groups.get(request.group_id)
    return SyncGroupResponse[ctx.version](
        throttle_time_ms=0,
        error_code=code,
        assignment=assignment,
        protocol_type=group.protocol_type if group else None,
        protocol_name=group.protocol_name if group else None,
    )


@api(HeartbeatRequest, HeartbeatResponse, 0, 4)
async def heartbeat(broker, request, ctx):
    code = broker.groups.heartbeat(request.group_id, request.generation_id, request.member_id)
    return HeartbeatResponse[ctx.version](throttle_time_ms=0, error_code=code)


@api(LeaveGroupRequest, LeaveGroupResponse, 0, 5)
async def leave_group(broker, request, ctx):
    if ctx.version < 3:
        code = broker.groups.leave(request.group_id, request.member_id)
        return LeaveGroupResponse[ctx.version](throttle_time_ms=0, error_code=code)
    M = LeaveGroupResponse.MemberResponse
    members = [
        M(
            member_id=m.member_id,
            group_instance_id=m.group_instance_id,
            error_code=broker.groups.leave(request.group_id, m.member_id, m.group_instance_id),
        )
        for m in request.members
    ]
    return LeaveGroupResponse[ctx.version](throttle_time_ms=0, error_code=0, members=members)


@api(OffsetCommitRequest, OffsetCommitResponse, 2, 9)
async def offset_commit(broker, request, ctx):
    R = OffsetCommitResponse.OffsetCommitResponseTopic
    P = R.OffsetCommitResponsePartition
    group, code = broker.groups.validate_commit(
        request.group_id, request.generation_id_or_member_epoch, request.member_id, request.group_instance_id
    )
    now = int(time.time() * 1000)
    offsets = {}
    topics = []
    for t in request.topics:
        partitions = []
        for p in t.partitions:
            pcode = code
            if not pcode and t.name not in broker.topics.topics:
                pcode = Errors.UnknownTopicOrPartitionError.errno
            elif not pcode and p.committed_metadata and len(p.committed_metadata) > MAX_METADATA:
                pcode = Errors.OffsetMetadataTooLargeError.errno
            if not pcode:
                offsets[(t.name, p.partition_index)] = OffsetAndMetadata(
                    p.committed_offset, p.committed_metadata, p.committed_leader_epoch, now
                )
            partitions.append(P(partition_index=p.partition_index, error_code=pcode))
        topics.append(R(name=t.name, partitions=partitions))
    if group is not None and offsets:
        broker.groups.store_offsets(group, offsets)
    return OffsetCommitResponse[ctx.version](throttle_time_ms=0, topics=topics)


def _fetch_group_offsets(broker, group_id: str, topics, require_stable: bool):
    """[(topic, [(partition, offset, leader_epoch, metadata, error)])] for one group."""
    group = broker.groups.groups.get(group_id)
    stored = group.offsets if group else {}
    unstable = broker.txns.pending_offsets(group_id) if require_stable else set()
    if topics is None:
        wanted: dict[str, list[int]] = {}
        for topic, partition in sorted(stored):
            wanted.setdefault(topic, []).append(partition)
    else:
        wanted = {t.name: list(t.partition_indexes) for t in topics}
    result = []
    for topic, partitions in wanted.items():
        rows = []
        for partition in partitions:
            om = stored.get((topic, partition))
            code = Errors.UnstableOffsetCommitError.errno if (topic, partition) in unstable else 0
            if om is None:
                rows.append((partition, -1, -1, "", code))
            else:
                rows.append((partition, om.offset, om.leader_epoch, om.metadata, code))
        result.append((topic, rows))
    return result


@api(OffsetFetchRequest, OffsetFetchResponse, 1, 9)
async def offset_fetch(broker, request, ctx):
    if ctx.version < 8:
        R = OffsetFetchResponse.OffsetFetchResponseTopic
        P = R.OffsetFetchResponsePartition
        rows = _fetch_group_offsets(broker, request.group_id, request.topics, request.require_stable)
        return OffsetFetchResponse[ctx.version](
            throttle_time_ms=0,
            error_code=0,
            topics=_offset_fetch_topics(R, P, rows),
        )
    G = OffsetFetchResponse.OffsetFetchResponseGroup
    T = G.OffsetFetchResponseTopics
    P = T.OffsetFetchResponsePartitions
    groups = []
    for g in request.groups:
        rows = _fetch_group_offsets(broker, g.group_id, g.topics, request.require_stable)
        groups.append(
            G(
                group_id=g.group_id,
                error_code=0,
                topics=_offset_fetch_topics(T, P, rows),
            )
        )
    return OffsetFetchResponse[ctx.version](throttle_time_ms=0, groups=groups)


def _offset_fetch_topics(topic_cls, partition_cls, rows):
    """The topics of an OffsetFetch response (one group's, in v8+) from _fetch_group_offsets' rows; the classes
    differ between the versions before 8 and after, the fields do not."""
    return [
        topic_cls(
            name=topic,
            partitions=[
                partition_cls(partition_index=p, committed_offset=o, committed_leader_epoch=e, metadata=m, error_code=c)
                for p, o, e, m, c in parts
            ],
        )
        for topic, parts in rows
    ]


@api(ListGroupsRequest, ListGroupsResponse, 0, 5)
async def list_groups(broker, request, ctx):
    L = ListGroupsResponse.ListedGroup
    states = {s.lower() for s in (request.states_filter or [])}
    types = {t.lower() for t in (request.types_filter or [])}
    groups = []
    for group_id in sorted(broker.groups.groups):
        group = broker.groups.existing(group_id)
        if group is None or (states and group.state.lower() not in states) or (types and "classic" not in types):
            continue
        groups.append(
            L(
                group_id=group_id,
                protocol_type=group.protocol_type or "consumer",
                group_state=group.state,
                group_type="classic",
            )
        )
    return ListGroupsResponse[ctx.version](throttle_time_ms=0, error_code=0, groups=groups)


@api(DescribeGroupsRequest, DescribeGroupsResponse, 0, 5)
async def describe_groups(broker, request, ctx):
    D = DescribeGroupsResponse.DescribedGroup
    M = D.DescribedGroupMember
    described = []
    for group_id in request.groups:
        group = broker.groups.describe(group_id)
        if group is None:
            # Kafka describes an unknown group as Dead with no members (error NONE before v6).
            described.append(
                D(error_code=0, group_id=group_id, group_state=DEAD, protocol_type="", protocol_data="", members=[])
            )
            continue
        stable = group.state == "Stable"
        members = [
            M(
                member_id=m.member_id,
                group_instance_id=m.group_instance_id,
                client_id=m.client_id,
                client_host=m.client_host,
                member_metadata=m.metadata_for(group.protocol_name) if stable and group.protocol_name else b"",
                member_assignment=m.assignment if stable else b"",
            )
            for m in group.members.values()
        ]
        described.append(
            D(
                error_code=0,
                group_id=group_id,
                group_state=group.state,
                protocol_type=group.protocol_type or "",
                protocol_data=group.protocol_name if stable else "",
                members=members,
            )
        )
    return DescribeGroupsResponse[ctx.version](throttle_time_ms=0, groups=described)


@api(DeleteGroupsRequest, DeleteGroupsResponse, 0, 2)
async def delete_groups(broker, request, ctx):
    R = DeleteGroupsResponse.DeletableGroupResult
    return DeleteGroupsResponse[ctx.version](
        throttle_time_ms=0, results=[R(group_id=g, error_code=broker.groups.delete(g)) for g in request.groups_names]
    )


@api(OffsetDeleteRequest, OffsetDeleteResponse, 0, 0)
async def offset_delete(broker, request, ctx):
    T = OffsetDeleteResponse.OffsetDeleteResponseTopic
    P = T.OffsetDeleteResponsePartition
    group = broker.groups.existing(request.group_id)
    if group is None:
        return OffsetDeleteResponse[ctx.version](
            error_code=Errors.GroupIdNotFoundError.errno, throttle_time_ms=0, topics=[]
        )
    subscribed = group.subscribed_topics() if group.members else set()
    topics = []
    deletable = []
    for t in request.topics:
        partitions = []
        for p in t.partitions:
            if subscribed is None or t.name in subscribed:
                partitions.append(
                    P(partition_index=p.partition_index, error_code=Errors.GroupSubscribedToTopicError.errno)
                )
            else:
                deletable.append((t.name, p.partition_index))
                partitions.append(P(partition_index=p.partition_index, error_code=0))
        topics.append(T(name=t.name, partitions=partitions))
    broker.groups.delete_offsets(group, deletable)
    return OffsetDeleteResponse[ctx.version](error_code=0, throttle_time_ms=0, topics=topics)
