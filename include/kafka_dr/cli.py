"""`kafka-dr` command line: the embedded local stack, replication lag and health, client aliases and the demo.

Exit codes follow docs/design.md: 0 done, 1 failed, 2 bad input; every error is one line on stderr.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, NoReturn

from kafka_dr.clients import LIBRDKAFKA_LOG, ClientConfigError
from kafka_dr.local.apache import KAFKA_VERSION
from kafka_dr.local.broker.security import SASL_MECHANISMS, SECURITY_PROTOCOLS, USERS_ENV
from kafka_dr.local.config import (
    APACHE,
    BROKER_KINDS,
    EMBEDDED,
    SecurityConfig,
    StackConfig,
    StackInputError,
    check_bootstrap_servers,
)
from kafka_dr.local.stack import LocalStack, StackError, recorded_data_dir
from kafka_dr.paths import LOCAL_DATA_DIR, default_topology
from kafka_dr.replication.replicators import ReplicatorError
from kafka_dr.topology import TopologyError, load_topology


class _Parser(argparse.ArgumentParser):
    """argparse prints usage plus a message; DESIGN wants one line and exit code 2."""

    def error(self, message: str) -> NoReturn:
        _fail(f"{message} (see `{self.prog} --help`)")
        raise SystemExit(2)


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    _configure_logging(args.verbose)
    try:
        return args.run(args)
    except (StackInputError, TopologyError, ClientConfigError, ReplicatorError) as exc:
        _fail(str(exc))
        return 2
    except StackError as exc:
        _fail(str(exc))
        return 1
    except KeyboardInterrupt:
        return 130


def _fail(message: str) -> None:
    print(f"kafka-dr: error: {message}", file=sys.stderr)


def _configure_logging(verbose: bool) -> None:
    """Warnings of kafka-dr on stderr, as Python shows them by default; with --verbose its info lines and librdkafka's
    own log lines too, timed and named. Without it librdkafka's lines are dropped: a refused connection is logged
    many times before the command's one error line says what failed."""
    if verbose:
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
        LIBRDKAFKA_LOG.setLevel(logging.DEBUG)
    else:
        logging.basicConfig(level=logging.WARNING, format="%(message)s")
        LIBRDKAFKA_LOG.setLevel(logging.CRITICAL + 1)


def _verbose_option(parser: argparse.ArgumentParser, default: object = False) -> None:
    parser.add_argument(
        "-v", "--verbose", action="store_true", default=default, help="also log kafka-dr's and librdkafka's own lines"
    )


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="kafka-dr", description="Disaster recovery for multi-datacenter Apache Kafka.")
    _verbose_option(parser)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    data_dir = _Parser(add_help=False)
    _data_dir_option(data_dir)
    local = commands.add_parser("local", help="run the local two-DC stack (brokers and schema registries)")
    actions = local.add_subparsers(dest="action", required=True, metavar="ACTION")

    up = actions.add_parser("up", parents=[data_dir], help="start every process not yet running")
    up.add_argument("--broker-ports", type=_ports, metavar="P1,P2", help="dc1,dc2 broker ports (default 9091,9092)")
    up.add_argument("--registry-ports", type=_ports, metavar="P1,P2", help="dc1,dc2 registry ports (default 8081,8082)")
    up.add_argument(
        "--kafka",
        choices=BROKER_KINDS,
        help=f"the brokers: {APACHE} (Apache Kafka {KAFKA_VERSION} from Maven Central, the default) or {EMBEDDED} "
        "(kafka-dr's own Python broker); kept in stack.json",
    )
    security = up.add_argument_group(
        "security (off by default; kept in stack.json, so `start DC` brings a broker back the same way)"
    )
    security.add_argument(
        "--security",
        type=str.lower,
        choices=[p.lower() for p in SECURITY_PROTOCOLS],
        help="what the brokers' ports speak: SASL (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 all enabled) and/or TLS with "
        "a certificate generated into DATA_DIR/tls (clients trust DATA_DIR/tls/ca.pem)",
    )
    security.add_argument(
        "--users-file",
        type=Path,
        metavar="FILE",
        help=f'SASL users as JSON {{"user": "password"}} (default: the same JSON in ${USERS_ENV}); the registries '
        "and the stack's probes authenticate as the first user",
    )
    security.add_argument(
        "--sasl-mechanism",
        type=str.upper,
        choices=SASL_MECHANISMS,
        help="the mechanism the registries and probes use (default SCRAM-SHA-256)",
    )
    security.add_argument(
        "--registry-auth",
        action=argparse.BooleanOptionalAction,
        help="both schema registries require HTTP Basic authentication (Confluent's authentication.method=BASIC) of "
        f"the same users as the brokers (--users-file or ${USERS_ENV}); the stack's probes send the first user's",
    )
    up.set_defaults(run=_up)
    actions.add_parser("down", parents=[data_dir], help="stop every process, keep the data").set_defaults(run=_down)
    actions.add_parser("status", parents=[data_dir], help="show each process; exit 1 if any is unhealthy").set_defaults(
        run=_status
    )
    for name, help_text in (
        ("stop", "a disaster: kill the DC's broker and registry"),
        ("start", "bring a stopped DC back with its data"),
        ("wipe", "total loss: stop the DC and delete its data"),
    ):
        action = actions.add_parser(name, help=help_text)
        _stack_option(action)
        action.add_argument("dc", metavar="DC")
        if name == "wipe":
            action.add_argument(
                "--keep-cluster-id",
                action="store_true",
                help="come back empty but with the old cluster id (a cluster rebuilt and formatted with its id)",
            )
        action.set_defaults(run=_dc_action)

    registry = actions.add_parser("restart-registry", help="restart a DC's schema registry, e.g. on its own store")
    _stack_option(registry)
    registry.add_argument("dc", metavar="DC")
    registry.add_argument(
        "--kafkastore",
        metavar="DC|HOST:PORT",
        help="cluster that stores the schemas (a DC name or bootstrap servers)",
    )
    registry.add_argument("--leader-eligible", type=_bool, metavar="true|false", help="may this registry lead")
    registry.set_defaults(run=_restart_registry)

    lag = commands.add_parser("lag", help="replication lag per flow and partition, in records and seconds")
    _topology_option(lag)
    _verbose_option(lag, default=argparse.SUPPRESS)  # after the command too
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
    _topology_option(health)
    _verbose_option(health, default=argparse.SUPPRESS)  # after the command too
    health.add_argument("--flow", metavar="NAME", help="only this flow (default: every flow)")
    health.add_argument("--json", action="store_true", help='print {"flows": [...]} as docs/design.md describes it')
    health.set_defaults(run=_health)

    ready = commands.add_parser(
        "readiness", help="what would stop or slow a failover now, each with its runbook; exit 1 if anything would"
    )
    _topology_option(ready)
    _verbose_option(ready, default=argparse.SUPPRESS)  # after the command too
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
    _topology_option(metrics)
    metrics.add_argument(
        "--textfile",
        type=Path,
        metavar="FILE",
        help="write them to FILE (atomically, for node_exporter's textfile collector) instead of printing them",
    )
    metrics.set_defaults(run=_metrics)

    offsets = commands.add_parser(
        "offsets", help="where a consumer group resumes in another cluster: its translated offsets, per partition"
    )
    offsets.add_argument("group", metavar="GROUP")
    offsets.add_argument("--to", required=True, metavar="CLUSTER", dest="to_cluster", help="the cluster to resume in")
    _topology_option(offsets)
    _verbose_option(offsets, default=argparse.SUPPRESS)  # after the command too
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
    _topology_option(clients)
    clients.add_argument("--json", action="store_true", help="print JSON")
    clients.set_defaults(run=_clients)

    replicators = commands.add_parser(
        "replicators", help="the continuous replicators started on this host, or stop them (from any process)"
    )
    replicators.add_argument("action", nargs="?", choices=["list", "stop"], default="list", help="default: list")
    replicators.add_argument(
        "flows", nargs="*", metavar="FLOW", help="only these flows (default: every one started on this host)"
    )
    _topology_option(replicators, "where the flows' targets are, asked about a replicator of another PID namespace")
    replicators.add_argument(
        "--timeout", type=float, default=30.0, metavar="S", help="stop: seconds a replicator has to end (default 30)"
    )
    replicators.set_defaults(run=_replicators)

    airflow = commands.add_parser("airflow", help="run Airflow's own components for the local stack (UI on :8080)")
    airflow_actions = airflow.add_subparsers(dest="action", required=True, metavar="ACTION")
    airflow_up = airflow_actions.add_parser(
        "up", help="start api-server, scheduler, dag-processor and triggerer; print the URL and login"
    )
    _topology_option(airflow_up)
    airflow_up.add_argument("--port", type=int, metavar="PORT", help="the UI's port on 127.0.0.1 (default 8080)")
    airflow_up.add_argument(
        "--executor",
        choices=["local", "celery"],
        help="local (LocalExecutor, the default) or celery (redis-server and two Celery workers, each in PID and UTS "
        "namespaces of its own when run as root)",
    )
    airflow_up.set_defaults(run=_airflow_up)
    airflow_actions.add_parser("down", help="stop every Airflow component").set_defaults(run=_airflow_down)
    airflow_actions.add_parser(
        "status", help="show each component and its health; exit 1 if any is not healthy"
    ).set_defaults(run=_airflow_status)

    drill = commands.add_parser(
        "drill", help="the open DR drill record: what a drill stopped half-way left changed, and closing it"
    )
    drill.add_argument("action", nargs="?", choices=["status", "resolve"], default="status", help="default: status")
    _topology_option(drill)
    drill.add_argument(
        "--accept",
        action="store_true",
        help="resolve: close the record although the state differs from the drill's start (the state now is wanted)",
    )
    drill.set_defaults(run=_drill)

    demo = commands.add_parser(
        "demo",
        parents=[data_dir],
        help="the DR drill (dr_drill, disaster_round_trip): stack and Airflow up, the drill with its probe application",
    )
    demo.set_defaults(run=_demo)
    return parser


def _data_dir_option(parser: argparse._ActionsContainer) -> None:  # a parser or a group of its options
    parser.add_argument(
        "--data-dir",
        type=Path,
        default=LOCAL_DATA_DIR,
        metavar="DIR",
        help=f"where the local stack keeps data, logs and pid files (default: {LOCAL_DATA_DIR})",
    )


def _ports(text: str) -> tuple[int, int]:
    parts = text.split(",")
    if len(parts) != 2 or not all(p.strip().isdigit() for p in parts):
        raise argparse.ArgumentTypeError(f"expected two port numbers like 9091,9092, got {text!r}")
    first, second = (int(p) for p in parts)
    return first, second


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not value > 0:
        raise argparse.ArgumentTypeError(f"expected a positive number of seconds, got {text!r}")
    return value


def _bool(text: str) -> bool:
    if text.lower() not in ("true", "false"):
        raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")
    return text.lower() == "true"


def _up(args: argparse.Namespace) -> int:
    config = None
    security_given = args.security or args.users_file or args.sasl_mechanism or args.registry_auth is not None
    if args.broker_ports or args.registry_ports or security_given or args.kafka:
        saved = LocalStack(args.data_dir).config
        config = saved
        if args.broker_ports or args.registry_ports:
            config = StackConfig.default(
                broker_ports=args.broker_ports or [dc.broker_port for dc in saved.dcs],
                registry_ports=args.registry_ports or [dc.registry_port for dc in saved.dcs],
            )
        config = replace(config, security=_security_settings(args, saved.security), kafka=args.kafka or saved.kafka)
        config.validate("--security")
    stack = LocalStack(args.data_dir, config)
    started = stack.up()
    _print_started(stack, started, "already running")
    return _print_status(stack)


def _print_started(stack: LocalStack, started: list[str], otherwise: str) -> None:
    """What started, each with the seconds it took to answer: a JVM broker's start-up shows."""
    times = stack.startup_seconds
    names = [f"{name} ({times[name]:.1f} s)" if name in times else name for name in started]
    print(f"started: {', '.join(names)}" if started else otherwise)


def _security_settings(args: argparse.Namespace, saved: SecurityConfig) -> SecurityConfig:
    """`--security` sets the whole of it (users from --users-file, else the environment; registry auth off unless
    --registry-auth); without it, the other flags change the saved settings."""
    if args.security:
        protocol = args.security.upper()
        base = SecurityConfig(protocol=protocol)
    else:
        protocol, base = saved.protocol, saved
    sasl = protocol in ("SASL_PLAINTEXT", "SASL_SSL")
    registry_auth = base.registry_auth if args.registry_auth is None else args.registry_auth
    if not sasl and args.sasl_mechanism:
        raise StackInputError(
            f"--sasl-mechanism needs --security sasl_plaintext or sasl_ssl (the stack speaks {protocol})"
        )
    if not sasl and not registry_auth and args.users_file:
        raise StackInputError(
            f"--users-file needs --security sasl_plaintext or sasl_ssl, or --registry-auth "
            f"(the stack speaks {protocol})"
        )
    users_file = str(args.users_file.absolute()) if args.users_file else base.users_file
    return replace(
        base,
        users_file=users_file if sasl or registry_auth else None,  # --no-registry-auth drops users nothing needs
        sasl_mechanism=args.sasl_mechanism or base.sasl_mechanism,
        registry_auth=registry_auth,
    )


def _down(args: argparse.Namespace) -> int:
    stopped = LocalStack(args.data_dir).down()
    print(f"stopped: {', '.join(stopped)}" if stopped else "nothing was running")
    return 0


def _status(args: argparse.Namespace) -> int:
    return _print_status(LocalStack(args.data_dir))


def _stack_option(parser: argparse.ArgumentParser) -> None:
    """--data-dir, or --registry-url: the stack last brought up with a registry at that URL, wherever its data dir.
    The DAGs run these commands from the topology (the schema redirect's restart, a drill's cut-off) in Airflow
    tasks, whose working directory is not the terminal's that ran `kafka-dr local up --data-dir DIR` (which records
    DIR for its registries' URLs)."""
    stack_of = parser.add_mutually_exclusive_group()
    _data_dir_option(stack_of)
    stack_of.add_argument(
        "--registry-url", metavar="URL", help="instead of --data-dir: the stack serving the registry at URL"
    )


def _stack_of(args: argparse.Namespace) -> LocalStack:
    return LocalStack(recorded_data_dir(args.registry_url) if args.registry_url else args.data_dir)


def _dc_action(args: argparse.Namespace) -> int:
    stack = _stack_of(args)
    if args.action == "start":
        started = stack.start(args.dc)
        _print_started(stack, started, f"{args.dc} already running")
        return _print_status(stack)
    if args.action == "stop":
        stopped = stack.stop(args.dc)
        print(f"stopped: {', '.join(stopped)}" if stopped else f"{args.dc} was not running")
    else:
        stack.wipe(args.dc, keep_cluster_id=args.keep_cluster_id)
        same = " with the same cluster id" if args.keep_cluster_id else ""
        print(f"{args.dc} wiped (stopped, data deleted); `kafka-dr local start {args.dc}` brings it back empty{same}")
    return 0


def _restart_registry(args: argparse.Namespace) -> int:
    stack = _stack_of(args)
    stack.config.dc(args.dc)
    store = args.kafkastore
    if store is not None and store in [dc.name for dc in stack.config.dcs]:
        store = stack.config.dc(store).broker_address
    elif store is not None:
        check_bootstrap_servers(store, "--kafkastore")
    dc = stack.restart_registry(args.dc, kafkastore_bootstrap_servers=store, leader_eligibility=args.leader_eligible)
    eligible = "leader-eligible" if dc.registry_leader_eligible else "not leader-eligible"
    print(f"{dc.name} registry restarted on {dc.registry_url}: store {dc.registry_kafkastore}, {eligible}")
    return 0


def _topology_option(parser: argparse.ArgumentParser, what: str = "") -> None:
    parser.add_argument(
        "--topology",
        type=Path,
        metavar="FILE",
        help=f"topology file{': ' + what if what else ''} (default: $KDR_TOPOLOGY, else include/topology.yaml)",
    )


def _lag(args: argparse.Namespace) -> int:
    from kafka_dr.lag_report import lag_report  # Kafka clients are loaded only when asked

    return lag_report(load_topology(args.topology), args.flow, as_json=args.json, timeout=args.timeout)


def _health(args: argparse.Namespace) -> int:
    from kafka_dr.health.check import check_flow  # Kafka clients are loaded only when asked
    from kafka_dr.health.rules import render_table

    topology = load_topology(args.topology)
    names = [topology.flow(args.flow).name] if args.flow else [f.name for f in topology.flows]  # before any I/O
    results = []
    for name in names:
        if not args.json:
            print(f"checking {name} ...", file=sys.stderr, flush=True)
        results.append(check_flow(topology, name))
    if args.json:
        print(json.dumps({"flows": [h.to_dict() for h in results]}, indent=2))
    else:
        print(render_table(results))
    return 1 if any(h.status == "ERR" for h in results) else 0


def _readiness(args: argparse.Namespace) -> int:
    from datetime import UTC, datetime

    from kafka_dr import readiness

    topology = load_topology(args.topology)
    findings = readiness.evaluate(topology, readiness.gather(topology, datetime.now(UTC)))
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
        _fail(f"--textfile {args.textfile}: {exc.strerror or exc}")
        return 2
    print(f"wrote {written} bytes to {args.textfile}", file=sys.stderr)
    return 0


def _offsets(args: argparse.Namespace) -> int:
    from dataclasses import asdict

    from confluent_kafka import KafkaException

    from kafka_dr.clients import error_text
    from kafka_dr.replication.planner import UnreachableError
    from kafka_dr.times import iso_from_ms
    from kafka_dr.translation.group_offsets import CHECKPOINTS, LIVE, translated_offsets

    topology = load_topology(args.topology)
    source = LIVE if args.live else CHECKPOINTS
    try:
        found = translated_offsets(args.group, args.to_cluster, topology, args.flow, source)
        applied = found.apply() if args.apply and found.partitions else None
    except (KafkaException, UnreachableError) as exc:
        _fail(f"offsets of group {args.group} in {args.to_cluster}: {error_text(exc)}")
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
        _print_table(table)
        if found.checkpoint_age_s() is not None:
            print(f"oldest checkpoint: {found.checkpoint_age_s():.0f} s ago")
    if not found.partitions:
        where = "translated from its source" if args.live else f"checkpointed in {args.to_cluster}"
        _fail(f"group {args.group} has no offsets {where} (no commit in the flows' topics yet?)")
        return 1
    if applied is not None:
        if not applied.applied:
            _fail(f"offsets of group {args.group} not applied in {args.to_cluster}: {applied.reason}")
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
    _print_table(table)
    return 0


def _demo(args: argparse.Namespace) -> int:
    from kafka_dr.demo.drill import run_demo  # the demo pulls in Airflow's REST client and the app only when asked

    return 0 if run_demo(args.data_dir) else 1


def _drill(args: argparse.Namespace) -> int:
    """Exit 0 when no drill record is open (or `resolve` closed it), 1 while one stays open."""
    from kafka_dr.drill import ledger
    from kafka_dr.runbooks import see_runbook

    topology = load_topology(args.topology)
    if args.action == "status":
        record = ledger.open_record()
        changed = ledger.left(record["before"], ledger.snapshot(topology)) if record else []
    else:
        record, changed = ledger.resolve(topology, args.accept)
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
    import time
    from concurrent.futures import ThreadPoolExecutor

    from confluent_kafka import KafkaException

    from kafka_dr.clients import client_config, error_text
    from kafka_dr.health.snapshots import stalled_line
    from kafka_dr.replication import liveness, replicators

    path = args.topology or default_topology()
    topology = load_topology(path) if args.topology or path.exists() else None  # a bad file: one line, nothing done
    flows = args.flows or replicators.tracked()
    known = {f.name for f in topology.flows} if topology is not None else set()
    targets = {f: client_config(topology.cluster(topology.flow(f).target)) for f in flows if f in known}

    def one(flow: str) -> tuple[str, bool]:
        """The line to print for `flow`, and whether it is an error."""
        target, current = targets.get(flow), replicators.status(flow)
        if target is None and current is not None and not current.here:
            return f"started on {current.host} in {current.pid_namespace}: name its topology to reach it", True
        try:
            if args.action == "stop":
                if current is None and target is None:
                    return "never started", False
                return liveness.stop(flow, target, args.timeout), False
            if target is not None:
                seen = liveness.liveness(flow, target)
                if seen.running and (stalled := stalled_line(flow, int(time.time() * 1000))):
                    return f"running, {stalled}: {seen.detail}", True
                return f"{'running' if seen.running else 'not running'}: {seen.detail}", False
            if current is None:
                return "never started", False
            if current.running:
                if stalled := stalled_line(flow, int(time.time() * 1000)):
                    return f"running, {stalled}: pid {current.pid} on this host, log {current.log}", True
                return f"running: pid {current.pid} on this host, log {current.log}", False
            return "not running: " + ("stopped at " + current.stopped_at if current.stopped_at else "exited"), False
        except KafkaException as exc:
            return f"its target does not answer: {error_text(exc)}", True
        except ReplicatorError as exc:
            return str(exc), True

    with ThreadPoolExecutor(max_workers=max(1, len(flows))) as pool:
        lines = list(pool.map(one, flows))
    for flow, (line, _) in zip(flows, lines, strict=True):
        print(f"{flow}: {line}")
    if not flows:
        print("no replicator was started on this host")
    return 1 if any(failed for _, failed in lines) else 0


def _airflow_up(args: argparse.Namespace) -> int:
    from kafka_dr.local.airflow import APPROVER, APPROVER_PASSWORD, PASSWORD, USER, LocalAirflow

    local_airflow = LocalAirflow(port=args.port, executor=args.executor)
    topology = load_topology(args.topology)  # before anything starts: a bad topology changes nothing
    print(f"starting Airflow in {local_airflow.home} (first start: about a minute) ...", file=sys.stderr, flush=True)
    started = local_airflow.up(topology, args.topology or default_topology())
    print(f"started: {', '.join(started)}" if started else "already running")
    # up() saw every component healthy: the table asks again, and gives a busy api-server a minute to answer (a
    # loaded machine kept one request 7.6 s, and five seconds made a healthy start exit 1).
    code = _print_airflow_status(local_airflow, timeout=60.0)
    print(f"Airflow UI: {local_airflow.url}  (user {USER}, password {PASSWORD}; local only)")
    print(f"  a second user approves what {USER} triggers: {APPROVER}, password {APPROVER_PASSWORD}")
    print(f"Kafka DR dashboard: {local_airflow.url}/kafka-dr/")
    token = local_airflow.metrics_token_file()
    print(f"Prometheus metrics: {local_airflow.url}/kafka-dr/metrics (bearer token in {token})")
    print("kafka-dr's DAGs are unpaused: a run starts when triggered")
    print("stop it with `kafka-dr airflow down`")
    return code


def _airflow_down(args: argparse.Namespace) -> int:
    from kafka_dr.local.airflow import LocalAirflow

    stopped = LocalAirflow().down()
    print(f"stopped: {', '.join(stopped)}" if stopped else "nothing was running")
    return 0


def _airflow_status(args: argparse.Namespace) -> int:
    from kafka_dr.local.airflow import LocalAirflow

    return _print_airflow_status(LocalAirflow())


def _print_airflow_status(local_airflow: Any, timeout: float = 5.0) -> int:
    """The components' table; 0 when all are healthy. `timeout`: how long the api-server has to answer."""
    rows = [("COMPONENT", "PID", "STATE", "DETAIL")]
    for st in (statuses := local_airflow.status(timeout)):
        state = "healthy" if st.healthy else "unhealthy" if st.pid else "stopped"
        rows.append((st.name, str(st.pid or "-"), state, st.detail if st.healthy else f"{st.detail}; log {st.log}"))
    _print_table(rows)
    print(f"home: {local_airflow.home}")
    return 0 if all(st.healthy for st in statuses) else 1


def _print_table(rows: list[tuple[str, ...]]) -> None:
    """Columns aligned; the last one, often long, is not padded."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    for row in rows:
        print("  ".join([cell.ljust(width) for cell, width in zip(row, widths, strict=False)] + [row[-1]]))


def _print_status(stack: LocalStack) -> int:
    rows = [("DC", "PROCESS", "PID", "STATE", "ADDRESS", "DETAIL")]
    all_healthy = True
    for st in stack.status():
        state = "healthy" if st.healthy else "unhealthy" if st.alive else "stopped"
        detail = st.detail if st.healthy else f"{st.detail}; log {st.log}".lstrip("; ")
        rows.append((st.dc, st.kind, str(st.pid or "-"), state, st.address, detail))
        all_healthy &= st.healthy
    _print_table(rows)
    print(f"data: {stack.data_dir}")
    security = stack.config.security
    if security.protocol != "PLAINTEXT":
        users = f"users from {security.users_file or '$' + USERS_ENV}" if security.sasl else "no SASL"
        print(f"security: {security.protocol} ({users})")
        # What a client needs, the password left out; kafka-dr's own clients take it as KDR_CLUSTER_<DC>_CONFIG.
        print(f"client settings: {json.dumps(stack.client_settings(secrets=False))}")
    if security.registry_auth:
        print(f"schema registries: basic auth required (users from {security.users_file or '$' + USERS_ENV})")
        # The password left out; kafka-dr's own registry clients take user:password as KDR_REGISTRY_<CLUSTER>_USER_INFO.
        print(f"schema registry client settings: {json.dumps(stack.registry_client_settings(secrets=False))}")
    return 0 if all_healthy else 1


if __name__ == "__main__":
    sys.exit(main())
