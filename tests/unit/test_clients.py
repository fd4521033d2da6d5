"""Client settings from a topology and the environment: the topology's bootstrap, the cluster's variable on top of
the defaults, keyword overrides last; malformed variables named without their value; secrets redacted."""

from __future__ import annotations

import json

import pytest
from confluent_kafka import KafkaError, KafkaException

from kafka_dr.clients import LIBRDKAFKA_LOG, ClientConfigError, client_config, config_env_var, error_text, redact
from kafka_dr.topology import parse_topology

CLUSTER = parse_topology({"clusters": {"us-east": {"bootstrap_servers": "10.0.0.1:9092"}}}).cluster("us-east")
SECRET = "s3cret-never-shown"


def test_defaults_then_the_clusters_variable_then_keyword_overrides() -> None:
    assert config_env_var("us-east") == "KDR_CLUSTER_US_EAST_CONFIG"
    assert client_config(CLUSTER, {}) == {"bootstrap.servers": "10.0.0.1:9092", "logger": LIBRDKAFKA_LOG}
    environ = {"KDR_CLUSTER_US_EAST_CONFIG": json.dumps({"log_level": 7, "security.protocol": "SSL"})}
    assert client_config(CLUSTER, environ, enable_idempotence=True, security_protocol="SASL_SSL") == {
        "bootstrap.servers": "10.0.0.1:9092",
        "logger": LIBRDKAFKA_LOG,
        "log_level": 7,
        "security.protocol": "SASL_SSL",
        "enable.idempotence": True,
    }


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (f'{{"sasl.password": "{SECRET}"', "not a JSON object"),
        (json.dumps([SECRET]), "must be a JSON object of librdkafka settings"),
        (json.dumps({"sasl.password": {"nested": SECRET}}), "must be a JSON object of librdkafka settings"),
    ],
)
def test_a_malformed_variable_is_one_line_naming_it_and_not_its_value(raw: str, message: str) -> None:
    with pytest.raises(ClientConfigError, match=f"^KDR_CLUSTER_US_EAST_CONFIG: {message}") as error:
        client_config(CLUSTER, {"KDR_CLUSTER_US_EAST_CONFIG": raw})
    assert SECRET not in str(error.value) and "\n" not in str(error.value)


def test_redact_hides_secret_looking_keys_only() -> None:
    settings = {"sasl.password": SECRET, "sasl.username": "alice", "ssl.key.pem": SECRET, "acks": "all"}
    assert redact(settings) == {"sasl.password": "***", "sasl.username": "alice", "ssl.key.pem": "***", "acks": "all"}


def test_error_text_is_librdkafkas_own_line() -> None:
    error = KafkaException(KafkaError(KafkaError._TRANSPORT, "broker down:\n  connection refused"))
    assert error_text(error) == "broker down: connection refused"
    assert error_text(ValueError()) == "ValueError"
