"""A small client of the Confluent Schema Registry REST API, and the redirect of the white paper's
"Schema Registration" section.

Redirect: during a disaster the surviving registry follows the lost cluster's store and cannot
register. It is pointed at its own cluster's copy of `_schemas` (kept by replication) and made
leader-eligible, restarted through a configurable command, and proven by a registration whose id
is above every id it knew before, so new ids never collide with ids issued before the disaster.
The reverse (failback) points it back and makes it a follower again.

A registry that requires HTTP Basic authentication (Confluent's `authentication.method=BASIC`) gets the
credentials of its cluster from $KDR_REGISTRY_<NAME>_USER_INFO, `user:password` as Confluent's
`basic.auth.user.info`; in Airflow tasks the connection `kafka_dr_<cluster>_registry` fills it
(airflow/hooks/schema_registry.py). They travel in the Authorization header only, never in a message.
"""

from __future__ import annotations

import base64
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

from .clients import env_name, error_text
from .topology import Topology

TIMEOUT_S = 5.0
RETRY_S = 0.1  # between checks of a restarted registry: it is ready when it answers, not after a fixed delay
PROBE_SUBJECT = "_kdr-redirect-probe-value"


class RegistryError(RuntimeError):
    """A registry did not answer or refused; one line naming the registry and why."""


def first_url(urls: str) -> str:
    return urls.split(",")[0].strip().rstrip("/")


def user_info_env_var(cluster_name: str) -> str:
    """Environment variable holding `user:password` for a cluster's registry, e.g. KDR_REGISTRY_DC1_USER_INFO."""
    return f"KDR_REGISTRY_{env_name(cluster_name)}_USER_INFO"


def user_info(cluster_name: str, environ: Mapping[str, str] | None = None) -> str | None:
    """The cluster's registry credentials, `user:password`, from `environ` (default this process's environment), or
    None when it has none; a malformed value is one line naming the variable, never its value."""
    value = (os.environ if environ is None else environ).get(user_info_env_var(cluster_name))
    if not value:
        return None
    if ":" not in value:
        raise RegistryError(f"{user_info_env_var(cluster_name)} must be user:password")
    return value


def auth_headers(cluster_name: str, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The Authorization header for the cluster's registry, or none."""
    credentials = user_info(cluster_name, environ)
    return {"Authorization": f"Basic {base64.b64encode(credentials.encode()).decode()}"} if credentials else {}


def client_settings(topology: Topology, cluster_name: str) -> dict[str, str]:
    """Settings for confluent-kafka's SchemaRegistryClient for the cluster's registry, credentials included."""
    url = topology.cluster(cluster_name).schema_registry
    if url is None:
        raise RegistryError(f"cluster {cluster_name} has no schema_registry URL in the topology")
    credentials = user_info(cluster_name)
    return {"url": first_url(url), **({"basic.auth.user.info": credentials} if credentials else {})}


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
    topology: Topology,
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
    url = topology.cluster(registry).schema_registry
    if url is None:
        raise RegistryError(f"cluster {registry} has no schema_registry URL in the topology")
    url = first_url(url)
    headers = auth_headers(registry)
    try:
        before = max_schema_id(url, headers)
    except (OSError, ValueError) as exc:
        if isinstance(exc, urllib.error.HTTPError) and exc.code in (401, 403):
            raise _refused(registry, url, exc) from None
        before = None  # already down: the restart brings it up
    command = restart_command(topology, registry, store, leader_eligible)
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired) as exc:  # not found, not executable, or never returned
        raise RegistryError(f"restart of the {registry} registry failed ({shlex.join(command)}): {exc}") from None
    if done.returncode != 0:
        reason = (done.stderr or done.stdout).strip().splitlines()[-1:] or [f"exit {done.returncode}"]
        raise RegistryError(f"restart of the {registry} registry failed ({shlex.join(command)}): {reason[0]}")
    probe = None
    deadline = time.monotonic() + timeout
    while True:
        try:
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
            if leader_eligible:
                probe = register_probe(url, headers)
            break
        except (OSError, ValueError, RegistryError) as exc:  # also while it reads its store or elects itself
            if isinstance(exc, urllib.error.HTTPError) and exc.code in (401, 403):
                raise _refused(registry, url, exc) from None  # waiting would not change the answer
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


def answers(url: str, headers: Mapping[str, str] | None = None, timeout: float = TIMEOUT_S) -> bool:
    """The registry answers GET /subjects (whatever it holds)."""
    try:
        get_json(f"{url}/subjects", timeout=timeout, headers=headers)
        return True
    except (OSError, ValueError):
        return False


def registry_role(
    urls: str | None,
    timeout: float = TIMEOUT_S,
    cluster: str | None = None,
    environ: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The role of the schema registry at `urls` (the first one): leader or follower as the local stack's
    `GET /kdr/leader` says, unknown for a registry that answers without that endpoint (Confluent's), unreachable.
    `cluster`'s basic-auth credentials, if any, come from `environ` (default this process's environment). Here, not
    in the dashboard that shows it, so that a drill's record of what it changes asks the same way."""
    if urls is None:
        return {"url": None, "role": None, "leader": None, "error": None}
    url = first_url(urls)
    try:
        headers = auth_headers(cluster, environ) if cluster else {}
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


def writes_through(topology: Topology, follower: str, leader: str, timeout: float = 30.0) -> int:
    """Prove that the registries of clusters `follower` and `leader` have one leader between them: a probe registered
    through `follower`'s registry (which forwards it) is served by `leader`'s as the probe, so every id either issues
    comes from one store. Returns the probe's id; RegistryError with one line otherwise."""
    via, at = (first_url(topology.cluster(c).schema_registry or "") for c in (follower, leader))
    deadline = time.monotonic() + timeout
    while True:
        try:
            probe = register_probe(via, auth_headers(follower))
            subjects = get_json(f"{at}/schemas/ids/{probe}/subjects", headers=auth_headers(leader))
            if subjects != [PROBE_SUBJECT]:
                raise RegistryError(f"its id {probe} is {subjects} in the {leader} registry: two leaders")
            return probe
        except (OSError, ValueError, RegistryError) as exc:  # also while the follower learns of its new leader
            if isinstance(exc, urllib.error.HTTPError) and exc.code in (401, 403):
                raise _refused(follower, via, exc) from None
            if time.monotonic() > deadline:
                raise RegistryError(
                    f"one registry leader not shown: a probe registered through the {follower} registry ({via}) "
                    f"was not served by the {leader} registry within {timeout:g}s: {exc}"
                ) from None
            time.sleep(RETRY_S)


def _refused(registry: str, url: str, exc: urllib.error.HTTPError) -> RegistryError:
    """A registry that refused kafka-dr's credentials (or wants some): one line naming where they come from."""
    source = "given" if user_info(registry) else "none given"
    return RegistryError(
        f"the {registry} registry ({url}) refused the request, HTTP {exc.code} {exc.reason}: basic auth "
        f"credentials {source} (connection kafka_dr_{registry}_registry or ${user_info_env_var(registry)})"
    )
