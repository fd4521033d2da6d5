"""`kafka-dr-dev`: the development stack's commands, not part of the product: the local two-DC stack (`local`),
Airflow's own components for it (`airflow`) and the DR demo (`demo`). Errors and exit codes as `kafka-dr`'s
(docs/design.md): 0 done, 1 failed, 2 bad input; every error is one line on stderr.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from kafka_dr.cli import Parser, configure_logging, fail, print_table, topology_option, verbose_option
from kafka_dr.clients import ClientConfigError
from kafka_dr.paths import LOCAL_DATA_DIR, default_topology
from kafka_dr.topology import TopologyError, load_topology

from .local.apache import KAFKA_VERSION
from .local.broker.security import SASL_MECHANISMS, SECURITY_PROTOCOLS, USERS_ENV
from .local.config import (
    APACHE,
    BROKER_KINDS,
    EMBEDDED,
    SecurityConfig,
    StackConfig,
    StackInputError,
    check_bootstrap_servers,
)
from .local.stack import LocalStack, StackError, recorded_data_dir

PROG = "kafka-dr-dev"


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    configure_logging(args.verbose)
    try:
        return args.run(args)
    except (StackInputError, TopologyError, ClientConfigError) as exc:
        fail(str(exc), PROG)
        return 2
    except StackError as exc:
        fail(str(exc), PROG)
        return 1
    except KeyboardInterrupt:
        return 130


def _parser() -> argparse.ArgumentParser:
    parser = Parser(prog=PROG, description="kafka-dr's development stack: local Kafka, registries, Airflow, the demo.")
    verbose_option(parser)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    data_dir = Parser(add_help=False)
    _data_dir_option(data_dir)
    _local_commands(commands, data_dir)
    _airflow_commands(commands)
    demo = commands.add_parser(
        "demo",
        parents=[data_dir],
        help="the DR drill (dr_drill, disaster_round_trip): stack and Airflow up, the drill with its probe application",
    )
    demo.set_defaults(run=_demo)
    return parser


def _local_commands(commands: argparse._SubParsersAction, data_dir: argparse.ArgumentParser) -> None:
    """`local up|down|status|stop|start|wipe|restart-registry`: the two-DC stack."""
    local = commands.add_parser("local", help="run the local two-DC stack (brokers and schema registries)")
    actions = local.add_subparsers(dest="action", required=True, metavar="ACTION")
    _up_command(actions, data_dir)
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


def _up_command(actions: argparse._SubParsersAction, data_dir: argparse.ArgumentParser) -> None:
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


def _airflow_commands(commands: argparse._SubParsersAction) -> None:
    """`airflow up|down|status`: Airflow's own components for the local stack."""
    airflow = commands.add_parser("airflow", help="run Airflow's own components for the local stack (UI on :8080)")
    airflow_actions = airflow.add_subparsers(dest="action", required=True, metavar="ACTION")
    airflow_up = airflow_actions.add_parser(
        "up", help="start api-server, scheduler, dag-processor and triggerer; print the URL and login"
    )
    topology_option(airflow_up)
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
    tasks, whose working directory is not the terminal's that ran `kafka-dr-dev local up --data-dir DIR` (which records
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
        back = f"`kafka-dr-dev local start {args.dc}` brings it back empty{same}"
        print(f"{args.dc} wiped (stopped, data deleted); {back}")
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


def _demo(args: argparse.Namespace) -> int:
    from .demo import run_demo  # the demo pulls in Airflow's REST client and the app only when asked

    return 0 if run_demo(args.data_dir) else 1


def _airflow_up(args: argparse.Namespace) -> int:
    from .local.airflow import APPROVER, APPROVER_PASSWORD, PASSWORD, USER, LocalAirflow

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
    print("stop it with `kafka-dr-dev airflow down`")
    return code


def _airflow_down(args: argparse.Namespace) -> int:
    from .local.airflow import LocalAirflow

    stopped = LocalAirflow().down()
    print(f"stopped: {', '.join(stopped)}" if stopped else "nothing was running")
    return 0


def _airflow_status(args: argparse.Namespace) -> int:
    from .local.airflow import LocalAirflow

    return _print_airflow_status(LocalAirflow())


def _print_airflow_status(local_airflow: Any, timeout: float = 5.0) -> int:
    """The components' table; 0 when all are healthy. `timeout`: how long the api-server has to answer."""
    rows = [("COMPONENT", "PID", "STATE", "DETAIL")]
    for st in (statuses := local_airflow.status(timeout)):
        state = "healthy" if st.healthy else "unhealthy" if st.pid else "stopped"
        rows.append((st.name, str(st.pid or "-"), state, st.detail if st.healthy else f"{st.detail}; log {st.log}"))
    print_table(rows)
    print(f"home: {local_airflow.home}")
    return 0 if all(st.healthy for st in statuses) else 1


def _print_status(stack: LocalStack) -> int:
    rows = [("DC", "PROCESS", "PID", "STATE", "ADDRESS", "DETAIL")]
    all_healthy = True
    for st in stack.status():
        state = "healthy" if st.healthy else "unhealthy" if st.alive else "stopped"
        detail = st.detail if st.healthy else f"{st.detail}; log {st.log}".lstrip("; ")
        rows.append((st.dc, st.kind, str(st.pid or "-"), state, st.address, detail))
        all_healthy &= st.healthy
    print_table(rows)
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
