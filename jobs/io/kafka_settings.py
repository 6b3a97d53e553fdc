"""Kafka connection settings: from REBALANCE_KAFKA_* variables or an Airflow connection, secrets kept hidden.

The SASL password and the SSL key password show as '***' in every repr, and the client configuration handed to
kafka-python wraps them in `Secret`, because kafka-python logs its whole configuration dict at DEBUG level.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from typing import Any

from planner.errors import InputError

ENV_PREFIX = "REBALANCE_KAFKA_"
SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")  # kafka-python's user/password mechanisms
_SECRETS = ("sasl_password", "ssl_key_password")
_INTS = ("request_timeout_ms", "connect_timeout_ms")


class KafkaSettingsError(InputError):
    """Connection settings are missing or invalid; the message names the setting, never a secret's value."""


class Secret(str):
    """A string with a masked repr: a logged config dict shows '***' while the client reads the value."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "'***'"


@dataclass(frozen=True, repr=False)
class KafkaSettings:
    """How to reach a Kafka cluster; build it with `from_env` or `from_airflow_connection`."""

    bootstrap_servers: str
    security_protocol: str = "PLAINTEXT"
    sasl_mechanism: str | None = None
    sasl_username: str | None = None
    sasl_password: str | None = None
    ssl_cafile: str | None = None
    ssl_certfile: str | None = None
    ssl_keyfile: str | None = None
    ssl_key_password: str | None = None
    client_id: str = "rebalance-planner"
    request_timeout_ms: int = 30_000
    connect_timeout_ms: int = 10_000

    def __post_init__(self) -> None:
        servers = [s.strip() for s in self.bootstrap_servers.split(",") if s.strip()]
        if not servers:
            raise KafkaSettingsError("no bootstrap servers: set REBALANCE_KAFKA_BOOTSTRAP_SERVERS=HOST:PORT")
        object.__setattr__(self, "bootstrap_servers", ",".join(servers))
        protocol = self.security_protocol.upper()
        if protocol not in SECURITY_PROTOCOLS:
            raise KafkaSettingsError(f"security protocol {self.security_protocol!r} is not one of {SECURITY_PROTOCOLS}")
        object.__setattr__(self, "security_protocol", protocol)
        if protocol.startswith("SASL_"):
            mechanism = (self.sasl_mechanism or "PLAIN").upper()
            if mechanism not in SASL_MECHANISMS:
                raise KafkaSettingsError(f"SASL mechanism {self.sasl_mechanism!r} is not one of {SASL_MECHANISMS}")
            if not self.sasl_username or not self.sasl_password:
                raise KafkaSettingsError(
                    f"{protocol} needs a SASL username and password "
                    "(REBALANCE_KAFKA_SASL_USERNAME / REBALANCE_KAFKA_SASL_PASSWORD)"
                )
            object.__setattr__(self, "sasl_mechanism", mechanism)
        for name in _INTS:
            if getattr(self, name) <= 0:
                raise KafkaSettingsError(f"{name} must be positive, got {getattr(self, name)}")

    def __repr__(self) -> str:
        parts = []
        for f in fields(self):
            value = getattr(self, f.name)
            shown = "'***'" if f.name in _SECRETS and value else repr(value)
            parts.append(f"{f.name}={shown}")
        return f"KafkaSettings({', '.join(parts)})"

    def client_config(self) -> dict[str, Any]:
        """Keyword arguments shared by kafka-python's KafkaAdminClient and KafkaConsumer."""
        config: dict[str, Any] = {
            "bootstrap_servers": self.bootstrap_servers.split(","),
            "client_id": self.client_id,
            "security_protocol": self.security_protocol,
            "request_timeout_ms": self.request_timeout_ms,
            "bootstrap_timeout_ms": self.connect_timeout_ms,
        }
        if self.security_protocol.startswith("SASL_"):
            config.update(
                sasl_mechanism=self.sasl_mechanism,
                sasl_plain_username=self.sasl_username,
                sasl_plain_password=Secret(self.sasl_password or ""),
            )
        if self.security_protocol.endswith("SSL"):
            config.update(
                ssl_cafile=self.ssl_cafile,
                ssl_certfile=self.ssl_certfile,
                ssl_keyfile=self.ssl_keyfile,
                ssl_password=Secret(self.ssl_key_password) if self.ssl_key_password else None,
            )
        return config

    def with_overrides(self, **overrides: Any) -> KafkaSettings:
        """A copy with the given non-empty overrides (CLI flags, DAG params)."""
        return replace(self, **{k: v for k, v in overrides.items() if v not in (None, "")})


def from_env(env: Mapping[str, str] | None = None, **overrides: Any) -> KafkaSettings | None:
    """Settings from REBALANCE_KAFKA_* (or the Airflow connection in REBALANCE_KAFKA_CONN_ID), then overrides.

    Returns None when no bootstrap servers are configured anywhere, so a caller falls back to snapshot files.
    """
    env = os.environ if env is None else env
    values: dict[str, Any] = {}
    for f in fields(KafkaSettings):
        raw = env.get(ENV_PREFIX + f.name.upper())
        if raw in (None, ""):
            continue
        values[f.name] = _int_setting(ENV_PREFIX + f.name.upper(), raw) if f.name in _INTS else raw
    values.update({k: v for k, v in overrides.items() if v not in (None, "")})
    if conn_id := env.get(ENV_PREFIX + "CONN_ID"):
        return from_airflow_connection(conn_id).with_overrides(**values)
    if not values.get("bootstrap_servers"):
        return None
    return KafkaSettings(**values)


def from_airflow_connection(conn_id: str) -> KafkaSettings:
    """Settings from an Airflow connection: host[:port] or extra bootstrap servers, login/password for SASL.

    `extra` takes this module's field names or librdkafka's dotted names (as the apache-kafka provider stores
    them): security.protocol, sasl.mechanism, ssl.ca.location, ssl.certificate.location, ssl.key.location, ...
    """
    # Imported here: Airflow is heavy and only needed when a connection id is configured.
    from airflow.sdk import BaseHook
    from airflow.sdk.exceptions import AirflowNotFoundException

    try:
        conn = BaseHook.get_connection(conn_id)
    except AirflowNotFoundException:
        raise KafkaSettingsError(f"Airflow connection {conn_id!r} (REBALANCE_KAFKA_CONN_ID) is not defined") from None
    return settings_from_connection(conn.host, conn.port, conn.login, conn.password, conn.extra_dejson, name=conn_id)


_EXTRA_ALIASES = {
    "bootstrap.servers": "bootstrap_servers",
    "security.protocol": "security_protocol",
    "sasl.mechanism": "sasl_mechanism",
    "sasl.mechanisms": "sasl_mechanism",
    "sasl.username": "sasl_username",
    "sasl.password": "sasl_password",
    "ssl.ca.location": "ssl_cafile",
    "ssl.certificate.location": "ssl_certfile",
    "ssl.key.location": "ssl_keyfile",
    "ssl.key.password": "ssl_key_password",
    "client.id": "client_id",
    "request.timeout.ms": "request_timeout_ms",
    "socket.connection.setup.timeout.ms": "connect_timeout_ms",
}


def settings_from_connection(
    host: str | None,
    port: int | None,
    login: str | None,
    password: str | None,
    extra: Mapping[str, Any],
    *,
    name: str = "connection",
) -> KafkaSettings:
    """Map an Airflow-style connection's fields to settings (apart from Airflow so it is testable alone)."""
    known = {f.name for f in fields(KafkaSettings)}
    values: dict[str, Any] = {}
    for key, value in extra.items():
        field = _EXTRA_ALIASES.get(key, key)
        if field in known and value not in (None, ""):
            values[field] = _int_setting(f"{name} extra {key}", value) if field in _INTS else str(value)
    if not values.get("bootstrap_servers"):
        if not host:
            raise KafkaSettingsError(f"{name} has neither a host nor extra bootstrap_servers")
        values["bootstrap_servers"] = host if port is None or "," in host or ":" in host else f"{host}:{port}"
    if login:
        values["sasl_username"] = login
    if password:
        values["sasl_password"] = password
    return KafkaSettings(**values)


def _int_setting(name: str, raw: Any) -> int:
    try:
        return int(raw)
    except (TypeError, ValueError):
        raise KafkaSettingsError(f"{name} must be an integer number of milliseconds, got {raw!r}") from None
