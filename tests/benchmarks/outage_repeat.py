"""The continuous replicator's outage scenario, run again and again (issue 47): each run is the suite's test
`test_a_continuous_replicator_copies_every_record_once_through_a_target_and_then_a_source_outage` in a pytest of its
own (new brokers each time): 30,000 records written about 1 ms apart into dc1, dc2 killed for 10 s and started
again, then dc1; it passes only when dc2 holds every acknowledged record once, read from dc2 itself, and verify
agrees (0 missing, 0 duplicated). Prints each run's outcome and time, then the tally; exits 1 unless every run
passed.

    PYTHONPATH=tests .venv/bin/python tests/benchmarks/outage_repeat.py [--runs 20] [--kafka embedded]

On Apache Kafka nodes unless `--kafka embedded` (the broker issue 47's stall was seen on).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

from support.servers import BROKERS, KIND_ENV

ROOT = Path(__file__).resolve().parents[2]
TEST = (
    "tests/integration/test_replication.py::"
    "test_a_continuous_replicator_copies_every_record_once_through_a_target_and_then_a_source_outage"
)


def one_run(kafka: str) -> tuple[bool, str]:
    """(passed, pytest's last line, or the first assertion line of a failure)."""
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:randomly", "-p", "no:cacheprovider", TEST],
        cwd=ROOT,
        env={**os.environ, KIND_ENV: kafka},
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    lines = done.stdout.splitlines()
    failure = next((line for line in lines if line.startswith("E ")), None)
    return done.returncode == 0, failure or (lines[-1] if lines else f"exit {done.returncode}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--kafka", choices=sorted(BROKERS), default="apache", help="the brokers' kind")
    args = parser.parse_args()
    passed = 0
    for run in range(1, args.runs + 1):
        started = time.monotonic()
        ok, line = one_run(args.kafka)
        passed += ok
        print(f"run {run}/{args.runs}: {'passed' if ok else 'FAILED'} in {time.monotonic() - started:.0f} s: {line}")
        sys.stdout.flush()
    print(
        f"{passed}/{args.runs} runs passed on {args.kafka} brokers "
        "(each: every acknowledged record in dc2 once; verify 0 missing, 0 twice)"
    )
    return 0 if passed == args.runs else 1


if __name__ == "__main__":
    sys.exit(main())
