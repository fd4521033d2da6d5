"""Client aliases: home cluster until moved, moves recorded, config follows the active cluster."""

from __future__ import annotations

import pytest

from kafka_dr import client_switch
from kafka_dr.topology import TopologyError, parse_topology

TOPOLOGY = parse_topology(
    {
        "clusters": {"dc1": {"bootstrap_servers": "127.0.0.1:9091"}, "dc2": {"bootstrap_servers": "127.0.0.1:9092"}},
        "clients": {"app-producer": {"cluster": "dc1", "role": "producer"}, "app-consumer": {"cluster": "dc1"}},
    }
)


@pytest.fixture(autouse=True)
def _state_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("KDR_STATE_DIR", str(tmp_path))


def test_aliases_start_on_their_home_cluster():
    assert client_switch.active_cluster(TOPOLOGY, "app-producer") == "dc1"
    assert client_switch.client_config_for("app-consumer", TOPOLOGY)["bootstrap.servers"] == "127.0.0.1:9091"
    assert client_switch.history() == []


def test_switch_moves_records_and_is_idempotent(monkeypatch):
    monkeypatch.setenv("KDR_CLUSTER_DC2_CONFIG", '{"sasl.password": "s3cret"}')
    moves = client_switch.switch(TOPOLOGY, ["app-producer"], "dc2", "dr_failover run 1")
    assert [(m.alias, m.from_cluster, m.to_cluster) for m in moves] == [("app-producer", "dc1", "dc2")]
    config = client_switch.client_config_for("app-producer", TOPOLOGY)
    assert config["bootstrap.servers"] == "127.0.0.1:9092" and config["sasl.password"] == "s3cret"
    assert client_switch.switch(TOPOLOGY, ["app-producer", "app-consumer"], "dc2", "run 2")[0].alias == "app-consumer"
    assert [m.reason for m in client_switch.history()] == ["dr_failover run 1", "run 2"]
    state = {s.alias: s for s in client_switch.states(TOPOLOGY)}
    assert state["app-producer"].active == "dc2" and state["app-producer"].home == "dc1"


def test_bad_names_change_nothing():
    with pytest.raises(TopologyError, match="unknown cluster 'dc9'"):
        client_switch.switch(TOPOLOGY, ["app-producer"], "dc9", "x")
    with pytest.raises(TopologyError, match="unknown client alias 'nope'"):
        client_switch.switch(TOPOLOGY, ["app-producer", "nope"], "dc2", "x")
    assert client_switch.history() == [] and client_switch.active_cluster(TOPOLOGY, "app-producer") == "dc1"


def test_cli_prints_the_table_and_an_alias_without_secrets(tmp_path, monkeypatch, capsys):
    from kafka_dr.cli import main

    topology = tmp_path / "t.yaml"
    topology.write_text(
        'clusters:\n  dc1: {bootstrap_servers: "127.0.0.1:9091"}\n'
        '  dc2: {bootstrap_servers: "127.0.0.1:9092"}\n'
        "clients:\n  app-producer: {cluster: dc1, role: producer}\n"
    )
    client_switch.switch(TOPOLOGY, ["app-producer"], "dc2", "drill 7")
    assert main(["clients", "--topology", str(topology)]) == 0
    table = capsys.readouterr().out.splitlines()
    assert table[0].split() == ["ALIAS", "ROLE", "HOME", "ACTIVE", "SINCE", "REASON"]
    assert table[1].split()[:4] == ["app-producer", "producer", "dc1", "dc2"] and table[1].endswith("drill 7")
    monkeypatch.setenv("KDR_CLUSTER_DC2_CONFIG", '{"sasl.password": "s3cret"}')
    assert main(["clients", "app-producer", "--topology", str(topology), "--json"]) == 0
    shown = capsys.readouterr().out
    assert '"bootstrap.servers": "127.0.0.1:9092"' in shown and "s3cret" not in shown
    assert main(["clients", "nope", "--topology", str(topology)]) == 2
    assert "unknown client alias 'nope'" in capsys.readouterr().err
