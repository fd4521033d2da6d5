"""The Confluent Schema Registry REST API over the store, the state and the election.

Reads are answered by any instance from its state. Writes are executed by the leader only: a
follower forwards them to the leader and relays its answer, like Confluent does; with no known
leader it refuses them (HTTP 500, error_code 50004). Every failure is answered in Confluent's
``{"error_code", "message"}`` form; a bad request never takes the server down.

With Basic authentication on (``auth``), every request needs valid credentials, checked before anything else;
a forwarded write carries the caller's ``Authorization`` header, so the leader checks the caller, not the follower.
"""

from __future__ import annotations

import json
import logging
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, TypeVar
from urllib.parse import parse_qs, unquote, urlsplit

import httpx

from . import errors
from .auth import BasicAuthenticator
from .compat import check
from .election import LeaderElector
from .errors import RegistryError
from .schema_log import LATEST, RegistryState, SchemaRecord, parse_version
from .schemas import SCHEMA_TYPES, ParsedSchema, Reference, normalize_type, parse, parse_references
from .store import KafkaStore

log = logging.getLogger(__name__)

CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"
FORWARDED_HEADER = "X-KDR-Forwarded-By"
FORWARD_TIMEOUT_S = 30.0
T = TypeVar("T")


@dataclass
class Request:
    method: str
    target: str  # path and query, as received (percent-encoded)
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict, repr=False)  # lower-case names; may hold credentials
    peer: str = ""  # the client's address, for the log

    @property
    def path(self) -> str:
        path = urlsplit(self.target).path.rstrip("/")
        return path or "/"

    def arg(self, name: str, default: str = "") -> str:
        values = parse_qs(urlsplit(self.target).query, keep_blank_values=True).get(name)
        return values[-1] if values else default

    def flag(self, name: str) -> bool:
        """A boolean query parameter; the Python client sends ``True``/``False``."""
        return self.arg(name).lower() == "true"

    def json(self) -> dict[str, Any]:
        try:
            body = json.loads(self.body or b"null")
        except ValueError as exc:
            raise errors.bad_request(f"Request body is not valid JSON: {exc}") from None
        if not isinstance(body, dict):
            raise errors.bad_request("Request body must be a JSON object")
        return body


@dataclass
class Response:
    status: int
    body: bytes
    content_type: str = CONTENT_TYPE
    headers: dict[str, str] = field(default_factory=dict)  # besides Content-Type and Content-Length


def _json_response(status: int, document: Any) -> Response:
    return Response(status, json.dumps(document, ensure_ascii=False).encode())


@dataclass(frozen=True)
class Route:
    method: str
    pattern: re.Pattern[str]
    handler: str  # name of the RegistryApi method
    write: str | None = None  # the write it performs, named as in Confluent's forwarding errors


_SEG = "([^/]+)"
_ID = r"(\d+)"
ROUTES = [
    Route("GET", re.compile("/"), "root"),
    Route("GET", re.compile("/subjects"), "list_subjects"),
    Route("POST", re.compile(f"/subjects/{_SEG}"), "lookup"),
    Route("DELETE", re.compile(f"/subjects/{_SEG}"), "delete_subject", "delete subject"),
    Route("GET", re.compile(f"/subjects/{_SEG}/versions"), "list_versions"),
    Route("POST", re.compile(f"/subjects/{_SEG}/versions"), "register", "register schema"),
    Route("GET", re.compile(f"/subjects/{_SEG}/versions/{_SEG}"), "get_version"),
    Route("DELETE", re.compile(f"/subjects/{_SEG}/versions/{_SEG}"), "delete_version", "delete schema version"),
    Route("GET", re.compile(f"/subjects/{_SEG}/versions/{_SEG}/schema"), "get_version_schema"),
    Route("GET", re.compile(f"/subjects/{_SEG}/versions/{_SEG}/referencedby"), "referenced_by"),
    Route("GET", re.compile("/schemas"), "list_schemas"),
    Route("GET", re.compile("/schemas/types"), "schema_types"),
    Route("GET", re.compile(f"/schemas/ids/{_ID}"), "get_schema"),
    Route("GET", re.compile(f"/schemas/ids/{_ID}/schema"), "get_schema_text"),
    Route("GET", re.compile(f"/schemas/ids/{_ID}/subjects"), "schema_subjects"),
    Route("GET", re.compile(f"/schemas/ids/{_ID}/versions"), "schema_versions"),
    Route("GET", re.compile("/config"), "get_config"),
    Route("PUT", re.compile("/config"), "put_config", "update config"),
    Route("DELETE", re.compile("/config"), "delete_config", "delete config"),
    Route("GET", re.compile(f"/config/{_SEG}"), "get_config"),
    Route("PUT", re.compile(f"/config/{_SEG}"), "put_config", "update config"),
    Route("DELETE", re.compile(f"/config/{_SEG}"), "delete_config", "delete config"),
    Route("POST", re.compile(f"/compatibility/subjects/{_SEG}/versions/{_SEG}"), "test_compatibility"),
    Route("POST", re.compile(f"/compatibility/subjects/{_SEG}/versions"), "test_compatibility_all"),
    Route("GET", re.compile("/mode"), "get_mode"),
    Route("PUT", re.compile("/mode"), "put_mode", "update mode"),
    Route("GET", re.compile(f"/mode/{_SEG}"), "get_mode"),
    Route("PUT", re.compile(f"/mode/{_SEG}"), "put_mode", "update mode"),
    Route("DELETE", re.compile(f"/mode/{_SEG}"), "delete_mode", "delete mode"),
    Route("GET", re.compile("/contexts"), "contexts"),
    Route("GET", re.compile("/v1/metadata/id"), "metadata_id"),
    Route("GET", re.compile("/kdr/leader"), "leader_status"),
]


_NO_STATE = frozenset({"root", "schema_types", "contexts", "metadata_id", "leader_status"})  # answer even while loading


class RegistryApi:
    """Maps requests to state reads and leader writes; transport-free so tests can call it. With an
    `authenticator`, a request without valid Basic credentials gets Confluent's 401 and nothing else happens."""

    def __init__(
        self,
        url: str,
        state: RegistryState,
        store: KafkaStore,
        elector: LeaderElector,
        authenticator: BasicAuthenticator | None = None,
    ) -> None:
        self.url = url
        self.state = state
        self.store = store
        self.elector = elector
        self.authenticator = authenticator
        self._write_lock = threading.Lock()
        self._http = httpx.Client(timeout=FORWARD_TIMEOUT_S)

    def close(self) -> None:
        self._http.close()

    # ---- dispatch ---------------------------------------------------------------------------

    def dispatch(self, request: Request) -> Response:
        if self.authenticator is not None:
            user = self.authenticator.authenticate(request.headers.get("authorization"), request.peer)
            if user is None:
                return self._unauthorized()
        try:
            return self._dispatch(request)
        except RegistryError as exc:
            return _json_response(exc.status, exc.body())
        except Exception:
            log.exception("unexpected error serving %s %s", request.method, request.target)
            return _json_response(500, {"error_code": 500, "message": "Internal Server Error"})

    def _dispatch(self, request: Request) -> Response:
        path = request.path
        path_matched = False
        for route in ROUTES:
            match = route.pattern.fullmatch(path)
            if match is None:
                continue
            path_matched = True
            if route.method != request.method:
                continue
            args = [unquote(group) for group in match.groups()]
            if route.write and not self.elector.is_leader():
                return self._forward(request, route.write)
            if not route.write and route.handler not in _NO_STATE:
                self.store.wait_loaded()
            result = getattr(self, route.handler)(request, *args)
            return result if isinstance(result, Response) else _json_response(200, result)
        if path_matched:
            return _json_response(405, {"error_code": 405, "message": "HTTP 405 Method Not Allowed"})
        return _json_response(404, {"error_code": 404, "message": "HTTP 404 Not Found"})

    def _unauthorized(self) -> Response:
        """Confluent's answer to missing or wrong credentials, with the challenge a browser or client expects."""
        assert self.authenticator is not None
        response = _json_response(401, {"error_code": 401, "message": "Unauthorized"})
        response.headers["WWW-Authenticate"] = self.authenticator.challenge
        return response

    def _forward(self, request: Request, write: str) -> Response:
        if request.headers.get(FORWARDED_HEADER.lower()):
            raise errors.forwarding_failed(
                f"Error while forwarding {write} request to the leader: {self.url} is not the leader"
            )
        leader = self.elector.leader()
        if leader is None:
            reason = f"; {self.store.last_error}" if self.store.last_error else ""
            raise errors.unknown_leader(
                "Leader not known: no leader-eligible schema registry is alive on kafkastore "
                f"{self.store.bootstrap}{reason}"
            )
        headers = {
            "Content-Type": request.headers.get("content-type", CONTENT_TYPE),
            "Accept": CONTENT_TYPE,
            FORWARDED_HEADER: self.url,
        }
        if "authorization" in request.headers:  # the caller's credentials, as Confluent forwards them
            headers["Authorization"] = request.headers["authorization"]
        try:
            answer = self._http.request(
                request.method, leader.url + request.target, content=request.body, headers=headers
            )
        except httpx.HTTPError as exc:
            raise errors.forwarding_failed(
                f"Error while forwarding {write} request to the leader {leader.url}: {exc or type(exc).__name__}"
            ) from None
        relayed = (
            {"WWW-Authenticate": answer.headers["www-authenticate"]} if "www-authenticate" in answer.headers else {}
        )
        return Response(answer.status_code, answer.content, answer.headers.get("content-type", CONTENT_TYPE), relayed)

    def _write(self, plan: Callable[[], tuple[T, list[Any]]]) -> T:
        """Decide on the latest state and append the decision, one write at a time."""
        with self._write_lock:
            self.store.sync()
            result, records = plan()
            self.store.write(records)
            return result

    def _candidate(self, body: dict[str, Any]) -> tuple[ParsedSchema, tuple[Reference, ...]]:
        schema_type = normalize_type(body.get("schemaType"))
        refs = parse_references(body.get("references"))
        return parse(schema_type, body.get("schema"), self.state.resolve_references(refs)), refs

    # ---- subjects and versions --------------------------------------------------------------

    def root(self, request: Request) -> Any:
        return {}

    def list_subjects(self, request: Request) -> Any:
        return self.state.subjects(request.flag("deleted"), request.arg("subjectPrefix"))

    def list_versions(self, request: Request, subject: str) -> Any:
        return [r.version for r in self.state.versions(subject, request.flag("deleted"))]

    def _version(self, request: Request, subject: str, version: str) -> SchemaRecord:
        return self.state.get_version(subject, parse_version(version), request.flag("deleted"))

    def get_version(self, request: Request, subject: str, version: str) -> Any:
        return self._version(request, subject, version).to_response()

    def get_version_schema(self, request: Request, subject: str, version: str) -> Response:
        return Response(200, self._version(request, subject, version).schema.encode())

    def referenced_by(self, request: Request, subject: str, version: str) -> Any:
        return self.state.referenced_by(subject, self._version(request, subject, version).version)

    def lookup(self, request: Request, subject: str) -> Any:
        candidate, refs = self._candidate(request.json())
        return self.state.lookup(subject, candidate, refs, request.flag("deleted")).to_response()

    def register(self, request: Request, subject: str) -> Any:
        body = request.json()
        schema_id, version = body.get("id"), body.get("version")
        if schema_id is not None and (not isinstance(schema_id, int) or schema_id < 1):
            schema_id = None  # Confluent clients send -1/0 for "no id"
        if version is not None:
            version = parse_version(str(version))
            version = None if version == LATEST else version

        def plan() -> tuple[SchemaRecord, list[Any]]:
            candidate, refs = self._candidate(body)
            return self.state.plan_register(subject, candidate, refs, schema_id, version)

        return {"id": self._write(plan).id}

    def delete_subject(self, request: Request, subject: str) -> Any:
        return self._write(lambda: self.state.plan_delete_subject(subject, request.flag("permanent")))

    def delete_version(self, request: Request, subject: str, version: str) -> Any:
        number = parse_version(version)
        return self._write(lambda: self.state.plan_delete_version(subject, number, request.flag("permanent")))

    # ---- schemas by id ----------------------------------------------------------------------

    def list_schemas(self, request: Request) -> Any:
        deleted, latest_only = request.flag("deleted"), request.flag("latestOnly")
        answer = []
        for subject in self.state.subjects(deleted, request.arg("subjectPrefix")):
            records = self.state.versions(subject, deleted)
            answer += [r.to_response() for r in (records[-1:] if latest_only else records)]
        return answer

    def schema_types(self, request: Request) -> Any:
        return list(SCHEMA_TYPES)

    def get_schema(self, request: Request, schema_id: str) -> Any:
        body = self.state.schema_by_id(int(schema_id)).to_response()
        return {k: v for k, v in body.items() if k in ("schemaType", "references", "schema")}

    def get_schema_text(self, request: Request, schema_id: str) -> Response:
        return Response(200, self.state.schema_by_id(int(schema_id)).schema.encode())

    def _usages(self, request: Request, schema_id: str) -> list[SchemaRecord]:
        wanted = request.arg("subject")
        usages = self.state.usages_of_id(int(schema_id), request.flag("deleted"))
        return [r for r in usages if not wanted or r.subject == wanted]

    def schema_subjects(self, request: Request, schema_id: str) -> Any:
        return sorted({r.subject for r in self._usages(request, schema_id)})

    def schema_versions(self, request: Request, schema_id: str) -> Any:
        return [{"subject": r.subject, "version": r.version} for r in self._usages(request, schema_id)]

    # ---- config and mode --------------------------------------------------------------------

    def get_config(self, request: Request, subject: str | None = None) -> Any:
        if subject is None:
            return {"compatibilityLevel": self.state.compatibility(None)}
        level = self.state.config(subject)
        if level is None and request.flag("defaultToGlobal"):
            level = self.state.compatibility(None)
        if level is None:
            raise RegistryError(
                404,
                errors.SUBJECT_COMPATIBILITY_NOT_CONFIGURED,
                f"Subject '{subject}' does not have subject-level compatibility configured",
            )
        return {"compatibilityLevel": level}

    def put_config(self, request: Request, subject: str | None = None) -> Any:
        body = request.json()
        level = body.get("compatibility", body.get("compatibilityLevel"))
        return {"compatibility": self._write(lambda: self.state.plan_config(subject, level))}

    def delete_config(self, request: Request, subject: str | None = None) -> Any:
        return {"compatibilityLevel": self._write(lambda: self.state.plan_delete_config(subject))}

    def get_mode(self, request: Request, subject: str | None = None) -> Any:
        if subject is None:
            return {"mode": self.state.mode(None)}
        mode = self.state.mode_setting(subject)
        if mode is None and request.flag("defaultToGlobal"):
            mode = self.state.mode(None)
        if mode is None:
            raise RegistryError(
                404,
                errors.SUBJECT_MODE_NOT_CONFIGURED,
                f"Subject '{subject}' does not have subject-level mode configured",
            )
        return {"mode": mode}

    def put_mode(self, request: Request, subject: str | None = None) -> Any:
        mode = request.json().get("mode")
        return {"mode": self._write(lambda: self.state.plan_mode(subject, mode, request.flag("force")))}

    def delete_mode(self, request: Request, subject: str) -> Any:
        return {"mode": self._write(lambda: self.state.plan_delete_mode(subject))}

    # ---- compatibility ----------------------------------------------------------------------

    def _compat_answer(self, request: Request, problems: list[str]) -> Any:
        answer: dict[str, Any] = {"is_compatible": not problems}
        if request.flag("verbose"):
            answer["messages"] = problems
        return answer

    def test_compatibility(self, request: Request, subject: str, version: str) -> Any:
        candidate, _ = self._candidate(request.json())
        number = parse_version(version)
        if number == LATEST and not self.state.has_subject(subject):
            return self._compat_answer(request, [])
        record = self.state.get_version(subject, number)
        level = self.state.compatibility(subject)
        return self._compat_answer(request, check(level, candidate, [self.state.parsed(record)]))

    def test_compatibility_all(self, request: Request, subject: str) -> Any:
        candidate, _ = self._candidate(request.json())
        live = self.state.versions(subject) if self.state.has_subject(subject) else []
        return self._compat_answer(request, self.state.incompatibilities(subject, candidate, live))

    # ---- misc -------------------------------------------------------------------------------

    def contexts(self, request: Request) -> Any:
        return ["."]

    def metadata_id(self, request: Request) -> Any:
        """Confluent's cluster metadata: the id of the Kafka cluster whose `_schemas` this registry reads (a redirect
        waits for the new one: schema_registry.redirect)."""
        if self.store.cluster_id is None:
            raise errors.store_error(f"kafkastore {self.store.bootstrap} not reached yet")
        clusters = {"kafka-cluster": self.store.cluster_id, "schema-registry-cluster": "schema-registry"}
        return {"scope": {"path": [], "clusters": clusters}}

    def leader_status(self, request: Request) -> Any:
        """Non-standard: who leads, for tests, the stack manager and the failover DAG."""
        leader = self.elector.leader()
        return {
            "leader": leader.url if leader else None,
            "is_leader": self.elector.is_leader(),
            "url": self.url,
            "leader_eligible": self.elector.me.eligible,
            "kafkastore": self.store.bootstrap,
            "store_loaded": self.store.loaded.is_set(),
            "store_error": self.store.last_error,
            "members": [m.url for m in self.elector.members()],
        }


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: RegistryHttpServer

    def _serve(self) -> None:
        length = self.headers.get("Content-Length", "0")
        if self.headers.get("Transfer-Encoding") or not length.isdigit():
            self.close_connection = True  # the body cannot be delimited: do not read it
            message = "A request body needs a valid Content-Length header"
            response = _json_response(411, {"error_code": 411, "message": message})
        else:
            body = self.rfile.read(int(length))
            headers = {k.lower(): v for k, v in self.headers.items()}
            peer = f"{self.client_address[0]}:{self.client_address[1]}"
            response = self.server.api.dispatch(Request(self.command, self.path, body, headers, peer))
        self.send_response(response.status)
        self.send_header("Content-Type", response.content_type)
        self.send_header("Content-Length", str(len(response.body)))
        for name, value in response.headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(response.body)

    do_GET = do_POST = do_PUT = do_DELETE = _serve

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        log.debug("%s %s", self.address_string(), format % args)


class RegistryHttpServer(ThreadingHTTPServer):
    """A threaded HTTP/1.1 server (keep-alive, as the Python client's httpx pool expects)."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, host: str, port: int, api: RegistryApi) -> None:
        self.api = api
        super().__init__((host, port), _Handler)
