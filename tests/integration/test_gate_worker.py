"""A what-if's Great Expectations worker process: its failures reach the gate as one named error."""

from __future__ import annotations

import pandas as pd
import pytest

from jobs.steps.gate_gx import SUMMARY
from jobs.steps.gate_worker import GateWorker
from planner.errors import SourceError
from schemas.quality import PLAN_SUITE

pytestmark = pytest.mark.integration

FRAME = pd.DataFrame(
    {
        "generation_id": [1, 1],
        "group_id": ["g", "g"],
        "strategy": ["range", "range"],
        "topic": ["t", "t"],
        "partition": [0, 1],
        "member": ["m", None],
        "subscribed": [True, True],
        "expected": [True, True],
    }
)


def test_a_failure_inside_great_expectations_is_named_and_the_worker_serves_on() -> None:
    worker = GateWorker()
    try:
        misspelt = {"type": "expect_column_values_to_not_be_null", "kwargs": {"columns": "member"}}
        with pytest.raises(SourceError, match="worker process: ValidationError: .* column field required"):
            worker.validate(FRAME, PLAN_SUITE | {"expectations": [misspelt]}, SUMMARY)
        results = {r["expectation"]: r for r in worker.validate(FRAME, PLAN_SUITE, SUMMARY)}
    finally:
        worker.close()
    assert results["expect_column_values_to_not_be_null(member)"]["unexpected_count"] == 1
    assert worker.process.returncode == 0


def test_a_worker_that_died_fails_the_gate_with_its_exit_code() -> None:
    worker = GateWorker()
    worker.process.kill()
    with pytest.raises(SourceError, match=r"worker process ended \(exit code -9\)"):
        worker.validate(FRAME, PLAN_SUITE, SUMMARY)
    worker.close()
