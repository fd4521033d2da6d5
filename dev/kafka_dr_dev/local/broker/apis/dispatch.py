"""What the broker's server and its API handlers share: the table of handlers by API key (filled by `api`), a
request's context, the broker as the handlers see it (ServingBroker, which server.Broker is: a Protocol, so that
the handlers need not import the server that imports them), and the mapping of errors to Kafka error codes.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol

import kafka.errors as Errors

if TYPE_CHECKING:
    from ..groups import GroupCoordinator
    from ..security import ConnectionAuth
    from ..topics import TopicStore
    from ..transactions import TransactionCoordinator

UNKNOWN_SERVER_ERROR = -1


@dataclasses.dataclass(frozen=True)
class RequestContext:
    client_id: str
    client_host: str
    version: int
    auth: ConnectionAuth | None = None  # the connection's authentication state (SaslHandshake, SaslAuthenticate)


class ServingBroker(Protocol):
    """The broker state and hooks the handlers use."""

    host: str
    port: int
    node_id: int
    cluster_id: str
    configs: dict[str, str]
    topics: TopicStore
    groups: GroupCoordinator
    txns: TransactionCoordinator

    def api_versions(self) -> list: ...

    def notify_append(self) -> None: ...

    async def wait_for_append(self, timeout: float) -> None: ...


Handler = Callable[[ServingBroker, Any, RequestContext], Awaitable[Any]]


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
