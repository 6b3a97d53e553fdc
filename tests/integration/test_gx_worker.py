"""A what-if's Great Expectations worker process: its failures reach the gate as one named error."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pandas as pd
import pytest

from jobs.io.gx import SUMMARY
from jobs.io.gx_worker import GxWorker
from planner.errors import SourceError
from schemas.quality import PLAN_SUITE

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]

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
    worker = GxWorker()
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
    worker = GxWorker()
    worker.process.kill()
    with pytest.raises(SourceError, match=r"worker process ended \(exit code -9\)"):
        worker.validate(FRAME, PLAN_SUITE, SUMMARY)
    worker.close()


def test_a_module_imported_on_first_use_loads_when_first_read() -> None:
    code = textwrap.dedent(
        """
        import sys
        from jobs.io.gx import import_on_first_use

        import_on_first_use("scipy.stats")
        from scipy import stats

        print(type(stats).__name__, "scipy.stats._stats_py" in sys.modules, stats.norm.cdf(0.0), type(stats).__name__)
        """
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["_LazyModule", "False", "0.5", "module"]


def test_a_top_level_module_imported_on_first_use_is_a_stand_in_until_first_read() -> None:
    code = textwrap.dedent(
        """
        import sys
        from jobs.io.gx import import_on_first_use

        import_on_first_use("altair")
        import altair as alt

        print(type(alt).__name__, "altair.vegalite" in sys.modules, alt.__spec__.name)
        print(alt.Chart.__name__, type(sys.modules["altair"]).__name__, alt.Chart is sys.modules["altair"].Chart)
        """
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["OnFirstUse", "False", "altair", "Chart", "module", "True"]


def test_great_expectations_imports_without_the_integrations_the_gate_never_uses() -> None:
    code = textwrap.dedent(
        """
        import sys
        import pyspark.sql  # as in `rebalance run`'s process, where the plan step runs Spark meanwhile
        import pandas as pd
        from jobs.io.gx import SUMMARY, import_great_expectations, validate
        from schemas.quality import PLAN_SUITE

        import_great_expectations()
        kept = ("sqlalchemy", "boto3", "pyspark.ml", "scipy.stats._stats_py", "altair.vegalite")
        loaded = [m for m in kept if m in sys.modules]
        frame = pd.DataFrame(
            {
                "generation_id": [1, 1], "group_id": ["g", "g"], "strategy": ["range", "range"], "topic": ["t", "t"],
                "partition": [0, 1], "member": ["m", None], "subscribed": [True, True], "expected": [True, True],
            }
        )
        results = {r["expectation"]: r for r in validate(frame, PLAN_SUITE, SUMMARY)}
        import sqlalchemy, pyspark.ml  # code other than GX imports them as usual
        print(loaded, results["expect_column_values_to_not_be_null(member)"]["unexpected_count"])
        """
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["[]", "1"]
