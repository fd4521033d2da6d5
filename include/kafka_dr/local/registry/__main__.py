"""Command line: ``python -m kafka_dr.local.registry --port 8081 --kafkastore-bootstrap-servers ...``."""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading
from pathlib import Path
from types import FrameType

from .api import RegistryApi, RegistryHttpServer
from .election import LeaderElector
from .state import RegistryState
from .store import DEFAULT_TOPIC, KafkaStore

log = logging.getLogger("kafka_dr.local.registry")
PID_FILE = "schema-registry.pid"


def _boolean(value: str) -> bool:
    if value.lower() not in ("true", "false"):
        raise argparse.ArgumentTypeError(f"expected true or false, got {value!r}")
    return value.lower() == "true"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m kafka_dr.local.registry", description="Embedded Confluent-compatible Schema Registry."
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
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(
        stream=sys.stderr, level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    logging.getLogger("httpx").setLevel(logging.WARNING)  # it logs every forwarded request at INFO
    url = f"http://{args.host}:{args.port}"
    state = RegistryState()
    store = KafkaStore(args.kafkastore_bootstrap_servers, state, args.kafkastore_topic)
    elector = LeaderElector(args.kafkastore_bootstrap_servers, url, args.leader_eligibility)
    api = RegistryApi(url, state, store, elector)
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
        "schema registry listening on %s (kafkastore %s, topic %s, leader.eligibility=%s)",
        url,
        args.kafkastore_bootstrap_servers,
        args.kafkastore_topic,
        str(args.leader_eligibility).lower(),
    )
    try:
        server.serve_forever()
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
