"""Kafka connection settings: environment, Airflow connection, validation, and secrets that never show."""

from __future__ import annotations

import json
import logging

import pytest

from jobs.io.kafka_settings import KafkaSettings, KafkaSettingsError, Secret, from_airflow_connection, from_env

PASSWORD = "s3cret-Passw0rd"
KEY_PASSWORD = "key-Passw0rd-9"


def sasl_env(**extra: str) -> dict[str, str]:
    return {
        "REBALANCE_KAFKA_BOOTSTRAP_SERVERS": "k1:9093, k2:9093",
        "REBALANCE_KAFKA_SECURITY_PROTOCOL": "sasl_ssl",
        "REBALANCE_KAFKA_SASL_MECHANISM": "scram-sha-512",
        "REBALANCE_KAFKA_SASL_USERNAME": "planner",
        "REBALANCE_KAFKA_SASL_PASSWORD": PASSWORD,
        "REBALANCE_KAFKA_SSL_CAFILE": "/etc/ca.pem",
        "REBALANCE_KAFKA_SSL_KEY_PASSWORD": KEY_PASSWORD,
        "REBALANCE_KAFKA_REQUEST_TIMEOUT_MS": "5000",
        **extra,
    }


def test_no_bootstrap_servers_means_no_kafka() -> None:
    assert from_env({}) is None


def test_env_settings_are_normalized() -> None:
    s = from_env(sasl_env())
    assert s is not None
    assert s.bootstrap_servers == "k1:9093,k2:9093"
    assert (s.security_protocol, s.sasl_mechanism, s.sasl_username) == ("SASL_SSL", "SCRAM-SHA-512", "planner")
    assert s.request_timeout_ms == 5000 and s.ssl_cafile == "/etc/ca.pem"


def test_overrides_win_over_env() -> None:
    s = from_env({"REBALANCE_KAFKA_BOOTSTRAP_SERVERS": "a:1"}, bootstrap_servers="b:2", client_id=None)
    assert s == KafkaSettings("b:2")


def test_repr_and_logged_client_config_hide_secrets(caplog: pytest.LogCaptureFixture) -> None:
    s = from_env(sasl_env())
    config = s.client_config()
    assert config["sasl_plain_password"] == PASSWORD  # the client still gets the real value
    assert isinstance(config["sasl_plain_password"], Secret)
    with caplog.at_level(logging.DEBUG):
        logging.getLogger("kafka.admin.client").debug("Starting KafkaAdminClient with configuration: %s", config)
    for text in (repr(s), str(s), str(config), repr(config), caplog.text):
        assert PASSWORD not in text and KEY_PASSWORD not in text
    assert "sasl_password='***'" in repr(s)


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"REBALANCE_KAFKA_BOOTSTRAP_SERVERS": " , "}, "no bootstrap servers"),
        ({"REBALANCE_KAFKA_BOOTSTRAP_SERVERS": "a:1", "REBALANCE_KAFKA_SECURITY_PROTOCOL": "TLS"}, "security protocol"),
        ({"REBALANCE_KAFKA_BOOTSTRAP_SERVERS": "a:1", "REBALANCE_KAFKA_REQUEST_TIMEOUT_MS": "soon"}, "REQUEST_TIMEOUT"),
        (
            {
                "REBALANCE_KAFKA_BOOTSTRAP_SERVERS": "a:1",
                "REBALANCE_KAFKA_SECURITY_PROTOCOL": "SASL_PLAINTEXT",
                "REBALANCE_KAFKA_SASL_USERNAME": "u",
            },
            "needs a SASL username and password",
        ),
        (
            {
                "REBALANCE_KAFKA_BOOTSTRAP_SERVERS": "a:1",
                "REBALANCE_KAFKA_SECURITY_PROTOCOL": "SASL_PLAINTEXT",
                "REBALANCE_KAFKA_SASL_MECHANISM": "GSSAPI",
                "REBALANCE_KAFKA_SASL_USERNAME": "u",
                "REBALANCE_KAFKA_SASL_PASSWORD": PASSWORD,
            },
            "SASL mechanism",
        ),
    ],
)
def test_invalid_settings_name_the_setting_not_the_secret(env: dict[str, str], message: str) -> None:
    with pytest.raises(KafkaSettingsError, match=message) as info:
        from_env(env)
    assert PASSWORD not in str(info.value)


def test_airflow_connection(monkeypatch: pytest.MonkeyPatch) -> None:
    conn = {
        "conn_type": "kafka",
        "host": "broker-1",
        "port": 9094,
        "login": "svc",
        "password": PASSWORD,
        "extra": {
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "PLAIN",
            "ssl.ca.location": "/ca.pem",
            "client_id": "nightly",
            "request_timeout_ms": "7000",
        },
    }
    monkeypatch.setenv("AIRFLOW_CONN_KAFKA_PROD", json.dumps(conn))
    s = from_env({"REBALANCE_KAFKA_CONN_ID": "kafka_prod", "REBALANCE_KAFKA_CLIENT_ID": "override"})
    assert s == KafkaSettings(
        "broker-1:9094", "SASL_SSL", "PLAIN", "svc", PASSWORD, "/ca.pem", client_id="override", request_timeout_ms=7000
    )
    assert PASSWORD not in repr(s)


def test_airflow_connection_with_bootstrap_in_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    conn = {"conn_type": "kafka", "extra": {"bootstrap.servers": "a:1,b:2"}}
    monkeypatch.setenv("AIRFLOW_CONN_KAFKA_EXTRA", json.dumps(conn))
    assert from_airflow_connection("kafka_extra") == KafkaSettings("a:1,b:2")


def test_missing_airflow_connection_is_a_clear_error() -> None:
    with pytest.raises(KafkaSettingsError, match="'no_such_conn'.*not defined"):
        from_env({"REBALANCE_KAFKA_CONN_ID": "no_such_conn"})
