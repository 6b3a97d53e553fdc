"""Settings for every tier: deterministic property tests, Spark's Python and loopback address, no GX analytics."""

from __future__ import annotations

import os
import sys

import pytest

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")

from hypothesis import HealthCheck, settings  # noqa: E402

# Property tests draw the same examples on every run and machine (no example database, no random seed), and no
# verdict of theirs reads the clock: no deadline per example, no health check of slow drawing (a loaded host once
# stalled a draw 2.4 s and failed a test that passes).
settings.register_profile(
    "deterministic", derandomize=True, database=None, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile("deterministic")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tier markers from the path (tests/unit and the doctests are `unit`, tests/integration is `integration`), and
    the files that start servers first, so that the workers (`make test` runs `-n 3 --dist loadfile`) end together
    on short files instead of one waiting on the other's last long one. The order is the same on every run."""
    slow_files = set()
    for item in items:
        tier = "integration" if item.nodeid.startswith("tests/integration/") else "unit"
        item.add_marker(getattr(pytest.mark, tier))
        if item.get_closest_marker("slow"):
            slow_files.add(item.path)
    # A stable sort: each file stays in one piece and in its collected order within its rank.
    items.sort(key=lambda item: (item.path not in slow_files, not item.nodeid.startswith("tests/integration/")))
