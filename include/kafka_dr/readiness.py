"""Readiness: every condition that would stop or slow a failover tonight, each with one line and its runbook section.

Pure over `Facts`, what a caller gathered (`kafka-dr readiness`, a health run): each check is a function of the
topology and the facts, so that one condition can be made true at a time. A check whose facts were not gathered
(Airflow's own state, asked from a command line without Airflow) says so: it is not counted as ready.
"""

from __future__ import annotations

import json
import shlex
import shutil
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta

from confluent_kafka import KafkaException

from .access import ClusterAccess
from .drill.history import drill_history
from .paths import state_dir
from .replication import liveness
from .replication.lag import LagError, flow_lag
from .roles import away_flows
from .roles import pending as pending_failovers
from .runbooks import RUNBOOKS_DIR
from .schema_registry import registry_role
from .state import write_json
from .times import epoch_ms
from .topology import Topology

RUNBOOK = f"{RUNBOOKS_DIR}/readiness.md"  # a check's section is its name, dashed (tests/docs checks each)
# The DAGs a failover, its approval and the way back need: a paused one queues its run and never starts it.
DR_DAGS = ("dr_failover", "dr_failback", "dr_schema_redirect", "dr_replication_health", "dr_bringup")
SCHEMAS_TOPIC = "_schemas"
SNAPSHOT = "readiness.json"  # in the state directory: the newest health run's findings


@dataclass(frozen=True)
class Finding:
    """One condition: `ready` True, False, or None when its facts were not gathered here."""

    check: str
    ready: bool | None
    reason: str

    @property
    def runbook(self) -> str:
        return f"{RUNBOOK}#{self.check.replace('_', '-')}"

    def line(self) -> str:
        mark = {True: "ready", False: "NOT READY", None: "not checked"}[self.ready]
        return f"{self.check}: {mark}: {self.reason}" + ("" if self.ready else f" (see {self.runbook})")

    def to_dict(self) -> dict[str, object]:
        return {**asdict(self), "runbook": self.runbook}


@dataclass(frozen=True)
class Facts:
    """What the checks look at, gathered by the caller. None: not gathered here."""

    now: datetime
    paused_dags: frozenset[str] | None = None  # Airflow's paused DAG ids
    known_users: frozenset[str] | None = None  # the user ids Airflow's auth manager knows
    flows_running: Mapping[str, bool | None] = field(default_factory=dict)  # flow -> its replicator runs
    rpo_records: Mapping[str, int | None] = field(default_factory=dict)  # flow -> records a disaster would lose now
    failed_over: frozenset[str] = frozenset()  # clusters failed over from, failback pending (kafka_dr.roles)
    registry_roles: Mapping[str, str] | None = None  # cluster -> its registry's role (schema_registry.registry_role)
    last_drill_passed: datetime | None = None  # when the newest passing dr_drill started
    drills_known: bool = False  # whether the reports were read (else last_drill_passed means nothing)
    runnable: Callable[[str], bool] = lambda program: shutil.which(program) is not None


def evaluate(topology: Topology, facts: Facts) -> list[Finding]:
    """Every check, in the order an on-call engineer would fix them."""
    return [check(topology, facts) for check in CHECKS]


def ready(findings: list[Finding]) -> bool:
    return all(finding.ready is True for finding in findings)


def dags_unpaused(topology: Topology, facts: Facts) -> Finding:
    if facts.paused_dags is None:
        return Finding("dags_unpaused", None, "Airflow's paused DAGs were not gathered here")
    paused = sorted(set(DR_DAGS) & facts.paused_dags)
    if paused:
        return Finding("dags_unpaused", False, f"paused: {', '.join(paused)}: a run triggered now would never start")
    return Finding("dags_unpaused", True, f"{', '.join(DR_DAGS)} unpaused")


def approvers(topology: Topology, facts: Facts) -> Finding:
    policy = topology.dr
    if policy.approval == "none":
        return Finding("approvers", True, "dr.approval is none: no approval is asked")
    if not policy.approvers:
        return Finding("approvers", True, "any Airflow user may approve (dr.approvers is empty)")
    if facts.known_users is None:
        return Finding("approvers", None, "Airflow's users were not gathered here")
    known = [user for user in policy.approvers if user in facts.known_users]
    if not known:
        listed = ", ".join(policy.approvers)
        return Finding("approvers", False, f"no approver Airflow knows: dr.approvers lists {listed}, not user ids")
    return Finding("approvers", True, f"approvers Airflow knows: {', '.join(known)}")


def commands(topology: Topology, facts: Facts) -> Finding:
    """The commands a failover or a drill runs on a host: the registry's restart, the drill's cut-off and way back."""
    templates = {
        "schema_registry.restart_command": topology.schema_registry_restart,
        "dr.cut_off_command": topology.dr.cut_off_command,
        "dr.bring_back_command": topology.dr.bring_back_command,
    }
    missing = [
        f"{key}: {program!r} not found"
        for key, template in templates.items()
        if template is not None and not facts.runnable(program := shlex.split(template)[0])
    ]
    if missing:
        return Finding("commands", False, "; ".join(missing))
    given = [key for key, template in templates.items() if template is not None]
    return Finding("commands", True, f"runnable: {', '.join(given)}" if given else "none configured")


def schema_registry(topology: Topology, facts: Facts) -> Finding:
    """A registry failover needs the primary's `_schemas` copied to every other cluster with a registry, and the
    registries to agree on one leader: two leaders issue clashing ids, none accepts no new schema."""
    primary = topology.schema_registry_primary
    if primary is None:
        return Finding("schema_registry", True, "no primary registry: nothing to redirect")
    others = [name for name, c in topology.clusters.items() if name != primary and c.schema_registry is not None]
    copied = {flow.target for flow in topology.flows if flow.source == primary and flow.copies(SCHEMAS_TOPIC)}
    uncopied = [name for name in others if name not in copied]
    if uncopied:
        return Finding(
            "schema_registry", False, f"{SCHEMAS_TOPIC} of {primary} is copied by no flow into {', '.join(uncopied)}"
        )
    copied = f"{SCHEMAS_TOPIC} of {primary} copied into {', '.join(others) or 'none'}"
    if facts.registry_roles is None:
        return Finding("schema_registry", None, f"{copied}; the registries' roles were not gathered here")
    roles = dict(sorted(facts.registry_roles.items()))
    leaders = [name for name, role in roles.items() if role == "leader"]
    down = [name for name, role in roles.items() if role == "unreachable"]
    if len(leaders) > 1:
        return Finding("schema_registry", False, f"{len(leaders)} registries lead ({', '.join(leaders)}): split brain")
    if down:
        return Finding("schema_registry", False, f"the registry of {', '.join(down)} does not answer")
    if not leaders and any(role in ("leader", "follower") for role in roles.values()):
        return Finding("schema_registry", False, "no registry leads: every one that says its role follows")
    if not leaders:
        return Finding("schema_registry", None, f"{copied}; the registries do not expose their roles")
    return Finding("schema_registry", True, f"{copied}; {leaders[0]}'s registry leads, the others follow")


def flows(topology: Topology, facts: Facts) -> Finding:
    """Every flow's replicator runs, and what a disaster would lose now is within dr.rpo_records; the flows from or
    into a cluster failed over from wait for its failback, which is said once."""
    problems, unknown = [], []
    objective = topology.dr.rpo_records
    held = away_flows(topology, facts.failed_over)
    waiting = f"; failed over from {', '.join(sorted(facts.failed_over))}: {len(held)} flow(s) wait for the failback"
    for flow in (flow for flow in topology.flows if flow.name not in held):
        running = facts.flows_running.get(flow.name)
        rpo = facts.rpo_records.get(flow.name)
        if running is False:
            problems.append(f"{flow.name} not running")
        elif running is None:
            unknown.append(flow.name)
        if objective is not None and rpo is not None and rpo > objective:
            problems.append(f"{flow.name} would lose {rpo} records, over dr.rpo_records {objective}")
    note = waiting if held else ""
    if problems:
        return Finding("flows", False, "; ".join(problems) + note)
    if unknown:
        return Finding("flows", None, f"not known whether these run: {', '.join(unknown)}{note}")
    return Finding("flows", True, f"{len(topology.flows) - len(held)} flow(s) running within the RPO objective{note}")


def client_aliases(topology: Topology, facts: Facts) -> Finding:
    if not topology.clients:
        return Finding("client_aliases", False, "no client alias: a failover moves no application, each by hand")
    return Finding("client_aliases", True, f"{len(topology.clients)} alias(es) a failover moves")


def airflow_site(topology: Topology, facts: Facts) -> Finding:
    """Airflow (scheduler, database, triggerer, state directory) must not sit in a DC a failover may start from."""
    site = topology.dr.airflow_site
    if site is None:
        return Finding("airflow_site", None, "dr.airflow_site does not say where Airflow runs")
    sources = sorted({flow.source for flow in topology.flows})
    if site in sources:
        return Finding("airflow_site", False, f"Airflow runs in {site}, which a failover may start from: lost with it")
    return Finding("airflow_site", True, f"Airflow runs in {site}, no flow's source")


def drill_age(topology: Topology, facts: Facts) -> Finding:
    if not facts.drills_known:
        return Finding("drill_age", None, "the drill reports were not read")
    limit = timedelta(seconds=topology.dr.drill_max_age_s)
    if facts.last_drill_passed is None:
        return Finding("drill_age", False, "no dr_drill has passed")
    age = facts.now - facts.last_drill_passed
    if age > limit:
        return Finding("drill_age", False, f"the last passing dr_drill is {age.days} days old, over dr.drill_max_age")
    return Finding("drill_age", True, f"the last passing dr_drill is {age.days} days old")


CHECKS = (dags_unpaused, approvers, flows, schema_registry, commands, client_aliases, airflow_site, drill_age)


def gather(access: ClusterAccess, now: datetime, rpo_records: Mapping[str, int | None] | None = None) -> Facts:
    """What the clusters of `access` and the state directory say (not Airflow's own state): whether each flow's
    replicator runs and its lag in records (None where a cluster does not answer), and the newest passing drill.
    `rpo_records`: the lags a health run just measured, not measured again."""
    topology = access.topology
    running: dict[str, bool | None] = {}
    rpo: dict[str, int | None] = dict(rpo_records or {})
    for flow in topology.flows:
        try:
            target = access.config(flow.target)
            running[flow.name] = liveness.liveness(flow.name, target).running
        except KafkaException:
            running[flow.name] = None
        if rpo_records is None:
            try:
                rpo[flow.name] = flow_lag(access, flow.name).total_records
            except LagError:
                rpo[flow.name] = None
    registries = {name: c for name, c in topology.clusters.items() if c.schema_registry is not None}
    roles = {
        name: registry_role(c.schema_registry, headers=access.registry_headers(name))["role"]
        for name, c in registries.items()
    }
    return Facts(
        now=now,
        failed_over=frozenset(pending_failovers()),
        registry_roles=roles,
        flows_running=running,
        rpo_records=rpo,
        last_drill_passed=last_passing_drill(),
        drills_known=True,
    )


def save(findings: list[Finding], checked_at: datetime) -> dict[str, object]:
    """The findings as the DR page and the metrics read them (STATE_DIR/readiness.json), returned as written."""
    body = {"checked_at": checked_at.isoformat(timespec="seconds"), "ready": ready(findings)}
    body["findings"] = [finding.to_dict() for finding in findings]
    write_json(state_dir() / SNAPSHOT, body)
    return body


def load() -> dict[str, object] | None:
    """The newest saved findings; None when no health run has checked readiness yet (or the file is unreadable)."""
    try:
        return json.loads((state_dir() / SNAPSHOT).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def last_passing_drill() -> datetime | None:
    """When the newest passing dr_drill started, from the drills' evidence (drill.history, which reads each one's
    verdict); None when none passed. An unreadable file is one entry with an error there: the others decide."""
    started = [drill["started"] for drill in drill_history() if drill["error"] is None and drill["passed"] is True]
    return max((datetime.fromtimestamp(epoch_ms(when, "started") / 1000, UTC) for when in started), default=None)
