"""Kafka fixtures: one Apache Kafka broker (KRaft) per test session on free 127.0.0.1 ports, stopped by PID at the end."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from jobs.demo.cluster import Broker, broker


@pytest.fixture(scope="session")
def kafka_broker() -> Iterator[Broker]:
    """Apache Kafka for the whole session; torn down by PID even if tests fail."""
    with broker() as running:
        yield running
