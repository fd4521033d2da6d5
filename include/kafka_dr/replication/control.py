"""Stop requests that travel through a flow's clusters, so that any process on any host can stop a replicator it did
not start (another worker, another container, another PID namespace).

A request is a record keyed by the flow in `_kdr.control` of the flow's target (or of its source, when the target is
lost). A running replicator's driver reads both from where they stood when the driver started (`StopRequests`), so
it obeys requests made while it runs and never one made before it; it then ends its epoch as it does on SIGTERM and,
as its last record, appends an owner record to the target's `_kdr.progress` that names the request
(fencing.FlowClaim.release): the acknowledgement that `liveness.stop` waits for, when the target answers. A request
made in a disaster names the lost cluster: a driver whose source it is skips what would wait on it as it ends (the
last heartbeat's copy, the last checkpoint pass), so it acknowledges in about a second, not after their timeouts.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from confluent_kafka import Consumer, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient

from .internal import CONTROL, ensure_internal_topics, put_records

log = logging.getLogger(__name__)

STOP = "stop"


@dataclass(frozen=True)
class StopRequest:
    flow: str
    id: str
    by: str  # host and pid of the process that asked, for the replicator's log
    lost: str | None = None  # the cluster a disaster lost, when the request is made for one

    def to_json(self) -> dict[str, Any]:
        return {"action": STOP, "id": self.id, "by": self.by, "lost": self.lost, "at_ms": int(time.time() * 1000)}


def request_stop(
    target_config: dict[str, Any], flow: str, timeout: float = 10.0, lost: str | None = None
) -> StopRequest:
    """Append a stop request for `flow` to the target's `_kdr.control` (made if missing) and return it; `lost`: the
    cluster a disaster lost."""
    request = StopRequest(flow, uuid.uuid4().hex, f"{socket.gethostname()} pid {os.getpid()}", lost)
    put_records(target_config, CONTROL, [(flow.encode(), request.to_json())], timeout)
    return request


def parse_request(key: bytes | None, value: bytes | None) -> StopRequest | None:
    """The stop request a `_kdr.control` record holds, None for anything else (a malformed record is ignored: it
    must not stop a replicator, nor crash one)."""
    try:
        body = json.loads(value or b"")
        if body.get("action") != STOP or not isinstance(body.get("id"), str):
            return None
        lost = body.get("lost") if isinstance(body.get("lost"), str) else None
        return StopRequest((key or b"").decode(), body["id"], str(body.get("by", "?")), lost)
    except (ValueError, AttributeError, UnicodeDecodeError):
        return None


class StopRequests:
    """A replicator driver's watch on `_kdr.control` of its target and of its source, on a daemon thread: the first
    request for its flow calls `obey(request)` and ends the watch; so does `stop` being set. A stop of a flow into a
    lost cluster can only be asked through its source. Each read starts at the topic's end when the watch is made,
    before the driver claims its flow, so a request made after the claim is always seen."""

    POLL_S = 0.2

    def __init__(
        self,
        flow: str,
        cluster_configs: Sequence[dict[str, Any]],
        stop: threading.Event,
        obey: Callable[[StopRequest], None],
        timeout: float = 10.0,
    ) -> None:
        self.flow, self.stop, self.obey = flow, stop, obey
        self.readers = [_reader_at_end(config, timeout) for config in cluster_configs]
        self.thread = threading.Thread(target=self.run, name="kdr-control", daemon=True)

    def start(self) -> None:
        self.thread.start()

    def run(self) -> None:
        try:
            while not self.stop.is_set():
                for reader in self.readers:
                    message = reader.poll(self.POLL_S / len(self.readers))
                    if message is None or message.error():
                        continue
                    request = parse_request(message.key(), message.value())
                    if request is not None and request.flow == self.flow:
                        log.info("flow %s: stop request %s from %s", self.flow, request.id, request.by)
                        self.obey(request)
                        return
        except KafkaException as exc:  # a cluster is gone: the epoch loop fails the run on its own if it matters
            log.warning("flow %s: stop requests no longer read: %s", self.flow, exc.args[0].str())
        finally:
            for reader in self.readers:
                reader.close()


def _reader_at_end(config: dict[str, Any], timeout: float) -> Consumer:
    ensure_internal_topics(AdminClient(config), (CONTROL,), timeout=timeout)
    reader = Consumer({**config, "group.id": "_kdr.control", "enable.auto.commit": False})
    _, end = reader.get_watermark_offsets(TopicPartition(CONTROL, 0), timeout=timeout)
    reader.assign([TopicPartition(CONTROL, 0, end)])
    return reader
