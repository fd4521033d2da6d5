"""A replicator's liveness and its stop as any process sees them through the target cluster (kafka_dr.replication
.liveness, control): a real broker, and a driver's claim played by FlowClaim itself, without Spark. The real driver
obeying a stop request from another PID namespace is tests/integration/test_replication.py's continuous test."""

from __future__ import annotations

import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient
from support.ports import free_port
from support.retry import eventually

from kafka_dr.clients import answers
from kafka_dr.replication import activity, liveness, replicators
from kafka_dr.replication.control import StopRequest, StopRequests, request_stop
from kafka_dr.replication.fencing import ClaimRenewal, FlowClaim
from kafka_dr.replication.internal import CONTROL, PROGRESS, ensure_internal_topics
from kafka_dr.replication.replicators import ReplicatorError

pytestmark = pytest.mark.integration
OWNER = {"host": "worker-7", "pid": 4242, "started_at": "2026-11-26T14:00:00+00:00"}


@pytest.fixture
def target(broker_pair, tmp_path, monkeypatch):
    monkeypatch.setenv("KDR_STATE_DIR", str(tmp_path / "state"))  # no tracker: only the target can answer
    ensure_internal_topics(AdminClient(broker_pair.dc2.config), (PROGRESS, CONTROL))
    return dict(broker_pair.dc2.config)


def test_the_target_tells_a_running_a_crashed_and_an_ended_replicator_apart(target):
    assert liveness.liveness("lv-none", target) == liveness.Liveness(
        "lv-none", False, "no replicator ever claimed it in its target"
    )
    claim, renewing = FlowClaim("lv-crash", target, OWNER), threading.Event()
    assert claim.holds()  # as a driver's first epoch does
    ClaimRenewal(claim, renewing, lost=lambda: None).start()
    try:
        seen = liveness.liveness("lv-crash", target)
        assert seen.running and seen.detail == "claims it in its target (worker-7 pid 4242)", seen
    finally:
        renewing.set()  # a crash: the claims stop, nothing says it ended
    crashed = liveness.liveness("lv-crash", target)
    assert (
        not crashed.running
        and crashed.detail == "its replicator (worker-7 pid 4242) stopped renewing its claim: it died"
    )
    ended = FlowClaim("lv-ended", target, OWNER)
    ended.release("done")
    seen = liveness.liveness("lv-ended", target, window=0.0)  # an end is read, not waited for
    assert not seen.running and seen.detail.startswith("ended at 20") and seen.detail.endswith(": done"), seen


def test_a_stop_request_through_the_target_is_obeyed_and_acknowledged(target):
    """The driver's side (StopRequests, then the last owner record) played in this process; liveness.stop from
    anywhere. A request made before the driver started is not its: it only reads what comes after."""
    old = request_stop(target, "lv-stop")  # for an earlier replicator of the flow
    stop, obeyed = threading.Event(), []
    watch = StopRequests("lv-stop", [target], stop, obey=lambda r: (obeyed.append(r), stop.set()))
    claim = FlowClaim("lv-stop", target, OWNER)
    assert claim.holds()
    ClaimRenewal(claim, stop, lost=lambda: None).start()
    watch.start()
    other = StopRequests("lv-other", [target], threading.Event(), obey=lambda r: pytest.fail(f"obeyed {r}"))
    other.start()  # another flow's replicator: never obeys this flow's request
    with ThreadPoolExecutor(1) as pool:
        stopping = pool.submit(liveness.stop, "lv-stop", target, 20.0)
        assert stop.wait(15), "the request was not read"
        [request] = obeyed
        assert isinstance(request, StopRequest) and request.flow == "lv-stop" and "pid" in request.by
        assert request.id != old.id
        claim.release(f"stop request from {request.by}", request=request.id)
        assert stopping.result(15) == "stopped"
    other.stop.set()
    seen = liveness.liveness("lv-stop", target, window=0.0)
    assert not seen.running and seen.detail.endswith(f"(stop request {request.id})"), seen
    assert liveness.stop("lv-stop", target, 5.0) == "not running"


def test_a_request_through_the_source_is_obeyed_while_the_target_is_lost(broker_pair, target):
    """A flow into a lost cluster: its replicator elsewhere also reads its source's `_kdr.control`, so a disaster
    failover can stop it before that cluster comes back (nothing acknowledges it: the target is gone). The request
    names the lost cluster."""
    source = dict(broker_pair.dc1.config)
    stop, obeyed = threading.Event(), []
    StopRequests("lv-into-lost", [target, source], stop, obey=lambda r: (obeyed.append(r), stop.set())).start()
    asked = request_stop(source, "lv-into-lost", lost="dc2")
    assert stop.wait(10) and obeyed == [asked] and asked.lost == "dc2"


def test_a_replicator_that_ignores_the_request_fails_the_stop_in_one_line(target):
    claim, renewing = FlowClaim("lv-deaf", target, OWNER), threading.Event()
    assert claim.holds()
    ClaimRenewal(claim, renewing, lost=lambda: None).start()  # claims on, reads no requests
    try:
        with pytest.raises(ReplicatorError, match=r"^flow lv-deaf: its replicator did not acknowledge stop request"):
            liveness.stop("lv-deaf", target, 3.0)
    finally:
        renewing.set()
    assert replicators.status("lv-deaf") is None  # nothing recorded for a replicator this host never started
    assert activity.claimed_within(target, "lv-deaf", 1.5) is False


def test_a_replicator_started_here_into_a_lost_cluster_is_killed_without_waiting_out_its_grace(tmp_path, monkeypatch):
    """It can commit nothing into a lost target, so a disaster's stop gives it no SIGTERM grace: a driver that would
    take the whole grace (this one ignores SIGTERM) is gone at once, or the test's own timeout ends it."""
    monkeypatch.setenv("KDR_STATE_DIR", str(tmp_path / "state"))
    deaf = (
        "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('deaf', flush=True); time.sleep(600)"
    )
    started, _ = replicators.start("lv-into-lost-here", [sys.executable, "-c", deaf])
    eventually(lambda: "deaf" in Path(started.log).read_text().split(), "the driver to ignore SIGTERM")
    assert liveness.stop("lv-into-lost-here", None, timeout=3600.0) == "stopped"
    assert not replicators.is_running("lv-into-lost-here")


def test_a_cluster_that_refuses_connections_does_not_answer_at_once_and_a_running_one_answers(broker_pair):
    """A refused connection is an answer ("all brokers down"), not a wait for the whole timeout; a timeout of an hour
    would otherwise outlast the test's own."""
    assert not answers({"bootstrap.servers": f"127.0.0.1:{free_port()}"}, timeout=3600.0)
    assert answers(dict(broker_pair.dc1.config), timeout=10.0)
