"""HTTP Basic authentication, as Confluent Schema Registry does with ``authentication.method=BASIC``.

Confluent checks ``Authorization: Basic base64(user:password)`` against a JAAS realm of users and answers a
request without valid credentials with HTTP 401, ``{"error_code": 401, "message": "Unauthorized"}`` and a
``WWW-Authenticate: Basic realm=...`` challenge; so does this registry, with the users of a JSON file
``{"user": "password"}`` (the format of the brokers' SASL users) or of ``$KDR_REGISTRY_USERS``.

Every password comparison runs in constant time (``hmac.compare_digest``), an unknown user included, so the
answer's timing tells neither a password nor whether a user exists. A refusal is logged with the peer and the
user name only: never the password nor the header.
"""

from __future__ import annotations

import base64
import binascii
import hmac
import logging
from collections.abc import Mapping
from pathlib import Path

from ..broker.security import SecurityError, read_users

log = logging.getLogger(__name__)

USERS_ENV = "KDR_REGISTRY_USERS"
REALM = "SchemaRegistry"
_DUMMY = b"\0" * 32  # compared against when the user is unknown, so that path costs the same


class AuthConfigError(ValueError):
    """Unusable users (file, variable or content): one line naming the source, never a password."""


def check_users(users: object, source: str) -> dict[str, str]:
    """The users as {name: password}, refused in one line when Basic authentication cannot carry them (RFC 7617:
    a user id holds no ':'), or they are not a non-empty JSON object of non-empty strings."""
    if not isinstance(users, dict) or not users:
        raise AuthConfigError(f'users {source}: must be a non-empty JSON object {{"user": "password", ...}}')
    for user, password in users.items():
        if not isinstance(user, str) or not user or ":" in user or "\0" in user:
            raise AuthConfigError(f"users {source}: user {user!r}: a name must be non-empty, without ':' or NUL")
        if not isinstance(password, str) or not password or "\0" in password:
            raise AuthConfigError(f"users {source}: the password of user {user!r} must be a non-empty string")
    return users


def load_users(path: Path | None, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """{user: password} from the JSON file at `path`, else from $KDR_REGISTRY_USERS; errors never quote a value."""
    missing = (
        f"basic authentication without users: give --basic-auth-users-file or set {USERS_ENV} to JSON "
        '{"user": "password"}'
    )
    try:
        users, source = read_users(path, USERS_ENV, missing, environ)
    except SecurityError as exc:
        raise AuthConfigError(str(exc)) from None
    return check_users(users, source)


def authorization_header(user: str, password: str) -> str:
    """The ``Authorization`` value a client sends (what confluent-kafka's ``basic.auth.user.info`` produces)."""
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode("ascii")


class BasicAuthenticator:
    """Checks ``Authorization`` headers against a fixed set of users (read once, at start, as Confluent does)."""

    def __init__(self, users: Mapping[str, str], realm: str = REALM) -> None:
        self._users = {user: password.encode() for user, password in users.items()}
        self.challenge = f'Basic realm="{realm}"'

    def authenticate(self, header: str | None, peer: str) -> str | None:
        """The authenticated user, or None after logging why (peer and user name, nothing the client sent else)."""
        if not header:
            log.warning("refused a request from %s: no credentials", peer)
            return None
        scheme, _, token = header.strip().partition(" ")
        try:
            if scheme.lower() != "basic":
                raise ValueError
            user, colon, password = base64.b64decode(token.strip(), validate=True).decode().partition(":")
            if not colon:
                raise ValueError
        except (ValueError, binascii.Error):  # UnicodeDecodeError is a ValueError
            log.warning("refused a request from %s: malformed Basic credentials", peer)
            return None
        expected = self._users.get(user)
        matches = hmac.compare_digest(password.encode(), _DUMMY if expected is None else expected)
        if expected is None or not matches:
            log.warning("refused a request from %s: wrong credentials for user %r", peer, user[:64])
            return None
        return user
