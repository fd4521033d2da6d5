"""`kafka-dr` command line: replication lag and health, readiness and status, offsets, client aliases, replicators
and drills. The development stack's commands (`local`, `airflow`, `demo`) are `kafka-dr-dev`'s (kafka_dr_dev.cli),
which builds on the helpers here (Parser, fail, ...).

Exit codes follow docs/design.md: 0 done, 1 failed, 2 bad input; every error is one line on stderr.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn

from kafka_dr.access import ClusterAccess
from kafka_dr.clients import LIBRDKAFKA_LOG, ClientConfigError
from kafka_dr.paths import default_topology
from kafka_dr.replication.replicators import ReplicatorError
from kafka_dr.topology import TopologyError, load_topology


class Parser(argparse.ArgumentParser):
    """argparse prints usage plus a message; DESIGN wants one line and exit code 2."""

    def error(self, message: str) -> NoReturn:
        fail(f"{message} (see `{self.prog} --help`)", self.prog.split()[0])
        raise SystemExit(2)


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    configure_logging(args.verbose)
    try:
        return args.run(args)
    except (TopologyError, ClientConfigError, ReplicatorError) as exc:
        fail(str(exc))
        return 2
    except KeyboardInterrupt:
        return 130


def fail(message: str, prog: str = "kafka-dr") -> None:
    print(f"{prog}: error: {message}", file=sys.stderr)


def configure_logging(verbose: bool) -> None:
    """Warnings of kafka-dr on stderr, as Python shows them by default; with --verbose its info lines and librdkafka's
    own log lines too, timed and named. Without it librdkafka's lines are dropped: a refused connection is logged
    many times before the command's one error line says what failed."""
    if verbose:
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
        LIBRDKAFKA_LOG.setLevel(logging.DEBUG)
    else:
        logging.basicConfig(level=logging.WARNING, format="%(message)s")
        LIBRDKAFKA_LOG.setLevel(logging.CRITICAL + 1)


def verbose_option(parser: argparse.ArgumentParser, default: object = False) -> None:
    parser.add_argument(
        "-v", "--verbose", action="store_true", default=default, help="also log kafka-dr's and librdkafka's own lines"
    )


def _parser() -> argparse.ArgumentParser:
    parser = Parser(prog="kafka-dr", description="Disaster recovery for multi-datacenter Apache Kafka.")
    verbose_option(parser)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _watch_commands(commands)
    _act_commands(commands)
    return parser


def _watch_commands(commands: argparse._SubParsersAction) -> None:
    """The commands that read how replication and the deployment stand: lag, health, readiness, status, metrics."""
    lag = commands.add_parser("lag", help="replication lag per flow and partition, in records and seconds")
    topology_option(lag)
    verbose_option(lag, default=argparse.SUPPRESS)  # after the command too
    lag.add_argument("--flow", metavar="NAME", help="only this flow (default: every flow)")
    lag.add_argument("--json", action="store_true", help="print a JSON list, one object per flow")
    lag.add_argument(
        "--timeout",
        type=_seconds,
        default=10.0,
        metavar="SECONDS",
        help="how long to wait for each cluster (default 10)",
    )
    lag.set_defaults(run=_lag)

    health = commands.add_parser(
        "health", help="sample and evaluate each flow once (what dr_replication_health does, without self-heal)"
    )
    topology_option(health)
    verbose_option(health, default=argparse.SUPPRESS)  # after the command too
    health.add_argument("--flow", metavar="NAME", help="only this flow (default: every flow)")
    health.add_argument("--json", action="store_true", help='print {"flows": [...]} as docs/design.md describes it')
    health.set_defaults(run=_health)

    ready = commands.add_parser(
        "readiness", help="what would stop or slow a failover now, each with its runbook; exit 1 if anything would"
    )
    topology_option(ready)
    verbose_option(ready, default=argparse.SUPPRESS)  # after the command too
    ready.add_argument("--json", action="store_true", help='print {"ready": bool, "findings": [...]}')
    ready.set_defaults(run=_readiness)

    status = commands.add_parser(
        "status", help="which DC serves: each failover whose failback is pending, and the last readiness verdict"
    )
    status.add_argument("--json", action="store_true", help='print {"failed_over": [...], "readiness": {...}}')
    status.set_defaults(run=_failover_status)

    metrics = commands.add_parser(
        "metrics", help="Prometheus metrics from the latest health runs and reports (no cluster is asked)"
    )
    topology_option(metrics)
    metrics.add_argument(
        "--textfile",
        type=Path,
        metavar="FILE",
        help="write them to FILE (atomically, for node_exporter's textfile collector) instead of printing them",
    )
    metrics.set_defaults(run=_metrics)


def _act_commands(commands: argparse._SubParsersAction) -> None:
    """The commands about one thing an operator acts on: a group's offsets, client aliases, replicators, the drill
    record."""
    offsets = commands.add_parser(
        "offsets", help="where a consumer group resumes in another cluster: its translated offsets, per partition"
    )
    offsets.add_argument("group", metavar="GROUP")
    offsets.add_argument("--to", required=True, metavar="CLUSTER", dest="to_cluster", help="the cluster to resume in")
    topology_option(offsets)
    verbose_option(offsets, default=argparse.SUPPRESS)  # after the command too
    offsets.add_argument("--flow", metavar="NAME", help="only this flow into CLUSTER (default: every one)")
    offsets.add_argument(
        "--live",
        action="store_true",
        help="translate the group's offsets in the source now (it must answer) instead of reading the checkpoints "
        "kept in CLUSTER (what to use when the source is lost)",
    )
    offsets.add_argument("--json", action="store_true", help="print JSON")
    offsets.add_argument(
        "--apply", action="store_true", help="commit them for GROUP in CLUSTER; refused while it has an active member"
    )
    offsets.set_defaults(run=_offsets)

    clients = commands.add_parser("clients", help="which cluster each client alias connects to now")
    clients.add_argument(
        "alias", nargs="?", metavar="ALIAS", help="print this alias's client settings (secrets hidden)"
    )
    topology_option(clients)
    clients.add_argument("--json", action="store_true", help="print JSON")
    clients.set_defaults(run=_clients)

    replicators = commands.add_parser(
        "replicators", help="the continuous replicators started on this host, or stop them (from any process)"
    )
    replicators.add_argument("action", nargs="?", choices=["list", "stop"], default="list", help="default: list")
    replicators.add_argument(
        "flows", nargs="*", metavar="FLOW", help="only these flows (default: every one started on this host)"
    )
    topology_option(replicators, "where the flows' targets are, asked about a replicator of another PID namespace")
    replicators.add_argument(
        "--timeout", type=float, default=30.0, metavar="S", help="stop: seconds a replicator has to end (default 30)"
    )
    replicators.set_defaults(run=_replicators)

    drill = commands.add_parser(
        "drill", help="the open DR drill record: what a drill stopped half-way left changed, and closing it"
    )
    drill.add_argument("action", nargs="?", choices=["status", "resolve"], default="status", help="default: status")
    topology_option(drill)
    drill.add_argument(
        "--accept",
        action="store_true",
        help="resolve: close the record although the state differs from the drill's start (the state now is wanted)",
    )
    drill.set_defaults(run=_drill)


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not value > 0:
        raise argparse.ArgumentTypeError(f"expected a positive number of seconds, got {text!r}")
    return value


def topology_option(parser: argparse.ArgumentParser, what: str = "") -> None:
    parser.add_argument(
        "--topology",
        type=Path,
        metavar="FILE",
        help=f"topology file{': ' + what if what else ''} (default: $KDR_TOPOLOGY, else include/topology.yaml)",
    )


def _access(args: argparse.Namespace) -> ClusterAccess:
    """How the command reaches the clusters of its topology: the settings of this process's environment."""
    return ClusterAccess.from_environ(load_topology(args.topology))


def _lag(args: argparse.Namespace) -> int:
    from kafka_dr.lag_report import lag_report  # Kafka clients are loaded only when asked

    return lag_report(_access(args), args.flow, as_json=args.json, timeout=args.timeout)


def _health(args: argparse.Namespace) -> int:
    from kafka_dr.health.check import check_flow  # Kafka clients are loaded only when asked
    from kafka_dr.health.rules import render_table

    access = _access(args)
    topology = access.topology
    names = [topology.flow(args.flow).name] if args.flow else [f.name for f in topology.flows]  # before any I/O
    results = []
    for name in names:
        if not args.json:
            print(f"checking {name} ...", file=sys.stderr, flush=True)
        results.append(check_flow(access, name))
    if args.json:
        print(json.dumps({"flows": [h.to_dict() for h in results]}, indent=2))
    else:
        print(render_table(results))
    return 1 if any(h.status == "ERR" for h in results) else 0


def _readiness(args: argparse.Namespace) -> int:
    from datetime import UTC, datetime

    from kafka_dr import readiness

    access = _access(args)
    findings = readiness.evaluate(access.topology, readiness.gather(access, datetime.now(UTC)))
    ready = readiness.ready(findings)
    if args.json:
        print(json.dumps({"ready": ready, "findings": [f.to_dict() for f in findings]}, indent=2))
    else:
        print("\n".join(f.line() for f in findings))
        print("READY" if ready else "NOT READY: a failover now would stop or slow on the lines above")
    return 0 if ready else 1


def _failover_status(args: argparse.Namespace) -> int:
    from dataclasses import asdict

    from kafka_dr import readiness, roles

    pending, checked = roles.pending(), readiness.load()
    if args.json:
        print(json.dumps({"failed_over": [asdict(e) for e in pending.values()], "readiness": checked}, indent=2))
        return 0
    for entry in pending.values():
        print(f"failed over: {entry.line()}")
    if not pending:
        print("no failover pending: every cluster serves its own clients")
    if checked is None:
        print("readiness: not checked yet (each dr_replication_health run checks it; `kafka-dr readiness` now)")
    else:
        verdict = "ready" if checked["ready"] else "NOT READY"
        failing = [f["check"] for f in checked["findings"] if f["ready"] is False]
        print(f"readiness at {checked['checked_at']}: {verdict}" + (f" ({', '.join(failing)})" if failing else ""))
    return 0


def _metrics(args: argparse.Namespace) -> int:
    from kafka_dr import metrics

    if args.textfile is None:
        sys.stdout.write(metrics.render(args.topology).decode())
        return 0
    try:
        written = metrics.write_textfile(args.textfile, args.topology)
    except OSError as exc:
        fail(f"--textfile {args.textfile}: {exc.strerror or exc}")
        return 2
    print(f"wrote {written} bytes to {args.textfile}", file=sys.stderr)
    return 0


def _offsets(args: argparse.Namespace) -> int:
    from dataclasses import asdict

    from confluent_kafka import KafkaException

    from kafka_dr.clients import error_text
    from kafka_dr.replication.flow_clients import UnreachableError
    from kafka_dr.times import iso_from_ms
    from kafka_dr.translation.group_offsets import CHECKPOINTS, LIVE, translated_offsets

    source = LIVE if args.live else CHECKPOINTS
    try:
        found = translated_offsets(args.group, args.to_cluster, _access(args), args.flow, source)
        applied = found.apply() if args.apply and found.partitions else None
    except (KafkaException, UnreachableError) as exc:
        fail(f"offsets of group {args.group} in {args.to_cluster}: {error_text(exc)}")
        return 1
    if args.json:
        print(json.dumps({**found.to_dict(), "applied": None if applied is None else asdict(applied)}))
    elif found.partitions:
        table = [("TOPIC", "PARTITION", "SOURCE-TOPIC", "SOURCE-OFFSET", "OFFSET", "METHOD", "CHECKPOINT", "LAG")]
        table += [
            (
                p.topic,
                str(p.partition),
                p.source_topic,
                str(p.source_offset),
                str(p.offset),
                p.method,
                "live" if p.checkpoint_ms is None else iso_from_ms(p.checkpoint_ms),
                str(p.lag),
            )
            for p in found.partitions
        ]
        print_table(table)
        if found.checkpoint_age_s() is not None:
            print(f"oldest checkpoint: {found.checkpoint_age_s():.0f} s ago")
    if not found.partitions:
        where = "translated from its source" if args.live else f"checkpointed in {args.to_cluster}"
        fail(f"group {args.group} has no offsets {where} (no commit in the flows' topics yet?)")
        return 1
    if applied is not None:
        if not applied.applied:
            fail(f"offsets of group {args.group} not applied in {args.to_cluster}: {applied.reason}")
            return 1
        if not args.json:
            print(f"applied: group {args.group} resumes at these offsets in {args.to_cluster}")
    return 0


def _clients(args: argparse.Namespace) -> int:
    from dataclasses import asdict

    from kafka_dr.client_switch import active_cluster, client_config_for, states
    from kafka_dr.clients import redact

    topology = load_topology(args.topology)
    if args.alias:
        config = redact(client_config_for(args.alias, topology))
        if args.json:
            print(json.dumps({"alias": args.alias, "cluster": active_cluster(topology, args.alias), "config": config}))
        else:
            print(f"{args.alias} -> {active_cluster(topology, args.alias)}")
            for key, value in sorted(config.items()):
                print(f"  {key}={value}")
        return 0
    rows = states(topology)
    if args.json:
        print(json.dumps([asdict(r) for r in rows]))
        return 0
    if not rows:
        print("no client aliases in the topology (add a `clients:` section)")
        return 0
    table = [("ALIAS", "ROLE", "HOME", "ACTIVE", "SINCE", "REASON")]
    table += [(r.alias, r.role, r.home, r.active, r.since or "-", r.reason or "-") for r in rows]
    print_table(table)
    return 0


def _drill(args: argparse.Namespace) -> int:
    """Exit 0 when no drill record is open (or `resolve` closed it), 1 while one stays open."""
    from kafka_dr.drill import ledger
    from kafka_dr.runbooks import see_runbook

    access = _access(args)
    if args.action == "status":
        record = ledger.open_record()
        changed = ledger.left(record["before"], ledger.snapshot(access)) if record else []
    else:
        record, changed = ledger.resolve(access, args.accept)
    if record is None:
        print("no drill open")
        return 0
    print(f"drill {record['run_id']} ({record['scenario']}, started {record['started']})")
    for line in changed:
        print(f"  left: {line}")
    if args.action == "resolve" and (args.accept or not changed):
        print("closed" + (": the state now accepted" if changed else ": nothing left changed"))
        return 0
    if not changed:
        print(
            "  nothing left changed: the next drill closes it, or `kafka-dr drill resolve`; "
            + see_runbook("dr_drill", "a-drill-left-production-changed")
        )
    else:
        print(
            "  put these back (a failback, dr_bringup for the replicators), or `kafka-dr drill resolve --accept`; "
            + see_runbook("dr_drill", "a-drill-left-production-changed")
        )
    return 1


def _replicators(args: argparse.Namespace) -> int:
    from concurrent.futures import ThreadPoolExecutor

    from kafka_dr.replication import replicators

    path = args.topology or default_topology()
    topology = load_topology(path) if args.topology or path.exists() else None  # a bad file: one line, nothing done
    flows = args.flows or replicators.tracked()
    known = {f.name for f in topology.flows} if topology is not None else set()
    access = ClusterAccess.from_environ(topology) if topology is not None else None
    targets = {f: access.config(topology.flow(f).target) for f in flows if f in known and access is not None}
    with ThreadPoolExecutor(max_workers=max(1, len(flows))) as pool:
        lines = list(pool.map(lambda flow: _replicator_line(args, flow, targets.get(flow)), flows))
    for flow, (line, _) in zip(flows, lines, strict=True):
        print(f"{flow}: {line}")
    if not flows:
        print("no replicator was started on this host")
    return 1 if any(failed for _, failed in lines) else 0


def _replicator_line(args: argparse.Namespace, flow: str, target: dict[str, Any] | None) -> tuple[str, bool]:
    """The line `replicators` prints for `flow` (its target's client settings when the topology names it), and
    whether it is an error."""
    from confluent_kafka import KafkaException

    from kafka_dr.clients import error_text
    from kafka_dr.replication import liveness, replicators

    current = replicators.status(flow)
    if target is None and current is not None and not current.here:
        return f"started on {current.host} in {current.pid_namespace}: name its topology to reach it", True
    try:
        if args.action == "stop":
            if current is None and target is None:
                return "never started", False
            return liveness.stop(flow, target, args.timeout), False
        if target is not None:
            seen = liveness.liveness(flow, target)
            return _running_line(flow, seen.running, seen.detail)
        if current is None:
            return "never started", False
        if current.running:
            return _running_line(flow, True, f"pid {current.pid} on this host, log {current.log}")
        return "not running: " + ("stopped at " + current.stopped_at if current.stopped_at else "exited"), False
    except KafkaException as exc:
        return f"its target does not answer: {error_text(exc)}", True
    except ReplicatorError as exc:
        return str(exc), True


def _running_line(flow: str, running: bool, detail: str) -> tuple[str, bool]:
    """A replicator's state and `detail`; a running one whose health run found it stalled is an error."""
    import time

    from kafka_dr.health.snapshots import stalled_line

    if running and (stalled := stalled_line(flow, int(time.time() * 1000))):
        return f"running, {stalled}: {detail}", True
    return f"{'running' if running else 'not running'}: {detail}", False


def print_table(rows: list[tuple[str, ...]]) -> None:
    """Columns aligned; the last one, often long, is not padded."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    for row in rows:
        print("  ".join([cell.ljust(width) for cell, width in zip(row, widths, strict=False)] + [row[-1]]))


if __name__ == "__main__":
    sys.exit(main())
