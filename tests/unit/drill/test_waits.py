"""The drill's one wait (kafka_dr/drill/waits.py) and the steps that wait with it, on fakes: every wait ends, and a
wait that reached its deadline says what did not come in one line, handing over the last value it saw."""

from __future__ import annotations

import json
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from kafka_dr.access import ClusterAccess
from kafka_dr.drill import steps
from kafka_dr.drill.plan import DrillError, plan_drill
from kafka_dr.drill.run import AT_CUT, DrillRun
from kafka_dr.drill.waits import WaitTimeout, wait_until
from kafka_dr.topology import parse_topology

TOPOLOGY = parse_topology(
    {
        "clusters": {"dc1": {"bootstrap_servers": "127.0.0.1:1"}, "dc2": {"bootstrap_servers": "127.0.0.1:2"}},
        "flows": [
            {"name": "out", "source": "dc1", "target": "dc2", "topics": {"include": ["_kdr.drill"]}},
            {"name": "back", "source": "dc2", "target": "dc1", "topics": {"include": ["_kdr.drill"]}},
        ],
        "clients": {"app": {"cluster": "dc1", "role": "both"}},
    }
)


def test_a_wait_returns_the_first_value_that_is_done() -> None:
    values = iter([1, 2, 3, 4])
    assert wait_until(lambda: next(values), lambda v: v >= 3, timeout=5, every=0.001, what="three") == 3
    assert next(values) == 4  # not asked again once done


def test_a_wait_past_its_deadline_is_one_line_with_the_last_value() -> None:
    seen: list[float] = []
    started = time.monotonic()
    with pytest.raises(WaitTimeout) as raised:
        wait_until(
            lambda: seen.append(time.monotonic()) or len(seen), lambda _: False, timeout=0.2, every=0.05, what="x"
        )
    assert str(raised.value) == "x within 0.2 s" and raised.value.last == len(seen)
    assert isinstance(raised.value, DrillError)  # a step's wait fails the task with its line
    assert 3 <= len(seen) <= 6 and seen[-1] - started >= 0.2  # every `every`, the last look at the deadline
    with pytest.raises(WaitTimeout):
        wait_until(lambda: seen.append(0) or 0, bool, timeout=0, every=1, what="x")  # one look even at 0 s
    assert seen[-1] == 0


def drill_run(tmp_path: Path, scenario: str = "disaster_round_trip") -> DrillRun:
    params = {"scenario": scenario, "from_cluster": "dc1", "to_cluster": "dc2"}
    return DrillRun(plan_drill(TOPOLOGY, params), "topology.yaml", "0" * 64, tmp_path / "run")


def test_health_is_asked_again_until_no_flow_is_err_and_else_the_last_answer(monkeypatch: pytest.MonkeyPatch) -> None:
    from kafka_dr.health import check

    answers = iter([{"out": "ERR", "back": "OK"}, {"out": "OK", "back": "WARN"}])
    current: dict[str, str] = {}

    def check_flow(access: Any, name: str) -> SimpleNamespace:
        if name == "out":
            current.update(next(answers))
        return SimpleNamespace(name=name, status=current[name], problems=["no checkpoint yet"])

    monkeypatch.setattr(check, "check_flow", check_flow)
    monkeypatch.setattr(steps, "HEALTH_EVERY_S", 0.001)
    assert steps.wait_healthy(ClusterAccess(TOPOLOGY), timeout=5) == {
        "flows": {"out": "OK", "back": "WARN"},
        "passed": True,
        "problems": {},
    }
    answers = iter([{"out": "ERR", "back": "OK"}] * 1000)
    with pytest.raises(DrillError, match=r"^flows not healthy before the drill, nothing changed: out: no checkpoint"):
        steps.healthy_before(ClusterAccess(TOPOLOGY), timeout=0.01)


def test_the_consumer_catching_up_ends_once_it_read_what_was_acknowledged_since_the_cut(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = drill_run(tmp_path)
    run.probe.mkdir(parents=True)
    (run.folder / AT_CUT).write_text(json.dumps([1, 2, 3]))
    tallies = iter(
        [
            {"acknowledged": [1, 2, 3, 4, 5], "consumed": [1, 4]},
            {"acknowledged": [1, 2, 3, 4, 5, 6], "consumed": [1, 4, 5, 6]},
        ]
    )
    monkeypatch.setattr(steps.probe_process, "read", lambda folder: next(tallies))
    monkeypatch.setattr(steps, "CATCH_UP_EVERY_S", 0.001)
    assert steps.catch_up(run)["unread_after_failover"] == 2  # 2 and 3 were left in the lost DC
    assert json.loads((run.probe / "control.json").read_text())["consume"] is True

    monkeypatch.setattr(steps.probe_process, "read", lambda folder: {"acknowledged": [1, 2, 3, 7], "consumed": []})
    monkeypatch.setattr(steps, "CATCH_UP_S", 0.01)
    assert steps.catch_up(run)["unread_after_failover"] == 3  # never caught up: counted from its last tally
    assert steps.catch_up(drill_run(tmp_path, "planned_round_trip"))["unread_after_failover"] is None


def test_a_flow_that_never_checkpoints_the_probes_group_fails_the_disaster_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = drill_run(tmp_path)
    monkeypatch.setattr(steps, "copies_in", lambda admin, topic: 10)
    monkeypatch.setattr(steps, "load_checkpoints", lambda target, flow: ({"other-group": []}, 1))
    monkeypatch.setattr(steps.probe_process, "read", lambda folder: {"consumed": [1]})
    monkeypatch.setattr(steps, "CHECKPOINT_WAIT_S", 0.01)
    with pytest.raises(DrillError) as raised:
        steps.wait_checkpointed(run, "kdr-drill-probe-ab12", {}, None, before=0)
    assert str(raised.value) == (
        "flow out did not copy the probe's records into dc2 and checkpoint its group within 0.01 s: a disaster "
        "failover would have nothing to resume it from"
    )
    checkpoints = iter([({}, None), ({"kdr-drill-probe-ab12": []}, 1), ({"kdr-drill-probe-ab12": []}, 2**62)])
    monkeypatch.setattr(steps, "load_checkpoints", lambda target, flow: next(checkpoints))
    monkeypatch.setattr(steps, "CHECKPOINT_WAIT_S", 5.0)
    monkeypatch.setattr(steps, "CHECKPOINT_EVERY_S", 0.001)
    steps.wait_checkpointed(run, "kdr-drill-probe-ab12", {}, None, before=0)
    with pytest.raises(StopIteration):  # a checkpoint made before the first copy (at 1 ms) was not taken
        next(checkpoints)
