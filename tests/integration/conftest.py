"""Integration tier: real Spark (one session per test session), Delta lakes, Airflow, the embedded Kafka broker."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from jobs.airflow.environment import REPO, configure

# Under two pytest workers each has its own Airflow home: one SQLite metadatabase per process (shared, `dag.test()`
# runs in both would wait on each other's locks). A run without workers keeps the configured home.
if worker := os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ["AIRFLOW_HOME"] = str(Path(os.environ.get("AIRFLOW_HOME") or REPO / ".airflow") / "workers" / worker)
configure()

from fixtures_kafka import *  # noqa: F401,F403,E402


@pytest.fixture(scope="session")
def spark():
    from jobs.io.spark import get_spark

    session = get_spark("local[2]")
    yield session
    session.stop()


@pytest.fixture(scope="session")
def s3(tmp_path_factory: pytest.TempPathFactory):
    """An S3-compatible server on 127.0.0.1 (moto) requiring signed requests; `s3.bucket()` makes a fresh bucket."""
    from jobs.io.s3_server import s3_server

    with s3_server(tmp_path_factory.mktemp("s3")) as server:
        yield server


@pytest.fixture
def lake(tmp_path: Path):
    from jobs.io.lake import Lake

    store = Lake(tmp_path / "lake")
    store.create_all()
    return store


@pytest.fixture
def lake_env(lake, monkeypatch: pytest.MonkeyPatch) -> Iterator:
    """A lake that REBALANCE_LAKE points at, for steps that read their configuration from the environment."""
    monkeypatch.setenv("REBALANCE_LAKE", str(lake.root))
    yield lake
