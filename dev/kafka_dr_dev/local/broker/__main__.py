"""Run one embedded broker: `python -m kafka_dr_dev.local.broker --port 9091 --data-dir DIR`.

Security is off by default; `--security-protocol SASL_SSL --users-file users.json` (or $KDR_BROKER_USERS)
turns on SASL and TLS (see `security`).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
from pathlib import Path

from .security import SASL_MECHANISMS, SECURITY_PROTOCOLS, USERS_ENV, BrokerSecurity, SecurityError
from .server import Broker


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m kafka_dr_dev.local.broker", description="Embedded single-node Kafka broker (one cluster)."
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to bind and advertise")
    parser.add_argument("--port", type=int, default=9092)
    parser.add_argument("--data-dir", type=Path, required=True, help="log directory (created if missing)")
    parser.add_argument("--node-id", type=int, default=1)
    parser.add_argument(
        "--config",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="broker config override, e.g. group.initial.rebalance.delay.ms=0",
    )
    parser.add_argument(
        "--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"], help="DEBUG logs every request"
    )
    security = parser.add_argument_group("security (off by default)")
    security.add_argument(
        "--security-protocol",
        default="PLAINTEXT",
        type=str.upper,
        choices=SECURITY_PROTOCOLS,
        help="what the port speaks (default PLAINTEXT)",
    )
    security.add_argument(
        "--sasl-mechanisms",
        default=",".join(SASL_MECHANISMS),
        metavar="M1,M2",
        help=f"SASL mechanisms enabled with SASL_* (default {','.join(SASL_MECHANISMS)})",
    )
    security.add_argument(
        "--users-file",
        type=Path,
        metavar="PATH",
        help=f'SASL users as JSON {{"user": "password"}} (default: the same JSON in ${USERS_ENV})',
    )
    security.add_argument(
        "--tls-dir",
        type=Path,
        metavar="PATH",
        help="where the CA and server certificate are generated or reused with SSL/SASL_SSL (default DATA_DIR/tls)",
    )
    return parser.parse_args(argv)


async def run(broker: Broker) -> None:
    await broker.start()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    await broker.shutdown()


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=args.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    configs = {}
    for item in args.config:
        key, sep, value = item.partition("=")
        if not sep:
            print(f"kafka-dr broker: error: --config {item!r} is not KEY=VALUE", file=sys.stderr)
            return 2
        configs[key] = value
    try:
        security = BrokerSecurity.from_options(
            args.security_protocol,
            args.sasl_mechanisms.split(","),
            args.users_file,
            args.tls_dir or args.data_dir / "tls",
            [args.host],
        )
    except SecurityError as exc:
        print(f"kafka-dr broker: error: {exc}", file=sys.stderr)
        return 2
    try:
        broker = Broker(args.data_dir, args.host, args.port, args.node_id, configs, security)
    except OSError as exc:
        print(f"kafka-dr broker: error: cannot open data dir {args.data_dir}: {exc}", file=sys.stderr)
        return 1
    try:
        asyncio.run(run(broker))
    except OSError as exc:
        print(f"kafka-dr broker: error: cannot listen on {args.host}:{args.port}: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
