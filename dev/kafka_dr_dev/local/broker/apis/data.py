"""Produce, Fetch, ListOffsets, DeleteRecords and OffsetForLeaderEpoch: the data path."""

from __future__ import annotations

import time

import kafka.errors as Errors
from kafka.protocol.admin import DeleteRecordsRequest, DeleteRecordsResponse
from kafka.protocol.consumer import (
    FetchRequest,
    FetchResponse,
    ListOffsetsRequest,
    ListOffsetsResponse,
    OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse,
)
from kafka.protocol.producer import ProduceRequest, ProduceResponse

from ..records import (
    InvalidRecordError,
    assign_offset,
    null_key_offsets,
    parse_header,
    set_log_append_time,
    validate_single_batch,
)
from .dispatch import api, each_partition, error_code, error_message

EARLIEST, LATEST, MAX_TIMESTAMP = -2, -1, -3
READ_COMMITTED = 1


@api(ProduceRequest, ProduceResponse, 3, 11)
async def produce(broker, request, ctx):
    R = ProduceResponse.TopicProduceResponse
    P = R.PartitionProduceResponse
    if request.acks not in (-1, 0, 1):
        code = Errors.InvalidRequiredAcksError.errno
        responses = [
            R(
                name=t.name,
                partition_responses=[P(index=p.index, error_code=code, base_offset=-1) for p in t.partition_data],
            )
            for t in request.topic_data
        ]
        return ProduceResponse[ctx.version](responses=responses, throttle_time_ms=0)
    responses = []
    appended = False
    for t in request.topic_data:
        results = []
        for p in t.partition_data:
            try:
                base_offset, log_append_time, log_start = append_batch(
                    broker, t.name, p.index, p.records or b"", request.transactional_id
                )
                appended = True
                results.append(
                    P(
                        index=p.index,
                        error_code=0,
                        base_offset=base_offset,
                        log_append_time_ms=log_append_time,
                        log_start_offset=log_start,
                        record_errors=[],
                        error_message=None,
                    )
                )
            except Exception as exc:
                results.append(
                    P(
                        index=p.index,
                        error_code=error_code(exc),
                        base_offset=-1,
                        log_append_time_ms=-1,
                        log_start_offset=-1,
                        record_errors=[],
                        error_message=error_message(exc),
                    )
                )
        responses.append(R(name=t.name, partition_responses=results))
    if appended:
        broker.notify_append()
    if request.acks == 0:
        return None
    return ProduceResponse[ctx.version](responses=responses, throttle_time_ms=0)


def append_batch(
    broker, topic_name: str, partition: int, data: bytes, transactional_id: str | None
) -> tuple[int, int, int]:
    """Validate and append one produced batch; (base offset, log append time or -1, log start)."""
    # Only Metadata auto-creates topics; Produce to an unknown one fails as in Kafka.
    log = broker.topics.partition(topic_name, partition)
    topic = broker.topics.get(topic_name)
    try:
        header = validate_single_batch(data)
    except InvalidRecordError as exc:
        raise Errors.CorruptRecordError(str(exc)) from None
    if "compact" in topic.config("cleanup.policy") and null_key_offsets(data):
        raise Errors.InvalidRecordError(f"compacted topic {topic_name} does not accept records without a key")
    if header.length > int(topic.config("max.message.bytes")):
        raise Errors.MessageSizeTooLargeError(
            f"batch of {header.length} bytes exceeds max.message.bytes={topic.config('max.message.bytes')}"
        )
    if header.is_transactional:
        if not transactional_id:
            raise Errors.InvalidRecordError("transactional batch without a transactional id")
        broker.txns.check_produce(header.producer_id, header.producer_epoch, topic_name, partition)
    duplicate = log.check_producer(header)
    if duplicate is not None:
        return duplicate, -1, log.log_start_offset  # an idempotent retry: already in the log
    batch = assign_offset(data, log.log_end_offset)
    log_append_time = -1
    if topic.config("message.timestamp.type") == "LogAppendTime":
        log_append_time = int(time.time() * 1000)
        set_log_append_time(batch, log_append_time)
    base_offset = log.append(batch, parse_header(batch))
    return base_offset, log_append_time, log.log_start_offset


@api(FetchRequest, FetchResponse, 4, 12)
async def fetch(broker, request, ctx):
    deadline = time.monotonic() + max(request.max_wait_ms, 0) / 1000
    while True:
        responses, total = read_fetch(broker, request)
        remaining = deadline - time.monotonic()
        if total >= request.min_bytes or remaining <= 0 or _has_error(responses):
            break
        await broker.wait_for_append(remaining)
    return FetchResponse[ctx.version](throttle_time_ms=0, error_code=0, session_id=0, responses=responses)


def _has_error(responses) -> bool:
    return any(p.error_code for t in responses for p in t.partitions)


def read_fetch(broker, request) -> tuple[list, int]:
    R = FetchResponse.FetchableTopicResponse
    P = R.PartitionData
    A = P.AbortedTransaction
    budget = request.max_bytes
    total = 0
    responses = []
    for t in request.topics:
        partitions = []
        for p in t.partitions:
            try:
                log = broker.topics.partition(t.topic, p.partition)
            except Errors.KafkaError as exc:
                partitions.append(
                    P(
                        partition_index=p.partition,
                        error_code=error_code(exc),
                        high_watermark=-1,
                        last_stable_offset=-1,
                        log_start_offset=-1,
                        aborted_transactions=None,
                        records=None,
                    )
                )
                continue
            committed = request.isolation_level == READ_COMMITTED
            bound = log.last_stable_offset if committed else log.high_watermark
            aborted = None
            try:
                # Every partition may return its first batch even past the request's budget (KIP-74).
                limit = min(p.partition_max_bytes, budget) if total else p.partition_max_bytes
                records = log.read(p.fetch_offset, max(limit, 1), bound)
                code = 0
            except Errors.OffsetOutOfRangeError as exc:
                records, code = b"", error_code(exc)
            if records and committed:
                last = parse_last_offset(records)
                aborted = [
                    A(producer_id=a.producer_id, first_offset=a.first_offset)
                    for a in log.aborted_between(p.fetch_offset, last + 1)
                ]
            total += len(records)
            budget -= len(records)
            partitions.append(
                P(
                    partition_index=p.partition,
                    error_code=code,
                    high_watermark=log.high_watermark,
                    last_stable_offset=log.last_stable_offset,
                    log_start_offset=log.log_start_offset,
                    aborted_transactions=aborted if committed else None,
                    preferred_read_replica=-1,
                    records=records,
                )
            )
        responses.append(R(topic=t.topic, partitions=partitions))
    return responses, total


def parse_last_offset(records: bytes) -> int:
    """Last offset of the last batch in a run of whole batches."""
    pos = 0
    last = -1
    while pos < len(records):
        header = parse_header(records, pos)
        last = header.last_offset
        pos += header.length
    return last


@api(ListOffsetsRequest, ListOffsetsResponse, 1, 7)
async def list_offsets(broker, request, ctx):
    R = ListOffsetsResponse.ListOffsetsTopicResponse
    P = R.ListOffsetsPartitionResponse

    def answer(topic, p):
        offset, timestamp = _offset_for(
            broker.topics.partition(topic, p.partition_index), p.timestamp, request.isolation_level
        )
        return P(
            partition_index=p.partition_index,
            error_code=0,
            timestamp=timestamp,
            offset=offset,
            leader_epoch=0 if offset >= 0 else -1,
        )

    results = each_partition(
        request.topics, "name", answer, lambda p, code: P(partition_index=p.partition_index, error_code=code)
    )
    return ListOffsetsResponse[ctx.version](
        throttle_time_ms=0, topics=[R(name=name, partitions=parts) for name, parts in results]
    )


def _offset_for(log, timestamp: int, isolation_level: int) -> tuple[int, int]:
    if timestamp == EARLIEST:
        return log.log_start_offset, -1
    if timestamp == LATEST:
        return (log.last_stable_offset if isolation_level == READ_COMMITTED else log.high_watermark), -1
    if timestamp == MAX_TIMESTAMP:
        found = log.max_timestamp_offset()
    elif timestamp < 0:
        raise Errors.InvalidRequestError(f"unsupported special timestamp {timestamp}")
    else:
        found = log.offset_for_timestamp(timestamp)
    return found if found is not None else (-1, -1)


@api(DeleteRecordsRequest, DeleteRecordsResponse, 0, 2)
async def delete_records(broker, request, ctx):
    R = DeleteRecordsResponse.DeleteRecordsTopicResult
    P = R.DeleteRecordsPartitionResult

    def answer(topic, p):
        low = broker.topics.partition(topic, p.partition_index).delete_records_before(p.offset)
        return P(partition_index=p.partition_index, low_watermark=low, error_code=0)

    results = each_partition(
        request.topics,
        "name",
        answer,
        lambda p, code: P(partition_index=p.partition_index, low_watermark=-1, error_code=code),
    )
    return DeleteRecordsResponse[ctx.version](
        throttle_time_ms=0, topics=[R(name=name, partitions=parts) for name, parts in results]
    )


@api(OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse, 2, 4)
async def offset_for_leader_epoch(broker, request, ctx):
    # One leader epoch (0) ever: its end offset is the log end offset.
    R = OffsetForLeaderEpochResponse.OffsetForLeaderTopicResult
    P = R.EpochEndOffset

    def answer(topic, p):
        log = broker.topics.partition(topic, p.partition)
        end = log.log_end_offset if p.leader_epoch >= 0 else -1
        return P(error_code=0, partition=p.partition, leader_epoch=0, end_offset=end)

    results = each_partition(request.topics, "topic", answer, lambda p, code: P(error_code=code, partition=p.partition))
    return OffsetForLeaderEpochResponse[ctx.version](
        throttle_time_ms=0, topics=[R(topic=name, partitions=parts) for name, parts in results]
    )
