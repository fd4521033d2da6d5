"""A real Prometheus server (Debian's binary, installed by `make venv`) for the tests: the repository's own scrape
config (monitoring/prometheus/prometheus.yml) and rules, pointed at a test's api-server and token file, scraping every
second, bound to 127.0.0.1; read back through Prometheus's HTTP API."""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import yaml

from kafka_dr.paths import PROJECT_ROOT

from .ports import free_port
from .retry import eventually

MONITORING = PROJECT_ROOT / "monitoring" / "prometheus"


@dataclass(frozen=True)
class PrometheusServer:
    url: str
    log: Path

    def query(self, promql: str) -> list[dict[str, Any]]:
        """The instant vector of `promql` now: [{"metric": {labels}, "value": [time, "value"]}, ...]."""
        answer = httpx.get(f"{self.url}/api/v1/query", params={"query": promql}, timeout=10).json()
        assert answer["status"] == "success", answer
        return answer["data"]["result"]

    def rule_groups(self) -> list[dict[str, Any]]:
        return httpx.get(f"{self.url}/api/v1/rules", timeout=10).json()["data"]["groups"]


@contextlib.contextmanager
def prometheus(
    root: Path, target: str, token_file: Path, wrong_token_file: Path | None = None
) -> Iterator[PrometheusServer]:
    """Prometheus scraping `target` (host:port of an api-server) with the repository's job, the bearer token read
    from `token_file`; with `wrong_token_file`, the same job once more as `kafka-dr-wrong-token`, whose scrapes the
    endpoint must refuse."""
    binary = shutil.which("prometheus")
    assert binary, "prometheus is missing: `make venv` installs Debian's prometheus package"
    root.mkdir(parents=True, exist_ok=True)
    config = yaml.safe_load((MONITORING / "prometheus.yml").read_text())
    config["global"] = {"scrape_interval": "1s", "evaluation_interval": "1s"}
    config["rule_files"] = [str(MONITORING / "rules.yml")]
    [job] = config["scrape_configs"]
    job["static_configs"] = [{"targets": [target]}]
    job["authorization"]["credentials_file"] = str(token_file)
    if wrong_token_file is not None:
        wrong = {**job, "job_name": "kafka-dr-wrong-token", "authorization": {**job["authorization"]}}
        wrong["authorization"]["credentials_file"] = str(wrong_token_file)
        config["scrape_configs"].append(wrong)
    (root / "prometheus.yml").write_text(yaml.safe_dump(config))
    port = free_port()
    log = root / "prometheus.log"
    command = [
        binary,
        f"--config.file={root / 'prometheus.yml'}",
        f"--storage.tsdb.path={root / 'data'}",
        f"--web.listen-address=127.0.0.1:{port}",
        "--log.level=warn",
    ]
    with open(log, "wb") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
    server = PrometheusServer(f"http://127.0.0.1:{port}", log)
    try:
        eventually(lambda: _ready(server, process), f"prometheus ready (log {log})", 60)
        yield server
    finally:
        process.terminate()
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)


def _ready(server: PrometheusServer, process: subprocess.Popen[bytes]) -> bool:
    assert process.poll() is None, f"prometheus exited {process.returncode}: {server.log.read_text()[-2000:]}"
    try:
        return httpx.get(f"{server.url}/-/ready", timeout=2).status_code == 200
    except httpx.TransportError:
        time.sleep(0.2)
        return False
