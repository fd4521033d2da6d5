"""The provenance header format and the cycle rule, with its failback override."""

from __future__ import annotations

import pytest

from kafka_dr.replication.provenance import HEADER, ForceCopy, Hop, ProvenanceError, blocked, hops

A, B = "clusterA", "clusterB"


def test_hop_round_trips_as_readable_ascii() -> None:
    hop = Hop(A, "topic2", 3, 1234, 1700000000000)
    assert hop.encode() == b"clusterA,topic2,3,1234,1700000000000"
    assert Hop.decode(hop.encode()) == hop


@pytest.mark.parametrize("value", [None, b"", b"a,b,c", b"A,t,x,1,2", b"\xff\xfe", b"A,t,1,2,3,4"])
def test_malformed_header_is_refused(value) -> None:
    with pytest.raises(ProvenanceError, match=HEADER):
        Hop.decode(value)


def test_chain_keeps_hop_order_and_ignores_other_headers() -> None:
    headers = [
        ("trace", b"x"),
        (HEADER, Hop(A, "t", 0, 5, 1).encode()),
        ("other", None),
        (HEADER, Hop(B, "t", 1, 9, 2).encode()),
    ]
    assert [(h.cluster_id, h.offset) for h in hops(headers)] == [(A, 5), (B, 9)]
    assert hops(None) == [] and hops([]) == []


def test_cycle_rule_blocks_only_the_cluster_and_topic_named() -> None:
    chain = [Hop(A, "topic1", 0, 1, 100)]
    assert blocked(chain, A, "topic1", 100)
    assert not blocked(chain, A, "topic1.replica", 100)  # a renamed copy is a different topic
    assert not blocked(chain, B, "topic1", 100)
    assert not blocked([], A, "topic1", 100)


def test_force_copy_overrides_by_cluster_topic_and_time_range() -> None:
    chain = [Hop(A, "topic1", 0, 1, 100)]
    assert not blocked(chain, A, "topic1", 150, ForceCopy(cluster="cluster.*"))
    assert blocked(chain, A, "topic1", 150, ForceCopy(cluster="other"))
    assert blocked(chain, A, "topic1", 150, ForceCopy(topic="topic2"))
    window = ForceCopy(from_ms=100, to_ms=200)
    assert not blocked(chain, A, "topic1", 100, window)
    assert blocked(chain, A, "topic1", 200, window)  # the end of the range is exclusive
    assert blocked(chain, A, "topic1", 99, window)
