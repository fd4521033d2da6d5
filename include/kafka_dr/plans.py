"""What the DR phases' plan objects share: the check of a choice they are made from, and reading one back from the
plain dict it travels as between tasks (XCom)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any


def choice(name: str, value: Any, allowed: Iterable[str]) -> str:
    """Param `name`'s `value`, one of `allowed`; else ValueError with one line."""
    allowed = tuple(allowed)
    if value not in allowed:
        raise ValueError(f"param {name}: must be one of {', '.join(allowed)}, got {value!r}")
    return value


def required(**params: Any) -> None:
    """Every one of `params` chosen: a DR switch has no defaults, so a run whose conf leaves one empty (REST, CLI or a
    cleared run of an older DAG version) fails naming them all; else ValueError with one line."""
    missing = [name for name, value in params.items() if value is None or value == ""]
    if missing:
        raise ValueError(f"param{'s' if len(missing) > 1 else ''} {', '.join(missing)}: required, no default")


def fields_of(data: Any, what: str, *required: str) -> Mapping[str, Any]:
    """`data` as a mapping holding every `required` key; else ValueError naming `what` and the keys missing."""
    if not isinstance(data, Mapping):
        raise ValueError(f"{what}: expected a mapping, got {type(data).__name__}")
    missing = [key for key in required if key not in data]
    if missing:
        raise ValueError(f"{what}: missing {', '.join(missing)}")
    return data
