"""ProposalApprovalTrigger's loop, driven in asyncio as the triggerer drives it, with the answer poll and the probe
of the lost cluster replaced: the wait ends with the answer when one comes first, and by itself, as "reachable
again", when the cluster answers first. Against a real cluster and scheduler: tests/e2e/test_local_executor.py."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest
from airflow.triggers.base import TriggerEvent

from kafka_dr.airflow.triggers import proposal
from kafka_dr.airflow.triggers.proposal import REACHABLE_AGAIN, ProposalApprovalTrigger


def trigger() -> ProposalApprovalTrigger:
    return ProposalApprovalTrigger(
        ti_id=uuid.uuid4(),
        options=["Approve", "Reject"],
        params={},
        timeout_datetime=None,
        poke_interval=0.01,
        cluster="dc1",
        topology="t.yaml",
    )


async def first_event(made: ProposalApprovalTrigger) -> dict[str, Any]:
    async for event in made.run():
        return event.payload
    raise AssertionError("the trigger ended without an event")


def test_it_serializes_with_the_cluster_and_the_topology() -> None:
    made = trigger()
    classpath, kwargs = made.serialize()
    assert classpath == "kafka_dr.airflow.triggers.proposal.ProposalApprovalTrigger"
    assert (kwargs["cluster"], kwargs["topology"], kwargs["options"]) == ("dc1", "t.yaml", ["Approve", "Reject"])
    assert ProposalApprovalTrigger(**kwargs).serialize() == (classpath, kwargs)


def test_the_wait_ends_by_itself_once_the_cluster_answers(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(proposal, "PROBE_INTERVAL_S", 0.0)
    made = trigger()
    probes = iter([False, False, True])

    async def no_answer() -> None:
        return None

    monkeypatch.setattr(made, "_handle_response", no_answer)
    monkeypatch.setattr(made, "reachable", lambda: next(probes))
    assert asyncio.run(first_event(made)) == {"error": "dc1 reachable again", "error_type": REACHABLE_AGAIN}


def test_an_answer_ends_the_wait_before_any_probe(monkeypatch: pytest.MonkeyPatch) -> None:
    made = trigger()
    answer = {"chosen_options": ["Approve"], "responded_by_user": {"id": "bob", "name": "bob"}}

    async def answered() -> TriggerEvent:
        return TriggerEvent(answer)

    def probe() -> bool:
        raise AssertionError("probed although the answer had come")

    monkeypatch.setattr(made, "_handle_response", answered)
    monkeypatch.setattr(made, "reachable", probe)
    assert asyncio.run(first_event(made)) == answer


def test_probes_are_spaced_by_the_probe_interval(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(proposal, "PROBE_INTERVAL_S", 3600.0)
    made = trigger()
    polls = probes = 0

    async def no_answer_then_one() -> TriggerEvent | None:
        nonlocal polls
        polls += 1
        return TriggerEvent({"chosen_options": ["Reject"]}) if polls == 20 else None

    def probe() -> bool:
        nonlocal probes
        probes += 1
        return False

    monkeypatch.setattr(made, "_handle_response", no_answer_then_one)
    monkeypatch.setattr(made, "reachable", probe)
    assert asyncio.run(first_event(made)) == {"chosen_options": ["Reject"]}
    assert (polls, probes) == (20, 1)  # polled every poke_interval, probed once an hour
