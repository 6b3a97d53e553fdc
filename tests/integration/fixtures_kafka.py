"""Kafka fixtures: one noida-db broker per test session on a free 127.0.0.1 port, stopped by PID at the end."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from jobs.demo.cluster import Broker, broker


@pytest.fixture(scope="session")
def kafka_broker() -> Iterator[Broker]:
    """A real Kafka-protocol broker (noida-db) for the whole session; torn down by PID even if tests fail."""
    with broker() as running:
        yield running
