"""Command line: ``python -m kafka_dr_dev.local.registry --port 8081 --kafkastore-bootstrap-servers ...``."""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading
from pathlib import Path
from types import FrameType

from ..broker.security import SASL_MECHANISMS, SECURITY_PROTOCOLS, USERS_ENV, SecurityError, load_users
from . import auth
from .api import RegistryApi, RegistryHttpServer
from .election import LeaderElector
from .schema_log import RegistryState
from .store import DEFAULT_TOPIC, KafkaStore, use_security

log = logging.getLogger("kafka_dr_dev.local.registry")
PID_FILE = "schema-registry.pid"


def _boolean(value: str) -> bool:
    if value.lower() not in ("true", "false"):
        raise argparse.ArgumentTypeError(f"expected true or false, got {value!r}")
    return value.lower() == "true"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m kafka_dr_dev.local.registry", description="Embedded Confluent-compatible Schema Registry."
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on and advertise (host.name)")
    parser.add_argument("--port", type=int, default=8081, help="HTTP port (default 8081)")
    parser.add_argument(
        "--kafkastore-bootstrap-servers", required=True, help="cluster holding the _schemas topic (HOST:PORT,...)"
    )
    parser.add_argument("--kafkastore-topic", default=DEFAULT_TOPIC, help="schemas topic (default _schemas)")
    parser.add_argument(
        "--leader-eligibility", type=_boolean, default=True, metavar="true|false", help="may become leader"
    )
    parser.add_argument("--data-dir", type=Path, help="where to write the pid file (schemas live in Kafka only)")
    parser.add_argument("--log-level", default="INFO", help="DEBUG, INFO, WARNING or ERROR (default INFO)")
    security = parser.add_argument_group("kafkastore security (Confluent's kafkastore.security.protocol, sasl.*)")
    security.add_argument(
        "--kafkastore-security-protocol",
        default="PLAINTEXT",
        type=str.upper,
        choices=SECURITY_PROTOCOLS,
        help="how the store cluster is reached (default PLAINTEXT)",
    )
    security.add_argument(
        "--kafkastore-sasl-mechanism", default="SCRAM-SHA-256", type=str.upper, choices=SASL_MECHANISMS
    )
    security.add_argument(
        "--kafkastore-sasl-username", metavar="USER", help="SASL user (default: the first of the users)"
    )
    security.add_argument(
        "--kafkastore-users-file",
        type=Path,
        metavar="PATH",
        help=f"JSON {{user: password}} holding the user's password (default: ${USERS_ENV}, the brokers' users)",
    )
    security.add_argument("--kafkastore-ssl-ca-location", type=Path, metavar="PATH", help="CA the brokers' TLS uses")
    rest = parser.add_argument_group("REST authentication (Confluent's authentication.method; off by default)")
    rest.add_argument(
        "--authentication-method",
        default="NONE",
        type=str.upper,
        choices=("NONE", "BASIC"),
        help="BASIC: every request needs Authorization: Basic base64(user:password) of a known user, else HTTP 401",
    )
    rest.add_argument(
        "--basic-auth-users-file",
        type=Path,
        metavar="PATH",
        help=f'JSON {{"user": "password"}} of the users BASIC accepts (default: the same JSON in ${auth.USERS_ENV})',
    )
    return parser.parse_args(argv)


def authenticator(args: argparse.Namespace) -> auth.BasicAuthenticator | None:
    """The REST users, read once at start as Confluent reads its JAAS realm; from a file or the environment, never
    the command line (which any local user can read)."""
    if args.authentication_method == "NONE":
        if args.basic_auth_users_file is not None:
            raise auth.AuthConfigError("--basic-auth-users-file needs --authentication-method BASIC")
        return None
    return auth.BasicAuthenticator(auth.load_users(args.basic_auth_users_file))


def kafkastore_security(args: argparse.Namespace) -> dict[str, str]:
    """librdkafka settings for the store cluster; the password comes from the users file or the environment, never
    from the command line (which any local user can read)."""
    protocol = args.kafkastore_security_protocol
    if protocol == "PLAINTEXT":
        return {}
    settings = {"security.protocol": protocol}
    if protocol in ("SASL_PLAINTEXT", "SASL_SSL"):
        users = load_users(args.kafkastore_users_file)
        user = args.kafkastore_sasl_username or next(iter(users))
        if user not in users:
            raise SecurityError(f"user {user!r} is not among the users")
        settings.update(
            {"sasl.mechanism": args.kafkastore_sasl_mechanism, "sasl.username": user, "sasl.password": users[user]}
        )
    if protocol in ("SSL", "SASL_SSL"):
        if args.kafkastore_ssl_ca_location is None:
            raise SecurityError(f"{protocol} needs --kafkastore-ssl-ca-location")
        settings["ssl.ca.location"] = str(args.kafkastore_ssl_ca_location)
    return settings


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(
        stream=sys.stderr, level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    logging.getLogger("httpx").setLevel(logging.WARNING)  # it logs every forwarded request at INFO
    try:
        use_security(kafkastore_security(args))
        rest_auth = authenticator(args)
    except (SecurityError, auth.AuthConfigError) as exc:
        print(f"schema registry: error: {exc}", file=sys.stderr)
        return 2
    url = f"http://{args.host}:{args.port}"
    state = RegistryState()
    store = KafkaStore(args.kafkastore_bootstrap_servers, state, args.kafkastore_topic)
    elector = LeaderElector(args.kafkastore_bootstrap_servers, url, args.leader_eligibility)
    api = RegistryApi(url, state, store, elector, rest_auth)
    try:
        server = RegistryHttpServer(args.host, args.port, api)
    except OSError as exc:
        print(f"schema registry: cannot listen on {args.host}:{args.port}: {exc.strerror}", file=sys.stderr)
        return 1
    pid_file = args.data_dir / PID_FILE if args.data_dir else None
    if pid_file is not None:
        pid_file.parent.mkdir(parents=True, exist_ok=True)
        pid_file.write_text(f"{os.getpid()}\n")

    def stop(signum: int, frame: FrameType | None) -> None:
        threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    store.start()
    elector.start()
    log.info(
        "schema registry listening on %s (kafkastore %s %s, topic %s, leader.eligibility=%s, authentication.method=%s)",
        url,
        args.kafkastore_security_protocol,
        args.kafkastore_bootstrap_servers,
        args.kafkastore_topic,
        str(args.leader_eligibility).lower(),
        args.authentication_method,
    )
    try:
        server.serve_forever(poll_interval=0.1)  # a stop is seen within 0.1 s (the schema redirect waits)
    finally:
        server.server_close()
        elector.stop()
        store.stop()
        api.close()
        if pid_file is not None:
            pid_file.unlink(missing_ok=True)
        log.info("schema registry on %s stopped", url)
    return 0


if __name__ == "__main__":
    sys.exit(main())
