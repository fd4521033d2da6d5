"""Ending a continuous epoch before its deadline: the driver's word to its copy tasks, wherever they run.

A continuous epoch's tasks copy until the epoch's deadline (the flow's epoch_seconds). A stop (SIGTERM) or a
discovery round that found new partitions need not wait for it: the driver listens on a port of its own host
(the address Spark's executors already reach it at; 127.0.0.1 in local mode), each task of an epoch connects as it
starts and names its epoch, and the driver sends one byte once that epoch is to end. A task looks between batches
without waiting (a zero-timeout poll), so it ends at its next committed batch, its progress recorded as at any
epoch end. A task that cannot connect copies to the deadline, as it would without this.

The listener only ever sends that byte; a connection that does not open with the run's random token is dropped.
"""

from __future__ import annotations

import contextlib
import logging
import secrets
import select
import selectors
import socket
import struct
import threading
from dataclasses import dataclass

log = logging.getLogger(__name__)

TOKEN_BYTES = 16
HELLO = struct.Struct(f"!{TOKEN_BYTES}sQ")  # the run's token, the task's epoch number
CONNECT_TIMEOUT_S = 2.0
ALL = 2**63  # end_all: every epoch number is below it


@dataclass(frozen=True)
class EpochTicket:
    """What a task of one epoch needs to hear its end (pickled into the Spark job)."""

    host: str
    port: int
    token: bytes
    epoch: int

    def watch(self) -> EpochWatch:
        return EpochWatch(self)


class EpochWatch:
    """A task's side: `ended()` says, without waiting, whether the driver ended this task's epoch (or is gone)."""

    def __init__(self, ticket: EpochTicket) -> None:
        self._ended = False
        self._sock: socket.socket | None = None
        try:
            self._sock = socket.create_connection((ticket.host, ticket.port), timeout=CONNECT_TIMEOUT_S)
            self._sock.sendall(HELLO.pack(ticket.token, ticket.epoch))
        except OSError as exc:
            log.warning(
                "epoch %d: no word from the driver at %s:%d (%s); copying to the deadline",
                ticket.epoch,
                ticket.host,
                ticket.port,
                exc,
            )
            self.close()
            return
        # poll, not select: a task's process holds its Kafka clients' sockets too, and select() refuses a
        # descriptor number past 1023.
        self._poll = select.poll()
        self._poll.register(self._sock, select.POLLIN)

    def ended(self) -> bool:
        if self._ended or self._sock is None:
            return self._ended
        self._ended = bool(self._poll.poll(0))  # the driver's byte, or its end of the connection: either way, stop
        return self._ended

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None


class EpochEnds:
    """The driver's side: `ticket()` for each epoch's tasks, `end_current()` to end the latest epoch early,
    `end_all()` to end it and every later one (a stop). One thread serves the connections."""

    def __init__(self, host: str) -> None:
        self._listener = socket.create_server((host, 0))
        self._listener.setblocking(False)
        self.host, self.port = host, self._listener.getsockname()[1]
        self._token = secrets.token_bytes(TOKEN_BYTES)
        self._lock = threading.Lock()
        self._issued = -1  # the latest epoch a ticket was issued for
        self._ended_below = 0  # every epoch under this number has ended
        self._waiting: dict[socket.socket, int] = {}  # connection -> its epoch, once its hello was read
        self._hellos: dict[socket.socket, bytes] = {}  # connection -> what it sent of its hello so far
        self._wake_read, self._wake_write = socket.socketpair()
        self._selector = selectors.DefaultSelector()
        self._selector.register(self._listener, selectors.EVENT_READ)
        self._selector.register(self._wake_read, selectors.EVENT_READ)
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="kdr-epoch-ends", daemon=True)
        self._thread.start()

    def ticket(self) -> EpochTicket:
        """A ticket for a new epoch (a rerun of a fenced epoch is a new epoch too)."""
        with self._lock:
            self._issued += 1
            return EpochTicket(self.host, self.port, self._token, self._issued)

    def end_current(self) -> None:
        with self._lock:
            self._ended_below = max(self._ended_below, self._issued + 1)
        self._wake()

    def end_all(self) -> None:
        with self._lock:
            self._ended_below = ALL
        self._wake()

    def close(self) -> None:
        self._closed.set()
        self._wake()
        self._thread.join(5)
        for sock in [*self._waiting, *self._hellos]:
            sock.close()
        self._selector.close()
        for sock in (self._listener, self._wake_read, self._wake_write):
            sock.close()

    def _wake(self) -> None:
        with contextlib.suppress(OSError):  # closed already: nothing is left to end
            self._wake_write.send(b"\0")

    def _serve(self) -> None:
        while not self._closed.is_set():
            for key, _ in self._selector.select():
                sock = key.fileobj
                if sock is self._listener:
                    self._accept()
                elif sock is self._wake_read:
                    sock.recv(64)
                else:
                    self._read_hello(sock)
            self._notify()

    def _accept(self) -> None:
        try:
            conn, _ = self._listener.accept()
        except BlockingIOError:
            return
        conn.setblocking(False)
        self._hellos[conn] = b""
        self._selector.register(conn, selectors.EVENT_READ)

    def _read_hello(self, conn: socket.socket) -> None:
        if conn in self._waiting:  # a task that closed its end (or sent more than its hello): forget it
            self._drop(conn)
            return
        try:
            data = conn.recv(HELLO.size - len(self._hellos[conn]))
        except OSError:
            data = b""
        if not data:
            self._drop(conn)
            return
        self._hellos[conn] += data
        if len(self._hellos[conn]) < HELLO.size:
            return
        token, epoch = HELLO.unpack(self._hellos.pop(conn))
        if not secrets.compare_digest(token, self._token):
            self._drop(conn)
            return
        self._waiting[conn] = epoch

    def _notify(self) -> None:
        with self._lock:
            ended_below = self._ended_below
        for conn, epoch in list(self._waiting.items()):
            if epoch < ended_below:
                with contextlib.suppress(OSError):  # a task already gone
                    conn.send(b"\1")
                self._drop(conn)

    def _drop(self, conn: socket.socket) -> None:
        self._selector.unregister(conn)
        self._waiting.pop(conn, None)
        self._hellos.pop(conn, None)
        conn.close()
