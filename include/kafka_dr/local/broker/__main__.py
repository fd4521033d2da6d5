"""Run one embedded broker: `python -m kafka_dr.local.broker --port 9091 --data-dir DIR`."""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
from pathlib import Path

from .server import Broker


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m kafka_dr.local.broker", description="Embedded single-node Kafka broker (one cluster)."
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
        broker = Broker(args.data_dir, args.host, args.port, args.node_id, configs)
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
