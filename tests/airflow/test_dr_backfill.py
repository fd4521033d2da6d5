"""dr_backfill with dag.test() on the session's embedded stack: a flow started at `latest` after three hours of
records gets hour 2 backfilled beside its destination exactly once (a rerun copies nothing), a run without window
params takes its hourly data interval, a dry run changes nothing, bad params fail at the first task, and
`airflow backfill create` executed by a real scheduler copies each hour once.

That a backfill run again copies nothing is shown once, by the dag.test() rerun: a second `airflow backfill create`
re-running the scheduler's completed runs showed the same (0 copied, every record already present) for about 30
core-seconds of scheduler and task processes."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest
from airflow.utils.state import DagRunState, TaskInstanceState
from support.drills import copy_flow, send, states_of
from support.kafka import HOUR_MS, create_topic, high_watermarks, hourly_records, iso

from kafka_dr.clients import read_committed
from kafka_dr.replication.provenance import hops
from kafka_dr.topology import load_topology

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.usefixtures("jobs_in_process")]
PER_HOUR = 40


def backfill(dags: dict[str, Any], topology: Any, logical_date: datetime | None = None, **conf: Any) -> Any:
    """dr_backfill with every param given: dag.test() keeps params of an earlier run's conf."""
    params = {"flow": "bfd-flow", "topics": "", "window_start": "", "window_end": "", "offsets": ""}
    params |= {"target_topic": "{topic}.backfill", "dry_run": False, **conf}
    extra = {} if logical_date is None else {"logical_date": logical_date}
    return dags["dr_backfill"].test(run_conf={"topology": str(topology), **params}, **extra)


def copies(config: dict[str, str], topic: str) -> list[tuple[int, int]]:
    """(partition, origin offset) of every copy in `topic`."""
    ends = {key: end for key, end in high_watermarks(config).items() if key[0] == topic}
    return sorted(
        (m.partition(), hops(m.headers())[-1].offset)
        for m in read_committed(config, {k: (0, e) for k, e in ends.items()}, 30)
    )


def test_hour_2_backfilled_once_by_params_and_by_its_data_interval(dags, stack, state):
    dc1, dc2 = stack.local.config.dc("dc1"), stack.local.config.dc("dc2")
    source, target = {"bootstrap.servers": dc1.broker_address}, {"bootstrap.servers": dc2.broker_address}
    create_topic(source, "bfd", 2)
    hour1 = hourly_records(source, "bfd", PER_HOUR)
    path = stack.write_topology(
        "backfill-bfd",
        '  - {name: bfd-flow, source: dc1, target: dc2, topics: {include: ["bfd"]}, start: latest}',
        schema_registry=False,
    )
    copy_flow(load_topology(path), "bfd-flow")  # the flow runs from `latest`: no history in dc2
    hour2 = {"window_start": iso(hour1 + HOUR_MS), "window_end": iso(hour1 + 2 * HOUR_MS)}

    before = high_watermarks(target)
    dry = backfill(dags, path, **hour2, dry_run=True)
    assert dry.state == DagRunState.SUCCESS, states_of(dry)
    assert high_watermarks(target) == before

    run = backfill(dags, path, **hour2)
    assert run.state == DagRunState.SUCCESS, states_of(run)
    reports = sorted((state / "reports").glob("dr_backfill-*.json"), key=lambda p: p.stat().st_mtime)
    body = json.loads(reports[-1].read_text())
    assert (body["copied"], body["already_present"], body["unavailable"]) == (PER_HOUR, 0, [])
    assert body["verify"]["status"] == "verified" and body["target_topics"] == ["bfd.backfill"]
    assert body["window"] == hour2

    # No window params: the run's data interval. A manual run at hour 3's start covers hour 2: copies nothing more.
    hour3_start = datetime.fromtimestamp((hour1 + 2 * HOUR_MS) / 1000, UTC)
    rerun = backfill(dags, path, logical_date=hour3_start)
    assert rerun.state == DagRunState.SUCCESS, states_of(rerun)
    reports = sorted((state / "reports").glob("dr_backfill-*.json"), key=lambda p: p.stat().st_mtime)
    again = json.loads(reports[-1].read_text())
    assert (again["copied"], again["already_present"]) == (0, PER_HOUR)
    assert again["window"]["window_start"].startswith(iso(hour1 + HOUR_MS)[:19])


@pytest.mark.parametrize(
    ("conf", "message"),
    [
        ({"window_start": "2026-01-02T00:00:00Z", "window_end": "2026-01-01T00:00:00Z"}, "is not after"),
        ({"window_start": "2026-01-01T00:00:00Z", "window_end": "2999-01-01T00:00:00Z"}, "is in the future"),
        ({"flow": "nope", "offsets": '{"bfd-bad:0": [0, 1]}'}, "unknown flow 'nope'"),
        ({"topics": "other", "offsets": '{"bfd-bad:0": [0, 1]}'}, "selects none of the topics"),
        ({"offsets": '{"bfd-bad:0": [0, 5]}'}, "offsets past the end of their partition: bfd-bad:0 ends at 5"),
    ],
)
def test_bad_params_fail_at_the_first_task_and_change_nothing(dags, stack, state, capfd, conf, message):
    dc1, dc2 = stack.local.config.dc("dc1"), stack.local.config.dc("dc2")
    source = {"bootstrap.servers": dc1.broker_address}
    if ("bfd-bad", 0) not in high_watermarks(source):
        create_topic(source, "bfd-bad", 1)
        send(dc1.broker_address, "bfd-bad", [str(i) for i in range(5)])
    path = stack.write_topology(
        "backfill-bad",
        '  - {name: bfd-flow, source: dc1, target: dc2, topics: {include: ["bfd-bad"]}}',
        schema_registry=False,
    )
    before = high_watermarks({"bootstrap.servers": dc2.broker_address})
    run = backfill(dags, path, **conf)
    assert run.state == DagRunState.FAILED
    states = states_of(run)
    assert states["validate_backfill"] == TaskInstanceState.FAILED
    assert states["backfill"] == TaskInstanceState.UPSTREAM_FAILED
    assert message in "".join(capfd.readouterr())
    assert high_watermarks({"bootstrap.servers": dc2.broker_address}) == before


@pytest.mark.timeout(900)
def test_airflow_backfill_create_copies_each_hour_once(airflow_execution_api, stack, state, tmp_path):
    """`airflow backfill create` over the first two of three hours of records, executed by a scheduler (a process per
    task): each of those hours' records copied once in total, none of the third; the DAG's scheduled run copied
    nothing."""
    from support.airflow import backfill_with_scheduler, scheduled_runs

    dc1, dc2 = stack.local.config.dc("dc1"), stack.local.config.dc("dc2")
    source, target = {"bootstrap.servers": dc1.broker_address}, {"bootstrap.servers": dc2.broker_address}
    create_topic(source, "bfa", 2)
    # Hours that no earlier run of this session's dr_backfill covered: a backfill makes no run for a logical date that
    # has one (unless told to reprocess it).
    hour1 = hourly_records(source, "bfa", PER_HOUR, ending_ago=6)
    path = stack.write_topology(
        "backfill-bfa",
        '  - {name: bfa-flow, source: dc1, target: dc2, topics: {include: ["bfa"]}, start: latest}',
        schema_registry=False,
    )
    copy_flow(load_topology(path), "bfa-flow")
    conf = {"topology": str(path), "flow": "bfa-flow", "target_topic": "{topic}.backfill"}
    hours = (iso(hour1), iso(hour1 + HOUR_MS))  # logical dates of the first two hourly intervals, inclusive
    each_hour_once = sorted((i % 2, hour * PER_HOUR // 2 + i // 2) for hour in range(2) for i in range(PER_HOUR))
    logical_dates = [datetime.fromtimestamp((hour1 + h * HOUR_MS) / 1000, UTC).isoformat() for h in range(2)]

    runs = backfill_with_scheduler("dr_backfill", *hours, conf, airflow_execution_api, tmp_path / "backfill.log")
    assert runs == [(date, "success") for date in logical_dates], runs
    assert copies(target, "bfa.backfill") == each_hour_once
    reports = sorted((state / "reports").glob("dr_backfill-backfill__*.json"))  # one per run, in hour order
    copied = [(body["copied"], body["already_present"]) for body in (json.loads(r.read_text()) for r in reports)]
    assert copied == [(PER_HOUR, 0)] * 2
    # The DAG is unpaused at creation, so the scheduler also made its scheduled run of the latest hour, which skipped
    # itself and copied nothing.
    scheduled = scheduled_runs("dr_backfill")
    assert scheduled and all(state == "success" for state, _ in scheduled), scheduled
    assert all(set(tasks.values()) == {"skipped"} for _, tasks in scheduled), scheduled
