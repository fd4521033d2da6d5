"""A small client of the Confluent Schema Registry REST API, and the redirect of the white paper's
"Schema Registration" section.

Redirect: during a disaster the surviving registry follows the lost cluster's store and cannot
register. It is pointed at its own cluster's copy of `_schemas` (kept by replication) and made
leader-eligible, restarted through a configurable command, and proven by a registration whose id
is above every id it knew before, so new ids never collide with ids issued before the disaster.
The reverse (failback) points it back and makes it a follower again.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import asdict, dataclass
from typing import Any

from .local.stack import recorded_data_dir
from .topology import Topology

TIMEOUT_S = 5.0
PROBE_SUBJECT = "_kdr-redirect-probe-value"
DEFAULT_RESTART = (
    f"{shlex.quote(sys.executable)} -m kafka_dr.cli local restart-registry {{cluster}} --data-dir {{data_dir}} "
    "--kafkastore {kafkastore} --leader-eligible {leader_eligible}"
)
"""The local stack's own restart, on the stack last brought up with that registry, wherever it was (`{data_dir}`);
production sets schema_registry.restart_command (systemd, docker compose...)."""


class RegistryError(RuntimeError):
    """A registry did not answer or refused; one line naming the registry and why."""


def first_url(urls: str) -> str:
    return urls.split(",")[0].strip().rstrip("/")


def get_json(url: str, timeout: float = TIMEOUT_S) -> Any:
    with urllib.request.urlopen(url, timeout=timeout) as response:
        return json.loads(response.read())


def post_json(url: str, body: Any, timeout: float = TIMEOUT_S) -> Any:
    request = urllib.request.Request(
        url,
        data=json.dumps(body).encode(),
        method="POST",
        headers={"Content-Type": "application/vnd.schemaregistry.v1+json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return json.loads(response.read())
    except urllib.error.HTTPError as exc:
        detail = exc.read().decode(errors="replace")[:200]
        raise RegistryError(f"{url}: HTTP {exc.code}: {detail}") from None


def max_schema_id(url: str) -> int:
    """The highest schema id the registry knows (0 when none)."""
    return max((s["id"] for s in get_json(f"{url}/schemas?deleted=true")), default=0)


def register_probe(url: str) -> int:
    """Register a new version of kafka-dr's probe subject; returns its id."""
    schema = {
        "type": "record",
        "name": "KdrRedirectProbe",
        "fields": [{"name": "at_ms", "type": "long", "default": int(time.time() * 1000)}],
    }
    return post_json(f"{url}/subjects/{PROBE_SUBJECT}/versions", {"schema": json.dumps(schema)})["id"]


@dataclass(frozen=True)
class Redirect:
    registry: str  # the cluster whose registry was restarted
    url: str
    store: str  # the cluster whose `_schemas` it now uses
    leader_eligible: bool
    max_id_before: int | None  # None: the registry was not answering before
    probe_id: int | None  # a registration made after the restart (leader-eligible only)
    seconds: float

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def restart_command(topology: Topology, registry: str, store: str, leader_eligible: bool) -> list[str]:
    template = topology.schema_registry_restart or DEFAULT_RESTART
    values = {
        "cluster": registry,
        "kafkastore": topology.cluster(store).bootstrap_servers,
        "leader_eligible": "true" if leader_eligible else "false",
        "data_dir": str(recorded_data_dir(first_url(topology.cluster(registry).schema_registry or ""))),
    }
    return [part.format(**values) for part in shlex.split(template)]  # no shell: values cannot inject


def redirect(topology: Topology, registry: str, store: str, leader_eligible: bool, timeout: float = 60.0) -> Redirect:
    """Point `registry`'s schema registry at `store`'s cluster with the given eligibility, restart it and
    verify it: it answers, and when leader-eligible a new registration gets an id above all it knew."""
    started = time.monotonic()
    url = topology.cluster(registry).schema_registry
    if url is None:
        raise RegistryError(f"cluster {registry} has no schema_registry URL in the topology")
    url = first_url(url)
    try:
        before = max_schema_id(url)
    except (OSError, ValueError):
        before = None  # already down: the restart brings it up
    command = restart_command(topology, registry, store, leader_eligible)
    done = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    if done.returncode != 0:
        reason = (done.stderr or done.stdout).strip().splitlines()[-1:] or [f"exit {done.returncode}"]
        raise RegistryError(f"restart of the {registry} registry failed ({shlex.join(command)}): {reason[0]}")
    probe = None
    deadline = time.monotonic() + timeout
    while True:
        try:
            known = max_schema_id(url)
            if leader_eligible and before is not None and known < before:
                # The store's copy lacks ids the registry served: a registration now could reuse one of them.
                raise RegistryError(
                    f"the `_schemas` of {store} knows ids up to {known} but the {registry} registry "
                    f"served ids up to {before}: replicate `_schemas` to {store} first"
                )
            if leader_eligible:
                probe = register_probe(url)
            break
        except (OSError, ValueError, RegistryError) as exc:  # also while it reads its store or elects itself
            if time.monotonic() > deadline:
                raise RegistryError(
                    f"the {registry} registry ({url}) did not "
                    f"{'register' if leader_eligible else 'answer'} within {timeout:g}s after "
                    f"its restart: {exc}"
                ) from None
            time.sleep(0.5)
    if probe is not None and probe <= known:
        raise RegistryError(f"the {registry} registry issued id {probe}, not above the ids it knew ({known})")
    return Redirect(registry, url, store, leader_eligible, before, probe, round(time.monotonic() - started, 3))
