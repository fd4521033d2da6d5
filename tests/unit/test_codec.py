"""The one codec between the steps' typed values and the plain JSON of their XComs (kafka_dr.codec): a round trip
through JSON gives the value back, nested dataclasses, tuples, lists, dicts, enums, datetimes and unions included;
a field missing, one too many or of the wrong kind is refused with one line naming the type and the field."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import Enum
from typing import Any

import pytest

from kafka_dr.codec import CodecError, decode, encode
from kafka_dr.schema_redirect.steps import OneLeader, RegistryMove, Skipped
from kafka_dr.schema_registry import Redirect


class Mode(Enum):
    PLANNED = "planned"
    DISASTER = "disaster"


@dataclass(frozen=True)
class Inner:
    name: str
    count: int


@dataclass(frozen=True)
class Outer:
    inner: Inner
    names: tuple[str, ...]
    counts: list[int]
    by_name: dict[str, Inner]
    mode: Mode
    at: datetime
    ratio: float
    pair: tuple[str, int]
    anything: Any
    maybe: Inner | None = None
    flag: bool = False
    tags: tuple[str, ...] = field(default_factory=tuple)


VALUE = Outer(
    inner=Inner("a", 1),
    names=("x", "y"),
    counts=[3, 4],
    by_name={"b": Inner("b", 2)},
    mode=Mode.DISASTER,
    at=datetime(2026, 3, 1, 10, 0, tzinfo=UTC),
    ratio=0.5,
    pair=("p", 9),
    anything={"free": [1, None]},
)


def through_json(value: Any) -> Any:
    """`value` encoded, as an XCom keeps it and hands it back: JSON text in between."""
    return json.loads(json.dumps(encode(value)))


def test_a_value_comes_back_from_its_json() -> None:
    data = through_json(VALUE)
    assert data["inner"] == {"name": "a", "count": 1} and data["names"] == ["x", "y"]
    assert (data["mode"], data["at"]) == ("disaster", "2026-03-01T10:00:00+00:00")
    assert decode(Outer, data) == VALUE
    fuller = Outer(**{**VALUE.__dict__, "maybe": Inner("m", 0), "flag": True, "tags": ("t",)})
    assert decode(Outer, through_json(fuller)) == fuller


def test_a_none_with_a_none_default_is_left_out_and_read_back_as_none() -> None:
    data = through_json(VALUE)
    assert "maybe" not in data  # None by default: only what the value has
    assert (data["flag"], data["tags"]) == (False, [])  # other defaults are written
    assert decode(Outer, data).maybe is None
    assert decode(Inner | None, None) is None


@pytest.mark.parametrize(
    ("change", "line"),
    [
        (lambda d: d.pop("names"), "^Outer: missing field 'names'$"),
        (lambda d: d.pop("flag"), "^Outer: missing field 'flag'$"),  # a default other than None is always written
        (lambda d: d.update(name="x"), "^Outer: unknown field 'name'$"),
        (lambda d: d["inner"].pop("count"), "^Outer.inner: Inner: missing field 'count'$"),
        (lambda d: d["by_name"]["b"].update(size=1), r"^Outer.by_name\['b'\]: Inner: unknown field 'size'$"),
        (lambda d: d.update(names="x"), "^Outer.names: expected a list, got str$"),
        (lambda d: d.update(counts=[1, True]), r"^Outer.counts\[1\]: expected int, got bool$"),
        (lambda d: d.update(mode="sudden"), "^Outer.mode: expected one of planned, disaster, got 'sudden'$"),
        (lambda d: d.update(at="yesterday"), "^Outer.at: expected an ISO time, got 'yesterday'$"),
        (lambda d: d.update(pair=["p"]), "^Outer.pair: expected 2 items, got 1$"),
        (lambda d: d.update(inner=None), "^Outer.inner: expected Inner, got None$"),
    ],
)
def test_a_field_missing_extra_or_of_the_wrong_kind_is_refused_in_one_line(change: Any, line: str) -> None:
    data = through_json(VALUE)
    change(data)
    with pytest.raises(CodecError, match=line):
        decode(Outer, data)


def test_where_names_the_value_in_the_line() -> None:
    with pytest.raises(CodecError, match=r"^report\(plan\): Inner: missing field 'count'$"):
        decode(Inner, {"name": "a"}, "report(plan)")
    with pytest.raises(CodecError, match=r"^report\(plan\): expected Inner, got list$"):
        decode(Inner, [], "report(plan)")


def test_an_int_is_a_float_and_a_bool_is_no_number() -> None:
    assert decode(float, 3) == 3.0 and isinstance(decode(float, 3), float)
    with pytest.raises(CodecError, match="^expected float, got bool$"):
        decode(float, True)


def test_a_union_of_dataclasses_is_told_apart_by_their_fields() -> None:
    redirect = Redirect("dc2", "http://dc2:8081", "dc2", True, 3, 4, 1.5)
    moved = RegistryMove(primary=redirect, follower=Skipped("dc1 does not answer"), one_leader=OneLeader("dc1", 5))
    data = through_json(moved)
    assert data == {
        "primary": data["primary"],
        "follower": {"skipped": "dc1 does not answer"},
        "one_leader": data["one_leader"],
    }
    assert decode(RegistryMove, data) == moved
    both = RegistryMove(primary=redirect, follower=redirect)
    assert decode(RegistryMove, through_json(both)) == both
    with pytest.raises(CodecError, match="^RegistryMove.follower: expected Redirect or Skipped or None, got str$"):
        decode(RegistryMove, {"follower": "dc1"})


def test_what_json_cannot_hold_is_refused_when_encoded() -> None:
    with pytest.raises(CodecError, match="^cannot encode a bytes as JSON"):
        encode(Inner(b"a", 1))  # type: ignore[arg-type]
    with pytest.raises(CodecError, match="^cannot encode a int key as JSON"):
        encode({1: "a"})
