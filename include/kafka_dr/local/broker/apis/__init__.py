"""Kafka API handlers, registered by API key with the version range this broker advertises.

Request and response classes come from kafka-python, generated from Kafka's own JSON message
definitions; handlers only translate between those and the broker's state. Version ranges stop
where a newer version would change semantics the broker does not implement (topic ids in Fetch
and Produce, transactions V2), which is what an older Kafka broker advertises too.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import kafka.errors as Errors

if TYPE_CHECKING:
    from ..security import ConnectionAuth
    from ..server import Broker

UNKNOWN_SERVER_ERROR = -1


@dataclasses.dataclass(frozen=True)
class RequestContext:
    client_id: str
    client_host: str
    version: int
    auth: ConnectionAuth | None = None  # the connection's authentication state (SaslHandshake, SaslAuthenticate)


Handler = Callable[["Broker", Any, RequestContext], Awaitable[Any]]


@dataclasses.dataclass(frozen=True)
class Api:
    key: int
    request: type
    response: type
    min_version: int
    max_version: int
    handler: Handler


REGISTRY: dict[int, Api] = {}


def api(request: type, response: type, min_version: int, max_version: int) -> Callable[[Handler], Handler]:
    def register(handler: Handler) -> Handler:
        REGISTRY[request.API_KEY] = Api(request.API_KEY, request, response, min_version, max_version, handler)
        return handler

    return register


def error_code(exc: BaseException) -> int:
    """The Kafka error code for an exception raised while serving a request."""
    if isinstance(exc, Errors.KafkaError) and getattr(exc, "errno", None) is not None:
        return exc.errno
    return UNKNOWN_SERVER_ERROR


def error_message(exc: BaseException) -> str:
    return str(exc.args[0]) if exc.args else type(exc).__name__


def each_partition(topics, topic_field: str, answer: Callable, on_error: Callable) -> list[tuple[str, list]]:
    """[(topic, [answer(topic, p) or on_error(p, code)])] for a request's topics and partitions, so one
    partition's error never fails the others."""
    out = []
    for t in topics:
        name = getattr(t, topic_field)
        results = []
        for p in t.partitions:
            try:
                results.append(answer(name, p))
            except Errors.KafkaError as exc:
                results.append(on_error(p, error_code(exc)))
        out.append((name, results))
    return out


def load_all() -> dict[int, Api]:
    """Import the handler modules (they register themselves) and return the registry."""
    from . import admin, data, groups, metadata, sasl, txn  # noqa: F401

    return REGISTRY
