"""Shared fixtures: one SparkSession per test session, a fresh lake per test, Airflow set up in the repo."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")

from hypothesis import settings  # noqa: E402

from jobs.airflow_env import configure  # noqa: E402

# Property tests draw the same examples on every run and machine (no example database, no random seed).
settings.register_profile("deterministic", derandomize=True, database=None)
settings.load_profile("deterministic")
configure()

from fixtures_kafka import *  # noqa: F401,F403,E402


@pytest.fixture(scope="session")
def spark():
    from jobs.spark import get_spark

    session = get_spark("local[2]")
    yield session
    session.stop()


@pytest.fixture
def lake(tmp_path: Path):
    from jobs.lake import Lake

    store = Lake(tmp_path / "lake")
    store.create_all()
    return store


@pytest.fixture
def lake_env(lake, monkeypatch: pytest.MonkeyPatch) -> Iterator:
    """A lake that REBALANCE_LAKE points at, for steps that read their configuration from the environment."""
    monkeypatch.setenv("REBALANCE_LAKE", str(lake.root))
    yield lake
