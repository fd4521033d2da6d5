"""Schema compatibility, as Confluent's compatibility levels define it.

BACKWARD: the new schema (reader) can read data written with the old (writer). FORWARD: the old
schema can read data written with the new. FULL: both. ``_TRANSITIVE`` checks every earlier
version instead of only the latest.

AVRO follows the Avro specification's schema-resolution rules (as Java's SchemaCompatibility
does): type promotions, record fields matched by name or alias, reader-only fields need a
default, enum symbols, fixed sizes, unions branch by branch, recursive named types.
JSON is a documented subset of Confluent's JSON Schema rules: matching ``type`` (integer may
widen to number), ``required`` properties, closed content models (``additionalProperties: false``),
``enum`` values and array ``items``, recursively through ``properties``. PROTOBUF is not checked:
any PROTOBUF change is accepted. A change of schema type is always incompatible.
"""

from __future__ import annotations

from typing import Any

from .schemas import AVRO, JSON, ParsedSchema

LEVELS = (
    "NONE",
    "BACKWARD",
    "BACKWARD_TRANSITIVE",
    "FORWARD",
    "FORWARD_TRANSITIVE",
    "FULL",
    "FULL_TRANSITIVE",
)
DEFAULT_LEVEL = "BACKWARD"

_PRIMITIVES = {"null", "boolean", "int", "long", "float", "double", "bytes", "string"}
_PROMOTIONS = {
    "int": {"int", "long", "float", "double"},
    "long": {"long", "float", "double"},
    "float": {"float", "double"},
    "string": {"string", "bytes"},
    "bytes": {"bytes", "string"},
}
_CONTAINED = {"array": "items", "map": "values"}  # a container type: the key of the schema it holds


def is_transitive(level: str) -> bool:
    return level.endswith("_TRANSITIVE")


def check(level: str, new: ParsedSchema, previous: list[ParsedSchema]) -> list[str]:
    """Problems making ``new`` incompatible with ``previous`` (the versions ``level`` compares
    against, oldest first) under ``level``; empty when compatible."""
    base = level.removesuffix("_TRANSITIVE")
    problems: list[str] = []
    for old in previous:
        if base in ("BACKWARD", "FULL"):
            problems += [f"BACKWARD: {p}" for p in can_read(new, old)]
        if base in ("FORWARD", "FULL"):
            problems += [f"FORWARD: {p}" for p in can_read(old, new)]
    return problems


def can_read(reader: ParsedSchema, writer: ParsedSchema) -> list[str]:
    """Why data written with ``writer`` cannot be read with ``reader`` (empty when it can)."""
    if reader.schema_type != writer.schema_type:
        return [f"schema type changed from {writer.schema_type} to {reader.schema_type}"]
    if reader.schema_type == AVRO:
        return _AvroResolver(reader.named, writer.named).check(reader.parsed, writer.parsed, "/")
    if reader.schema_type == JSON:
        return _json_can_read(reader.parsed, writer.parsed, "#")
    return []


class _AvroResolver:
    """Applies the Avro resolution rules; named types are looked up in each side's names."""

    def __init__(self, reader_names: dict[str, Any], writer_names: dict[str, Any]) -> None:
        self.reader_names = reader_names
        self.writer_names = writer_names
        self.in_progress: set[tuple[str, str]] = set()

    def _resolve(self, schema: Any, names: dict[str, Any]) -> Any:
        if isinstance(schema, str) and schema not in _PRIMITIVES:
            return names[schema]
        if isinstance(schema, dict) and schema.get("type") in _PRIMITIVES:
            return schema["type"]
        return schema

    def check(self, reader: Any, writer: Any, path: str) -> list[str]:
        reader = self._resolve(reader, self.reader_names)
        writer = self._resolve(writer, self.writer_names)
        if isinstance(writer, list):  # every branch the writer may have written must be readable
            return [p for i, branch in enumerate(writer) for p in self.check(reader, branch, f"{path}{i}/")]
        if isinstance(reader, list):  # one reader branch that reads the writer is enough
            if any(not self.check(branch, writer, path) for branch in reader):
                return []
            return [f"{path}: reader union has no branch matching writer type {_type_name(writer)}"]
        r_type, w_type = _type_name(reader), _type_name(writer)
        if w_type in _PRIMITIVES or r_type in _PRIMITIVES or r_type != w_type:
            if r_type in _PROMOTIONS.get(w_type, {w_type}):
                return []
            return [f"{path}: reader type {r_type} cannot read writer type {w_type}"]
        if r_type in _CONTAINED:
            key = _CONTAINED[r_type]
            return self.check(reader[key], writer[key], f"{path}{key}/")
        return self._check_named(r_type, reader, writer, path)

    def _check_named(self, r_type: str, reader: dict[str, Any], writer: dict[str, Any], path: str) -> list[str]:
        """A fixed, an enum or a record: the names match first."""
        if not _names_match(reader, writer):
            return [f"{path}: reader name {reader['name']} does not match writer name {writer['name']}"]
        if r_type == "fixed":
            if reader["size"] != writer["size"]:
                return [f"{path}: fixed size changed from {writer['size']} to {reader['size']}"]
            return []
        if r_type == "enum":
            if "default" in reader:
                return []
            missing = [s for s in writer["symbols"] if s not in reader["symbols"]]
            return [f"{path}: reader enum lacks symbols {missing}"] if missing else []
        return self._check_record(reader, writer, path)

    def _check_record(self, reader: dict[str, Any], writer: dict[str, Any], path: str) -> list[str]:
        pair = (reader["name"], writer["name"])
        if pair in self.in_progress:  # a recursive type: assume compatible while checking it
            return []
        self.in_progress.add(pair)
        try:
            problems: list[str] = []
            writer_fields = {f["name"]: f for f in writer["fields"]}
            for r_field in reader["fields"]:
                names = [r_field["name"], *r_field.get("aliases", [])]
                w_field = next((writer_fields[n] for n in names if n in writer_fields), None)
                field_path = f"{path}fields/{r_field['name']}/"
                if w_field is not None:
                    problems += self.check(r_field["type"], w_field["type"], field_path)
                elif "default" not in r_field:
                    problems.append(
                        f"{field_path}: reader field '{r_field['name']}' has no default value "
                        "and is missing in the writer schema"
                    )
            return problems
        finally:
            self.in_progress.discard(pair)


def _type_name(schema: Any) -> str:
    return schema if isinstance(schema, str) else schema["type"]


def _short(name: str) -> str:
    return name.rsplit(".", 1)[-1]


def _names_match(reader: dict[str, Any], writer: dict[str, Any]) -> bool:
    """Unqualified names match, or a reader alias names the writer (Java's rule)."""
    if _short(reader["name"]) == _short(writer["name"]):
        return True
    return writer["name"] in reader.get("aliases", []) or _short(writer["name"]) in reader.get("aliases", [])


def _json_types(schema: dict[str, Any]) -> set[str] | None:
    declared = schema.get("type")
    if declared is None:
        return None
    return {declared} if isinstance(declared, str) else set(declared)


def _json_can_read(reader: Any, writer: Any, path: str) -> list[str]:
    if reader is True or reader == {} or writer is False:
        return []
    if reader is False:
        return [f"{path}: reader schema accepts nothing"]
    if writer is True:
        writer = {}
    type_problem = _json_type_problem(reader, writer, path)
    if type_problem:
        return [type_problem]
    return [
        *_json_enum_problems(reader, writer, path),
        *_json_object_problems(reader, writer, path),
        *_json_nested_problems(reader, writer, path),
    ]


def _json_type_problem(reader: dict[str, Any], writer: dict[str, Any], path: str) -> str | None:
    """The writer's types must be among the reader's (an integer is a number)."""
    r_types, w_types = _json_types(reader), _json_types(writer)
    if r_types is None:
        return None
    if w_types is None:
        return f"{path}: reader restricts type to {sorted(r_types)}, writer does not"
    widened = r_types | ({"integer"} if "number" in r_types else set())
    if not w_types <= widened:
        return f"{path}: reader type {sorted(r_types)} cannot read writer type {sorted(w_types)}"
    return None


def _json_enum_problems(reader: dict[str, Any], writer: dict[str, Any], path: str) -> list[str]:
    if "enum" not in reader:
        return []
    if "enum" not in writer:
        return [f"{path}: reader restricts values to an enum, writer does not"]
    extra = [v for v in writer["enum"] if v not in reader["enum"]]
    return [f"{path}: writer enum values {extra} are not in the reader enum"] if extra else []


def _json_object_problems(reader: dict[str, Any], writer: dict[str, Any], path: str) -> list[str]:
    """Properties the reader requires and the writer does not; a closed reader's properties against the writer's."""
    problems = [
        f"{path}/properties/{name}: required by the reader but optional in the writer"
        for name in sorted(set(reader.get("required", [])) - set(writer.get("required", [])))
    ]
    if reader.get("additionalProperties") is False:
        if writer.get("additionalProperties") is not False:
            problems.append(f"{path}: reader is closed (additionalProperties false) but writer is open")
        r_props, w_props = reader.get("properties", {}), writer.get("properties", {})
        problems += [
            f"{path}/properties/{name}: writer property is not allowed by the closed reader"
            for name in sorted(set(w_props) - set(r_props))
        ]
    return problems


def _json_nested_problems(reader: dict[str, Any], writer: dict[str, Any], path: str) -> list[str]:
    """The properties both declare, then the array items, each checked as a schema of its own."""
    r_props, w_props = reader.get("properties", {}), writer.get("properties", {})
    problems: list[str] = []
    for name in sorted(set(r_props) & set(w_props)):
        problems += _json_can_read(r_props[name], w_props[name], f"{path}/properties/{name}")
    if "items" in reader and isinstance(reader["items"], dict | bool):
        problems += _json_can_read(reader["items"], writer.get("items", True), f"{path}/items")
    return problems
