"""Settings of the embedded two-datacenter stack: ports and registry settings per DC, security, checked and saved.

Apart from the supervisor (`local.stack`) because the settings are plain data every command agrees on
through DATA_DIR/stack.json, checked in full before any process is touched.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from kafka_dr.processes import write_atomic

from .broker.security import PLAINTEXT, SASL_MECHANISMS, SASL_PLAINTEXT, SASL_SSL, SCRAM_SHA_256, SECURITY_PROTOCOLS

HOST = "127.0.0.1"
APACHE = "apache"  # Apache Kafka from Maven Central (local.apache): the default
EMBEDDED = "embedded"  # kafka-dr's own Python broker (local.broker)
BROKER_KINDS = (APACHE, EMBEDDED)

_DC_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]*")
_CONFIG_VERSION = 1


class StackInputError(ValueError):
    """The request itself is wrong (unknown DC, bad port, bad stack.json); nothing was changed."""


@dataclass(frozen=True)
class DcConfig:
    """Ports and registry settings of one local datacenter."""

    name: str
    broker_port: int
    registry_port: int
    registry_kafkastore: str
    registry_leader_eligible: bool

    @property
    def broker_address(self) -> str:
        return f"{HOST}:{self.broker_port}"

    @property
    def registry_url(self) -> str:
        return f"http://{HOST}:{self.registry_port}"

    def validate(self, where: str, seen_names: set[str], seen_ports: dict[int, str]) -> None:
        """Refuse a bad DC with one line; seen_names and seen_ports (the other DCs' so far) catch one used twice."""
        if not isinstance(self.name, str) or not _DC_NAME_RE.fullmatch(self.name):
            raise StackInputError(f"{where}.name: bad DC name {self.name!r} (letters, digits, '_', '-')")
        if self.name in seen_names:
            raise StackInputError(f"{where}.name: duplicate DC {self.name!r}")
        seen_names.add(self.name)
        self._validate_ports(where, seen_ports)
        if not isinstance(self.registry_leader_eligible, bool):
            raise StackInputError(f"{where}.registry_leader_eligible: must be true or false")
        check_bootstrap_servers(self.registry_kafkastore, f"{where}.registry_kafkastore")

    def _validate_ports(self, where: str, seen_ports: dict[int, str]) -> None:
        for key in ("broker_port", "registry_port"):
            port = getattr(self, key)
            if isinstance(port, bool) or not isinstance(port, int) or not 0 < port < 65536:
                raise StackInputError(f"{where}.{key}: must be a port number 1-65535, got {port!r}")
            if port in seen_ports:
                raise StackInputError(f"{where}.{key}: port {port} is also {seen_ports[port]}")
            seen_ports[port] = f"{self.name} {key}"


@dataclass(frozen=True)
class SecurityConfig:
    """What the brokers' ports speak (PLAINTEXT unless `up --security` said otherwise), and how the stack's own
    clients (its probes, the registries' store connections) authenticate. The brokers enable every SASL
    mechanism; `sasl_mechanism` is the one the stack's clients use. SASL users come from `users_file` (absolute),
    else from $KDR_BROKER_USERS in the environment of each command that starts or probes a broker.

    `registry_auth` (`up --registry-auth`) makes both registries require HTTP Basic credentials of the same users,
    whatever the brokers speak; the stack's probes of the registries authenticate as the first user."""

    protocol: str = PLAINTEXT
    sasl_mechanism: str = SCRAM_SHA_256
    users_file: str | None = None
    registry_auth: bool = False

    @property
    def sasl(self) -> bool:
        return self.protocol in (SASL_PLAINTEXT, SASL_SSL)

    @property
    def needs_users(self) -> bool:
        """Some process authenticates someone: SASL brokers, or registries with Basic authentication."""
        return self.sasl or self.registry_auth

    @property
    def tls(self) -> bool:
        return self.protocol in ("SSL", SASL_SSL)

    def validate(self, source: str) -> None:
        if self.protocol not in SECURITY_PROTOCOLS:
            raise StackInputError(f"{source}.protocol: {self.protocol!r} is not one of {', '.join(SECURITY_PROTOCOLS)}")
        if self.sasl_mechanism not in SASL_MECHANISMS:
            raise StackInputError(
                f"{source}.sasl_mechanism: {self.sasl_mechanism!r} is not one of {', '.join(SASL_MECHANISMS)}"
            )
        if not isinstance(self.registry_auth, bool):
            raise StackInputError(f"{source}.registry_auth: must be true or false, got {self.registry_auth!r}")
        if self.users_file is not None:
            if not isinstance(self.users_file, str) or not Path(self.users_file).is_absolute():
                raise StackInputError(f"{source}.users_file: must be an absolute path, got {self.users_file!r}")
            if not self.needs_users:
                raise StackInputError(
                    f"{source}.users_file: a users file needs SASL_PLAINTEXT or SASL_SSL, or registry_auth"
                )


@dataclass(frozen=True)
class StackConfig:
    """All local datacenters and the kind of broker they run; persisted as DATA_DIR/stack.json so every command
    agrees on it."""

    dcs: tuple[DcConfig, ...]
    security: SecurityConfig = SecurityConfig()
    kafka: str = APACHE

    @classmethod
    def default(
        cls,
        broker_ports: Sequence[int] = (9091, 9092),
        registry_ports: Sequence[int] = (8081, 8082),
        kafka: str = APACHE,
    ) -> StackConfig:
        """docs/design.md's layout: dc2's registry follows the store of dc1, which alone is leader-eligible."""
        if len(broker_ports) != 2 or len(registry_ports) != 2:
            raise StackInputError("the local stack has two DCs: give exactly two broker and two registry ports")
        primary_store = f"{HOST}:{broker_ports[0]}"
        config = cls(
            dcs=(
                DcConfig("dc1", broker_ports[0], registry_ports[0], primary_store, True),
                DcConfig("dc2", broker_ports[1], registry_ports[1], primary_store, False),
            ),
            kafka=kafka,
        )
        config.validate("ports")
        return config

    def dc(self, name: str) -> DcConfig:
        for dc in self.dcs:
            if dc.name == name:
                return dc
        raise StackInputError(f"unknown DC {name!r} (known: {', '.join(d.name for d in self.dcs)})")

    def with_dc(self, new: DcConfig) -> StackConfig:
        return replace(self, dcs=tuple(new if dc.name == new.name else dc for dc in self.dcs))

    def validate(self, source: str) -> None:
        """Refuse unusable settings with one line, before any process is touched."""
        if self.kafka not in BROKER_KINDS:
            raise StackInputError(f"{source}: kafka: {self.kafka!r} is not one of {', '.join(BROKER_KINDS)}")
        if not self.dcs:
            raise StackInputError(f"{source}: no DCs defined")
        seen_names: set[str] = set()
        seen_ports: dict[int, str] = {}  # port: whose it is
        for i, dc in enumerate(self.dcs):
            dc.validate(f"{source}: dcs[{i}]", seen_names, seen_ports)
        if not isinstance(self.security, SecurityConfig):
            raise StackInputError(f"{source}: security: must be a mapping")
        self.security.validate(f"{source}: security")

    def to_json(self) -> str:
        data: dict[str, Any] = {
            "version": _CONFIG_VERSION,
            "kafka": self.kafka,
            "dcs": [asdict(dc) for dc in self.dcs],
        }
        if self.security != SecurityConfig():  # a plaintext stack's file stays as it always was
            data["security"] = asdict(self.security)
        return json.dumps(data, indent=2) + "\n"

    @classmethod
    def from_json(cls, text: str, source: str) -> StackConfig:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise StackInputError(f"{source}: not valid JSON: {exc}") from None
        if not isinstance(data, dict) or data.get("version") != _CONFIG_VERSION:
            raise StackInputError(f"{source}: not a version {_CONFIG_VERSION} stack file")
        raw_dcs = data.get("dcs")
        if not isinstance(raw_dcs, list):
            raise StackInputError(f"{source}: dcs: must be a list")
        fields = list(DcConfig.__dataclass_fields__)
        dcs = []
        for i, raw in enumerate(raw_dcs):
            if not isinstance(raw, dict) or sorted(raw) != sorted(fields):
                raise StackInputError(f"{source}: dcs[{i}]: must be a mapping with keys {', '.join(fields)}")
            dcs.append(DcConfig(**raw))
        raw_security = data.get("security", {})
        keys = list(SecurityConfig.__dataclass_fields__)
        if not isinstance(raw_security, dict) or not set(raw_security) <= set(keys):
            raise StackInputError(f"{source}: security: must be a mapping with keys among {', '.join(keys)}")
        # A stack.json from before the key existed belongs to a stack of embedded brokers.
        config = cls(dcs=tuple(dcs), security=SecurityConfig(**raw_security), kafka=data.get("kafka", EMBEDDED))
        config.validate(source)
        return config

    @classmethod
    def load(cls, path: Path) -> StackConfig | None:
        """The settings saved in `path`, None when there are none yet; a bad file is a StackInputError."""
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return None
        return cls.from_json(text, str(path))

    def save(self, path: Path) -> None:
        """Atomically: a command reading it meanwhile sees the old settings or the new, never half."""
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, self.to_json())


def check_bootstrap_servers(value: Any, what: str) -> str:
    """Validate a "host:port[,host:port]" list, the form the registry's kafkastore option takes."""
    items = value.split(",") if isinstance(value, str) else [None]
    for item in items:
        host, _, port = (item or "").strip().rpartition(":")
        if not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise StackInputError(f"{what}: bad address list {value!r} (expected host:port[,host:port])")
    return value
