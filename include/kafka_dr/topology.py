"""Topology file: which clusters exist and which replication flows run between them.

The file is the single contract shared by the DAGs, the Spark jobs and the CLI, so it is
validated strictly up front: a bad file is refused with one line naming the key path and the
reason, before anything touches a cluster.
"""

from __future__ import annotations

import dataclasses
import difflib
import re
import string
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from types import MappingProxyType
from typing import Any
from urllib.parse import urlsplit

import yaml

from .paths import DEFAULT_TOPOLOGY as DEFAULT_TOPOLOGY  # re-exported: the topology's users look here
from .paths import default_topology
from .times import epoch_ms
from .wire import DRILL_TOPIC as DRILL_TOPIC  # re-exported, as the topology's users name them
from .wire import HEARTBEATS_TOPIC as HEARTBEATS_TOPIC
from .wire import INTERNAL_TOPIC_PREFIX as INTERNAL_TOPIC_PREFIX

# The internal topics every flow copies, keeping their names: heartbeats (the provenance of their copies measures the
# end-to-end latency; never counted as lag) and the DR drill's probe records (dr_drill: its consumer must find them in
# the other DC after the drill's failover, so they are data: lagged, translated, resynced).
COPIED_INTERNAL_TOPICS = (HEARTBEATS_TOPIC, DRILL_TOPIC)
# A failback's inverse of a flow (serving cluster -> restored one) is named `<flow>.failback`.
FAILBACK_FLOW_SUFFIX = ".failback"


def is_data_topic(topic: str) -> bool:
    """Whether a topic's records are data an application reads, counted in an RPO, republished by a failback: every
    topic but kafka-dr's own (`_kdr.`), and of those the drill's probe topic, which stands in for an application."""
    return topic == DRILL_TOPIC or not topic.startswith(INTERNAL_TOPIC_PREFIX)


# A continuous replicator copies in epochs (spark_jobs/replicate.py): a stop ends at the end of one, and its claim is
# written at the start of each, so the epoch also bounds how long a stop and the failover's activity watch take.
DEFAULT_EPOCH_S = 5.0
MAX_EPOCH_S = 300.0
DEFAULT_CHECKPOINT_S = 30.0
MAX_CHECKPOINT_S = 3600.0

_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
_TOPIC_CHARS_RE = re.compile(r"[A-Za-z0-9._-]*")
_LEGAL_CHARS = "letters, digits, '.', '_', '-'"
_MAX_TOPIC_LENGTH = 249


class TopologyError(ValueError):
    """A topology file or lookup is invalid; the message is one line naming the key and why."""


@dataclass(frozen=True)
class Cluster:
    """One Kafka cluster (a datacenter) and its optional schema registry."""

    name: str
    bootstrap_servers: str
    schema_registry: str | None = None


@dataclass(frozen=True)
class TopicFilter:
    """Include/exclude regexes (full match) selecting topics or consumer groups."""

    include: tuple[re.Pattern[str], ...]
    exclude: tuple[re.Pattern[str], ...] = ()

    def matches(self, name: str) -> bool:
        """True if `name` is selected; `_kdr.` internal names never are, so they are never replicated."""
        if name.startswith(INTERNAL_TOPIC_PREFIX):
            return False
        return any(p.fullmatch(name) for p in self.include) and not self.excludes(name)

    def excludes(self, name: str) -> bool:
        """True if an exclude regex names `name` (also how a flow leaves out the drill's probe topic)."""
        return any(p.fullmatch(name) for p in self.exclude)


ALL_GROUPS = TopicFilter(include=(re.compile(".*"),))


@dataclass(frozen=True)
class Flow:
    """One direction of replication from `source` to `target`."""

    name: str
    source: str
    target: str
    topics: TopicFilter
    rename: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    provenance: bool = True
    sync_topic_configs: bool = True
    groups: TopicFilter = ALL_GROUPS
    start: str = "earliest"  # where a new flow begins: earliest, latest or an ISO time (FLOW_STARTS)
    epoch_seconds: float = DEFAULT_EPOCH_S  # how long each Spark job of a continuous replicator copies for
    # how often a continuous replicator keeps its groups' translated offsets in the target (what a disaster reads)
    checkpoint_seconds: float = DEFAULT_CHECKPOINT_S

    @property
    def start_ms(self) -> int | None:
        """The start as epoch milliseconds when it is a time, else None."""
        return None if self.start in FLOW_STARTS else epoch_ms(self.start, f"flow {self.name} start")

    def copies(self, topic: str) -> bool:
        """Whether the flow copies `topic`: its data (`copies_data`) and the heartbeats."""
        return topic == HEARTBEATS_TOPIC or self.copies_data(topic)

    def copies_data(self, topic: str) -> bool:
        """Whether `topic` is data the flow copies: its `topics:`, and the DR drill's probe topic unless
        `topics.exclude` names it (a failback's inverse flow does, beside a flow back that copies it: one copy each)."""
        return (topic == DRILL_TOPIC and not self.topics.excludes(topic)) or self.topics.matches(topic)

    def destination_topic(self, topic: str) -> str:
        """Name of `topic` in the target: the first rename regex that fully matches wins, its format given the topic
        and the flow's source cluster (`{source}.{topic}` takes dc1's `orders` to `dc1.orders`, as MirrorMaker 2
        names remote topics). The internal topics a flow copies keep their names."""
        if topic in COPIED_INTERNAL_TOPICS:
            return topic
        for pattern, fmt in self.rename.items():
            if re.fullmatch(pattern, topic):
                return fmt.format(topic=topic, source=self.source)
        return topic

    def source_topic(self, dest_topic: str) -> str | None:
        """The topic of the source that the flow copies into `dest_topic`, or None: the rename formats read backwards
        (`{topic}.replica` takes `orders.replica` back to `orders`, `{source}.{topic}` takes `dc1.orders` back to
        `orders` when the source is dc1), kept only when the filter selects the name and renames it to `dest_topic`.
        Two names that would both land there refuse the topology."""
        candidates = {dest_topic}
        for key, fmt in self.rename.items():
            pattern, has_topic = "", False
            for literal, field_name, _, _ in string.Formatter().parse(fmt):
                pattern += re.escape(literal)
                if field_name == "source":
                    pattern += re.escape(self.source)
                elif field_name == "topic":
                    pattern += "(?P=topic)" if has_topic else "(?P<topic>.+)"
                    has_topic = True
            match = re.fullmatch(pattern, dest_topic)
            if match is not None:  # without {topic}, a plain name of a one-topic key
                candidates.add(match.group("topic") if has_topic else (literal_topic(key) or dest_topic))
        origins = sorted(t for t in candidates if self.copies_data(t) and self.destination_topic(t) == dest_topic)
        if len(origins) > 1:
            raise TopologyError(f"flow {self.name} renames both {' and '.join(origins)} to {dest_topic}")
        return origins[0] if origins else None


def literal_topic(pattern: str) -> str | None:
    """The one name a rename key matches when it is a plain name (dots escaped: `orders\\.v2`), else None."""
    name, i = [], 0
    while i < len(pattern):
        char = pattern[i]
        if char == "\\":
            if i + 1 == len(pattern) or pattern[i + 1].isalnum():
                return None  # \d, \w, ... are classes, not characters
            name.append(pattern[i + 1])
            i += 2
            continue
        if char in _REGEX_META:
            return None
        name.append(char)
        i += 1
    return "".join(name)


_REGEX_META = frozenset(".^$*+?{}[]|()")

FLOW_STARTS = ("earliest", "latest")  # or an ISO time: the first offset at or after it

CLIENT_ROLES = ("producer", "consumer", "both")

# schema_registry.restart_command's placeholders: the cluster whose registry restarts, that registry's URL (the first
# of its list), the bootstrap servers of the store it is pointed at, and its leader eligibility (true or false).
RESTART_PLACEHOLDERS = ("cluster", "registry_url", "kafkastore", "leader_eligible")
CUT_OFF_PLACEHOLDERS = ("cluster", "registry_url", "bootstrap_servers")  # dr.cut_off_command, dr.bring_back_command


@dataclass(frozen=True)
class ClientAlias:
    """A named application (or group of them) whose cluster kafka-dr switches on failover."""

    name: str
    cluster: str  # home cluster: where it connects until a failover moves it
    role: str  # producer, consumer or both: a planned failover moves producers first


@dataclass(frozen=True)
class Slo:
    """The topology's `health:` section: limits that make a flow ERR when passed (None: not checked; health/rules.py
    applies them)."""

    max_lag_records: int | None = None
    max_lag_seconds: float | None = None
    max_heartbeat_latency_ms: float | None = None
    max_checkpoint_age_s: float | None = None


ALERT_EVENTS = ("flow_status", "readiness", "failed_over", "dag_failed", "approval_needed", "dr_report")
DEFAULT_REPEAT_AFTER_S = 3600.0
_DURATION_RE = re.compile(r"(\d+(?:\.\d+)?)\s*(s|m|h|d)")
_DURATION_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_APPRISE_URL_RE = re.compile(r"[a-z][a-z0-9+.-]*://\S+")


@dataclass(frozen=True)
class Alerts:
    """The topology's `alerts:` section (alerts.py sends them): Apprise URLs (`${VAR}` not yet taken from the
    environment), the events sent, and how often an unchanged ERR is repeated."""

    urls: tuple[str, ...] = ()
    on: tuple[str, ...] = ALERT_EVENTS
    repeat_after_s: float = DEFAULT_REPEAT_AFTER_S


APPROVALS = ("required", "none")
# Why dr.hourly_gap_repair is gone: copies of a past hour can only be appended after the running flow's newer ones.
REMOVED_GAP_REPAIR = (
    "was removed: a running flow's destination cannot take a past hour's copies in order (dr_backfill refuses it); "
    "delete the key, and repair a lost window with a dr_backfill run into a topic of its own"
)
DEFAULT_APPROVAL_TIMEOUT_S = 3600.0
DEFAULT_DRILL_MAX_AGE_S = 31 * 86400.0


@dataclass(frozen=True)
class DrPolicy:
    """The topology's `dr:` section, the safety of the red button: whether a failover or failback waits at its
    `approve` task for a person, who may answer (Airflow user names; empty: any user), whether the user who
    triggered the run may approve it (`four_eyes`: not), and how long the approval waits before the run fails;
    after how many dr_replication_health runs in a row with a cluster unreachable a disaster failover is proposed
    (0: never);
    the objectives a dr_drill checks (`rpo_records`: records a failover may lose; `rto_seconds`: run start to clients
    switched; None: not set, the drill reports the figure without a verdict)."""

    approval: str = "required"
    approvers: tuple[str, ...] = ()
    four_eyes: bool = True
    approval_timeout_s: float = DEFAULT_APPROVAL_TIMEOUT_S
    propose_failover_after: int = 3
    rpo_records: int | None = None
    rto_seconds: float | None = None
    cut_off_command: str | None = None  # how a disaster drill cuts a cluster off ({cluster}), and brings it back
    bring_back_command: str | None = None
    airflow_site: str | None = None  # where Airflow and its state run: a cluster's name, or any other site's
    drill_max_age_s: float = DEFAULT_DRILL_MAX_AGE_S  # readiness: the last passing dr_drill at most this old


@dataclass(frozen=True)
class Topology:
    """All clusters and flows of a deployment."""

    clusters: Mapping[str, Cluster]
    flows: tuple[Flow, ...]
    schema_registry_primary: str | None = None
    schema_registry_restart: str | None = None  # command template for the schema redirect
    clients: Mapping[str, ClientAlias] = field(default_factory=lambda: MappingProxyType({}))
    health: Slo = field(default_factory=Slo)  # the `health:` SLOs of dr_replication_health and `kafka-dr health`
    alerts: Alerts = field(default_factory=Alerts)  # none sent unless it lists URLs
    dr: DrPolicy = field(default_factory=DrPolicy)  # approvals required unless it says `approval: none`

    def flow(self, name: str) -> Flow:
        """The flow called `name`; an unknown name is a user error, hence TopologyError."""
        for flow in self.flows:
            if flow.name == name:
                return flow
        raise TopologyError(f"unknown flow {name!r} (known: {_names(f.name for f in self.flows)})")

    def cluster(self, name: str) -> Cluster:
        """The cluster called `name`; an unknown name is a user error, hence TopologyError."""
        try:
            return self.clusters[name]
        except KeyError:
            raise TopologyError(f"unknown cluster {name!r} (known: {_names(self.clusters)})") from None

    def client(self, name: str) -> ClientAlias:
        """The client alias called `name`; an unknown name is a user error, hence TopologyError."""
        try:
            return self.clients[name]
        except KeyError:
            raise TopologyError(f"unknown client alias {name!r} (known: {_names(self.clients)})") from None


def load_topology(path: str | Path | None = None) -> Topology:
    """Read and validate a topology file; None means $KDR_TOPOLOGY, else include/topology.yaml."""
    path = default_topology() if path is None else Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise TopologyError(f"{path}: file not found") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise TopologyError(f"{path}: cannot read: {_one_line(exc)}") from None
    try:
        data = yaml.load(text, Loader=_StrictLoader)
    except yaml.YAMLError as exc:
        raise TopologyError(f"{path}: not valid YAML: {_yaml_reason(exc)}") from None
    return parse_topology(data, source=str(path))


def parse_topology(data: Any, source: str = "topology") -> Topology:
    """Validate already-parsed YAML data; `source` prefixes every error message."""
    return _Parser(source).topology(data)


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader that refuses duplicate mapping keys, which plain YAML silently overwrites."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if isinstance(key, list | dict):
                continue  # unhashable key: the base class reports it with a position
            if key in seen:
                raise yaml.constructor.ConstructorError(None, None, f"duplicate key {key!r}", key_node.start_mark)
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


def _yaml_reason(exc: yaml.YAMLError) -> str:
    """One-line reason and position out of PyYAML's multi-line error."""
    problem = getattr(exc, "problem", None) or _one_line(exc)
    mark = getattr(exc, "problem_mark", None)
    where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
    return f"{problem}{where}"


def _one_line(value: object) -> str:
    return " ".join(str(value).split())


def _names(names: Any) -> str:
    return ", ".join(names) or "none"


def _type_name(value: Any) -> str:
    return "null" if value is None else type(value).__name__


class _Parser:
    """Walks the raw YAML, keeping the file name for error messages."""

    def __init__(self, source: str) -> None:
        self.source = source

    def error(self, path: str, reason: str) -> TopologyError:
        return TopologyError(f"{self.source}: {path}: {reason}" if path else f"{self.source}: {reason}")

    def mapping(self, value: Any, path: str, required: tuple[str, ...], optional: tuple[str, ...]) -> dict[str, Any]:
        """Check `value` is a mapping with all `required` keys and no key outside both tuples."""
        if not isinstance(value, dict):
            raise self.error(path, f"must be a mapping, got {_type_name(value)}")
        allowed = required + optional
        for key in value:
            if key not in allowed:
                close = difflib.get_close_matches(str(key), allowed, n=1)
                hint = f"did you mean {close[0]!r}? " if close else ""
                raise self.error(path, f"unknown key {key!r} ({hint}allowed: {', '.join(allowed)})")
        for key in required:
            if key not in value:
                raise self.error(path, f"missing required key {key!r}")
        return value

    def string(self, value: Any, path: str) -> str:
        if not isinstance(value, str):
            raise self.error(path, f"must be a string, got {_type_name(value)}")
        if not value.strip():
            raise self.error(path, "must not be empty")
        return value

    def boolean(self, value: Any, path: str) -> bool:
        if not isinstance(value, bool):
            raise self.error(path, f"must be true or false, got {_type_name(value)} {value!r}")
        return value

    def name(self, value: Any, path: str, what: str) -> str:
        if not isinstance(value, str):
            raise self.error(path, f"{what} must be a string, got {_type_name(value)} {value!r}")
        if not _NAME_RE.fullmatch(value):
            raise self.error(path, f"bad {what} {value!r} (use {_LEGAL_CHARS}; start with a letter or digit)")
        return value

    def regex(self, value: Any, path: str) -> re.Pattern[str]:
        if not isinstance(value, str):
            raise self.error(path, f"must be a regex string, got {_type_name(value)}")
        try:
            return re.compile(value)
        except re.error as exc:
            raise self.error(path, f"bad regex {value!r}: {exc}") from None

    def regex_list(self, value: Any, path: str, non_empty: bool) -> tuple[re.Pattern[str], ...]:
        if not isinstance(value, list):
            raise self.error(path, f"must be a list of regexes, got {_type_name(value)}")
        if non_empty and not value:
            raise self.error(path, "must list at least one regex")
        return tuple(self.regex(item, f"{path}[{i}]") for i, item in enumerate(value))

    def filter(self, value: Any, path: str, default_include: tuple[str, ...]) -> TopicFilter:
        required = () if default_include else ("include",)
        raw = self.mapping(value, path, required, ("exclude",) if required else ("include", "exclude"))
        include = raw.get("include", list(default_include))
        return TopicFilter(
            include=self.regex_list(include, f"{path}.include", non_empty=True),
            exclude=self.regex_list(raw.get("exclude", []), f"{path}.exclude", non_empty=False),
        )

    def bootstrap_servers(self, value: Any, path: str) -> str:
        """Accept "h:p,h:p" or a list of "h:p"; return librdkafka's comma-separated form."""
        if isinstance(value, str):
            items = [item.strip() for item in value.split(",")]
        elif isinstance(value, list) and all(isinstance(item, str) for item in value):
            items = [item.strip() for item in value]
        else:
            raise self.error(path, f"must be a 'host:port' list, got {_type_name(value)}")
        if not any(items):
            raise self.error(path, "must list at least one 'host:port'")
        for item in items:
            host, sep, port = item.rpartition(":")
            if not sep or not host or host in ("[", "[]") or not port.isdigit() or not 0 < int(port) < 65536:
                raise self.error(path, f"bad address {item!r} (expected host:port with port 1-65535)")
        return ",".join(items)

    def url(self, value: Any, path: str) -> str:
        text = self.string(value, path)
        for item in text.split(","):
            parts = urlsplit(item.strip())
            if parts.scheme not in ("http", "https") or not parts.netloc:
                raise self.error(path, f"bad URL {item.strip()!r} (expected http(s)://host:port)")
        return text

    def rename_format(self, value: Any, path: str, source: str, one_topic: bool = False) -> str:
        """A format whose only placeholders are {topic} and {source} (the flow's source cluster), producing a legal
        Kafka topic name; a name without {topic} only for a key that names `one_topic` (else several topics would
        land in one)."""
        fmt = self.string(value, path)
        try:
            parts = list(string.Formatter().parse(fmt))
        except ValueError as exc:
            raise self.error(path, f"bad format {fmt!r}: {exc}") from None
        fixed, topics = "", 0  # the name's characters other than the topic's, and how many times the topic comes
        for literal, field_name, spec, conversion in parts:
            fixed += literal
            if field_name is None:
                continue
            if field_name not in ("topic", "source") or spec or conversion:
                raise self.error(path, f"bad placeholder in {fmt!r}: only a plain {{topic}} or {{source}} is allowed")
            if field_name == "source":
                fixed += source
            else:
                topics += 1
        made = f"format {fmt!r}" + (f" with source {source!r}" if "{source}" in fmt else "")
        if not _TOPIC_CHARS_RE.fullmatch(fixed):
            raise self.error(path, f"{made} would make an illegal topic name (allowed: {_LEGAL_CHARS})")
        if len(fixed) + topics > _MAX_TOPIC_LENGTH:
            raise self.error(path, f"{made} would make topic names longer than {_MAX_TOPIC_LENGTH} characters")
        if not topics and not one_topic:
            raise self.error(
                path, f"format {fmt!r} must contain the {{topic}} placeholder (a plain name needs a one-topic key)"
            )
        return fmt

    def rename(self, value: Any, path: str, source: str) -> dict[str, str]:
        if not isinstance(value, dict):
            raise self.error(path, f"must be a mapping of topic regex to format, got {_type_name(value)}")
        result = {}
        for key, fmt in value.items():
            key_path = f"{path}[{key!r}]"
            self.regex(key, key_path)
            result[key] = self.rename_format(fmt, key_path, source, one_topic=literal_topic(key) is not None)
        return result

    def cluster(self, name: Any, value: Any) -> Cluster:
        path = f"clusters.{name}"
        self.name(name, "clusters", "cluster name")
        raw = self.mapping(value, path, ("bootstrap_servers",), ("schema_registry",))
        registry = raw.get("schema_registry")
        return Cluster(
            name=name,
            bootstrap_servers=self.bootstrap_servers(raw["bootstrap_servers"], f"{path}.bootstrap_servers"),
            schema_registry=None if registry is None else self.url(registry, f"{path}.schema_registry"),
        )

    def cluster_ref(self, value: Any, path: str, clusters: Mapping[str, Cluster]) -> str:
        name = self.string(value, path)
        if name not in clusters:
            raise self.error(path, f"unknown cluster {name!r} (known: {_names(clusters)})")
        return name

    def flow(self, value: Any, path: str, clusters: Mapping[str, Cluster]) -> Flow:
        raw = self.mapping(
            value,
            path,
            ("name", "source", "target", "topics"),
            ("rename", "provenance", "sync_topic_configs", "groups", "start", "epoch_seconds", "checkpoint_seconds"),
        )
        name = self.name(raw["name"], f"{path}.name", "flow name")
        source = self.cluster_ref(raw["source"], f"{path}.source", clusters)
        target = self.cluster_ref(raw["target"], f"{path}.target", clusters)
        if source == target:
            raise self.error(f"{path}.target", f"source and target are both {source!r}")
        return Flow(
            name=name,
            source=source,
            target=target,
            topics=self.filter(raw["topics"], f"{path}.topics", default_include=()),
            rename=MappingProxyType(self.rename(raw.get("rename", {}), f"{path}.rename", source)),
            provenance=self.boolean(raw.get("provenance", True), f"{path}.provenance"),
            sync_topic_configs=self.boolean(raw.get("sync_topic_configs", True), f"{path}.sync_topic_configs"),
            groups=self.filter(raw.get("groups", {}), f"{path}.groups", default_include=(".*",)),
            start=self.flow_start(raw.get("start", "earliest"), f"{path}.start"),
            epoch_seconds=self.seconds(raw.get("epoch_seconds", DEFAULT_EPOCH_S), f"{path}.epoch_seconds", MAX_EPOCH_S),
            checkpoint_seconds=self.seconds(
                raw.get("checkpoint_seconds", DEFAULT_CHECKPOINT_S), f"{path}.checkpoint_seconds", MAX_CHECKPOINT_S
            ),
        )

    def seconds(self, value: Any, path: str, maximum: float) -> float:
        """A number of seconds above 0 and at most `maximum`."""
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= maximum:
            raise self.error(
                path, f"must be a number of seconds > 0 and <= {maximum:g}, got {_type_name(value)} {value!r}"
            )
        return float(value)

    def flow_start(self, value: Any, path: str) -> str:
        """earliest, latest, or an ISO-8601 time (YAML may hand it over as a datetime already)."""
        if isinstance(value, datetime):
            value = (value if value.tzinfo else value.replace(tzinfo=UTC)).isoformat()
        text = self.string(value, path)
        if text not in FLOW_STARTS:
            try:
                epoch_ms(text, "start")
            except ValueError:
                raise self.error(path, f"expected earliest, latest or an ISO-8601 time, got {text!r}") from None
        return text

    def topology(self, data: Any) -> Topology:
        if data is None:
            raise self.error("", "empty file (expected a mapping with 'clusters' and 'flows')")
        raw = self.mapping(data, "", ("clusters",), ("flows", "schema_registry", "clients", "health", "alerts", "dr"))
        clusters = self.clusters(raw["clusters"])
        flows = self.flows(raw.get("flows", []), clusters)
        primary, restart = (
            self.schema_registry(raw["schema_registry"], clusters) if "schema_registry" in raw else (None, None)
        )
        raw_clients = raw.get("clients", {})
        if not isinstance(raw_clients, dict):
            raise self.error("clients", f"must be a mapping of alias to settings, got {_type_name(raw_clients)}")
        clients = {name: self.client(name, value, clusters) for name, value in raw_clients.items()}
        return Topology(
            clusters=MappingProxyType(clusters),
            flows=flows,
            schema_registry_primary=primary,
            schema_registry_restart=restart,
            clients=MappingProxyType(clients),
            health=self.health(raw.get("health", {})),
            alerts=self.alerts(raw.get("alerts", {})),
            dr=self.dr(raw.get("dr", {})),
        )

    def clusters(self, value: Any) -> dict[str, Cluster]:
        if not isinstance(value, dict):
            raise self.error("clusters", f"must be a mapping of cluster name to settings, got {_type_name(value)}")
        if not value:
            raise self.error("clusters", "must define at least one cluster")
        return {name: self.cluster(name, settings) for name, settings in value.items()}

    def flows(self, value: Any, clusters: Mapping[str, Cluster]) -> tuple[Flow, ...]:
        if not isinstance(value, list):
            raise self.error("flows", f"must be a list of flows, got {_type_name(value)}")
        flows: list[Flow] = []
        first_index: dict[str, int] = {}
        for i, item in enumerate(value):
            flow = self.flow(item, f"flows[{i}]", clusters)
            if flow.name in first_index:
                reason = f"duplicate flow name {flow.name!r} (also flows[{first_index[flow.name]}])"
                raise self.error(f"flows[{i}].name", reason)
            first_index[flow.name] = i
            flows.append(flow)
        return tuple(flows)

    def schema_registry(self, value: Any, clusters: Mapping[str, Cluster]) -> tuple[str, str | None]:
        """The `schema_registry:` section: its primary cluster (which must have a registry URL) and restart
        command."""
        registry = self.mapping(value, "schema_registry", ("primary",), ("restart_command",))
        primary = self.cluster_ref(registry["primary"], "schema_registry.primary", clusters)
        if clusters[primary].schema_registry is None:
            raise self.error("schema_registry.primary", f"cluster {primary!r} has no schema_registry URL")
        restart = None
        if "restart_command" in registry:
            restart = self.command_template(registry["restart_command"], "schema_registry.restart_command")
        return primary, restart

    def dr(self, value: Any) -> DrPolicy:
        """The `dr:` section: `approval` required|none, `approvers` a list of user names, `four_eyes` a boolean,
        `approval_timeout` a duration like 30m or 1h, `propose_failover_after` a count of runs (0 or more), the drill's
        objectives `rpo_records` (a whole number >= 0) and `rto_seconds` (a
        number > 0), the commands with which a disaster drill cuts a cluster off and brings it back (`{cluster}`:
        the embedded stack's `kafka-dr-dev local stop|start {cluster}`; a deployment's own, e.g. a firewall rule), where
        Airflow runs (`airflow_site`: a cluster's name, or any other site's) and how old the last passing drill may
        be (`drill_max_age`, a duration; readiness checks both)."""
        keys = (
            "approval", "approvers", "four_eyes", "approval_timeout", "propose_failover_after", "rpo_records",
            "rto_seconds", "cut_off_command", "bring_back_command", "airflow_site", "drill_max_age",
        )  # fmt: skip
        if isinstance(value, dict) and "hourly_gap_repair" in value:
            raise self.error("dr.hourly_gap_repair", REMOVED_GAP_REPAIR)
        raw = self.mapping(value, "dr", (), keys)
        approval = raw.get("approval", "required")
        if approval not in APPROVALS:
            raise self.error("dr.approval", f"must be one of {', '.join(APPROVALS)}, got {approval!r}")
        approvers = raw.get("approvers", [])
        if not isinstance(approvers, list) or not all(isinstance(a, str) and a.strip() for a in approvers):
            raise self.error("dr.approvers", f"must be a list of Airflow user names, got {approvers!r}")
        four_eyes = self.boolean(raw.get("four_eyes", True), "dr.four_eyes")
        timeout = self.duration(raw.get("approval_timeout", "1h"), "dr.approval_timeout")
        after = raw.get("propose_failover_after", 3)
        if isinstance(after, bool) or not isinstance(after, int) or after < 0:
            raise self.error("dr.propose_failover_after", f"must be a count of runs (0: never), got {after!r}")
        rpo = raw.get("rpo_records")
        if rpo is not None and (isinstance(rpo, bool) or not isinstance(rpo, int) or rpo < 0):
            raise self.error("dr.rpo_records", f"must be a whole number of records >= 0, got {rpo!r}")
        rto = raw.get("rto_seconds")
        if rto is not None and (isinstance(rto, bool) or not isinstance(rto, int | float) or rto <= 0):
            raise self.error("dr.rto_seconds", f"must be a number of seconds > 0, got {rto!r}")
        commands = [
            None if raw.get(key) is None else self.command_template(raw[key], f"dr.{key}", CUT_OFF_PLACEHOLDERS)
            for key in ("cut_off_command", "bring_back_command")
        ]
        if (commands[0] is None) != (commands[1] is None):
            raise self.error("dr", "cut_off_command and bring_back_command go together: a drill undoes its cut")
        site = None if raw.get("airflow_site") is None else self.string(raw["airflow_site"], "dr.airflow_site")
        max_age = self.duration(raw.get("drill_max_age", "31d"), "dr.drill_max_age")
        policy = (tuple(a.strip() for a in approvers), four_eyes, timeout, after, rpo, rto, *commands, site, max_age)
        return DrPolicy(approval, *policy)

    def duration(self, value: Any, path: str) -> float:
        """Seconds of a duration like 30s, 30m, 1h or 1d (above 0)."""
        match = _DURATION_RE.fullmatch(value.strip()) if isinstance(value, str) else None
        if match is None or float(match.group(1)) <= 0:
            raise self.error(path, f"must be a duration like 30m, 1h or 1d, got {value!r}")
        return float(match.group(1)) * _DURATION_UNITS[match.group(2)]

    def alerts(self, value: Any) -> Alerts:
        """The `alerts:` section: URLs of Apprise's form (scheme://...), known events, a duration like 30m or 1h."""
        if isinstance(value, dict) and True in value:  # YAML 1.1 (PyYAML) reads a bare `on:` key as true
            value = {("on" if key is True else key): item for key, item in value.items()}
        raw = self.mapping(value, "alerts", (), ("urls", "on", "repeat_after"))
        urls = raw.get("urls", [])
        if not isinstance(urls, list):
            raise self.error("alerts.urls", f"must be a list of Apprise URLs, got {_type_name(urls)}")
        for i, url in enumerate(urls):
            if not isinstance(url, str) or not _APPRISE_URL_RE.fullmatch(url.strip()):
                shown = url.split("://")[0] + "://..." if isinstance(url, str) else _type_name(url)
                raise self.error(f"alerts.urls[{i}]", f"not an Apprise URL (scheme://...): {shown!r}")
        events = raw.get("on", list(ALERT_EVENTS))
        if not isinstance(events, list) or not events:
            raise self.error("alerts.on", f"must be a list of events ({', '.join(ALERT_EVENTS)})")
        for i, event in enumerate(events):
            if event not in ALERT_EVENTS:
                raise self.error(f"alerts.on[{i}]", f"unknown event {event!r} (known: {', '.join(ALERT_EVENTS)})")
        seconds = self.duration(raw.get("repeat_after", "1h"), "alerts.repeat_after")
        return Alerts(tuple(u.strip() for u in urls), tuple(events), seconds)

    def health(self, value: Any) -> Slo:
        """The `health:` SLOs; a limit left out is not checked."""
        raw = self.mapping(value, "health", (), tuple(f.name for f in dataclasses.fields(Slo)))
        limits: dict[str, float] = {}
        for key, limit in raw.items():
            integral = key == "max_lag_records"
            if isinstance(limit, bool) or not isinstance(limit, int if integral else int | float) or limit < 0:
                kind = "a whole number" if integral else "a number"
                raise self.error(f"health.{key}", f"must be {kind} >= 0, got {_type_name(limit)} {limit!r}")
            limits[key] = limit
        return Slo(**limits)

    def command_template(self, value: Any, path: str, placeholders: tuple[str, ...] = RESTART_PLACEHOLDERS) -> str:
        """A command template whose only placeholders are `placeholders`."""
        template = self.string(value, path)
        try:
            fields = {f for _, f, _, _ in string.Formatter().parse(template) if f is not None}
        except ValueError as exc:
            raise self.error(path, f"bad template {template!r}: {exc}") from None
        unknown = fields - set(placeholders)
        if unknown:
            allowed = ", ".join(f"{{{name}}}" for name in placeholders)
            raise self.error(path, f"unknown placeholder {{{sorted(unknown)[0]}}} (allowed: {allowed})")
        return template

    def client(self, name: Any, value: Any, clusters: Mapping[str, Cluster]) -> ClientAlias:
        path = f"clients.{name}"
        self.name(name, "clients", "client alias")
        raw = self.mapping(value, path, ("cluster",), ("role",))
        role = raw.get("role", "both")
        if role not in CLIENT_ROLES:
            raise self.error(f"{path}.role", f"must be one of {', '.join(CLIENT_ROLES)}, got {role!r}")
        return ClientAlias(name, self.cluster_ref(raw["cluster"], f"{path}.cluster", clusters), role)
