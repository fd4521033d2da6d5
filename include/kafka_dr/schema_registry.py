"""A small client of the Confluent Schema Registry REST API, and the redirect of the white paper's
"Schema Registration" section.

Redirect: during a disaster the surviving registry follows the lost cluster's store and cannot
register. It is pointed at its own cluster's copy of `_schemas` (kept by replication) and made
leader-eligible, restarted through a configurable command, and proven by a registration whose id
is above every id it knew before, so new ids never collide with ids issued before the disaster.
The reverse (failback) points it back and makes it a follower again.

A registry that requires HTTP Basic authentication (Confluent's `authentication.method=BASIC`) gets the
credentials of its cluster, `user:password` as Confluent's `basic.auth.user.info`, from the process's ClusterAccess
(kafka_dr.access: the connection `kafka_dr_<cluster>_registry` in Airflow tasks, else
$KDR_REGISTRY_<NAME>_USER_INFO). They travel in the Authorization header only, never in a message.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from .access import ClusterAccess, user_info_env_var
from .clients import error_text
from .topology import Topology

TIMEOUT_S = 5.0
RETRY_S = 0.1  # between checks of a restarted registry: it is ready when it answers, not after a fixed delay
PROBE_SUBJECT = "_kdr-redirect-probe-value"


class RegistryError(RuntimeError):
    """A registry did not answer or refused; one line naming the registry and why."""


def first_url(urls: str) -> str:
    return urls.split(",")[0].strip().rstrip("/")


def client_settings(access: ClusterAccess, cluster_name: str) -> dict[str, str]:
    """Settings for confluent-kafka's SchemaRegistryClient for the cluster's registry, credentials included."""
    url = access.topology.cluster(cluster_name).schema_registry
    if url is None:
        raise RegistryError(f"cluster {cluster_name} has no schema_registry URL in the topology")
    user = access.registry_users.get(cluster_name)
    return {"url": first_url(url), **({"basic.auth.user.info": user} if user else {})}


def get_json(url: str, timeout: float = TIMEOUT_S, headers: Mapping[str, str] | None = None) -> Any:
    with urllib.request.urlopen(urllib.request.Request(url, headers=dict(headers or {})), timeout=timeout) as response:
        return json.loads(response.read())


def post_json(url: str, body: Any, timeout: float = TIMEOUT_S, headers: Mapping[str, str] | None = None) -> Any:
    request = urllib.request.Request(
        url,
        data=json.dumps(body).encode(),
        method="POST",
        headers={"Content-Type": "application/vnd.schemaregistry.v1+json", **(headers or {})},
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return json.loads(response.read())
    except urllib.error.HTTPError as exc:
        detail = exc.read().decode(errors="replace")[:200]
        raise RegistryError(f"{url}: HTTP {exc.code}: {detail}") from None


def max_schema_id(url: str, headers: Mapping[str, str] | None = None) -> int:
    """The highest schema id the registry knows (0 when none)."""
    return max((s["id"] for s in get_json(f"{url}/schemas?deleted=true", headers=headers)), default=0)


def register_probe(url: str, headers: Mapping[str, str] | None = None) -> int:
    """Register a new version of kafka-dr's probe subject; returns its id."""
    schema = {
        "type": "record",
        "name": "KdrRedirectProbe",
        "fields": [{"name": "at_ms", "type": "long", "default": int(time.time() * 1000)}],
    }
    body = {"schema": json.dumps(schema)}
    return post_json(f"{url}/subjects/{PROBE_SUBJECT}/versions", body, headers=headers)["id"]


@dataclass(frozen=True)
class Redirect:
    registry: str  # the cluster whose registry was restarted
    url: str
    store: str  # the cluster whose `_schemas` it now uses
    leader_eligible: bool
    max_id_before: int | None  # None: the registry was not answering before
    probe_id: int | None  # a registration made after the restart (leader-eligible only)
    seconds: float


def restart_command(topology: Topology, registry: str, store: str, leader_eligible: bool) -> list[str]:
    """The topology's schema_registry.restart_command for `registry` (the deployment's own: systemd, docker compose,
    the local stack's `kafka-dr-dev local restart-registry` in include/topology.yaml); none is one line."""
    template = topology.schema_registry_restart
    if template is None:
        raise RegistryError(f"the topology has no schema_registry.restart_command to restart the {registry} registry")
    values = {
        "cluster": registry,
        "registry_url": first_url(topology.cluster(registry).schema_registry or ""),
        "kafkastore": topology.cluster(store).bootstrap_servers,
        "leader_eligible": "true" if leader_eligible else "false",
    }
    return [part.format(**values) for part in shlex.split(template)]  # no shell: values cannot inject


def kafka_cluster_id(url: str, headers: Mapping[str, str] | None = None) -> str | None:
    """The id of the Kafka cluster whose `_schemas` the registry reads (Confluent's GET /v1/metadata/id); None from a
    registry without that endpoint."""
    try:
        return get_json(f"{url}/v1/metadata/id", headers=headers)["scope"]["clusters"]["kafka-cluster"]
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            return None
        raise


def store_cluster_id(store_config: Mapping[str, Any], timeout: float = TIMEOUT_S) -> str:
    """The Kafka cluster id of a store, asked of the cluster itself: what a registry redirected to it must report."""
    admin = AdminClient(dict(store_config))  # held until the answer: a collected client cancels its requests
    try:
        return admin.describe_cluster(request_timeout=timeout).result(timeout).cluster_id
    except KafkaException as exc:
        raise RegistryError(f"the store cluster does not answer: {error_text(exc)}") from None


def redirect(
    access: ClusterAccess,
    registry: str,
    store: str,
    leader_eligible: bool,
    timeout: float = 60.0,
    store_id: str | None = None,
) -> Redirect:
    """Point `registry`'s schema registry at `store`'s cluster with the given eligibility, restart it and
    verify it: it answers, and when leader-eligible a new registration gets an id above all it knew.

    A restart command may return before the registry restarts (a wrapper that signals a container). With `store_id`
    (the store's Kafka cluster id) nothing is verified until the registry reports that store, so the old process is
    never the one checked or the one the probe goes through; a registry whose store does not change (or without
    Confluent's metadata endpoint) gives no such sign, and its restart command must then return only once the
    restarted registry answers."""
    started = time.monotonic()
    topology = access.topology
    url = topology.cluster(registry).schema_registry
    if url is None:
        raise RegistryError(f"cluster {registry} has no schema_registry URL in the topology")
    url = first_url(url)
    headers = access.registry_headers(registry)
    try:
        before = max_schema_id(url, headers)
    except (OSError, ValueError) as exc:
        if isinstance(exc, urllib.error.HTTPError) and exc.code in (401, 403):
            raise _refused(registry, url, exc, bool(headers)) from None
        before = None  # already down: the restart brings it up
    _restart(restart_command(topology, registry, store, leader_eligible), registry, timeout, access.child_environ())
    deadline = time.monotonic() + timeout
    while True:
        try:
            known, probe = _check_redirected(url, headers, registry, store, store_id, leader_eligible, before)
            break
        except (OSError, ValueError, RegistryError) as exc:  # also while it reads its store or elects itself
            if isinstance(exc, urllib.error.HTTPError) and exc.code in (401, 403):
                raise _refused(registry, url, exc, bool(headers)) from None  # waiting would not change the answer
            if time.monotonic() > deadline:
                raise RegistryError(
                    f"the {registry} registry ({url}) did not "
                    f"{'register' if leader_eligible else 'answer'} within {timeout:g}s after "
                    f"its restart: {exc}"
                ) from None
            time.sleep(RETRY_S)
    if probe is not None and probe <= known:
        raise RegistryError(f"the {registry} registry issued id {probe}, not above the ids it knew ({known})")
    return Redirect(registry, url, store, leader_eligible, before, probe, round(time.monotonic() - started, 3))


def _restart(command: list[str], registry: str, timeout: float, env: Mapping[str, str]) -> None:
    """Run the registry's restart command, with the clusters' settings in its environment (`env`, never on its
    command line); RegistryError with its last line of output when it fails."""
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, env={**os.environ, **env})
    except (OSError, subprocess.TimeoutExpired) as exc:  # not found, not executable, or never returned
        raise RegistryError(f"restart of the {registry} registry failed ({shlex.join(command)}): {exc}") from None
    if done.returncode != 0:
        reason = (done.stderr or done.stdout).strip().splitlines()[-1:] or [f"exit {done.returncode}"]
        raise RegistryError(f"restart of the {registry} registry failed ({shlex.join(command)}): {reason[0]}")


def _check_redirected(
    url: str,
    headers: Mapping[str, str],
    registry: str,
    store: str,
    store_id: str | None,
    leader_eligible: bool,
    before: int | None,
) -> tuple[int, int | None]:
    """One look at the restarted registry: the highest id it knows and, when leader-eligible, the id a probe
    registration got. Raises (to be retried until the deadline) while it still reads another store."""
    reads = kafka_cluster_id(url, headers) if store_id is not None else None
    if reads is not None and reads != store_id:
        raise RegistryError(f"it still reads the `_schemas` of cluster {reads}, not {store}'s ({store_id})")
    known = max_schema_id(url, headers)
    if leader_eligible and before is not None and known < before:
        # The store's copy lacks ids the registry served: a registration now could reuse one of them.
        raise RegistryError(
            f"the `_schemas` of {store} knows ids up to {known} but the {registry} registry "
            f"served ids up to {before}: replicate `_schemas` to {store} first"
        )
    return known, register_probe(url, headers) if leader_eligible else None


def answers(url: str, headers: Mapping[str, str] | None = None, timeout: float = TIMEOUT_S) -> bool:
    """The registry answers GET /subjects (whatever it holds)."""
    try:
        get_json(f"{url}/subjects", timeout=timeout, headers=headers)
        return True
    except (OSError, ValueError):
        return False


def registry_role(
    urls: str | None, timeout: float = TIMEOUT_S, headers: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """The role of the schema registry at `urls` (the first one): leader or follower as the local stack's
    `GET /kdr/leader` says, unknown for a registry that answers without that endpoint (Confluent's), unreachable.
    `headers`: its Authorization (ClusterAccess.registry_headers). Here, not in the dashboard that shows it, so that a
    drill's record of what it changes asks the same way."""
    if urls is None:
        return {"url": None, "role": None, "leader": None, "error": None}
    url = first_url(urls)
    try:
        status = get_json(f"{url}/kdr/leader", timeout, headers)
    except RegistryError as exc:
        return {"url": url, "role": "unknown", "leader": None, "error": str(exc)}
    except urllib.error.HTTPError as exc:
        return {"url": url, "role": "unknown", "leader": None, "error": f"answers, role not exposed (HTTP {exc.code})"}
    except (OSError, ValueError) as exc:
        return {"url": url, "role": "unreachable", "leader": None, "error": " ".join(str(exc).split())}
    if not isinstance(status, dict):
        return {"url": url, "role": "unknown", "leader": None, "error": "unexpected answer from /kdr/leader"}
    role = "leader" if status.get("is_leader") else "follower"
    return {"url": url, "role": role, "leader": status.get("leader"), "error": None}


def writes_through(access: ClusterAccess, follower: str, leader: str, timeout: float = 30.0) -> int:
    """Prove that the registries of clusters `follower` and `leader` have one leader between them: a probe registered
    through `follower`'s registry (which forwards it) is served by `leader`'s as the probe, so every id either issues
    comes from one store. Returns the probe's id; RegistryError with one line otherwise."""
    via, at = (first_url(access.topology.cluster(c).schema_registry or "") for c in (follower, leader))
    deadline = time.monotonic() + timeout
    while True:
        try:
            probe = register_probe(via, access.registry_headers(follower))
            subjects = get_json(f"{at}/schemas/ids/{probe}/subjects", headers=access.registry_headers(leader))
            if subjects != [PROBE_SUBJECT]:
                raise RegistryError(f"its id {probe} is {subjects} in the {leader} registry: two leaders")
            return probe
        except (OSError, ValueError, RegistryError) as exc:  # also while the follower learns of its new leader
            if isinstance(exc, urllib.error.HTTPError) and exc.code in (401, 403):
                raise _refused(follower, via, exc, follower in access.registry_users) from None
            if time.monotonic() > deadline:
                raise RegistryError(
                    f"one registry leader not shown: a probe registered through the {follower} registry ({via}) "
                    f"was not served by the {leader} registry within {timeout:g}s: {exc}"
                ) from None
            time.sleep(RETRY_S)


def _refused(registry: str, url: str, exc: urllib.error.HTTPError, given: bool) -> RegistryError:
    """A registry that refused kafka-dr's credentials (or wants some): one line naming where they come from."""
    source = "given" if given else "none given"
    return RegistryError(
        f"the {registry} registry ({url}) refused the request, HTTP {exc.code} {exc.reason}: basic auth "
        f"credentials {source} (connection kafka_dr_{registry}_registry or ${user_info_env_var(registry)})"
    )
