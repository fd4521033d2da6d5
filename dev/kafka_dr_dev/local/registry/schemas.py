"""Schema validation and the canonical text a schema is stored and compared under.

Confluent stores a schema's canonical string and finds "the same schema" by comparing it, so
whitespace or key spacing never creates a new version or id. AVRO and JSON are stored as
compact JSON (the only normalization done, whatever ``normalize`` says); PROTOBUF is stored as
sent, without deep validation.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import fastavro

from .errors import invalid_schema

AVRO = "AVRO"
JSON = "JSON"
PROTOBUF = "PROTOBUF"
SCHEMA_TYPES = (JSON, PROTOBUF, AVRO)  # the order Confluent lists them in /schemas/types


@dataclass(frozen=True)
class Reference:
    """A schema reference: ``name`` is the type (AVRO) or import path, resolved at subject/version."""

    name: str
    subject: str
    version: int

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "subject": self.subject, "version": self.version}


@dataclass(frozen=True)
class ParsedSchema:
    """A validated schema ready for compatibility checks."""

    schema_type: str
    text: str
    parsed: Any
    named: dict[str, Any] = field(default_factory=dict)


def parse_references(raw: Any) -> tuple[Reference, ...]:
    """Validate the ``references`` array of a request body."""
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise invalid_schema("'references' must be an array")
    refs = []
    for item in raw:
        if not isinstance(item, dict):
            raise invalid_schema("each reference must be an object with name, subject and version")
        name, subject, version = item.get("name"), item.get("subject"), item.get("version")
        if not isinstance(name, str) or not isinstance(subject, str) or not isinstance(version, int):
            raise invalid_schema("each reference needs a string name, a string subject and an integer version")
        refs.append(Reference(name, subject, version))
    return tuple(refs)


def normalize_type(schema_type: Any) -> str:
    """The schema type of a request; AVRO when absent, as in Confluent."""
    if schema_type is None:
        return AVRO
    if not isinstance(schema_type, str) or schema_type.upper() not in SCHEMA_TYPES:
        raise invalid_schema(f"unknown schemaType {schema_type!r}; expected one of {', '.join(SCHEMA_TYPES)}")
    return schema_type.upper()


def canonical_text(schema_type: str, text: str) -> str:
    """The form two schemas are compared under; text that is not JSON is compared as sent."""
    if schema_type == PROTOBUF:
        return text
    try:
        return json.dumps(json.loads(text), separators=(",", ":"), ensure_ascii=False)
    except ValueError:
        return text


def parse(schema_type: str, text: Any, referenced: list[ParsedSchema] | None = None) -> ParsedSchema:
    """Validate ``text`` as ``schema_type`` and return it in canonical form.

    ``referenced`` are the already parsed schemas this one references, outermost last; their
    named types are visible to an AVRO schema, as Confluent's resolver makes them.
    """
    if not isinstance(text, str) or not text.strip():
        raise invalid_schema("empty schema")
    if schema_type == PROTOBUF:
        return ParsedSchema(PROTOBUF, text, text)
    try:
        loaded = json.loads(text)
    except ValueError as exc:
        raise invalid_schema(f"not valid JSON: {exc}") from None
    canonical = json.dumps(loaded, separators=(",", ":"), ensure_ascii=False)
    if schema_type == JSON:
        if not isinstance(loaded, dict | bool):
            raise invalid_schema("a JSON schema must be an object or a boolean")
        return ParsedSchema(JSON, canonical, loaded)
    named: dict[str, Any] = {}
    for ref in referenced or []:
        named.update(ref.named)
    try:
        parsed = fastavro.parse_schema(loaded, named_schemas=named, _write_hint=False)
    except Exception as exc:  # fastavro raises several unrelated types for bad schemas
        raise invalid_schema(f"{type(exc).__name__}: {exc}") from None
    return ParsedSchema(AVRO, canonical, parsed, named)
