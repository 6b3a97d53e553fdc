"""Kafka fixtures: one Apache Kafka broker (KRaft) per test session on free 127.0.0.1 ports, stopped by PID at the end.

Beside its PLAINTEXT listener the broker has a SASL_PLAINTEXT one ("SASL", mechanism PLAIN, one user) for the
tests of credentials and refused mechanisms; `tests/integration/test_kafka_security.py` starts its own broker for
SCRAM, TLS and ACLs.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from jobs.io.kafka_broker import Broker, Listener, broker

SASL_USER = "planner"
SASL_PASSWORD = "pw-Zq8#never-printed"
SASL_LISTENER = Listener(
    "SASL",
    "SASL_PLAINTEXT",
    {
        "sasl.enabled.mechanisms": "PLAIN",
        "plain.sasl.jaas.config": "org.apache.kafka.common.security.plain.PlainLoginModule required "
        f'user_{SASL_USER}="{SASL_PASSWORD}";',
    },
)


@pytest.fixture(scope="session")
def kafka_broker() -> Iterator[Broker]:
    """Apache Kafka for the whole session; torn down by PID even if tests fail."""
    with broker(listeners=[SASL_LISTENER]) as running:
        yield running
