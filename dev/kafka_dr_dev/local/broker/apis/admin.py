"""Topic and config administration: CreateTopics, DeleteTopics, CreatePartitions and configs."""

from __future__ import annotations

import kafka.errors as Errors
from kafka.protocol.admin import (
    AlterConfigsRequest,
    AlterConfigsResponse,
    CreatePartitionsRequest,
    CreatePartitionsResponse,
    CreateTopicsRequest,
    CreateTopicsResponse,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
    DescribeConfigsRequest,
    DescribeConfigsResponse,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
)

from ..topics import TOPIC_CONFIGS, validate_config
from .dispatch import api, error_code, error_message

TOPIC_RESOURCE, BROKER_RESOURCE = 2, 4
# DescribeConfigs config sources.
DYNAMIC_TOPIC_CONFIG, STATIC_BROKER_CONFIG, DEFAULT_CONFIG = 1, 4, 5
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


def create_topic_or_error(
    broker,
    name: str,
    partitions: int,
    configs: dict[str, str],
    replication_factor: int = -1,
    validate_only: bool = False,
) -> int:
    try:
        _create(broker, name, partitions, configs, replication_factor, validate_only)
        return 0
    except Errors.KafkaError as exc:
        return error_code(exc)


def _create(
    broker, name: str, partitions: int, configs: dict[str, str], replication_factor: int, validate_only: bool
) -> None:
    if replication_factor not in (-1, 1):
        raise Errors.InvalidReplicationFactorError(
            f"Replication factor: {replication_factor} larger than available brokers: 1."
        )
    partitions = int(broker.configs["num.partitions"]) if partitions == -1 else partitions
    if validate_only:
        broker.topics.check_create(name, partitions, configs)
    else:
        broker.topics.create(name, partitions, configs)


@api(CreateTopicsRequest, CreateTopicsResponse, 2, 7)
async def create_topics(broker, request, ctx):
    R = CreateTopicsResponse.CreatableTopicResult
    results = []
    for t in request.topics:
        configs = {c.name: c.value for c in t.configs}
        try:
            if t.assignments:
                raise Errors.InvalidRequestError("manual replica assignment is not supported by this broker")
            _create(broker, t.name, t.num_partitions, configs, t.replication_factor, request.validate_only)
            topic = broker.topics.topics.get(t.name)
            partitions = len(topic.partitions) if topic else t.num_partitions
            results.append(
                R(
                    name=t.name,
                    topic_id=topic.topic_id if topic else None,
                    error_code=0,
                    error_message=None,
                    num_partitions=partitions,
                    replication_factor=1,
                    configs=[_create_config(topic, n) for n in sorted(TOPIC_CONFIGS)] if topic else [],
                )
            )
        except Errors.KafkaError as exc:
            results.append(
                R(
                    name=t.name,
                    error_code=error_code(exc),
                    error_message=error_message(exc),
                    num_partitions=-1,
                    replication_factor=-1,
                    configs=None,
                )
            )
    return CreateTopicsResponse[ctx.version](throttle_time_ms=0, topics=results)


def _create_config(topic, name):
    C = CreateTopicsResponse.CreatableTopicResult.CreatableTopicConfigs
    return C(
        name=name,
        value=topic.config(name),
        read_only=False,
        is_sensitive=False,
        config_source=_config_source(topic, name),
    )


def _config_source(topic, name: str) -> int:
    """Set on the topic, or Kafka's default."""
    return DYNAMIC_TOPIC_CONFIG if name in topic.configs else DEFAULT_CONFIG


@api(DeleteTopicsRequest, DeleteTopicsResponse, 1, 5)
async def delete_topics(broker, request, ctx):
    R = DeleteTopicsResponse.DeletableTopicResult
    results = []
    for name in request.topic_names:
        try:
            broker.topics.delete(name)
            results.append(R(name=name, error_code=0, error_message=None))
        except Errors.KafkaError as exc:
            results.append(R(name=name, error_code=error_code(exc), error_message=error_message(exc)))
    return DeleteTopicsResponse[ctx.version](throttle_time_ms=0, responses=results)


@api(CreatePartitionsRequest, CreatePartitionsResponse, 0, 3)
async def create_partitions(broker, request, ctx):
    R = CreatePartitionsResponse.CreatePartitionsTopicResult
    results = []
    for t in request.topics:
        try:
            if t.assignments:
                raise Errors.InvalidRequestError("manual replica assignment is not supported by this broker")
            broker.topics.add_partitions(t.name, t.count, request.validate_only)
            results.append(R(name=t.name, error_code=0, error_message=None))
        except Errors.KafkaError as exc:
            results.append(R(name=t.name, error_code=error_code(exc), error_message=error_message(exc)))
    return CreatePartitionsResponse[ctx.version](throttle_time_ms=0, results=results)


@api(DescribeConfigsRequest, DescribeConfigsResponse, 1, 4)
async def describe_configs(broker, request, ctx):
    R = DescribeConfigsResponse.DescribeConfigsResult
    results = []
    for res in request.resources:
        try:
            code, message, configs = 0, None, _described(request, res, _config_entries(broker, res))
        except Errors.KafkaError as exc:
            code, message, configs = error_code(exc), error_message(exc), []
        results.append(
            R(
                error_code=code,
                error_message=message,
                resource_type=res.resource_type,
                resource_name=res.resource_name,
                configs=configs,
            )
        )
    return DescribeConfigsResponse[ctx.version](throttle_time_ms=0, results=results)


def _config_entries(broker, res) -> list[tuple[str, str, int, int]]:
    """A resource's configs, sorted by name: (name, value, config source, config type)."""
    if res.resource_type == TOPIC_RESOURCE:
        topic = broker.topics.get(res.resource_name)
        return [
            (name, topic.config(name), _config_source(topic, name), TOPIC_CONFIGS[name][1])
            for name in sorted(TOPIC_CONFIGS)
        ]
    if res.resource_type == BROKER_RESOURCE:
        if res.resource_name not in ("", str(broker.node_id)):
            raise Errors.InvalidRequestError(f"unknown broker {res.resource_name}")
        return [(name, value, STATIC_BROKER_CONFIG, 2) for name, value in sorted(broker.configs.items())]
    raise Errors.InvalidRequestError(f"unsupported resource type {res.resource_type}")


def _described(request, res, entries: list[tuple[str, str, int, int]]) -> list:
    """The entries the request asked for (all when it names no keys), with their synonyms if it asked for them."""
    C = DescribeConfigsResponse.DescribeConfigsResult.DescribeConfigsResourceResult
    S = C.DescribeConfigsSynonym
    keys = set(res.configuration_keys) if res.configuration_keys is not None else None
    return [
        C(
            name=name,
            value=value,
            read_only=res.resource_type == BROKER_RESOURCE,
            config_source=source,
            is_default=source == DEFAULT_CONFIG,
            is_sensitive=False,
            synonyms=[S(name=name, value=value, source=source)] if request.include_synonyms else [],
            config_type=kind,
            documentation=None,
        )
        for name, value, source, kind in entries
        if keys is None or name in keys
    ]


def _alter(broker, request, new_configs) -> list:
    """Shared by AlterConfigs (replace all) and IncrementalAlterConfigs (per-key operations)."""
    results = []
    for res in request.resources:
        try:
            if res.resource_type != TOPIC_RESOURCE:
                raise Errors.InvalidRequestError("only topic configs can be altered on this broker")
            topic = broker.topics.get(res.resource_name)
            configs = new_configs(topic, res.configs)
            if request.validate_only:
                for key, value in configs.items():
                    validate_config(key, value)
            else:
                broker.topics.set_configs(topic.name, configs)
            results.append((0, None, res))
        except Errors.KafkaError as exc:
            results.append((error_code(exc), error_message(exc), res))
    return results


@api(AlterConfigsRequest, AlterConfigsResponse, 0, 2)
async def alter_configs(broker, request, ctx):
    R = AlterConfigsResponse.AlterConfigsResourceResponse
    results = _alter(broker, request, lambda topic, entries: {c.name: c.value for c in entries})
    return AlterConfigsResponse[ctx.version](
        throttle_time_ms=0,
        responses=[
            R(error_code=code, error_message=msg, resource_type=res.resource_type, resource_name=res.resource_name)
            for code, msg, res in results
        ],
    )


def _incremental(topic, entries) -> dict[str, str]:
    configs = dict(topic.configs)
    for c in entries:
        if c.config_operation == SET:
            configs[c.name] = c.value
        elif c.config_operation == DELETE:
            configs.pop(c.name, None)
        elif c.config_operation in (APPEND, SUBTRACT):
            if c.name not in TOPIC_CONFIGS or TOPIC_CONFIGS[c.name][1] != 7:
                raise Errors.InvalidConfigurationError(f"{c.name} is not a list config")
            items = [v for v in topic.config(c.name).split(",") if v]
            change = [v for v in (c.value or "").split(",") if v]
            items = (
                items + [v for v in change if v not in items]
                if c.config_operation == APPEND
                else [v for v in items if v not in change]
            )
            configs[c.name] = ",".join(items)
        else:
            raise Errors.InvalidRequestError(f"unknown config operation {c.config_operation}")
    return configs


@api(IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse, 0, 1)
async def incremental_alter_configs(broker, request, ctx):
    R = IncrementalAlterConfigsResponse.AlterConfigsResourceResponse
    results = _alter(broker, request, _incremental)
    return IncrementalAlterConfigsResponse[ctx.version](
        throttle_time_ms=0,
        responses=[
            R(error_code=code, error_message=msg, resource_type=res.resource_type, resource_name=res.resource_name)
            for code, msg, res in results
        ],
    )
