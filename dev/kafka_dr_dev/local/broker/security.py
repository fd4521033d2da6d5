"""Authentication of a connection to the embedded broker: TLS, then SASL (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512).

Off by default (PLAINTEXT). The rules are Apache Kafka's (`SaslServerAuthenticator`, KIP-43, KIP-152, KIP-84):
- a SASL connection may send one ApiVersions, then SaslHandshake; any other request before authentication
  closes the connection (Kafka answers nothing and disconnects);
- SaslHandshake v1 makes the tokens travel in SaslAuthenticate requests; after v0 they travel as raw frames
  (a 4-byte size and the token, no Kafka header) as in Kafka 0.10, answered the same way;
- an unknown mechanism gets UNSUPPORTED_SASL_MECHANISM (33) with the enabled ones, then the connection closes;
  a failed authentication gets SASL_AUTHENTICATION_FAILED (58) with Kafka's message, then closes;
- before authentication a frame may not exceed sasl.server.max.receive.size (512 KiB).

Credentials come from a JSON file {"user": "password"} or the KDR_BROKER_USERS variable (the same JSON). They
are kept only as salted SCRAM credentials (RFC 5802: salt, StoredKey, ServerKey, 4096 iterations), as Kafka
keeps them; PLAIN checks a password against the SCRAM-SHA-512 credential. No password reaches a log line: the
log names the peer, the mechanism and a known user, never what the client sent.

TLS: a self-signed CA and a server certificate for 127.0.0.1 and localhost (subjectAltName) generated at
start with `cryptography` into the TLS directory (keys mode 0600) and reused while they are valid.
"""

from __future__ import annotations

import base64
import contextlib
import datetime
import enum
import fcntl
import hashlib
import hmac
import ipaddress
import json
import logging
import os
import secrets
import ssl
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from cryptography import x509
    from cryptography.hazmat.primitives.asymmetric import ec

    Validity = tuple[datetime.datetime, datetime.datetime]  # not before, not after

log = logging.getLogger(__name__)

PLAINTEXT, SASL_PLAINTEXT, SSL, SASL_SSL = "PLAINTEXT", "SASL_PLAINTEXT", "SSL", "SASL_SSL"
SECURITY_PROTOCOLS = (PLAINTEXT, SASL_PLAINTEXT, SSL, SASL_SSL)
PLAIN, SCRAM_SHA_256, SCRAM_SHA_512 = "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"
SASL_MECHANISMS = (PLAIN, SCRAM_SHA_256, SCRAM_SHA_512)
USERS_ENV = "KDR_BROKER_USERS"
SCRAM_ITERATIONS = 4096  # Kafka's minimum for both SCRAM mechanisms
SASL_MAX_RECEIVE_BYTES = 524288  # sasl.server.max.receive.size
TLS_HANDSHAKE_TIMEOUT = 10.0

API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE = 18, 17, 36
UNSUPPORTED_SASL_MECHANISM, ILLEGAL_SASL_STATE, SASL_AUTHENTICATION_FAILED = 33, 34, 58

CA_CERT, CA_KEY, SERVER_CERT, SERVER_KEY = "ca.pem", "ca-key.pem", "server.pem", "server-key.pem"

_HASHES: dict[str, Callable[..., Any]] = {SCRAM_SHA_256: hashlib.sha256, SCRAM_SHA_512: hashlib.sha512}


class SecurityError(ValueError):
    """Unusable security settings or credentials: one line naming the flag, file or variable, never a secret."""


# --- credentials -----------------------------------------------------------------------------------------------


def read_users(
    path: Path | None, env_var: str, missing: str, environ: Mapping[str, str] | None = None
) -> tuple[Any, str]:
    """The parsed JSON of the users file at `path`, else of $`env_var` (`missing` when it is unset), and the name of
    where it came from; shared by the brokers' and the registries' users. Errors never quote a value."""
    if path is not None:
        source = str(path)
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError as exc:
            raise SecurityError(f"users file {source}: cannot read it: {exc.strerror or exc}") from None
    else:
        source = f"${env_var}"
        text = (environ if environ is not None else os.environ).get(env_var, "")
        if not text.strip():
            raise SecurityError(missing)
    try:
        return json.loads(text), source
    except json.JSONDecodeError as exc:
        raise SecurityError(f"users {source}: not JSON ({exc.msg} at line {exc.lineno} column {exc.colno})") from None


def load_users(path: Path | None, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """{user: password} from the JSON file at `path`, else from $KDR_BROKER_USERS; errors never quote values."""
    missing = f'no SASL users: give a users file or set {USERS_ENV} to JSON {{"user": "password"}}'
    users, source = read_users(path, USERS_ENV, missing, environ)
    if not isinstance(users, dict) or not users:
        raise SecurityError(f'users {source}: must be a non-empty JSON object {{"user": "password", ...}}')
    for user, password in users.items():
        if not user or "\0" in user:
            raise SecurityError(f"users {source}: a user name is empty or holds a NUL character")
        if not isinstance(password, str) or not password or "\0" in password:
            raise SecurityError(f"users {source}: the password of user {user!r} must be a non-empty string without NUL")
    return users


@dataclass(frozen=True, repr=False)
class ScramCredential:
    """What Kafka stores for a SCRAM user (RFC 5802 section 3): enough to verify a proof, not to recover the
    password."""

    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    def __repr__(self) -> str:
        return f"ScramCredential(iterations={self.iterations})"


def _hmac(mechanism: str, key: bytes, message: bytes) -> bytes:
    return hmac.new(key, message, _HASHES[mechanism]).digest()


def _client_and_server_keys(mechanism: str, password: str, salt: bytes, iterations: int) -> tuple[bytes, bytes]:
    salted = hashlib.pbkdf2_hmac(_HASHES[mechanism]().name, password.encode(), salt, iterations)
    return _hmac(mechanism, salted, b"Client Key"), _hmac(mechanism, salted, b"Server Key")


def scram_credential(
    mechanism: str, password: str, salt: bytes | None = None, iterations: int = SCRAM_ITERATIONS
) -> ScramCredential:
    salt = secrets.token_bytes(32) if salt is None else salt
    client_key, server_key = _client_and_server_keys(mechanism, password, salt, iterations)
    return ScramCredential(salt, _HASHES[mechanism](client_key).digest(), server_key, iterations)


class Credentials:
    """Every user's SCRAM credentials for both hashes; the clear passwords are not kept."""

    def __init__(self, users: Mapping[str, str]) -> None:
        self._scram = {m: {user: scram_credential(m, pw) for user, pw in users.items()} for m in _HASHES}

    def __repr__(self) -> str:
        return f"Credentials({len(self._scram[SCRAM_SHA_256])} users)"

    def users(self) -> list[str]:
        return sorted(self._scram[SCRAM_SHA_256])

    def scram(self, mechanism: str, user: str) -> ScramCredential | None:
        return self._scram[mechanism].get(user)

    def check_password(self, user: str, password: str) -> bool:
        """PLAIN: the password derives the user's stored SCRAM-SHA-512 key (constant-time comparison)."""
        credential = self._scram[SCRAM_SHA_512].get(user)
        if credential is None:
            return False
        client_key, _ = _client_and_server_keys(SCRAM_SHA_512, password, credential.salt, credential.iterations)
        return hmac.compare_digest(hashlib.sha512(client_key).digest(), credential.stored_key)


# --- SASL mechanisms -----------------------------------------------------------------------------------------


class AuthenticationFailed(Exception):
    """A SASL exchange that failed: `client_message` is what Kafka tells the client, `reason` what the broker
    logs (neither holds a secret)."""

    def __init__(self, client_message: str, reason: str) -> None:
        super().__init__(reason)
        self.client_message = client_message
        self.reason = reason


def _invalid_credentials(mechanism: str, reason: str) -> AuthenticationFailed:
    """Kafka's answer to a SaslException: the same text whatever went wrong, so it tells an attacker nothing."""
    message = f"Authentication failed during authentication due to invalid credentials with SASL mechanism {mechanism}"
    return AuthenticationFailed(message, reason)


class PlainServer:
    """SASL/PLAIN (RFC 4616): one token `[authzid] NUL authcid NUL passwd`, answered with an empty token."""

    mechanism = PLAIN

    def __init__(self, credentials: Credentials) -> None:
        self.credentials = credentials
        self.complete = False
        self.principal: str | None = None

    def evaluate(self, token: bytes) -> bytes:
        try:
            parts = token.decode("utf-8").split("\0")
        except UnicodeDecodeError:
            raise _invalid_credentials(PLAIN, "the PLAIN token is not UTF-8") from None
        if len(parts) != 3:
            raise _invalid_credentials(PLAIN, f"invalid PLAIN token: expected 3 parts, got {len(parts)}")
        authzid, user, password = parts
        if not user or not password:
            raise _invalid_credentials(PLAIN, "the PLAIN token has no user name or no password")
        if not self.credentials.check_password(user, password):
            known = f"user {user!r}" if self.credentials.scram(SCRAM_SHA_512, user) else "an unknown user"
            raise AuthenticationFailed(
                "Authentication failed: Invalid username or password", f"wrong password or unknown user ({known})"
            )
        if authzid and authzid != user:
            raise AuthenticationFailed(
                "Authentication failed: Client requested an authorization id that is different from username",
                f"user {user!r} asked for another authorization id",
            )
        self.complete, self.principal = True, user
        return b""


def _scram_attributes(message: str) -> list[tuple[str, str]]:
    """`a=1,b=2` as [(a, "1"), (b, "2")]; a part without `=` is malformed."""
    out = []
    for part in message.split(","):
        key, sep, value = part.partition("=")
        if not sep or len(key) != 1:
            raise ValueError(f"malformed attribute {key[:1]!r}")
        out.append((key, value))
    return out


def _scram_name(saslname: str) -> str:
    """RFC 5802 section 5.1: ',' and '=' travel as '=2C' and '=3D'; any other '=' is malformed."""
    if "=" in saslname.replace("=2C", "").replace("=3D", ""):
        raise ValueError("malformed user name escape")
    return saslname.replace("=2C", ",").replace("=3D", "=")


def _nonce() -> str:
    """A printable server nonce (RFC 5802: any printable ASCII but ',')."""
    return secrets.token_urlsafe(24)


class ScramServer:
    """SCRAM-SHA-256/512 (RFC 5802, 7677) without channel binding, as Kafka's ScramSaslServer:
    client-first -> server-first (nonce, salt, iterations); client-final (proof) -> server-final (v=)."""

    def __init__(self, mechanism: str, credentials: Credentials, nonce: Callable[[], str] = _nonce) -> None:
        self.mechanism = mechanism
        self.credentials = credentials
        self._nonce = nonce
        self.complete = False
        self.principal: str | None = None
        self._state: tuple[str, str, str, str, ScramCredential] | None = None  # gs2, first-bare, server-first, nonce

    def evaluate(self, token: bytes) -> bytes:
        try:
            message = token.decode("utf-8")
        except UnicodeDecodeError:
            raise _invalid_credentials(self.mechanism, "a SCRAM message is not UTF-8") from None
        if self._state is None:
            return self._client_first(message)
        return self._client_final(message)

    def _client_first(self, message: str) -> bytes:
        # gs2-header: "n,," or "y,," (no channel binding), optionally "n,a=authzid,".
        flag, _, rest = message.partition(",")
        authzid_part, _, bare = rest.partition(",")
        if flag not in ("n", "y"):
            raise _invalid_credentials(self.mechanism, "the client asked for channel binding, which is not offered")
        try:
            authzid = _scram_name(authzid_part[2:]) if authzid_part.startswith("a=") else ""
            if authzid_part and not authzid_part.startswith("a="):
                raise ValueError("malformed gs2 header")
            attributes = _scram_attributes(bare)
            if len(attributes) < 2 or attributes[0][0] != "n" or attributes[1][0] != "r" or not attributes[1][1]:
                raise ValueError("client-first-message must start with n=USER,r=NONCE")
            user, client_nonce = _scram_name(attributes[0][1]), attributes[1][1]
        except ValueError as exc:
            raise _invalid_credentials(self.mechanism, f"invalid client-first-message: {exc}") from None
        credential = self.credentials.scram(self.mechanism, user)
        if credential is None:
            raise _invalid_credentials(self.mechanism, "unknown user")
        if authzid and authzid != user:
            raise AuthenticationFailed(
                "Authentication failed: Client requested an authorization id that is different from username",
                f"user {user!r} asked for another authorization id",
            )
        nonce = client_nonce + self._nonce()
        salt = base64.b64encode(credential.salt).decode()
        server_first = f"r={nonce},s={salt},i={credential.iterations}"
        self._state = (f"{flag},{authzid_part},", bare, server_first, nonce, credential)
        self.principal = user
        return server_first.encode()

    def _client_final(self, message: str) -> bytes:
        assert self._state is not None
        gs2_header, first_bare, server_first, nonce, credential = self._state
        user = self.principal
        without_proof, sep, proof_b64 = message.rpartition(",p=")
        try:
            if not sep:
                raise ValueError("no proof")
            attributes = _scram_attributes(without_proof)
            if len(attributes) < 2 or attributes[0][0] != "c" or attributes[1][0] != "r":
                raise ValueError("client-final-message must start with c=...,r=...")
            binding, final_nonce = attributes[0][1], attributes[1][1]
            proof = base64.b64decode(proof_b64, validate=True)
            if base64.b64decode(binding, validate=True) != gs2_header.encode():
                raise ValueError("channel binding differs from the gs2 header")
        except ValueError as exc:  # binascii.Error is a ValueError
            reason = f"invalid client-final-message of user {user!r}: {exc}"
            raise _invalid_credentials(self.mechanism, reason) from None
        if final_nonce != nonce:
            raise _invalid_credentials(self.mechanism, f"user {user!r} sent another nonce in its final message")
        auth_message = f"{first_bare},{server_first},{without_proof}".encode()
        client_signature = _hmac(self.mechanism, credential.stored_key, auth_message)
        if len(proof) != len(client_signature):
            raise _invalid_credentials(self.mechanism, f"invalid proof length from user {user!r}")
        client_key = bytes(a ^ b for a, b in zip(proof, client_signature, strict=True))
        if not hmac.compare_digest(_HASHES[self.mechanism](client_key).digest(), credential.stored_key):
            raise _invalid_credentials(self.mechanism, f"wrong password for user {user!r}")
        self.complete = True
        signature = base64.b64encode(_hmac(self.mechanism, credential.server_key, auth_message)).decode()
        return f"v={signature}".encode()


def sasl_server(mechanism: str, credentials: Credentials) -> PlainServer | ScramServer:
    return PlainServer(credentials) if mechanism == PLAIN else ScramServer(mechanism, credentials)


# --- one connection's authentication state --------------------------------------------------------------------


class SaslState(enum.Enum):
    """Kafka's SaslServerAuthenticator states, the ones this broker needs."""

    HANDSHAKE_OR_VERSIONS = "handshake or versions"
    HANDSHAKE = "handshake"
    AUTHENTICATE = "authenticate"
    COMPLETE = "complete"
    FAILED = "failed"


class Refused(Exception):
    """A request this connection may not send now: Kafka closes the connection without an answer."""


class ConnectionAuth:
    """Authentication state of one connection; a connection to a listener without SASL starts COMPLETE."""

    def __init__(self, security: BrokerSecurity, peer: str) -> None:
        self.security = security
        self.peer = peer
        self.state = SaslState.HANDSHAKE_OR_VERSIONS if security.sasl else SaslState.COMPLETE
        self.raw_tokens = False  # after SaslHandshake v0: tokens come as bare size-prefixed frames
        self.closing: str | None = None  # set: answer the current request, then close, logging this
        self.principal: str | None = None
        self._server: PlainServer | ScramServer | None = None

    @property
    def authenticated(self) -> bool:
        return self.state is SaslState.COMPLETE

    @property
    def max_frame_bytes(self) -> int | None:
        """The largest frame allowed now; None: the broker's own socket.request.max.bytes."""
        return None if self.authenticated else SASL_MAX_RECEIVE_BYTES

    def admit(self, api_key: int, api_name: str) -> None:
        """Raise Refused for a request the connection may not send in its state."""
        allowed = {
            SaslState.HANDSHAKE_OR_VERSIONS: (API_VERSIONS, SASL_HANDSHAKE),
            SaslState.HANDSHAKE: (SASL_HANDSHAKE,),
            SaslState.AUTHENTICATE: (SASL_AUTHENTICATE,),
        }
        if self.state is SaslState.COMPLETE or api_key in allowed.get(self.state, ()):
            return
        state, self.state = self.state, SaslState.FAILED
        raise Refused(f"{api_name} request before SASL authentication (state: {state.value}); disconnected")

    def answered(self, api_key: int) -> None:
        """A request was answered: one ApiVersions is allowed before the handshake, as in Kafka."""
        if api_key == API_VERSIONS and self.state is SaslState.HANDSHAKE_OR_VERSIONS:
            self.state = SaslState.HANDSHAKE

    def handshake(self, mechanism: str, version: int) -> tuple[int, list[str]]:
        """SaslHandshake: (error code, enabled mechanisms)."""
        enabled = list(self.security.mechanisms)
        if self.state is SaslState.COMPLETE:
            return ILLEGAL_SASL_STATE, enabled  # no SASL on this listener, or already authenticated
        if mechanism not in enabled:
            self.state = SaslState.FAILED
            self.closing = f"SASL mechanism {mechanism[:40]!r} is not enabled (enabled: {', '.join(enabled)})"
            return UNSUPPORTED_SASL_MECHANISM, enabled
        self._server = sasl_server(mechanism, self.security.credentials)
        self.raw_tokens = version == 0
        self.state = SaslState.AUTHENTICATE
        return 0, enabled

    def authenticate(self, token: bytes) -> tuple[int, str | None, bytes]:
        """SaslAuthenticate: (error code, error message, server token)."""
        if self.state is SaslState.COMPLETE:
            return ILLEGAL_SASL_STATE, "SaslAuthenticate request received after successful authentication", b""
        try:
            return 0, None, self._evaluate(token)
        except AuthenticationFailed as exc:
            return SASL_AUTHENTICATION_FAILED, exc.client_message, b""

    def raw_token(self, token: bytes) -> bytes | None:
        """A token after SaslHandshake v0: the server token to send back framed, None when it failed (Kafka then
        closes the connection: the legacy exchange has no way to carry an error)."""
        try:
            return self._evaluate(token)
        except AuthenticationFailed:
            return None

    def _evaluate(self, token: bytes) -> bytes:
        assert self._server is not None
        try:
            answer = self._server.evaluate(token)
        except AuthenticationFailed as exc:
            self.state = SaslState.FAILED
            self.closing = f"SASL/{self._server.mechanism} authentication failed: {exc.reason}"
            raise
        if self._server.complete:
            self.state, self.principal, self.raw_tokens = SaslState.COMPLETE, self._server.principal, False
            mechanism, protocol = self._server.mechanism, self.security.protocol
            log.debug("%s authenticated as %r (%s, %s)", self.peer, self.principal, protocol, mechanism)
        return answer


# --- the broker's settings -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class BrokerSecurity:
    """The listener's security protocol, its SASL mechanisms and credentials, and its TLS context."""

    protocol: str = PLAINTEXT
    mechanisms: tuple[str, ...] = ()
    credentials: Credentials | None = None
    ssl_context: ssl.SSLContext | None = None
    ca_file: Path | None = None

    @property
    def sasl(self) -> bool:
        return self.protocol in (SASL_PLAINTEXT, SASL_SSL)

    @property
    def tls(self) -> bool:
        return self.protocol in (SSL, SASL_SSL)

    def connection(self, peer: str) -> ConnectionAuth:
        return ConnectionAuth(self, peer)

    def describe(self) -> str:
        """For the start-up log line."""
        parts = [self.protocol]
        if self.sasl and self.credentials is not None:
            parts.append(f"SASL {', '.join(self.mechanisms)} for {len(self.credentials.users())} users")
        if self.ca_file is not None:
            parts.append(f"CA {self.ca_file}")
        return "; ".join(parts)

    @classmethod
    def from_options(
        cls,
        protocol: str,
        mechanisms: Sequence[str],
        users_file: Path | None,
        tls_dir: Path,
        hosts: Sequence[str],
        environ: Mapping[str, str] | None = None,
    ) -> BrokerSecurity:
        """Check the settings, load the credentials and make or reuse the certificate; SecurityError if unusable."""
        protocol = protocol.upper()
        if protocol not in SECURITY_PROTOCOLS:
            raise SecurityError(f"security protocol {protocol!r} is not one of {', '.join(SECURITY_PROTOCOLS)}")
        mechanisms = tuple(dict.fromkeys(m.strip().upper() for m in mechanisms if m.strip()))
        for mechanism in mechanisms:
            if mechanism not in SASL_MECHANISMS:
                raise SecurityError(f"SASL mechanism {mechanism!r} is not one of {', '.join(SASL_MECHANISMS)}")
        sasl = protocol in (SASL_PLAINTEXT, SASL_SSL)
        if sasl and not mechanisms:
            raise SecurityError(f"{protocol} needs at least one SASL mechanism")
        if not sasl and users_file is not None:
            raise SecurityError(f"a users file needs SASL_PLAINTEXT or SASL_SSL, not {protocol}")
        credentials = Credentials(load_users(users_file, environ)) if sasl else None
        context = ca_file = None
        if protocol in (SSL, SASL_SSL):
            files = ensure_certificates(tls_dir, hosts)
            context, ca_file = server_ssl_context(files), files.ca
        return cls(protocol, mechanisms if sasl else (), credentials, context, ca_file)


# --- TLS -----------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TlsFiles:
    """The PEM files of a TLS directory: the CA clients trust (ssl.ca.location) and the server's pair."""

    directory: Path

    @property
    def ca(self) -> Path:
        return self.directory / CA_CERT

    @property
    def ca_key(self) -> Path:
        return self.directory / CA_KEY

    @property
    def cert(self) -> Path:
        return self.directory / SERVER_CERT

    @property
    def key(self) -> Path:
        return self.directory / SERVER_KEY


@contextlib.contextmanager
def _locked(directory: Path) -> Iterator[None]:
    """Two brokers sharing a TLS directory (the local stack's) start together: one generates, the other reuses."""
    with open(directory / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def ensure_certificates(tls_dir: Path, hosts: Sequence[str] = ("127.0.0.1", "localhost")) -> TlsFiles:
    """The CA and a server certificate for `hosts`, generated unless valid ones are already there."""
    files = TlsFiles(Path(tls_dir))
    try:
        files.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as exc:
        raise SecurityError(f"TLS directory {tls_dir}: cannot create it: {exc.strerror or exc}") from None
    names = sorted({*hosts, "127.0.0.1", "localhost"})
    with _locked(files.directory):
        if _usable(files, names):
            log.info("reusing the TLS certificate in %s", files.directory)
        else:
            _generate(files, names)
            log.info("generated a CA and a TLS certificate for %s in %s", ", ".join(names), files.directory)
    return files


def _san(names: Sequence[str]) -> list[Any]:
    from cryptography import x509

    out: list[Any] = []
    for name in names:
        try:
            out.append(x509.IPAddress(ipaddress.ip_address(name)))
        except ValueError:
            out.append(x509.DNSName(name))
    return out


def _usable(files: TlsFiles, names: Sequence[str]) -> bool:
    """Every file there, the server certificate issued by the CA, covering `names`, and valid for a day more."""
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization

    try:
        ca = x509.load_pem_x509_certificate(files.ca.read_bytes())
        cert = x509.load_pem_x509_certificate(files.cert.read_bytes())
        key = serialization.load_pem_private_key(files.key.read_bytes(), password=None)
        serialization.load_pem_private_key(files.ca_key.read_bytes(), password=None)
        cert.verify_directly_issued_by(ca)
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except Exception:  # noqa: BLE001 - missing, unreadable, foreign or tampered: generate anew
        return False
    soon = datetime.datetime.now(datetime.UTC) + datetime.timedelta(days=1)
    return (
        key.public_key() == cert.public_key()
        and all(entry in list(san) for entry in _san(names))
        and min(ca.not_valid_after_utc, cert.not_valid_after_utc) > soon
    )


def _generate(files: TlsFiles, names: Sequence[str]) -> None:
    from cryptography.hazmat.primitives.asymmetric import ec

    now = datetime.datetime.now(datetime.UTC) - datetime.timedelta(minutes=5)  # a little clock skew is fine
    validity = (now, now + datetime.timedelta(days=825))
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = _ca_certificate(ca_key, validity)
    key = ec.generate_private_key(ec.SECP256R1())
    cert = _server_certificate(key, names, ca, ca_key, validity)
    # Keys first, so a reader never finds a certificate whose key is not there yet.
    _write(files.ca_key, _private_pem(ca_key), 0o600)
    _write(files.key, _private_pem(key), 0o600)
    _write(files.ca, _public_pem(ca), 0o644)
    _write(files.cert, _public_pem(cert), 0o644)


def _ca_certificate(ca_key: ec.EllipticCurvePrivateKey, validity: Validity) -> x509.Certificate:
    """A self-signed CA that may sign server certificates only (path length 0), with a random name of its own."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes
    from cryptography.x509.oid import NameOID

    ca_name = x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "kafka-dr"),
            x509.NameAttribute(NameOID.COMMON_NAME, f"kafka-dr-dev local CA {secrets.token_hex(4)}"),
        ]
    )
    return (
        _certificate_builder(ca_name, ca_name, ca_key.public_key(), validity)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(_key_usage(key_encipherment=False, cert_sign=True), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )


def _server_certificate(
    key: ec.EllipticCurvePrivateKey,
    names: Sequence[str],
    ca: x509.Certificate,
    ca_key: ec.EllipticCurvePrivateKey,
    validity: Validity,
) -> x509.Certificate:
    """The server's certificate for `names` (subjectAltName), issued by `ca`."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    ca_ski = ca.extensions.get_extension_for_class(x509.SubjectKeyIdentifier).value
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    return (
        _certificate_builder(subject, ca.subject, key.public_key(), validity)
        .add_extension(x509.SubjectAlternativeName(_san(names)), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(_key_usage(key_encipherment=True, cert_sign=False), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ca_ski), critical=False)
        .sign(ca_key, hashes.SHA256())
    )


def _certificate_builder(
    subject: x509.Name, issuer: x509.Name, public_key: ec.EllipticCurvePublicKey, validity: Validity
) -> x509.CertificateBuilder:
    from cryptography import x509

    not_before, not_after = validity
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(public_key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(not_before)
        .not_valid_after(not_after)
    )


def _key_usage(*, key_encipherment: bool, cert_sign: bool) -> x509.KeyUsage:
    """What a key may do: the CA's signs certificates and CRLs, the server's signs its TLS handshakes."""
    from cryptography import x509

    return x509.KeyUsage(
        digital_signature=True,
        content_commitment=False,
        key_encipherment=key_encipherment,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=cert_sign,
        crl_sign=cert_sign,
        encipher_only=False,
        decipher_only=False,
    )


def _private_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    from cryptography.hazmat.primitives import serialization

    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def _public_pem(cert: x509.Certificate) -> bytes:
    from cryptography.hazmat.primitives import serialization

    return cert.public_bytes(serialization.Encoding.PEM)


def _write(path: Path, data: bytes, mode: int) -> None:
    """Created with `mode` from the start (a key is never readable by others, even for a moment), then renamed."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.unlink(missing_ok=True)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    with os.fdopen(fd, "wb") as out:
        out.write(data)
    os.chmod(tmp, mode)  # the umask may have narrowed it
    os.replace(tmp, path)


def server_ssl_context(files: TlsFiles) -> ssl.SSLContext:
    """TLS 1.2+ with the generated certificate; clients are not asked for one (no ssl.client.auth)."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(files.cert, files.key)
    return context
