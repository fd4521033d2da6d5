"""The embedded broker: one asyncio event loop serving the Kafka wire protocol for one cluster.

Each connection is served in order, one request at a time, as Kafka does; waiting requests
(long-poll fetches, joins) only hold their own connection. A malformed frame closes that
connection only. State is single-threaded, so handlers need no locks. With a secured listener
(`security.BrokerSecurity`) a connection first completes TLS, then SASL, before any other request.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import logging
import ssl
import struct
import time
import uuid
from pathlib import Path

from kafka.protocol.metadata import ApiVersionsResponse

from . import cleaner
from .apis import load_all
from .apis.dispatch import RequestContext
from .groups import GroupCoordinator
from .security import TLS_HANDSHAKE_TIMEOUT, BrokerSecurity, ConnectionAuth, Refused
from .topics import TopicStore
from .transactions import TransactionCoordinator

log = logging.getLogger(__name__)

MAX_REQUEST_BYTES = 104857600  # socket.request.max.bytes
API_VERSIONS_KEY = 18
UNSUPPORTED_VERSION = 35

BROKER_DEFAULTS: dict[str, str] = {
    "auto.create.topics.enable": "true",
    "num.partitions": "1",
    "default.replication.factor": "1",
    "offsets.topic.replication.factor": "1",
    "transaction.state.log.replication.factor": "1",
    "group.initial.rebalance.delay.ms": "3000",
    "log.retention.check.interval.ms": "300000",
    "log.cleaner.backoff.ms": "15000",
    "message.max.bytes": "1048588",
    "connection.failed.authentication.delay.ms": "100",
    "log.dirs": "",
}


def read_or_create_cluster_id(data_dir: Path, node_id: int) -> str:
    """meta.properties as Kafka writes it; a fresh data dir gets a fresh cluster id."""
    path = data_dir / "meta.properties"
    if path.exists():
        props = dict(
            line.split("=", 1) for line in path.read_text().splitlines() if "=" in line and not line.startswith("#")
        )
        return props["cluster.id"].strip()
    cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
    path.write_text(f"#kafka-dr embedded broker\nversion=1\nnode.id={node_id}\ncluster.id={cluster_id}\n")
    return cluster_id


class Broker:
    def __init__(
        self,
        data_dir: Path,
        host: str = "127.0.0.1",
        port: int = 9092,
        node_id: int = 1,
        configs: dict[str, str] | None = None,
        security: BrokerSecurity | None = None,
    ) -> None:
        self.data_dir = data_dir
        self.security = security or BrokerSecurity()
        self.host = host
        self.port = port
        self.node_id = node_id
        self.configs = {**BROKER_DEFAULTS, **(configs or {}), "log.dirs": str(data_dir)}
        data_dir.mkdir(parents=True, exist_ok=True)
        self.cluster_id = read_or_create_cluster_id(data_dir, node_id)
        self.topics = TopicStore(data_dir)
        self.groups = GroupCoordinator(data_dir, int(self.configs["group.initial.rebalance.delay.ms"]))
        self.txns = TransactionCoordinator(data_dir, self.topics, self.groups)
        self.apis = load_all()
        self._appended = asyncio.Event()
        self._server: asyncio.base_events.Server | None = None
        self._tasks: list[asyncio.Task] = []
        self._connections: set[asyncio.Task] = set()

    # ---- appends wake long-polling fetches -----------------------------------------------
    def notify_append(self) -> None:
        self._appended.set()
        self._appended = asyncio.Event()

    async def wait_for_append(self, timeout: float) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._appended.wait(), timeout)

    # ---- lifecycle ---------------------------------------------------------------------------
    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve_connection, self.host, self.port, reuse_address=True)
        loop = asyncio.get_running_loop()
        self._tasks = [
            loop.create_task(self._every(0.1, self.groups.expire_sessions)),
            loop.create_task(self._every(1.0, self.txns.abort_expired)),
            loop.create_task(
                self._every(int(self.configs["log.retention.check.interval.ms"]) / 1000, self._enforce_retention)
            ),
            loop.create_task(self._every(int(self.configs["log.cleaner.backoff.ms"]) / 1000, self._compact)),
        ]
        log.info(
            "broker %d of cluster %s listening on %s:%d (%s), data in %s",
            self.node_id,
            self.cluster_id,
            self.host,
            self.port,
            self.security.describe(),
            self.data_dir,
        )

    async def _every(self, seconds: float, job) -> None:
        while True:
            await asyncio.sleep(seconds)
            try:
                job()
            except Exception:
                log.exception("background job %s failed", job.__name__)

    def _enforce_retention(self) -> None:
        now = int(time.time() * 1000)
        for topic in self.topics.topics.values():
            for index, partition in enumerate(topic.partitions):
                removed = partition.enforce_retention(now)
                if removed:
                    log.info("retention removed %d records from %s-%d", removed, topic.name, index)

    def _compact(self) -> None:
        now = int(time.time() * 1000)
        for topic in self.topics.topics.values():
            if "compact" not in topic.config("cleanup.policy"):
                continue
            for index, partition in enumerate(topic.partitions):
                if cleaner.dirty_ratio(partition) >= float(topic.config("min.cleanable.dirty.ratio")):
                    removed = cleaner.clean(partition, now, int(topic.config("delete.retention.ms")))
                    if removed:
                        log.info("compaction removed %d records from %s-%d", removed, topic.name, index)

    async def serve_forever(self) -> None:
        await self.start()
        async with self._server:
            await self._server.serve_forever()

    async def shutdown(self) -> None:
        """Stop listening, end open connections, then close the logs (a clean SIGTERM stop)."""
        if self._server:
            self._server.close()
        pending = [*self._tasks, *self._connections]
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
        self.close()

    def close(self) -> None:
        for task in self._tasks:
            task.cancel()
        if self._server:
            self._server.close()
        self.groups.close()
        self.txns.close()
        self.topics.close()

    # ---- connections -----------------------------------------------------------------------
    async def _serve_connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peer = writer.get_extra_info("peername") or ("?", 0)
        task = asyncio.current_task()
        self._connections.add(task)
        auth = self.security.connection(f"{peer[0]}:{peer[1]}")
        try:
            if self.security.ssl_context is not None and not await self._start_tls(writer, peer):
                return
            while True:
                size = struct.unpack(">i", await reader.readexactly(4))[0]
                limit = auth.max_frame_bytes or MAX_REQUEST_BYTES
                if not (0 if auth.raw_tokens else 8) <= size <= limit:
                    log.warning("closing %s: invalid frame size %d", peer, size)
                    return
                frame = await reader.readexactly(size)
                if auth.raw_tokens:  # after SaslHandshake v0: a bare SASL token, answered bare
                    token = auth.raw_token(frame)
                    response = None if token is None else struct.pack(">i", len(token)) + token
                else:
                    response = await self.dispatch(frame, peer[0], auth)
                if response is not None:
                    writer.write(response)
                    await writer.drain()
                if auth.closing:
                    log.warning("closing %s: %s", peer, auth.closing)
                    await self._linger(reader)
                    return
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError):
            pass
        except _CloseConnection as exc:
            log.warning("closing %s: %s", peer, exc)
        except Exception:
            log.exception("closing %s after an unexpected error", peer)
        finally:
            self._connections.discard(task)
            writer.close()

    async def _linger(self, reader: asyncio.StreamReader) -> None:
        """After a failed authentication's answer, hold the connection up to connection.failed.authentication.delay.ms
        (100 ms, Kafka's default; Kafka waits that long before answering, KIP-306) so the client reads the answer
        and closes first: kafka-python 3.0.12 drops a response that arrives together with the broker's FIN and
        reports a bare disconnect instead of the authentication error."""
        delay = int(self.configs["connection.failed.authentication.delay.ms"]) / 1000
        with contextlib.suppress(TimeoutError, ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            await asyncio.wait_for(reader.read(), delay)  # until the client closes; whatever it sends is ignored

    async def _start_tls(self, writer: asyncio.StreamWriter, peer: tuple) -> bool:
        """The TLS handshake, before anything is read: a client speaking plain Kafka to a TLS port is logged and
        dropped here (an asyncio TLS server would drop it silently)."""
        assert self.security.ssl_context is not None
        try:
            await writer.start_tls(self.security.ssl_context, ssl_handshake_timeout=TLS_HANDSHAKE_TIMEOUT)
        except ssl.SSLError as exc:
            log.warning("closing %s: TLS handshake failed (%s)", peer, exc.reason or exc)
            return False
        except (ConnectionError, TimeoutError, OSError) as exc:  # a port probe, or a client that gave up
            log.debug("closing %s: no TLS handshake (%s)", peer, type(exc).__name__)
            return False
        return True

    async def dispatch(self, frame: bytes, client_host: str, auth: ConnectionAuth | None = None) -> bytes | None:
        api_key, version, correlation_id = struct.unpack_from(">hhi", frame)
        api = self.apis.get(api_key)
        if api is None:
            raise _CloseConnection(f"unsupported API key {api_key}")
        if auth is not None:
            try:
                auth.admit(api_key, api.request.__name__.removesuffix("Request"))
            except Refused as exc:
                raise _CloseConnection(str(exc)) from None
        if not api.min_version <= version <= api.max_version:
            if api_key == API_VERSIONS_KEY:
                # Kafka answers an unknown ApiVersions version with a v0 body listing what it supports.
                response = ApiVersionsResponse[0](error_code=UNSUPPORTED_VERSION, api_keys=self.api_versions())
                response.with_header(correlation_id=correlation_id)
                return bytes(response.encode(header=True, framed=True))
            raise _CloseConnection(f"unsupported version {version} of API {api.request.__name__}")
        try:
            request = api.request.decode(frame, version=version, header=True)
        except Exception as exc:
            raise _CloseConnection(f"malformed {api.request.__name__} v{version}: {exc}") from exc
        context = RequestContext(request.header.client_id or "", client_host, version, auth)
        log.debug("%s v%d from %s (correlation %d)", api.request.__name__, version, context.client_id, correlation_id)
        response = await api.handler(self, request, context)
        log.debug("answered %s correlation %d", api.request.__name__, correlation_id)
        if auth is not None:
            auth.answered(api_key)
        if response is None:
            return None  # acks=0 produce
        response.with_header(correlation_id=correlation_id)
        return bytes(response.encode(header=True, framed=True))

    def api_versions(self) -> list:
        item = ApiVersionsResponse.ApiVersion
        return [
            item(api_key=a.key, min_version=a.min_version, max_version=a.max_version)
            for a in sorted(self.apis.values(), key=lambda a: a.key)
        ]


class _CloseConnection(Exception):
    """A request the broker cannot parse, or may not serve before authentication: Kafka closes the connection."""
