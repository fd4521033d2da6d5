"""Transaction APIs: InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn, TxnOffsetCommit, EndTxn."""

from __future__ import annotations

import time

import kafka.errors as Errors
from kafka.protocol.producer import (
    AddOffsetsToTxnRequest,
    AddOffsetsToTxnResponse,
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse,
    EndTxnRequest,
    EndTxnResponse,
    InitProducerIdRequest,
    InitProducerIdResponse,
    TxnOffsetCommitRequest,
    TxnOffsetCommitResponse,
)

from ..groups import OffsetAndMetadata
from .dispatch import api, error_code


@api(InitProducerIdRequest, InitProducerIdResponse, 0, 5)
async def init_producer_id(broker, request, ctx):
    try:
        pid, epoch = broker.txns.init_producer_id(
            request.transactional_id, request.transaction_timeout_ms, request.producer_id, request.producer_epoch
        )
        return InitProducerIdResponse[ctx.version](
            throttle_time_ms=0, error_code=0, producer_id=pid, producer_epoch=epoch
        )
    except Errors.KafkaError as exc:
        return InitProducerIdResponse[ctx.version](
            throttle_time_ms=0, error_code=error_code(exc), producer_id=-1, producer_epoch=-1
        )


@api(AddPartitionsToTxnRequest, AddPartitionsToTxnResponse, 0, 3)
async def add_partitions_to_txn(broker, request, ctx):
    T = AddPartitionsToTxnResponse.AddPartitionsToTxnTopicResult
    P = T.AddPartitionsToTxnPartitionResult
    wanted = [(t.name, p) for t in request.v3_and_below_topics for p in t.partitions]
    try:
        errors = broker.txns.add_partitions(
            request.v3_and_below_transactional_id,
            request.v3_and_below_producer_id,
            request.v3_and_below_producer_epoch,
            wanted,
        )
    except Errors.KafkaError as exc:
        errors = dict.fromkeys(wanted, error_code(exc))
    by_topic: dict[str, list] = {}
    for (topic, partition), code in errors.items():
        by_topic.setdefault(topic, []).append(P(partition_index=partition, partition_error_code=code))
    return AddPartitionsToTxnResponse[ctx.version](
        throttle_time_ms=0,
        results_by_topic_v3_and_below=[T(name=topic, results_by_partition=parts) for topic, parts in by_topic.items()],
    )


@api(AddOffsetsToTxnRequest, AddOffsetsToTxnResponse, 0, 3)
async def add_offsets_to_txn(broker, request, ctx):
    try:
        broker.txns.add_offsets(request.transactional_id, request.producer_id, request.producer_epoch, request.group_id)
        code = 0
    except Errors.KafkaError as exc:
        code = error_code(exc)
    return AddOffsetsToTxnResponse[ctx.version](throttle_time_ms=0, error_code=code)


@api(TxnOffsetCommitRequest, TxnOffsetCommitResponse, 0, 3)
async def txn_offset_commit(broker, request, ctx):
    T = TxnOffsetCommitResponse.TxnOffsetCommitResponseTopic
    P = T.TxnOffsetCommitResponsePartition
    code = 0
    if ctx.version >= 3 and request.generation_id >= 0:
        # KIP-447: a consumer-group-aware producer must still be a member of the current generation.
        _, code = broker.groups.validate_commit(
            request.group_id, request.generation_id, request.member_id, request.group_instance_id
        )
    now = int(time.time() * 1000)
    offsets = {
        (t.name, p.partition_index): OffsetAndMetadata(
            p.committed_offset, p.committed_metadata, p.committed_leader_epoch, now
        )
        for t in request.topics
        for p in t.partitions
    }
    if not code:
        try:
            broker.txns.txn_offset_commit(
                request.transactional_id, request.group_id, request.producer_id, request.producer_epoch, offsets
            )
        except Errors.KafkaError as exc:
            code = error_code(exc)
    return TxnOffsetCommitResponse[ctx.version](
        throttle_time_ms=0,
        topics=[
            T(name=t.name, partitions=[P(partition_index=p.partition_index, error_code=code) for p in t.partitions])
            for t in request.topics
        ],
    )


@api(EndTxnRequest, EndTxnResponse, 0, 4)
async def end_txn(broker, request, ctx):
    try:
        broker.txns.end_txn(request.transactional_id, request.producer_id, request.producer_epoch, request.committed)
        broker.notify_append()
        code = 0
    except Errors.KafkaError as exc:
        code = error_code(exc)
    return EndTxnResponse[ctx.version](throttle_time_ms=0, error_code=code)
