"""Pure health rules: windows of samples built by hand, no Kafka, no clock."""

from __future__ import annotations

import json

import pytest

from kafka_dr.codec import decode, encode
from kafka_dr.health.rules import (
    STOP_MIN_MS,
    WINDOW,
    Cycle,
    Drift,
    FlowFindings,
    FlowHealth,
    PartitionSample,
    PartitionStatus,
    Slo,
    evaluate_flow,
    evaluate_partition,
    render_table,
)

T0 = 1_700_000_000_000
STEP = 60_000  # one sample a minute


def sample(
    i: int,
    committed: int | None,
    lag: int,
    *,
    progress: int | None = -1,
    start: int = 0,
    topic: str = "topic1",
    partition: int = 0,
    dest_topic: str = "topic1",
    seconds: float | None = None,
) -> PartitionSample:
    """The i-th sample (taken at T0 + i minutes); by default the flow recorded progress when it was taken."""
    end = (committed or 0) + lag
    return PartitionSample(
        T0 + i * STEP,
        topic,
        partition,
        dest_topic,
        start,
        end,
        committed,
        lag,
        float(lag) / 10 if seconds is None else seconds,
        T0 + i * STEP if progress == -1 else progress,
    )


def window(*points: tuple[int | None, int], **kw: object) -> list[PartitionSample]:
    """One sample per (committed, lag) point, a minute apart, each with fresh progress."""
    return [sample(i, committed, lag, **kw) for i, (committed, lag) in enumerate(points)]


def now_after(samples: list[PartitionSample], ms: int = 1_000) -> int:
    return samples[-1].time_ms + ms


def status_of(samples: list[PartitionSample], now: int | None = None) -> PartitionStatus:
    return evaluate_partition(samples, now_after(samples) if now is None else now)


# evaluate_partition


def test_empty_window_is_refused() -> None:
    with pytest.raises(ValueError):
        evaluate_partition([], T0)


def test_one_sample_with_lag_is_ok() -> None:
    result = status_of([sample(0, 100, 50)])
    assert (result.status, result.reason, result.lag_records, result.lag_seconds) == ("OK", "", 50, 5.0)


def test_one_sample_stops_only_past_the_minimum() -> None:
    one = [sample(0, 100, 50)]
    assert status_of(one, one[0].time_ms + STOP_MIN_MS).status == "OK"
    stopped = status_of(one, one[0].time_ms + STOP_MIN_MS + 1)
    assert (stopped.status, stopped.reason) == ("STOP", "no progress for 60s (50 records waiting)")


def test_caught_up_is_ok_even_without_progress() -> None:
    assert status_of([sample(0, 100, 0, progress=None)], T0 + 10 * STOP_MIN_MS).status == "OK"


def test_no_progress_recorded_is_stop() -> None:
    result = status_of(window((100, 5), (100, 5), progress=None))
    assert (result.status, result.reason) == ("STOP", "no progress recorded by the flow")


def test_progress_advancing_with_lag_shrinking_is_ok() -> None:
    assert status_of(window((100, 50), (150, 40), (200, 45))).status == "OK"


def test_burrow_rule_1_a_zero_lag_sample_makes_the_window_ok() -> None:
    # Lag never decreases after the zero and offsets are fixed: STALL and WARN would match without it.
    samples = window((100, 0), (100, 5), (100, 5))
    assert status_of(samples).status == "OK"
    assert status_of(samples[1:]).status == "STALL"


def test_early_warning_lag_growing_without_progress() -> None:
    result = status_of(window((100, 0), (100, 5), (100, 9)))
    assert (result.status, result.reason) == (
        "WARN",
        "lag growing (5 -> 9 records), no progress since the previous sample",
    )


def test_no_early_warning_when_the_offset_moved() -> None:
    assert status_of(window((100, 0), (100, 5), (103, 9))).status == "OK"


def test_rewind() -> None:
    result = status_of(window((100, 10), (150, 10), (120, 40), (170, 30)))
    assert (result.status, result.reason) == ("REWIND", "committed offset went back from 150 to 120")


def test_rewind_ignores_samples_without_a_committed_offset() -> None:
    assert status_of(window((None, 10), (100, 9), (None, 8), (110, 7))).status == "OK"


def test_rewind_out_of_the_window_no_longer_counts() -> None:
    points = [(500, 10), (400, 10)] + [(400 + 10 * i, 10 - i % 2) for i in range(1, WINDOW - 1)]
    samples = window(*points)
    assert len(samples) == WINDOW and status_of(samples).status == "REWIND"
    samples.append(sample(WINDOW, 500, 8))
    assert status_of(samples).status == "OK"  # the 500 -> 400 step fell out of the last WINDOW samples


def test_stop_when_progress_freezes() -> None:
    # Progress at minutes 0..3, then none: 7 minutes since the last progress > its 3-minute span.
    samples = [sample(i, 100 + 10 * min(i, 3), 50 + i, progress=T0 + min(i, 3) * STEP) for i in range(8)]
    result = status_of(samples, T0 + 10 * STEP)
    assert (result.status, result.reason) == ("STOP", "no progress for 420s (57 records waiting)")
    assert status_of(samples, T0 + 6 * STEP).status == "WARN"  # 3 minutes without progress, span 3 minutes


def test_stop_even_with_a_zero_lag_sample_in_the_window() -> None:
    # Caught up, then the replicator stopped and records arrived: Burrow's rule 1 alone would say OK.
    samples = [sample(i, 100, 0 if i < 2 else 5, progress=T0 + min(i, 1) * STEP) for i in range(4)]
    result = status_of(samples, T0 + 4 * STEP)
    assert (result.status, result.reason) == ("STOP", "no progress for 180s (5 records waiting)")


def test_one_progress_time_over_many_samples_waits_for_the_minimum() -> None:
    # Samples faster than the flow records progress show no span: judged like a single sample.
    samples = [sample(i, 100 + i, 10 - i, progress=T0) for i in range(3)]
    assert status_of(samples, T0 + STOP_MIN_MS).status == "OK"
    assert status_of(samples, T0 + STOP_MIN_MS + 1).status == "STOP"


def test_stall_progress_advancing_offset_fixed() -> None:
    result = status_of(window((100, 10), (100, 10), (100, 12)))
    assert (result.status, result.reason) == (
        "STALL",
        "committed offset 100 unchanged over 3 samples while 12 records wait",
    )


def test_warn_offsets_advance_lag_not_decreasing() -> None:
    result = status_of(window((100, 10), (110, 10), (120, 15), (130, 20)))
    assert (result.status, result.reason) == ("WARN", "lag not decreasing over 4 samples (10 -> 20 records)")


def test_lag_decreasing_once_is_ok() -> None:
    assert status_of(window((100, 10), (110, 15), (120, 14), (130, 20))).status == "OK"


def test_fewer_than_window_samples_are_judged() -> None:
    assert len(window((100, 10), (110, 11), (120, 12))) < WINDOW
    assert status_of(window((100, 10), (110, 11), (120, 12))).status == "WARN"


def test_more_than_window_samples_only_the_last_count() -> None:
    # The lag decreased once, 11 samples ago: out of the window, so the lag never decreases in it.
    points = [(0, 20), (10, 5)] + [(10 + 10 * i, 5 + i) for i in range(1, WINDOW)]
    samples = window(*points)
    assert len(samples) == WINDOW + 1
    result = status_of(samples)
    assert (result.status, result.reason) == ("WARN", f"lag not decreasing over {WINDOW} samples (5 -> 14 records)")


def test_gap_exact_count_range_and_reason() -> None:
    samples = window((1100, 400), (1200, 300))
    samples[-1] = sample(1, 1200, 300, start=1500)
    result = status_of(samples)
    assert result.status == "GAP" and result.gap == (1200, 1499)
    assert result.reason == "300 records deleted at the source before they were copied (offsets 1200-1499)"


def test_gap_is_found_before_anything_else_even_at_zero_lag() -> None:
    assert status_of([sample(0, 10, 0, start=11, progress=None)]).gap == (10, 10)


def test_start_equal_to_committed_is_no_gap() -> None:
    assert status_of([sample(0, 1500, 30, start=1500)]).status == "OK"


def test_never_committed_is_no_gap() -> None:
    result = status_of([sample(0, None, 30, start=1500)])
    assert (result.status, result.gap) == ("OK", None)


# evaluate_flow

FINDINGS = FlowFindings("dc1-to-dc2", T0)
NO_SLO = Slo()
HEALTHY = window((100, 50), (150, 40))
STALLED = window((100, 10), (100, 10))


def flow(
    windows: dict[tuple[str, int], list[PartitionSample]] | None = None,
    findings: FlowFindings = FINDINGS,
    slo: Slo = NO_SLO,
    now: int | None = None,
) -> FlowHealth:
    windows = {("topic1", 0): HEALTHY} if windows is None else windows
    return evaluate_flow("dc1-to-dc2", windows, findings, slo, now_after(HEALTHY) if now is None else now)


def test_healthy_flow() -> None:
    result = flow()
    assert (result.status, result.problems) == ("OK", ())
    assert [p.status for p in result.partitions] == ["OK"]


def test_unreachable_flow_is_err_without_partitions() -> None:
    result = flow(findings=FlowFindings("dc1-to-dc2", T0, unreachable="dc1: no broker answered in 10s"))
    assert (result.status, result.problems, result.partitions) == ("ERR", ("dc1: no broker answered in 10s",), ())


def test_partitions_sorted_and_their_problem_lines() -> None:
    windows = {
        ("topic2", 0): window((100, 10), (110, 10), topic="topic2"),
        ("topic1", 1): window((100, 10), (100, 10), partition=1),
        ("topic1", 0): HEALTHY,
    }
    result = flow(windows)
    assert [(p.topic, p.partition) for p in result.partitions] == [("topic1", 0), ("topic1", 1), ("topic2", 0)]
    assert result.status == "ERR"
    assert result.problems == (
        "STALL topic1[1] committed offset 100 unchanged over 2 samples while 10 records wait",
        "WARN topic2[0] lag not decreasing over 2 samples (10 -> 10 records)",
    )


def test_warn_partition_makes_the_flow_warn() -> None:
    result = flow({("topic1", 0): window((100, 10), (110, 10))})
    assert result.status == "WARN"


@pytest.mark.parametrize("kind", ["missing", "fewer_partitions", "config"])
def test_error_drift_marks_the_topic_partitions(kind: str) -> None:
    windows = {
        ("topic1", 0): HEALTHY,
        ("topic1", 1): window((100, 10), (110, 10), partition=1),  # WARN: overridden
        ("topic1", 2): window((100, 10), (100, 10), partition=2),  # STALL: kept
        ("topic2", 0): window((100, 50), (150, 40), topic="topic2"),  # another topic: untouched
    }
    detail = "3 partitions in dc2, 4 at the source"
    result = flow(windows, FlowFindings("dc1-to-dc2", T0, drift=(Drift("topic1", "topic1", kind, detail),)))
    assert [p.status for p in result.partitions] == ["DRIFT", "DRIFT", "STALL", "OK"]
    assert result.partitions[0].reason == detail
    assert result.status == "ERR"
    assert result.problems == (
        "STALL topic1[2] committed offset 100 unchanged over 2 samples while 10 records wait",
        f"DRIFT topic1 -> topic1: {detail}",
    )


@pytest.mark.parametrize("kind", ["more_partitions", "unsynced_config"])
def test_warn_drift_is_a_line_only(kind: str) -> None:
    detail = "retention.ms: 86400000 at the source, 3600000 in dc2"
    result = flow(findings=FlowFindings("dc1-to-dc2", T0, drift=(Drift("topic1", "topic1.r", kind, detail),)))
    assert (result.status, result.problems) == ("WARN", (f"WARN topic1 -> topic1.r: {detail}",))
    assert [p.status for p in result.partitions] == ["OK"]


def test_unknown_drift_kind_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown drift kind"):
        flow(findings=FlowFindings("dc1-to-dc2", T0, drift=(Drift("topic1", "topic1", "renamed", "?"),)))


def test_cycle_marks_the_destination_partition() -> None:
    windows = {
        ("topic1", 0): window((100, 50), (150, 40), dest_topic="topic1.r"),
        ("topic1", 1): window((100, 50), (150, 40), partition=1, dest_topic="topic1.r"),
    }
    findings = FlowFindings("dc1-to-dc2", T0, cycles=(Cycle("topic1.r", 1, 42),))
    result = flow(windows, findings)
    assert [p.status for p in result.partitions] == ["OK", "CYCLE"]
    assert result.status == "ERR"
    assert result.problems == ("CYCLE topic1.r[1] offset 42: provenance names this cluster and topic",)


def test_finding_without_a_sampled_partition_still_fails_the_flow() -> None:
    result = flow(findings=FlowFindings("dc1-to-dc2", T0, cycles=(Cycle("elsewhere", 0, 7),)))
    assert result.status == "ERR" and [p.status for p in result.partitions] == ["OK"]


def test_dead_replicator_is_err_and_unknown_is_not() -> None:
    dead = flow(findings=FlowFindings("dc1-to-dc2", T0, replicator_alive=False))
    assert (dead.status, dead.problems) == ("ERR", ("STOP the flow's continuous replicator is not running",))
    assert flow(findings=FlowFindings("dc1-to-dc2", T0, replicator_alive=None)).status == "OK"
    assert flow(findings=FlowFindings("dc1-to-dc2", T0, replicator_alive=True)).status == "OK"


def test_a_running_replicator_that_copies_nothing_of_waiting_records_is_stalled_since_its_last_progress() -> None:
    """Burrow's STALLED: the replicator is there (alive) and does not advance. Not when nothing runs (that is the
    dead replicator's STOP line), and not while the partition still moves."""
    stuck = [sample(i, 100, 50 + i, progress=T0) for i in range(3)]
    moving = [sample(i, 200 + i, 6 - i, partition=1) for i in (3, 4)]  # progress at each sample, lag going down
    now = T0 + 5 * STEP
    alive = FlowFindings("dc1-to-dc2", now, replicator_alive=True)
    result = flow({("topic1", 0): stuck, ("topic1", 1): moving}, findings=alive, now=now)
    assert result.status == "ERR" and result.stalled_seconds == 300.0
    assert result.problems[0] == (
        "STALLED for 300s: the replicator runs but has copied none of the 52 records waiting in its stopped partitions"
    )
    assert result.problems[1] == "STOP topic1[0] no progress for 300s (52 records waiting)"
    assert decode(FlowHealth, json.loads(json.dumps(encode(result)))) == result  # as the health run's tasks hand it on
    dead = flow({("topic1", 0): stuck}, findings=FlowFindings("dc1-to-dc2", now, replicator_alive=False), now=now)
    assert dead.stalled_seconds is None and not any(line.startswith("STALLED") for line in dead.problems)
    fine = flow({("topic1", 1): moving}, findings=alive, now=now_after(moving))
    assert fine.stalled_seconds is None and fine.status == "OK"


@pytest.mark.parametrize(
    ("slo", "findings", "line"),
    [
        (Slo(max_lag_records=39), FINDINGS, "SLO max_lag_records: 40 records behind (limit 39)"),
        (Slo(max_lag_seconds=3.5), FINDINGS, "SLO max_lag_seconds: 4.0s behind (limit 3.5s)"),
        (
            Slo(max_heartbeat_latency_ms=500),
            FlowFindings("dc1-to-dc2", T0, heartbeat_latency_ms=750.0),
            "SLO max_heartbeat_latency_ms: heartbeat latency 750ms (limit 500ms)",
        ),
        (Slo(max_checkpoint_age_s=30), FINDINGS, "SLO max_checkpoint_age_s: no checkpoint yet (limit 30s)"),
        (
            Slo(max_checkpoint_age_s=30),
            FlowFindings("dc1-to-dc2", T0, checkpoint_ms=now_after(HEALTHY) - 45_000),
            "SLO max_checkpoint_age_s: newest checkpoint 45s old (limit 30s)",
        ),
    ],
)
def test_slo_breach_is_err(slo: Slo, findings: FlowFindings, line: str) -> None:
    result = flow(findings=findings, slo=slo)
    assert (result.status, result.problems) == ("ERR", (line,))


def test_slo_limits_are_inclusive_and_missing_latency_is_no_breach() -> None:
    slo = Slo(max_lag_records=40, max_lag_seconds=4.0, max_heartbeat_latency_ms=500, max_checkpoint_age_s=30)
    findings = FlowFindings("dc1-to-dc2", T0, heartbeat_latency_ms=500.0, checkpoint_ms=now_after(HEALTHY) - 30_000)
    assert flow(findings=findings, slo=slo).status == "OK"
    no_latency = FlowFindings("dc1-to-dc2", T0, checkpoint_ms=now_after(HEALTHY))
    assert flow(findings=no_latency, slo=slo).status == "OK"


def test_slo_uses_the_worst_partition() -> None:
    windows = {("topic1", 0): HEALTHY, ("topic1", 1): window((100, 90), (150, 80), partition=1)}
    result = flow(windows, slo=Slo(max_lag_records=50))
    assert result.problems == ("SLO max_lag_records: 80 records behind (limit 50)",)


# JSON forms and table


def test_flow_health_json_shape() -> None:
    gap = sample(0, 1200, 300, start=1500)
    result = flow({("topic1", 0): [gap], ("topic1", 1): window((100, 50), (150, 40), partition=1)})
    data = json.loads(json.dumps(result.to_dict()))
    assert list(data) == ["name", "status", "problems", "partitions", "stalled_seconds"]
    assert data["stalled_seconds"] is None
    assert data["status"] == "ERR" and data["problems"] == [
        "GAP topic1[0] 300 records deleted at the source before they were copied (offsets 1200-1499)"
    ]
    failing, ok = data["partitions"]
    assert list(failing) == ["topic", "partition", "status", "lag_records", "lag_seconds", "reason", "gap"]
    assert failing["gap"] == [1200, 1499]
    assert ok == {"topic": "topic1", "partition": 1, "status": "OK", "lag_records": 40, "lag_seconds": 4.0}


def test_render_table() -> None:
    bad = flow({("topic1", 0): window((100, 10), (100, 10))}, slo=Slo(max_lag_records=5))
    good = FlowHealth("dc2-to-dc1", "OK", (), (PartitionStatus("t", 0, "OK", 0, 0.0, ""),))
    down = FlowHealth("dc3-to-dc1", "ERR", ("dc3: unreachable",), ())
    assert render_table([bad, good, down]).splitlines() == [
        "FLOW        STATUS  MAX LAG RECORDS  MAX LAG SECONDS  PROBLEMS",
        "dc1-to-dc2  ERR                  10            1.000         2",
        "    STALL topic1[0] committed offset 100 unchanged over 2 samples while 10 records wait",
        "    SLO max_lag_records: 10 records behind (limit 5)",
        "dc2-to-dc1  OK                    0            0.000         0",
        "dc3-to-dc1  ERR                   -                -         1",
        "    dc3: unreachable",
    ]
