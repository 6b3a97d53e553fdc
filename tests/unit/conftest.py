"""Fixtures shared by the unit tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from planner import hashing


@pytest.fixture(scope="module", params=list(hashing.BATCHES))
def batch_implementation(request: pytest.FixtureRequest) -> Iterator[str]:
    """Runs the asking module once per batch murmur2 this interpreter has (numba, numpy): each must be Kafka-exact."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(hashing, "BATCH_IMPLEMENTATION", request.param)
        yield request.param
