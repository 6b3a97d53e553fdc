"""Settings for every tier: deterministic property tests, Spark's Python and loopback address, no GX analytics."""

from __future__ import annotations

import os
import sys

import pytest

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")

from hypothesis import settings  # noqa: E402

# Property tests draw the same examples on every run and machine (no example database, no random seed).
settings.register_profile("deterministic", derandomize=True, database=None)
settings.load_profile("deterministic")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tier markers from the path: tests/unit and the doctests are `unit`, tests/integration is `integration`."""
    for item in items:
        tier = "integration" if item.nodeid.startswith("tests/integration/") else "unit"
        item.add_marker(getattr(pytest.mark, tier))
