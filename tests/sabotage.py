"""Sabotage checks (`make sabotage`, outside `make test`): does the test named after an invariant fail when the
invariant is broken on purpose?

For each invariant, a scratch copy of the project's tracked files gets one deliberate break (an exact text
replacement in one source file, which must match once), and the tests named for it run there against the copy's
code (PYTHONPATH puts the copy's include/ and dev/ ahead of the venv's editable installs). A sabotage is caught when
every named test fails; before any sabotage the same tests must pass in an untouched copy, so a failure is the
break's doing. Prints a table and exits 1 when a sabotage went unnoticed or the baseline failed.

    make sabotage
    .venv/bin/python tests/sabotage.py [NAME ...]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from kafka_dr_dev.local import apache

ROOT = Path(__file__).resolve().parent.parent
# pytest runs at a time: the breaks caught by unit tests take a few seconds, those caught on brokers minutes of waiting.
JOBS = 3


@dataclass(frozen=True)
class Sabotage:
    name: str
    what: str
    changes: tuple[tuple[str, str, str], ...]  # (file relative to the project, text, its replacement)
    tests: tuple[str, ...]  # node ids that must fail


# drill/checks.py's verdict on the probe: each probe sabotage drops one of its counts.
PROBE_ONCE = (
    'once = drained and not (probe["lost"] or probe["duplicated"] or probe["refused"] or probe["unacknowledged"])'
)

SABOTAGES = (
    Sabotage(
        "group-requests-all-at-once",
        "every group coordinator request sent at once (librdkafka aborts the process when a queued one times out)",
        (
            (
                "include/kafka_dr/clients.py",
                "    for start in range(0, len(items), GROUPS_IN_FLIGHT):\n"
                "        window = ask(items[start : start + GROUPS_IN_FLIGHT])\n",
                "    for start in range(0, len(items), len(items)):\n        window = ask(items[start:])\n",
            ),
        ),
        ("tests/unit/test_clients.py::test_group_requests_go_out_a_window_at_a_time",),
    ),
    Sabotage(
        "stalled-unnamed",
        "a replicator that runs and copies nothing is never called STALLED",
        (
            (
                "include/kafka_dr/health/rules.py",
                "    if findings.replicator_alive is not True:\n        return None\n",
                "    return None\n",
            ),
        ),
        (
            "tests/unit/health/test_rules.py::"
            "test_a_running_replicator_that_copies_nothing_of_waiting_records_is_stalled_since_its_last_progress",
        ),
    ),
    Sabotage(
        "target-outage-ends-replicator",
        "a target node killed and started again ends the continuous replicator",
        (
            (
                "include/kafka_dr/replication/copier.py",
                "            if exc.args[0].code() not in (*STALE_METADATA, *AWAY_FOR_NOW)",
                "            if True or exc.args[0].code() not in ()",
            ),
        ),
        (
            "tests/unit/replication/test_copier.py::test_progress_waits_for_a_target_that_drops_its_broker_handle_and_comes_back",
        ),
    ),
    Sabotage(
        "translation-off-by-one",
        "offset translation returns the copy after the right one",
        (
            (
                "include/kafka_dr/translation/offsets.py",
                "            found[current] = message.offset()\n",
                "            found[current] = message.offset() + 1\n",
            ),
        ),
        (
            "tests/unit/translation/test_offsets.py::test_many_groups_of_one_partition_in_one_request",
            "tests/integration/test_translation.py::test_every_group_offset_is_exact_with_interleaved_local_records",
        ),
    ),
    Sabotage(
        "cycle-rule-off",
        "the cycle rule lets every record through",
        (
            (
                "include/kafka_dr/replication/provenance.py",
                "    return any(\n        hop.cluster_id == dest_cluster_id\n",
                "    return False and any(\n        hop.cluster_id == dest_cluster_id\n",
            ),
        ),
        (
            "tests/unit/replication/test_provenance.py::test_cycle_rule_blocks_only_the_cluster_and_topic_named",
            "tests/integration/test_replication.py::test_chain_carries_one_provenance_entry_per_hop_and_refuses_the_cycle",
        ),
    ),
    Sabotage(
        "fencing-off",
        "every writer and flow claim gets a transactional id of its own: a newer replicator fences no older one",
        (
            (
                "include/kafka_dr/replication/fencing.py",
                '    return f"_kdr.{flow}.writer-{slot}"\n',
                "    return f\"_kdr.{flow}.writer-{slot}.{__import__('uuid').uuid4().hex}\"\n",
            ),
            (
                "include/kafka_dr/replication/fencing.py",
                '"transactional.id": f"_kdr.{flow}.claim"',
                '"transactional.id": f"_kdr.{flow}.claim.{__import__(\'uuid\').uuid4().hex}"',
            ),
        ),
        (
            "tests/integration/test_replication.py::test_two_replicators_of_one_flow_raced_on_purpose_copy_each_record_once",
        ),
    ),
    Sabotage(
        "verify-blind",
        "verify counts no record as missing",
        (
            (
                "include/kafka_dr/replication/verify.py",
                "        missing = sorted(set(source) - set(seen))\n",
                "        missing = []\n",
            ),
        ),
        (
            "tests/unit/replication/test_verify.py::test_missing_duplicated_and_mismatched_copies_are_counted_with_their_offsets",
            "tests/integration/test_replication.py::test_verify_names_a_missing_a_duplicated_and_changed_copies_and_exits_1",
        ),
    ),
    Sabotage(
        "resume-from-checkpoint",
        "a replicator resumes at its progress record, not after the copies the destination log holds past it",
        (
            (
                "include/kafka_dr/replication/resume.py",
                "        return progress.next if last is None else max(last + 1, progress.next)\n",
                "        return progress.next\n",
            ),
        ),
        # Only the unit test: a copy task's progress record commits in the transaction of its copies, so the SIGKILL
        # test's kills never leave copies past it (it passed with this break, 2026-11-26 and 2026-11-28).
        (
            "tests/unit/replication/test_resume.py::test_progress_within_the_log_bounds_the_search_and_later_copies_are_found",
        ),
    ),
    Sabotage(
        "follower-start-off",
        "a following consumer in a group the DAG left out starts at auto.offset.reset, not the kept translation",
        (("include/kafka_dr/follower.py", "        if moved_in:\n", "        if False:\n"),),
        (
            "tests/airflow/test_following_clients.py::test_an_application_follows_a_disaster_failover_and_a_failback_without_a_restart",
        ),
    ),
    Sabotage(
        "reference-drifts",
        "the topology validator accepts a key the configuration reference does not list, and the CLI a flag the "
        "command-line reference does not",
        (
            (
                "include/kafka_dr/topology.py",
                '"airflow_site", "drill_max_age",',
                '"airflow_site", "drill_max_age", "rto_p",',
            ),
            (
                "include/kafka_dr/cli.py",
                'clients.add_argument("--json", action="store_true", help="print JSON")',
                'clients.add_argument("--json", "--as-json", action="store_true", help="print JSON")',
            ),
        ),
        (
            "tests/docs/test_reference.py::test_every_accepted_topology_key_is_documented",
            "tests/docs/test_reference.py::test_every_command_has_its_section_listing_its_flags",
        ),
    ),
    Sabotage(
        "probe-read-twice-ignored",
        "a drill whose probe read a record twice (and lost none) passes its verdict",
        (
            (
                "include/kafka_dr/drill/checks.py",
                PROBE_ONCE,
                PROBE_ONCE.replace('probe["duplicated"] or ', ""),
            ),
        ),
        (
            "tests/unit/drill/test_plan_and_checks.py::test_a_probe_that_lost_nothing_still_fails_a_record_read_twice_refused_or_unacknowledged[read-twice]",
        ),
    ),
    Sabotage(
        "probe-refused-ignored",
        "a drill whose probe had a record refused passes its verdict",
        (
            (
                "include/kafka_dr/drill/checks.py",
                PROBE_ONCE,
                PROBE_ONCE.replace(' or probe["refused"]', ""),
            ),
        ),
        (
            "tests/unit/drill/test_plan_and_checks.py::test_a_probe_that_lost_nothing_still_fails_a_record_read_twice_refused_or_unacknowledged[refused]",
        ),
    ),
    Sabotage(
        "probe-unacknowledged-ignored",
        "a drill whose probe had a record never acknowledged passes its verdict",
        (
            (
                "include/kafka_dr/drill/checks.py",
                PROBE_ONCE,
                PROBE_ONCE.replace(' or probe["unacknowledged"]', ""),
            ),
        ),
        (
            "tests/unit/drill/test_plan_and_checks.py::test_a_probe_that_lost_nothing_still_fails_a_record_read_twice_refused_or_unacknowledged[unacknowledged]",
        ),
    ),
    Sabotage(
        "proposal-runs-unapproved",
        "a failover health proposed runs without a person's approval under dr.approval: none",
        (
            (
                "include/kafka_dr/airflow/operators/approval.py",
                '        if topo.dr.approval == "none" and not proposed:\n',
                '        if topo.dr.approval == "none":\n',
            ),
        ),
        (
            "tests/airflow/test_approval_operator.py::test_approval_none_skips_the_task_but_a_proposed_failover_still_asks",
        ),
    ),
    Sabotage(
        "approvers-ignored",
        "any Airflow user may answer an approval whatever dr.approvers lists",
        (
            (
                "include/kafka_dr/airflow/operators/approval.py",
                '        self.assigned_users = [{"id": name, "name": name} for name in topo.dr.approvers] or None\n',
                "        self.assigned_users = None\n",
            ),
        ),
        (
            "tests/airflow/test_approval_operator.py::test_only_the_topologys_approvers_are_assigned_and_the_wait_ends_at_its_timeout",
        ),
    ),
    Sabotage(
        "approval-never-times-out",
        "an approval nobody answers waits for ever instead of failing the run at dr.approval_timeout",
        (
            (
                "include/kafka_dr/airflow/operators/approval.py",
                "        self.response_timeout = timedelta(seconds=topo.dr.approval_timeout_s)\n",
                "",
            ),
        ),
        (
            "tests/airflow/test_approval_operator.py::test_only_the_topologys_approvers_are_assigned_and_the_wait_ends_at_its_timeout",
        ),
    ),
    Sabotage(
        "finished-drill-approval-inherited",
        "an inner run cleared or triggered after its drill ended takes the finished drill's approval",
        (
            (
                "include/kafka_dr/airflow/operators/approval.py",
                '    if ti.get_dagrun_state("dr_drill", drill_run) != "running":\n        return None\n',
                "",
            ),
        ),
        (
            "tests/airflow/test_approval_operator.py::test_a_drills_approval_stands_for_its_inner_run_only_while_the_drill_runs",
        ),
    ),
    Sabotage(
        "four-eyes-ignored",
        "the user who triggered a failover may approve it under dr.four_eyes",
        (
            (
                "include/kafka_dr/airflow/operators/approval.py",
                "        if topo.dr.four_eyes and triggered_by and user == triggered_by:\n",
                "        if False:\n",
            ),
        ),
        (
            "tests/airflow/test_approval_operator.py::"
            "test_four_eyes_refuses_the_triggering_users_own_approval_unless_the_topology_turns_it_off",
        ),
    ),
    Sabotage(
        "rejection-approves",
        "a failover rejected by its approver runs on as if approved",
        (
            (
                "include/kafka_dr/airflow/operators/approval.py",
                '        if answer["chosen_options"] != [self.APPROVE]:\n',
                "        if False:\n",
            ),
        ),
        (
            "tests/airflow/test_approval_operator.py::"
            "test_a_rejection_fails_the_task_naming_who_and_an_approval_hands_who_and_the_wait_to_the_report",
        ),
    ),
    Sabotage(
        "dag-failed-every-run",
        "a scheduled DAG failing alike at every run alerts every time (twelve alerts an hour)",
        (
            (
                "include/kafka_dr/airflow/notifications/dag_failed.py",
                "notify(topology.alerts, alert, to, once_per=once_per)",
                "notify(topology.alerts, alert, to)",
            ),
        ),
        (
            "tests/airflow/test_dag_failed_notifier.py::"
            "test_a_scheduled_run_failing_the_same_way_alerts_once_and_each_manual_run_alerts_once",
        ),
    ),
    Sabotage(
        "failback-rto-unserved",
        "the metrics leave out the newest failback's RPO and RTO",
        (("include/kafka_dr/metrics.py", 'RTO_DAGS = ("dr_failover", "dr_failback")', 'RTO_DAGS = ("dr_failover",)'),),
        ("tests/unit/test_metrics.py::test_the_newest_failback_has_its_rpo_and_rto_beside_the_failovers",),
    ),
)


def scratch_copy(into: Path) -> Path:
    """The project's tracked files (as they are in the working tree) under `into`."""
    files = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True, text=True
    ).stdout.split("\0")
    for name in filter(None, files):
        source = ROOT / name
        if source.is_file():
            target = into / name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
    return into


def apply(copy: Path, sabotage: Sabotage) -> None:
    """The sabotage's changes in the copy; a text that is not there exactly once stops everything (the source moved
    on: the sabotage must be written again)."""
    for name, old, new in sabotage.changes:
        path = copy / name
        text = path.read_text()
        if text.count(old) != 1:
            raise SystemExit(f"{sabotage.name}: {name} holds the text to replace {text.count(old)} times, not once")
        path.write_text(text.replace(old, new))


def run_tests(copy: Path, tests: tuple[str, ...], log: Path) -> dict[str, str]:
    """Each test's outcome ("passed", "failed", "error", ...) in the copy, from pytest's report lines. Two xdist
    workers for the baseline's many tests; a break's one or two tests run in one process (a worker's start-up costs
    more than they do)."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(copy / "include"), str(copy / "dev"), str(copy / "tests")]),
        apache.LIBS_ENV: str(apache.libs_dir()),  # the copy has no .venv: this project's Kafka jars
    }
    env.pop("PYTEST_ADDOPTS", None)
    workers = ["-n", "2" if len(tests) > 2 else "0"]
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-rA", "-q", *workers, *tests]
    with open(log, "w") as out:
        subprocess.run(command, cwd=copy, env=env, stdout=out, stderr=subprocess.STDOUT, timeout=1800, check=False)
    outcomes = {test: "not run" for test in tests}
    for line in log.read_text(errors="replace").splitlines():
        word, _, rest = line.partition(" ")
        if word in ("PASSED", "FAILED", "ERROR", "SKIPPED") and rest.split(" - ")[0] in outcomes:
            outcomes[rest.split(" - ")[0]] = word.lower()
    return outcomes


def slow_first(sabotage: Sabotage) -> int:
    """How many of its tests start servers (those outside tests/unit and tests/docs): the slow breaks start first."""
    return -sum(not test.startswith(("tests/unit/", "tests/docs/")) for test in sabotage.tests)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help="sabotages to run (default: all)")
    parser.add_argument("--jobs", type=int, default=JOBS, help=f"pytest runs at a time (default {JOBS})")
    args = parser.parse_args()
    chosen = [s for s in SABOTAGES if not args.names or s.name in args.names]
    if args.names and len(chosen) != len(args.names):
        raise SystemExit(f"unknown sabotage: {sorted(set(args.names) - {s.name for s in SABOTAGES})}")
    work = Path(tempfile.mkdtemp(prefix="kdr-sabotage-"))
    print(f"scratch copies and logs in {work}", flush=True)
    tests = tuple(dict.fromkeys(t for s in chosen for t in s.tests))
    began = time.monotonic()

    def baseline() -> dict[str, str]:
        started = time.monotonic()
        outcomes = run_tests(scratch_copy(work / "baseline"), tests, work / "baseline.log")
        passed = sum(o == "passed" for o in outcomes.values())
        print(f"baseline, no sabotage: {passed}/{len(tests)} passed ({time.monotonic() - started:.0f} s)", flush=True)
        return outcomes

    def sabotaged(sabotage: Sabotage) -> dict[str, str]:
        started = time.monotonic()
        copy = scratch_copy(work / sabotage.name)
        apply(copy, sabotage)
        outcomes = run_tests(copy, sabotage.tests, work / f"{sabotage.name}.log")
        caught = all(outcome == "failed" for outcome in outcomes.values())
        verdict = "caught" if caught else "NOT CAUGHT"
        print(f"{sabotage.name}: {verdict} ({time.monotonic() - started:.0f} s)", flush=True)
        return outcomes

    # The baseline and the breaks run side by side (each in its own copy, each test on brokers of its own): a failure
    # is the break's doing only if the baseline passed, which is checked once all have run.
    with ThreadPoolExecutor(args.jobs) as pool:
        base = pool.submit(baseline)
        runs = {s.name: pool.submit(sabotaged, s) for s in sorted(chosen, key=slow_first)}
    rows = [(s.name, test, outcome) for s in chosen for test, outcome in runs[s.name].result().items()]
    print("\n| sabotage | test | outcome |\n|---|---|---|")
    for name, test, outcome in rows:
        print(f"| {name} | `{test}` | {outcome} |")
    caught = all(outcome == "failed" for _, _, outcome in rows)
    passed = all(outcome == "passed" for outcome in base.result().values())
    if not passed:
        print(f"\nbaseline failed: {base.result()}", file=sys.stderr)
    print(f"\n{len(chosen)} breaks in {time.monotonic() - began:.0f} s", flush=True)
    return 0 if caught and passed else 1


if __name__ == "__main__":
    sys.exit(main())
