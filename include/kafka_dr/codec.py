"""The one codec between the typed values the DR steps exchange (frozen dataclasses, nested, with tuples, lists, dicts,
enums, datetimes and paths) and the plain JSON Airflow keeps as XCom: a task returns `encode(result)` and reads
`decode(ItsType, xcom)` (kafka_dr.airflow.common.typed does both). JSON, not pickles: an XCom stays readable in the
UI and in a report.

A dataclass is an object of its fields. A field whose value is None and whose default is None is left out (a report
shows what happened, not every empty slot) and read back as None; any other missing field, and any field the type does
not have, is refused with one line naming the type and the field: a step renamed or changed on one side only fails
where its value is read, not later as a step that "did not run"."""

from __future__ import annotations

import dataclasses
import functools
import types
import typing
from collections.abc import Mapping, Sequence
from datetime import datetime
from enum import Enum
from pathlib import Path, PurePath
from typing import Any

NoneType = type(None)


class CodecError(ValueError):
    """A value that does not fit its type; one line naming where."""


def encode(value: Any) -> Any:
    """`value` as plain JSON: dataclasses as objects, tuples and lists as lists, enums as their values, datetimes as
    ISO strings, paths as strings. Raises CodecError for anything else (a pickle would hide it)."""
    if value is None or isinstance(value, str | int | float | bool):
        return value
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {
            f.name: encode(getattr(value, f.name))
            for f in dataclasses.fields(value)
            if not (getattr(value, f.name) is None and f.default is None)
        }
    if isinstance(value, Enum):
        return encode(value.value)
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, PurePath):
        return str(value)
    if isinstance(value, Mapping):
        return {_key(k): encode(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [encode(v) for v in value]
    raise CodecError(f"cannot encode a {type(value).__name__} as JSON: {value!r}")


def decode(kind: Any, data: Any, where: str = "") -> Any:
    """`data` (plain JSON, as encode made it) as a value of type `kind`; `where` names it in the error. Raises
    CodecError with one line, e.g. "FailoverPlan: missing field 'flows'"."""
    origin = typing.get_origin(kind) or (kind if kind in (dict, list, tuple, Mapping, Sequence) else None)
    if kind is Any:
        return data
    if origin in (typing.Union, types.UnionType):
        return _union(typing.get_args(kind), data, where)
    if dataclasses.is_dataclass(kind):
        return _dataclass(kind, data, where)
    if origin is not None:
        return _container(origin, typing.get_args(kind), data, where)
    if isinstance(kind, type) and issubclass(kind, Enum):
        try:
            return kind(data)
        except ValueError:
            raise _error(where, f"expected one of {', '.join(str(m.value) for m in kind)}, got {data!r}") from None
    if kind is Path:
        return Path(_scalar(str, data, where))
    if kind is datetime:
        try:
            return datetime.fromisoformat(data)
        except (TypeError, ValueError):
            raise _error(where, f"expected an ISO time, got {data!r}") from None
    return _scalar(kind, data, where)


def _dataclass(kind: type, data: Any, where: str) -> Any:
    if not isinstance(data, Mapping):
        raise _error(where, f"expected {kind.__name__}, got {_name(data)}")
    place = f"{where}: {kind.__name__}" if where else kind.__name__
    known = {f.name: f for f in dataclasses.fields(kind)}
    extra = [key for key in data if key not in known]
    if extra:
        raise CodecError(f"{place}: unknown field {extra[0]!r}")
    hints = _hints(kind)
    values = {}
    for name, field in known.items():
        if name in data:
            values[name] = decode(hints[name], data[name], f"{place}.{name}")
        elif field.default is not None:  # only a None default may be left out
            raise CodecError(f"{place}: missing field {name!r}")
    return kind(**values)


def _union(kinds: tuple[Any, ...], data: Any, where: str) -> Any:
    """None for an optional value; else the first of the kinds `data` decodes as (a union of dataclasses is told
    apart by their fields)."""
    if data is None and NoneType in kinds:
        return None
    chosen = [k for k in kinds if k is not NoneType]
    if len(chosen) == 1:
        return decode(chosen[0], data, where)
    for kind in chosen:
        try:
            return decode(kind, data, where)
        except CodecError:
            continue
    raise _error(where, f"expected {' or '.join(_type_name(k) for k in kinds)}, got {_name(data)}")


def _container(origin: Any, args: tuple[Any, ...], data: Any, where: str) -> Any:
    if origin in (dict, Mapping):
        if not isinstance(data, Mapping):
            raise _error(where, f"expected an object, got {_name(data)}")
        key, value = args or (Any, Any)
        return {decode(key, k, where): decode(value, v, f"{where}[{k!r}]") for k, v in data.items()}
    if origin in (list, tuple, Sequence):
        if isinstance(data, str | bytes | Mapping) or not isinstance(data, Sequence):
            raise _error(where, f"expected a list, got {_name(data)}")
        if origin is tuple and args and args[-1] is not Ellipsis:
            if len(args) != len(data):
                raise _error(where, f"expected {len(args)} items, got {len(data)}")
            return tuple(decode(k, v, f"{where}[{i}]") for i, (k, v) in enumerate(zip(args, data, strict=True)))
        items = [decode(args[0] if args else Any, v, f"{where}[{i}]") for i, v in enumerate(data)]
        return items if origin is list else tuple(items)
    raise _error(where, f"cannot decode {_type_name(origin)}")


def _scalar(kind: Any, data: Any, where: str) -> Any:
    """str, int, float, bool or None, as JSON has them: a bool is no number, an int is a float."""
    if kind in (None, NoneType):
        fits = data is None
    elif kind is bool:
        fits = isinstance(data, bool)
    elif kind is int:
        fits = isinstance(data, int) and not isinstance(data, bool)
    elif kind is float:
        fits = isinstance(data, int | float) and not isinstance(data, bool)
        data = float(data) if fits else data
    elif kind is str:
        fits = isinstance(data, str)
    else:
        raise _error(where, f"cannot decode {_type_name(kind)}")
    if not fits:
        raise _error(where, f"expected {_type_name(kind)}, got {_name(data)}")
    return data


@functools.cache
def _hints(kind: type) -> dict[str, Any]:
    """A dataclass's field types, its string annotations resolved in its module (once per type)."""
    return typing.get_type_hints(kind)


def _key(key: Any) -> str:
    if isinstance(key, Enum):
        key = key.value
    if not isinstance(key, str):
        raise CodecError(f"cannot encode a {type(key).__name__} key as JSON: {key!r}")
    return key


def _error(where: str, what: str) -> CodecError:
    return CodecError(f"{where}: {what}" if where else what)


def _type_name(kind: Any) -> str:
    return "None" if kind in (None, NoneType) else getattr(kind, "__name__", str(kind))


def _name(data: Any) -> str:
    return "None" if data is None else type(data).__name__
