"""Which aliases a failover treats as writers (kafka_dr.failover.switch): the report names those moved before the
target's registry led."""

from __future__ import annotations

from kafka_dr.failover.switch import writers
from kafka_dr.topology import parse_topology


def test_producers_and_aliases_that_do_both_write_and_consumers_do_not() -> None:
    topo = parse_topology(
        {
            "clusters": {"dc1": {"bootstrap_servers": "h1:9092"}},
            "clients": {
                "orders-producer": {"cluster": "dc1", "role": "producer"},
                "billing": {"cluster": "dc1", "role": "consumer"},
                "analytics": {"cluster": "dc1", "role": "both"},
                "legacy": {"cluster": "dc1"},  # role both by default
            },
        }
    )
    assert writers(topo) == ["orders-producer", "analytics", "legacy"]
