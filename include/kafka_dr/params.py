"""What the DR phases' plan objects share: the checks of the params they are made from (a choice, a required
param). They travel between tasks through kafka_dr.codec."""

from __future__ import annotations

from collections.abc import Iterable
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
