"""Real receivers of alerts, on 127.0.0.1: an HTTP server that takes Apprise's `json://` posts, and an SMTP server
(aiosmtpd) that requires a login, for Apprise's `mailto://`."""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from email import message_from_bytes
from email.message import Message
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from aiosmtpd.controller import Controller
from aiosmtpd.smtp import AuthResult, LoginPassword

from .ports import free_port


@dataclass
class Received:
    """What a receiver got, in arrival order."""

    items: list[Any] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, item: Any) -> None:
        with self.lock:
            self.items.append(item)

    def all(self) -> list[Any]:
        with self.lock:
            return list(self.items)


@contextlib.contextmanager
def http_receiver() -> Iterator[tuple[int, Received]]:
    """Apprise's json:// target: each POST's JSON body (title, message, type) with its path. Yields (port, got)."""
    got = Received()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - http.server's name
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            got.add({"path": self.path, **json.loads(body)})
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args: Any) -> None:  # quiet
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1], got
    finally:
        server.shutdown()
        server.server_close()


@contextlib.contextmanager
def smtp_receiver(user: str, password: str) -> Iterator[tuple[int, Received]]:
    """An SMTP server that takes mail only after AUTH with `user`/`password` (plain text: loopback only). Yields
    (port, got), got holding each message parsed."""
    got = Received()

    class Handler:
        async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:  # noqa: N802 - aiosmtpd's name
            got.add(message_from_bytes(envelope.original_content or envelope.content))
            return "250 OK"

    def authenticate(server: Any, session: Any, envelope: Any, mechanism: str, data: Any) -> AuthResult:
        ok = isinstance(data, LoginPassword) and (data.login, data.password) == (user.encode(), password.encode())
        return AuthResult(success=ok, handled=False)

    port = free_port()
    controller = Controller(
        Handler(),
        hostname="127.0.0.1",
        port=port,
        authenticator=authenticate,
        auth_require_tls=False,
        auth_required=True,
    )
    controller.start()
    try:
        yield port, got
    finally:
        controller.stop()


def subject_of(message: Message) -> str:
    return str(message["Subject"])
