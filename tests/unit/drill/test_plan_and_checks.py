"""A drill's params judged against the topology, and its figures judged against the objectives (pure logic)."""

from __future__ import annotations

from typing import Any

import pytest

from kafka_dr.drill import cutoff
from kafka_dr.drill.checks import drill_checks, drill_rpo, first_failure, objectives, probe_counts
from kafka_dr.drill.ledger import left
from kafka_dr.drill.plan import DrillError, plan_drill
from kafka_dr.topology import DrPolicy, Topology, load_topology, parse_topology

CLIENTS = {"orders-producer": {"cluster": "dc1", "role": "producer"}, "reader": {"cluster": "dc1", "role": "both"}}


def topology(**changes: Any) -> Topology:
    data: dict[str, Any] = {
        "clusters": {"dc1": {"bootstrap_servers": "127.0.0.1:1"}, "dc2": {"bootstrap_servers": "127.0.0.1:2"}},
        "flows": [
            {"name": "out", "source": "dc1", "target": "dc2", "topics": {"include": ["orders"]}},
            {"name": "back", "source": "dc2", "target": "dc1", "topics": {"include": ["orders"]}},
        ],
        "clients": CLIENTS,
    }
    data.update(changes)
    return parse_topology(data)


PARAMS = {"scenario": "planned_round_trip", "from_cluster": "dc1", "to_cluster": "dc2"}


def test_a_drill_plan_takes_the_probe_aliases_and_flows_from_the_topology() -> None:
    plan = plan_drill(topology(), PARAMS)
    assert (plan.producer_alias, plan.consumer_alias) == ("orders-producer", "reader")
    assert plan.flows == ("out",) and plan.probe_topic == "_kdr.drill" and plan.rate == 20.0
    assert not plan.disaster and plan.approval == "as_topology"


@pytest.mark.parametrize(
    "params, changes, error",
    [
        ({"scenario": "fire"}, {}, "scenario must be one of planned_round_trip, disaster_round_trip, got 'fire'"),
        ({"to_cluster": "dc3"}, {}, "to_cluster must be a cluster of the topology (dc1, dc2), got 'dc3'"),
        ({"to_cluster": "dc1"}, {}, "from_cluster and to_cluster are both 'dc1'"),
        ({"rate": 0}, {}, "rate must be records per second in (0, 1000], got 0"),
        ({"rate": True}, {}, "rate must be records per second in (0, 1000], got True"),
        ({"approval": "never"}, {}, "approval must be one of as_topology, skip, got 'never'"),
        ({"probe_topic": "payments"}, {}, "no flow dc1 -> dc2 copies the probe topic 'payments'"),
        ({}, {"flows": [{"name": "out", "source": "dc1", "target": "dc2", "topics": {"include": ["x"]}}]},
         "no flow dc2 -> dc1 copies the probe topic '_kdr.drill'"),
        ({}, {"clients": {"reader": {"cluster": "dc1", "role": "consumer"}}},
         "no client alias with role producer (or both) on dc1 for the probe"),
    ],
)  # fmt: skip
def test_a_bad_drill_param_is_refused_with_one_line(
    params: dict[str, Any], changes: dict[str, Any], error: str
) -> None:
    with pytest.raises(DrillError) as info:
        plan_drill(topology(**changes), {**PARAMS, **params})
    assert str(info.value).startswith(error), info.value
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(
    "params, changes",
    [
        ({"probe_topic": "payments"}, {}),
        ({}, {"clients": {"reader": {"cluster": "dc1", "role": "consumer"}}}),
    ],
)
def test_a_topology_that_cannot_run_the_drill_names_the_runbook_section(
    params: dict[str, Any], changes: dict[str, Any]
) -> None:
    with pytest.raises(DrillError) as info:
        plan_drill(topology(**changes), {**PARAMS, **params})
    assert str(info.value).endswith("; see docs/runbooks/dr_drill.md#the-topology-cannot-run-this-drill"), info.value


def test_a_cut_off_command_that_fails_names_what_to_do_next() -> None:
    """The DC may be left half cut off, or cut off for good: each failure names its runbook section."""
    without = topology()
    with pytest.raises(DrillError) as info:
        cutoff.check_commands(without, "dc1")
    assert str(info.value).endswith(
        "or run planned_round_trip; see docs/runbooks/dr_drill.md#the-topology-cannot-run-this-drill"
    )
    failing = topology(dr={"cut_off_command": "false {cluster}", "bring_back_command": "false {cluster}"})
    with pytest.raises(DrillError) as info:
        cutoff.cut_off(failing, "dc1")
    assert str(info.value) == (
        "dr.cut_off_command for dc1 exited 1: no output; see docs/runbooks/dr_drill.md#the-cluster-was-not-cut-off"
    )
    with pytest.raises(DrillError) as info:
        cutoff.bring_back(failing, "dc1")
    assert str(info.value) == (
        "dr.bring_back_command for dc1 exited 1: no output; see docs/runbooks/dr_drill.md#the-cluster-did-not-come-back"
    )


def test_the_embedded_topology_can_be_drilled_with_its_objectives_and_cut_off_commands() -> None:
    local = load_topology()  # include/topology.yaml
    assert plan_drill(local, {**PARAMS, "scenario": "disaster_round_trip"}).flows == ("dc1-to-dc2",)
    assert (local.dr.rpo_records, local.dr.rto_seconds) == (1000, 60)
    assert local.dr.cut_off_command == "kafka-dr-dev local stop {cluster} --registry-url {registry_url}"


TALLY = {"sent": 6, "acknowledged": [0, 1, 2, 3, 4, 5], "consumed": [0, 1, 2, 2, 3, 4], "refused": [], "dropped": 3}


def test_probe_counts_tell_lost_and_duplicated_records_apart() -> None:
    assert probe_counts(TALLY) == {
        "produced": 6, "delivered": 5, "lost": 1, "duplicated": 1, "sent": 6, "refused": 0, "unacknowledged": 0,
        "read_twice": 4, "registry_retries": 0, "errors": [],
    }  # fmt: skip


def test_a_disasters_rpo_is_exact_once_the_failback_measured_it() -> None:
    failover = {"rpo": {"records": 14, "exact": False}}
    failback = {"unreplicated": {"records": 3}}
    assert drill_rpo(True, failover, failback) == {"records": 3, "exact": True, "source": "dr_failback: unreplicated"}
    assert drill_rpo(True, failover, None) == {"records": 14, "exact": False, "source": "dr_failover: rpo"}
    assert drill_rpo(False, {"rpo": {"records": 0, "exact": True}}, failback)["records"] == 0


RUNS = [{"dag_id": "dr_failover", "state": "success"}, {"dag_id": "dr_failback", "state": "success"}]
COUNTS = probe_counts({"sent": 3, "acknowledged": [0, 1, 2], "consumed": [0, 1, 2]})
HEALTHY = {"flows": {"out": "OK", "back": "WARN"}}


def test_a_drill_that_met_everything_passes_every_check() -> None:
    goals = objectives(DrPolicy(rpo_records=10, rto_seconds=60), 0, 11.2)
    found = drill_checks(RUNS, COUNTS, True, goals, HEALTHY, [])
    assert [c.passed for c in found] == [True] * 6 and first_failure(found) is None
    assert [c.check for c in found][2:4] == ["RPO objective", "RTO objective"]
    assert found[3].detail == "11.2 s <= 60 s"


def test_an_impossible_rto_objective_fails_the_drill_naming_the_figure() -> None:
    goals = objectives(DrPolicy(rto_seconds=0.5), 0, 21.0)
    assert goals["rto_seconds"] == {"objective": 0.5, "measured": 21.0, "passed": False}
    failure = first_failure(drill_checks(RUNS, COUNTS, True, goals, HEALTHY, []))
    assert failure == "RTO objective missed: 21 s > 0.5 s (dr.rto_seconds)"


def test_no_objective_reports_the_figure_without_a_verdict() -> None:
    goals = objectives(DrPolicy(), 7, 11.0)
    assert goals["rpo_records"] == {"objective": None, "measured": 7, "passed": None}
    found = drill_checks(RUNS, COUNTS, True, goals, HEALTHY, [])
    assert found[2].passed and found[2].detail == "7 records; no objective (dr.rpo_records not set)"


@pytest.mark.parametrize(
    "runs, counts, drained, health, changed, failure",
    [
        ([{"dag_id": "dr_failover", "state": "failed"}, {"dag_id": "dr_failback", "state": None}], COUNTS, True,
         HEALTHY, [], "inner runs did not succeed: dr_failover failed, dr_failback not run"),
        (RUNS, probe_counts(TALLY), True, HEALTHY, [], "probe records not delivered once: 6 produced, 5 delivered, "
         "1 lost, 1 twice, 0 refused, 0 unacknowledged"),
        (RUNS, COUNTS, False, HEALTHY, [], "probe records not delivered once: 3 produced, 3 delivered, 0 lost, "
         "0 twice, 0 refused, 0 unacknowledged; its consumer did not catch up"),
        (RUNS, None, False, HEALTHY, [], "the probe gave no counts"),
        (RUNS, {**COUNTS, "errors": ["producer: ValueError: boom"]}, True, HEALTHY, [], "probe records not delivered "
         "once: 3 produced, 3 delivered, 0 lost, 0 twice, 0 refused, 0 unacknowledged; producer: ValueError: boom"),
        (RUNS, COUNTS, True, {"flows": {"out": "ERR"}}, [], "flows not healthy after the drill: out ERR"),
        (RUNS, COUNTS, True, None, [], "flows not healthy after the drill: not checked"),
        (RUNS, COUNTS, True, HEALTHY, ["client alias orders-producer on dc2 (was dc1)"],
         "the drill left production changed: client alias orders-producer on dc2 (was dc1); "
         "see docs/runbooks/dr_drill.md#a-drill-left-production-changed"),
    ],
)  # fmt: skip
def test_each_failed_check_names_what_failed(
    runs: list[dict[str, Any]], counts: Any, drained: bool, health: Any, changed: list[str], failure: str
) -> None:
    goals = objectives(DrPolicy(), 0, 1.0)
    assert first_failure(drill_checks(runs, counts, drained, goals, health, changed)) == failure


@pytest.mark.parametrize(
    "tally, counts",
    [
        pytest.param({"consumed": [0, 1, 1, 2]}, "0 lost, 1 twice, 0 refused, 0 unacknowledged", id="read-twice"),
        pytest.param({"refused": [3]}, "0 lost, 0 twice, 1 refused, 0 unacknowledged", id="refused"),
        pytest.param({"unacknowledged": 1}, "0 lost, 0 twice, 0 refused, 1 unacknowledged", id="unacknowledged"),
    ],
)
def test_a_probe_that_lost_nothing_still_fails_a_record_read_twice_refused_or_unacknowledged(
    tally: dict[str, Any], counts: str
) -> None:
    """Each count fails the verdict on its own: a drill whose probe lost nothing is not delivered-once for it."""
    probe = probe_counts({"sent": 4, "acknowledged": [0, 1, 2], "consumed": [0, 1, 2], **tally})
    assert probe["lost"] == 0
    failure = first_failure(drill_checks(RUNS, probe, True, objectives(DrPolicy(), 0, 1.0), HEALTHY, []))
    assert failure == f"probe records not delivered once: 3 produced, 3 delivered, {counts}"


def test_what_a_drill_left_changed_is_named_alias_by_alias() -> None:
    before = {
        "aliases": {"orders-producer": "dc1", "reader": "dc1"},
        "replicators": {"out": True, "back": True, "idle": False},
        "registries": {"dc1": "leader", "dc2": "follower"},
    }
    assert left(before, before) == []
    now = {
        "aliases": {"orders-producer": "dc2", "reader": "dc1"},
        "replicators": {"out": False, "back": True, "idle": False},
        "registries": {"dc1": "unreachable", "dc2": "leader"},
    }
    assert left(before, now) == [
        "client alias orders-producer on dc2 (was dc1)",
        "flow out: its replicator is not running (it was)",
        "schema registry of dc1: unreachable (was leader)",
        "schema registry of dc2: leader (was follower)",
    ]
