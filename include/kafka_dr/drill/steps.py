"""The drill's steps that act and wait (dr_drill's tasks call them; kafka_dr.airflow.drill only adapts them):
the ledger opened, the flows' health waited for, the approval's page, the probe topic made and the probe started,
the DC cut off with the probe's consumer behind, the consumer caught up in the target, the probe stopped. A step that
cannot go on raises DrillError (or the ledger's and the probe's own errors) with one line."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from typing import Any

from confluent_kafka import IsolationLevel, KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, NewTopic

from ..access import ClusterAccess
from ..clients import end_offsets
from ..topology import Topology
from ..translation.checkpoints import load_checkpoints
from . import checks, cutoff, ledger, probe_process
from .plan import DrillError, DrillPlan
from .run import AT_CUT, PROBE, DrillRun, run_folder
from .waits import WaitTimeout, wait_until

log = logging.getLogger(__name__)

HEALTH_WAIT_S = 180.0  # a fresh flow lacks its first checkpoint for a minute: health is asked again meanwhile
HEALTH_EVERY_S = 10.0
CHECKPOINT_WAIT_S = 150.0  # a running flow finds a new probe topic at its next epoch, checkpoints at the one after
CHECKPOINT_EVERY_S = 2.0
HOLD_S = 5.0  # the probe's consumer stops reading this long before the cut: it is behind when the DC is lost
CATCH_UP_S = 120.0
CATCH_UP_EVERY_S = 1.0
PROBE_PARTITIONS = 3


def open_ledger(
    run_id: str, access: ClusterAccess, drill: DrillPlan, running: Callable[[str], bool]
) -> tuple[dict[str, Any], str | None]:
    """ledger.begin, after killing the probe an earlier drill left running when it ended before its last step."""
    earlier = ledger.open_record()
    ended = earlier is not None and earlier["run_id"] != run_id and not running(earlier["run_id"])
    if ended and probe_process.kill(run_folder(earlier["run_id"]) / PROBE):
        log.warning("drill %s ended without stopping its probe: killed", earlier["run_id"])
    before, note = ledger.begin(run_id, access, drill.scenario, running)
    if note:
        log.warning("%s", note)
    return before, note


def wait_healthy(access: ClusterAccess, timeout: float = HEALTH_WAIT_S) -> dict[str, Any]:
    """Each flow's health status, asked again every HEALTH_EVERY_S until none is ERR or `timeout` passed:
    {"flows": name -> status, "passed", "problems": name -> problems of the flows in ERR}."""
    from ..health.check import check_flow  # Kafka reads, only in the task that needs them

    def health() -> dict[str, Any]:
        results = [check_flow(access, flow.name) for flow in access.topology.flows]
        problems = {h.name: h.problems for h in results if h.status == "ERR"}
        if problems:
            log.info("flows not healthy yet: %s", json.dumps(problems))
        return {"flows": {h.name: h.status for h in results}, "passed": not problems, "problems": problems}

    try:
        return wait_until(
            health, lambda found: found["passed"], timeout=timeout, every=HEALTH_EVERY_S, what="flows healthy"
        )
    except WaitTimeout as exc:
        return exc.last


def healthy_before(access: ClusterAccess, timeout: float = HEALTH_WAIT_S) -> dict[str, Any]:
    """No drill on a sick deployment: every flow healthy (up to `timeout`), else DrillError naming the flows."""
    health = wait_healthy(access, timeout)
    if not health["passed"]:
        lines = "; ".join(f"{name}: {', '.join(p)}" for name, p in health["problems"].items())
        raise DrillError(f"flows not healthy before the drill, nothing changed: {lines}")
    return health


def preview_page(drill: DrillPlan) -> str:
    """What the drill will do, for its approval: real switches of the topology's clients, and back."""
    cut = f"cut {drill.from_cluster} off (the topology's dr.cut_off_command), " if drill.disaster else ""
    mode = "disaster" if drill.disaster else "planned"
    return (
        f"# DR drill {drill.scenario}: {drill.from_cluster} -> {drill.to_cluster} and back\n\n"
        f"A probe application writes {drill.rate:g} records/s to `{drill.probe_topic}` through the client aliases "
        f"`{drill.producer_alias}` and `{drill.consumer_alias}`. The drill will {cut}run a real {mode} `dr_failover` "
        f"from {drill.from_cluster} to {drill.to_cluster} (flows {', '.join(drill.flows)}), then a `dr_failback` "
        f"(data_kept, republish): every client alias on {drill.from_cluster} moves and comes back.\n\n"
        f"Approval: {'this one approval stands for both runs' if drill.approval == 'skip' else 'each run asks'}.\n"
    )


def ensure_probe_topic(access: ClusterAccess, drill: DrillPlan) -> None:
    """The probe topic in both clusters, where missing, with the cluster's default replication factor (as the internal
    topics: a production cluster's, not 1)."""
    for cluster in (drill.from_cluster, drill.to_cluster):
        admin = access.admin(cluster)
        try:
            admin.create_topics([NewTopic(drill.probe_topic, PROBE_PARTITIONS)])[drill.probe_topic].result(30)
        except KafkaException as exc:
            if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                raise DrillError(f"cannot create {cluster}:{drill.probe_topic}: {exc.args[0].str()}") from None


def start_probe(run: DrillRun, access: ClusterAccess) -> dict[str, Any]:
    """The probe application, producing and consuming through the topology's aliases; for a disaster, until the flow
    has copied its records into the target and checkpointed its group since (the failover resumes it from there)."""
    drill = run.drill
    ensure_probe_topic(access, drill)
    target = access.config(drill.to_cluster)
    admin = AdminClient(target)
    # A disaster counts the target's copies before the probe writes: what the flow copies after is the probe's.
    copies_before = copies_in(admin, drill.probe_topic) if drill.disaster else 0
    tally = probe_process.start(
        run.probe,
        run.topology,
        drill.probe_topic,
        drill.producer_alias,
        drill.consumer_alias,
        drill.rate,
        access.child_environ(),
    )
    print(f"probe {tally['run']}: {drill.rate:g} records/s to {drill.probe_topic}", flush=True)
    if drill.disaster:
        wait_checkpointed(run, tally["group"], target, admin, copies_before)
    return {"run": tally["run"], "group": tally["group"]}


def copies_in(admin: AdminClient, topic: str) -> int:
    """Records in the target's probe topic (committed ends summed): before the failover only the flow writes there."""
    partitions = admin.list_topics(topic, timeout=30).topics[topic].partitions
    return sum(end_offsets(admin, [(topic, p) for p in partitions], IsolationLevel.READ_COMMITTED).values())


def wait_checkpointed(run: DrillRun, group: str, target: dict[str, Any], admin: AdminClient, before: int) -> None:
    """A disaster resumes the probe's group from the flow's last checkpoint: wait until the flow copies the probe's
    records into the target and has checkpointed the group since (a checkpoint made before the first copy, as a flow
    that has just found the new probe topic makes, would put the group before every copy: the records the consumer
    had not read at the cut would be read nowhere)."""
    drill = run.drill
    copying_ms: int | None = None  # when the first copy was seen

    def checkpointed() -> bool:
        nonlocal copying_ms
        if copying_ms is None and copies_in(admin, drill.probe_topic) > before:
            copying_ms = int(time.time() * 1000)
        groups, at_ms = load_checkpoints(target, drill.flows[0])
        consumed = probe_process.read(run.probe).get("consumed")
        return bool(copying_ms is not None and group in groups and at_ms and at_ms >= copying_ms and consumed)

    what = f"flow {drill.flows[0]} did not copy the probe's records into {drill.to_cluster} and checkpoint its group"
    try:
        wait_until(checkpointed, bool, timeout=CHECKPOINT_WAIT_S, every=CHECKPOINT_EVERY_S, what=what)
    except WaitTimeout as exc:
        raise DrillError(f"{exc}: a disaster failover would have nothing to resume it from") from None


def cut_off(run: DrillRun, topology: Topology) -> dict[str, Any]:
    """The disaster: the probe's consumer held HOLD_S first (behind at the cut), then the DC's broker and registry
    killed. Records the probe had acknowledged then, for what the application lost until the failback."""
    drill = run.drill
    probe_process.steer(run.probe, consume=False)
    time.sleep(HOLD_S)
    run.mark_cut()  # from here on, bring_back runs whatever happens (a command may fail half-way)
    try:
        stopped = cutoff.cut_off(topology, drill.from_cluster)
    except DrillError:
        probe_process.steer(run.probe, consume=True)
        raise
    time.sleep(1)  # acknowledgements the DC sent before it died reach the producer's callbacks
    tally = probe_process.read(run.probe)
    at_cut = sorted(set(tally.get("acknowledged", [])))
    (run.folder / AT_CUT).write_text(json.dumps(at_cut))
    behind = len(set(at_cut) - set(tally.get("consumed", [])))
    print(f"{drill.from_cluster} cut off ({stopped}); the probe's consumer is {behind} behind")
    return {"stopped": stopped, "behind": behind}


def catch_up(run: DrillRun) -> dict[str, Any]:
    """The probe's consumer reads on in the target: once it has what the target acknowledged since, it has read past
    every copy, and what the failed DC acknowledged that it still lacks is what the disaster lost until the failback."""
    probe_process.steer(run.probe, consume=True)
    cut_file = run.folder / AT_CUT
    at_cut = set(json.loads(cut_file.read_text())) if cut_file.exists() else set()

    def caught_up(tally: dict[str, Any]) -> bool:
        return set(tally.get("acknowledged", [])) - at_cut <= set(tally.get("consumed", []))

    try:
        tally = wait_until(
            lambda: probe_process.read(run.probe), caught_up, timeout=CATCH_UP_S, every=CATCH_UP_EVERY_S,
            what="the probe's consumer did not catch up",
        )  # fmt: skip
    except WaitTimeout as exc:
        tally = exc.last  # what it did not read counts below
    unread = len(at_cut - set(tally.get("consumed", [])))
    print(f"the probe's consumer reads {run.drill.to_cluster}: {unread} records acknowledged before the cut not there")
    return {"unread_after_failover": unread if run.drill.disaster else None}


def stop_probe(run: DrillRun) -> dict[str, Any]:
    """The probe stops producing, its consumer drains, and its last counts are kept in the run's folder."""
    time.sleep(HOLD_S)  # the probe goes on in the DC it is back in
    tally = probe_process.stop(run.probe, CATCH_UP_S)
    counts = checks.probe_counts(tally)
    print(f"probe stopped: {json.dumps(counts)}; drained: {tally['drained']}")
    return {"counts": counts, "drained": tally["drained"]}
