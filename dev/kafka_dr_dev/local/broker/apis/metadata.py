"""ApiVersions, Metadata, FindCoordinator and DescribeCluster: a one-node cluster's view of itself."""

from __future__ import annotations

import kafka.errors as Errors
from kafka.protocol.admin import DescribeClusterRequest, DescribeClusterResponse
from kafka.protocol.metadata import (
    ApiVersionsRequest,
    ApiVersionsResponse,
    FindCoordinatorRequest,
    FindCoordinatorResponse,
    MetadataRequest,
    MetadataResponse,
)

from .admin import create_topic_or_error
from .dispatch import api


@api(ApiVersionsRequest, ApiVersionsResponse, 0, 3)
async def api_versions(broker, request, ctx):
    return ApiVersionsResponse[ctx.version](error_code=0, api_keys=broker.api_versions(), throttle_time_ms=0)


@api(MetadataRequest, MetadataResponse, 0, 12)
async def metadata(broker, request, ctx):
    R = MetadataResponse
    if request.topics is None or (ctx.version == 0 and not request.topics):
        names = sorted(broker.topics.topics)
    else:
        names = []
        for t in request.topics:
            name = t.name
            if name is None and t.topic_id is not None:
                topic = broker.topics.by_id.get(t.topic_id)
                name = topic.name if topic else None
            if name is not None:
                names.append(name)
    auto_create = (ctx.version < 4 or request.allow_auto_topic_creation) and broker.configs[
        "auto.create.topics.enable"
    ] == "true"
    topics = []
    for name in names:
        code = 0
        if name not in broker.topics.topics:
            code = Errors.UnknownTopicOrPartitionError.errno
            if auto_create:
                code = create_topic_or_error(broker, name, int(broker.configs["num.partitions"]), {})
                code = Errors.LeaderNotAvailableError.errno if code == 0 else code
        topic = broker.topics.topics.get(name)
        if code and code != Errors.LeaderNotAvailableError.errno or topic is None:
            topics.append(R.MetadataResponseTopic(error_code=code, name=name, partitions=[]))
            continue
        partitions = [
            R.MetadataResponseTopic.MetadataResponsePartition(
                error_code=0,
                partition_index=i,
                leader_id=broker.node_id,
                leader_epoch=0,
                replica_nodes=[broker.node_id],
                isr_nodes=[broker.node_id],
                offline_replicas=[],
            )
            for i in range(len(topic.partitions))
        ]
        # Kafka answers LEADER_NOT_AVAILABLE for a topic it just auto-created; clients retry.
        topics.append(
            R.MetadataResponseTopic(
                error_code=code, name=name, topic_id=topic.topic_id, is_internal=False, partitions=partitions
            )
        )
    return R[ctx.version](
        throttle_time_ms=0,
        brokers=[R.MetadataResponseBroker(node_id=broker.node_id, host=broker.host, port=broker.port)],
        cluster_id=broker.cluster_id,
        controller_id=broker.node_id,
        topics=topics,
    )


@api(FindCoordinatorRequest, FindCoordinatorResponse, 0, 6)
async def find_coordinator(broker, request, ctx):
    R = FindCoordinatorResponse
    # key_type 0 = group, 1 = transaction; this single node coordinates both.
    code = Errors.InvalidRequestError.errno if request.key_type not in (0, 1) else 0
    if ctx.version >= 4:
        return R[ctx.version](
            throttle_time_ms=0,
            coordinators=[
                R.Coordinator(
                    key=key,
                    node_id=broker.node_id,
                    host=broker.host,
                    port=broker.port,
                    error_code=code,
                    error_message=None,
                )
                for key in request.coordinator_keys
            ],
        )
    return R[ctx.version](
        throttle_time_ms=0,
        error_code=code,
        error_message=None,
        node_id=broker.node_id,
        host=broker.host,
        port=broker.port,
    )


@api(DescribeClusterRequest, DescribeClusterResponse, 0, 1)
async def describe_cluster(broker, request, ctx):
    R = DescribeClusterResponse
    # Endpoint type 1 is brokers; a combined-mode node has no separate controller endpoints to list.
    code = 0 if ctx.version == 0 or request.endpoint_type == 1 else Errors.InvalidRequestError.errno
    return R[ctx.version](
        throttle_time_ms=0,
        error_code=code,
        error_message=None,
        cluster_id=broker.cluster_id,
        controller_id=broker.node_id,
        brokers=[R.DescribeClusterBroker(broker_id=broker.node_id, host=broker.host, port=broker.port, rack=None)],
    )
