"""The registry's state machine over the ``_schemas`` log, in Confluent's record format.

Every instance, leader or follower, rebuilds this state by applying the log from the start and
keeps applying it as it grows, so the log is the only truth and any instance serves reads. The
leader decides a write with the ``plan_*`` methods (pure: they only return the records to
append), appends the records, and answers once it has applied them back from the log.

Keys and values are the JSON documents Confluent's ``KafkaStore`` writes, serialized compactly
with fixed field order: the topic is compacted on the key bytes, so one logical key must always
be the same bytes (and real tooling can read our topic, and we theirs).
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any

from . import errors
from .compat import DEFAULT_LEVEL, LEVELS, check, is_transitive
from .errors import RegistryError
from .schemas import AVRO, ParsedSchema, Reference, canonical_text, parse

log = logging.getLogger(__name__)

MODES = ("READWRITE", "READONLY", "READONLY_OVERRIDE", "IMPORT")
DEFAULT_MODE = "READWRITE"
LATEST = -1
MAX_VERSION = 2**31 - 1

Record = tuple[dict[str, Any], dict[str, Any] | None]  # (key, value); a None value is a tombstone


@dataclass(frozen=True)
class SchemaRecord:
    """One subject version, as the SCHEMA value of the log holds it."""

    subject: str
    version: int
    id: int
    schema_type: str
    schema: str
    references: tuple[Reference, ...] = ()
    deleted: bool = False

    def content_key(self) -> tuple[str, str, tuple[Reference, ...]]:
        return (self.schema_type, canonical_text(self.schema_type, self.schema), self.references)

    def to_value(self) -> dict[str, Any]:
        value: dict[str, Any] = {"subject": self.subject, "version": self.version, "id": self.id}
        if self.schema_type != AVRO:
            value["schemaType"] = self.schema_type
        value["references"] = [r.to_json() for r in self.references]
        value["schema"] = self.schema
        value["deleted"] = self.deleted
        return value

    def to_response(self) -> dict[str, Any]:
        """The body of GET /subjects/{s}/versions/{v}: Confluent omits AVRO and empty references."""
        body: dict[str, Any] = {"subject": self.subject, "version": self.version, "id": self.id}
        if self.schema_type != AVRO:
            body["schemaType"] = self.schema_type
        if self.references:
            body["references"] = [r.to_json() for r in self.references]
        body["schema"] = self.schema
        return body


def schema_key(subject: str, version: int) -> dict[str, Any]:
    return {"keytype": "SCHEMA", "subject": subject, "version": version, "magic": 1}


def config_key(subject: str | None) -> dict[str, Any]:
    return {"keytype": "CONFIG", "subject": subject, "magic": 0}


def mode_key(subject: str | None) -> dict[str, Any]:
    return {"keytype": "MODE", "subject": subject, "magic": 0}


def delete_subject_key(subject: str) -> dict[str, Any]:
    return {"keytype": "DELETE_SUBJECT", "subject": subject, "magic": 0}


NOOP_KEY: dict[str, Any] = {"keytype": "NOOP", "magic": 0}


def encode(document: dict[str, Any] | None) -> bytes | None:
    """Compact JSON bytes, stable for a given document (compaction keys on these bytes)."""
    if document is None:
        return None
    return json.dumps(document, separators=(",", ":"), ensure_ascii=False).encode()


def parse_version(raw: str) -> int:
    """A path or body version: 1..2^31-1, or "latest"/-1 meaning the latest version."""
    if raw in ("latest", "-1"):
        return LATEST
    if raw.isdigit() and 1 <= int(raw) <= MAX_VERSION:
        return int(raw)
    raise errors.invalid_version(raw)


def validate_subject(subject: str) -> None:
    if not subject or any(ord(c) < 0x20 for c in subject):
        raise RegistryError(422, errors.INVALID_SUBJECT, "The specified subject is not valid.")


def _references(raw: Any) -> tuple[Reference, ...]:
    return tuple(Reference(r["name"], r["subject"], int(r["version"])) for r in raw or [])


class RegistryState:
    """Subjects, versions, ids, configs and modes, as applied from the log. Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._versions: dict[str, dict[int, SchemaRecord]] = {}
        self._by_id: dict[int, set[tuple[str, int]]] = {}
        self._by_content: dict[tuple[str, str, tuple[Reference, ...]], int] = {}
        self._configs: dict[str | None, str] = {}
        self._modes: dict[str | None, str] = {}
        self._parsed: dict[int, ParsedSchema] = {}
        self.max_id = 0

    # ---- applying the log -------------------------------------------------------------------

    def apply(self, key_bytes: bytes | None, value_bytes: bytes | None) -> None:
        """Apply one ``_schemas`` record; malformed or unknown records are logged and skipped."""
        try:
            key = json.loads(key_bytes) if key_bytes else None
            value = json.loads(value_bytes) if value_bytes is not None else None
            if not isinstance(key, dict) or not (value is None or isinstance(value, dict)):
                raise ValueError("key and value must be JSON objects")
            with self._lock:
                self._apply(key, value)
        except (ValueError, KeyError, TypeError) as exc:
            log.warning("skipping malformed _schemas record key=%r: %s", key_bytes, exc)

    def _apply(self, key: dict[str, Any], value: dict[str, Any] | None) -> None:
        keytype = key.get("keytype")
        if keytype == "SCHEMA":
            subject, version = key["subject"], int(key["version"])
            if value is None:
                self._remove_version(subject, version)
            else:
                self._put_version(
                    SchemaRecord(
                        subject=value["subject"],
                        version=int(value["version"]),
                        id=int(value["id"]),
                        schema_type=value.get("schemaType") or AVRO,
                        schema=value["schema"],
                        references=_references(value.get("references")),
                        deleted=bool(value.get("deleted", False)),
                    )
                )
        elif keytype == "DELETE_SUBJECT" and value is not None:
            upto = int(value["version"])
            for record in list(self._versions.get(key["subject"], {}).values()):
                if record.version <= upto and not record.deleted:
                    self._put_version(replace(record, deleted=True))
        elif keytype == "CONFIG":
            self._set(self._configs, key.get("subject"), value.get("compatibilityLevel") if value else None)
        elif keytype == "MODE":
            self._set(self._modes, key.get("subject"), value.get("mode") if value else None)

    @staticmethod
    def _set(table: dict[str | None, str], subject: str | None, setting: str | None) -> None:
        if setting is None:
            table.pop(subject, None)
        else:
            table[subject] = str(setting).upper()

    def _put_version(self, record: SchemaRecord) -> None:
        previous = self._versions.setdefault(record.subject, {}).get(record.version)
        if previous is not None and previous.id != record.id:
            self._unlink_id(previous)
        self._versions[record.subject][record.version] = record
        self._by_id.setdefault(record.id, set()).add((record.subject, record.version))
        content = record.content_key()
        known = self._by_content.setdefault(content, record.id)
        if known != record.id and known in self._by_id:
            log.warning("schema id %d duplicates the content of id %d (subject %s)", record.id, known, record.subject)
        self.max_id = max(self.max_id, record.id)

    def _remove_version(self, subject: str, version: int) -> None:
        record = self._versions.get(subject, {}).pop(version, None)
        if record is None:
            return
        if not self._versions[subject]:
            del self._versions[subject]
        self._unlink_id(record)

    def _unlink_id(self, record: SchemaRecord) -> None:
        users = self._by_id.get(record.id, set())
        users.discard((record.subject, record.version))
        if not users:
            self._by_id.pop(record.id, None)
            self._parsed.pop(record.id, None)
            if self._by_content.get(record.content_key()) == record.id:
                del self._by_content[record.content_key()]

    # ---- reads ------------------------------------------------------------------------------

    def subjects(self, deleted: bool = False, prefix: str = "") -> list[str]:
        with self._lock:
            return sorted(
                s
                for s, versions in self._versions.items()
                if s.startswith(prefix) and any(deleted or not r.deleted for r in versions.values())
            )

    def has_subject(self, subject: str) -> bool:
        """Whether ``subject`` has a version that is not soft-deleted."""
        with self._lock:
            return any(not r.deleted for r in self._versions.get(subject, {}).values())

    def versions(self, subject: str, deleted: bool = False) -> list[SchemaRecord]:
        """The subject's versions, oldest first; 40401 when it has none visible."""
        with self._lock:
            records = [r for _, r in sorted(self._versions.get(subject, {}).items()) if deleted or not r.deleted]
        if not records:
            raise errors.subject_not_found(subject)
        return records

    def get_version(self, subject: str, version: int, deleted: bool = False) -> SchemaRecord:
        records = self.versions(subject, deleted)
        if version == LATEST:
            return records[-1]
        for record in records:
            if record.version == version:
                return record
        raise errors.version_not_found(version)

    def schema_by_id(self, schema_id: int) -> SchemaRecord:
        with self._lock:
            users = self._by_id.get(schema_id)
            if not users:
                raise errors.schema_not_found(schema_id)
            subject, version = min(users)
            return self._versions[subject][version]

    def usages_of_id(self, schema_id: int, deleted: bool = False) -> list[SchemaRecord]:
        """The subject versions holding ``schema_id``; 40403 when the id is unknown."""
        with self._lock:
            users = sorted(self._by_id.get(schema_id, set()))
            if not users:
                raise errors.schema_not_found(schema_id)
            return [r for s, v in users if deleted or not (r := self._versions[s][v]).deleted]

    def lookup(self, subject: str, candidate: ParsedSchema, refs: tuple[Reference, ...], deleted: bool) -> SchemaRecord:
        """The version of ``subject`` holding this schema (POST /subjects/{s})."""
        records = self.versions(subject, deleted)
        content = (candidate.schema_type, candidate.text, refs)
        for record in reversed(records):
            if record.content_key() == content:
                return record
        raise errors.schema_not_found()

    def referenced_by(self, subject: str, version: int) -> list[int]:
        with self._lock:
            return sorted(
                {
                    r.id
                    for versions in self._versions.values()
                    for r in versions.values()
                    if not r.deleted and any(ref.subject == subject and ref.version == version for ref in r.references)
                }
            )

    def config(self, subject: str | None) -> str | None:
        with self._lock:
            return self._configs.get(subject)

    def compatibility(self, subject: str | None) -> str:
        """The level in force for ``subject``: its own, else the global one, else BACKWARD."""
        with self._lock:
            return self._configs.get(subject) or self._configs.get(None) or DEFAULT_LEVEL

    def mode_setting(self, subject: str | None) -> str | None:
        with self._lock:
            return self._modes.get(subject)

    def mode(self, subject: str | None) -> str:
        with self._lock:
            return self._modes.get(subject) or self._modes.get(None) or DEFAULT_MODE

    # ---- schemas and references -------------------------------------------------------------

    def resolve_references(self, refs: Iterable[Reference], depth: int = 0) -> list[ParsedSchema]:
        """Parse what ``refs`` point at; a dangling reference makes the schema invalid (42201)."""
        if depth > 32:
            raise errors.invalid_schema("schema references nest too deeply (a reference cycle?)")
        parsed = []
        for ref in refs:
            try:
                record = self.get_version(ref.subject, ref.version, deleted=True)
            except RegistryError:
                raise errors.invalid_schema(
                    f"reference '{ref.name}' to subject '{ref.subject}' version {ref.version} not found"
                ) from None
            parsed.append(self.parsed(record, depth + 1))
        return parsed

    def parsed(self, record: SchemaRecord, depth: int = 0) -> ParsedSchema:
        """The stored schema, parsed (cached by id: an id's content never changes)."""
        with self._lock:
            cached = self._parsed.get(record.id)
        if cached is None:
            cached = parse(record.schema_type, record.schema, self.resolve_references(record.references, depth))
            with self._lock:
                self._parsed[record.id] = cached
        return cached

    def incompatibilities(self, subject: str, candidate: ParsedSchema, against: list[SchemaRecord]) -> list[str]:
        level = self.compatibility(subject)
        if level == "NONE" or not against:
            return []
        if not is_transitive(level):
            against = against[-1:]
        return check(level, candidate, [self.parsed(r) for r in against])

    # ---- planning writes (leader only; pure: they return the records to append) -------------

    def _check_writable(self, subject: str | None) -> None:
        if self.mode(subject) in ("READONLY", "READONLY_OVERRIDE"):
            name = f"Subject '{subject}'" if subject else "The registry"
            raise errors.not_permitted(f"{name} is in read-only mode")

    def plan_register(
        self,
        subject: str,
        candidate: ParsedSchema,
        refs: tuple[Reference, ...],
        schema_id: int | None = None,
        version: int | None = None,
    ) -> tuple[SchemaRecord, list[Record]]:
        """Register ``candidate`` under ``subject``: the resulting version and the records to write.

        No records when the subject already holds the schema. A new id is the highest id the
        log has ever held plus one, so a registry that takes over a replicated copy of another
        cluster's ``_schemas`` never reuses an id registered before the copy was made.
        """
        with self._lock:
            validate_subject(subject)
            self._check_writable(subject)
            mode = self.mode(subject)
            if schema_id is not None and mode != "IMPORT":
                raise errors.not_permitted(f"Subject '{subject}' is not in import mode")
            content = (candidate.schema_type, candidate.text, refs)
            existing = self._versions.get(subject, {})
            for record in sorted(existing.values(), key=lambda r: r.version, reverse=True):
                if not record.deleted and record.content_key() == content:
                    if schema_id is not None and schema_id != record.id:
                        raise RegistryError(
                            422,
                            errors.ID_DOES_NOT_MATCH,
                            f"Schema already registered with id {record.id} instead of input id {schema_id}",
                        )
                    return record, []
            if mode != "IMPORT":
                live = [r for _, r in sorted(existing.items()) if not r.deleted]
                problems = self.incompatibilities(subject, candidate, live)
                if problems:
                    raise RegistryError(
                        409,
                        errors.INCOMPATIBLE_SCHEMA,
                        "Schema being registered is incompatible with an earlier schema for subject "
                        f'"{subject}", details: {problems}',
                    )
            new_id = self._choose_id(content, schema_id)
            if version is None:
                version = max(existing, default=0) + 1
            elif version in existing:
                raise errors.not_permitted(f"Overwrite of subject '{subject}' version {version} is not permitted")
            record = SchemaRecord(subject, version, new_id, candidate.schema_type, candidate.text, refs)
            return record, [(schema_key(subject, version), record.to_value())]

    def _choose_id(self, content: tuple[str, str, tuple[Reference, ...]], schema_id: int | None) -> int:
        known = self._by_content.get(content)
        if schema_id is None:
            return known if known is not None else self.max_id + 1
        users = self._by_id.get(schema_id)
        if users:
            subject, version = min(users)
            if self._versions[subject][version].content_key() != content:
                raise RegistryError(
                    422,
                    errors.ID_DOES_NOT_MATCH,
                    f"Overwrite new schema with id {schema_id} is not permitted.",
                )
        return schema_id

    def plan_delete_subject(self, subject: str, permanent: bool) -> tuple[list[int], list[Record]]:
        """Soft delete marks every version deleted; a permanent delete (of a soft-deleted subject)
        tombstones them. Returns the versions affected and the records to write."""
        with self._lock:
            self._check_writable(subject)
            records = self.versions(subject, deleted=True)
            live = [r for r in records if not r.deleted]
            if not permanent:
                if not live:
                    raise RegistryError(
                        404,
                        errors.SUBJECT_SOFT_DELETED,
                        f"Subject '{subject}' was soft deleted.Set permanent=true to delete permanently",
                    )
                self._check_unreferenced(live)
                value = {"subject": subject, "version": live[-1].version}
                return [r.version for r in live], [(delete_subject_key(subject), value)]
            if live:
                raise RegistryError(
                    404,
                    errors.SUBJECT_NOT_SOFT_DELETED,
                    f"Subject '{subject}' was not deleted first before being permanently deleted",
                )
            return [r.version for r in records], [(schema_key(subject, r.version), None) for r in records]

    def plan_delete_version(self, subject: str, version: int, permanent: bool) -> tuple[int, list[Record]]:
        """Soft delete rewrites the version with deleted=true; permanent delete tombstones it."""
        with self._lock:
            self._check_writable(subject)
            record = self.get_version(subject, version, deleted=permanent)
            if not permanent:
                self._check_unreferenced([record])
                deleted = replace(record, deleted=True)
                return record.version, [(schema_key(subject, record.version), deleted.to_value())]
            if not record.deleted:
                raise RegistryError(
                    404,
                    errors.SCHEMAVERSION_NOT_SOFT_DELETED,
                    f"Subject '{subject}' Version {record.version} was not deleted first before being "
                    "permanently deleted",
                )
            return record.version, [(schema_key(subject, record.version), None)]

    def _check_unreferenced(self, records: list[SchemaRecord]) -> None:
        for record in records:
            users = self.referenced_by(record.subject, record.version)
            if users:
                raise RegistryError(
                    422,
                    errors.REFERENCE_EXISTS,
                    f"One or more references exist to the schema {{subject={record.subject}, "
                    f"version={record.version}}} (referenced by ids {users})",
                )

    def plan_config(self, subject: str | None, level: Any) -> tuple[str, list[Record]]:
        if not isinstance(level, str) or level.upper() not in LEVELS:
            raise errors.invalid_compatibility()
        if subject is not None:
            validate_subject(subject)
        level = level.upper()
        return level, [(config_key(subject), {"compatibilityLevel": level})]

    def plan_delete_config(self, subject: str | None) -> tuple[str, list[Record]]:
        """Remove a config and return the level that was in force."""
        with self._lock:
            old = self.compatibility(subject)
            if subject is not None and subject not in self._configs:
                if subject not in self._versions:
                    raise errors.subject_not_found(subject)
                return old, []
            return old, [(config_key(subject), None)]

    def plan_mode(self, subject: str | None, mode: Any, force: bool) -> tuple[str, list[Record]]:
        if not isinstance(mode, str) or mode.upper() not in MODES:
            raise errors.invalid_mode()
        mode = mode.upper()
        with self._lock:
            if subject is not None:
                validate_subject(subject)
            if mode == "IMPORT" and not force and self.mode(subject) != "IMPORT":
                present = subject in self._versions if subject is not None else bool(self._versions)
                if present:
                    raise errors.not_permitted(
                        "Cannot import since found existing subjects; use force=true to import anyway"
                    )
        return mode, [(mode_key(subject), {"mode": mode})]

    def plan_delete_mode(self, subject: str) -> tuple[str, list[Record]]:
        with self._lock:
            old = self.mode(subject)
            if self._modes.get(subject) is None:
                raise RegistryError(
                    404,
                    errors.SUBJECT_MODE_NOT_CONFIGURED,
                    f"Subject '{subject}' does not have subject-level mode configured",
                )
            return old, [(mode_key(subject), None)]
