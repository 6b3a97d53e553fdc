"""Before a run's first job on a cluster or a Spark Connect server: can its executors run the kernels, and do they
see the lake? One small job answers both, so a worker without NumPy or pyarrow, or a lake directory the server
cannot see, is one line before any work instead of a Python traceback from inside a task minutes later.

A run whose steps run no Python on the executors (a what-if) asks only the second question, without Python
(`check_lake`).
Embedded (`local`) sessions need no check: their executors are this process's JVM and run this interpreter.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator

import pyarrow as pa
from pyspark.sql import SparkSession

from planner.errors import SourceError

# What the kernels import on an executor beyond pyspark itself; the project's own code reaches them in the code zip.
NEEDED = ("numpy", "pandas", "pyarrow")
ANSWER = "python string, missing string, sees_lake boolean"
HINT = (
    "set REBALANCE_SPARK_PYTHON (a cluster) or start the Connect server with such a Python (`make spark-connect` "
    "does) to one with the pinned numpy, pandas and pyarrow"
)


def probe(lake_dir: str | None) -> Callable[[Iterable[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The executor side: which Python runs, what it cannot import, whether it sees the lake directory."""

    def answer(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import importlib
        import os
        import sys

        for _ in batches:
            pass
        missing = []
        for name in NEEDED:
            try:
                importlib.import_module(name)
            except ImportError as e:
                missing.append(f"{name} ({e})")
        sees = lake_dir is None or os.path.isdir(lake_dir)
        yield pa.RecordBatch.from_pylist([{"python": sys.executable, "missing": "; ".join(missing), "sees_lake": sees}])

    return answer


def check_executors(spark: SparkSession, where: str, lake_dir: str | None) -> None:
    """Run the probe as one task; a SourceError naming `where` (the master or the Connect server) and the cause."""
    try:
        [row] = spark.range(1, numPartitions=1).mapInArrow(probe(lake_dir), ANSWER).collect()
    except Exception as e:  # the worker's Python could not even run the probe (no pyarrow, no such interpreter)
        raise SourceError(f"the executors of {where} cannot run Python tasks: {_cause(e)}; {HINT}") from None
    if row["missing"]:
        raise SourceError(f"the executors of {where} run {row['python']}, which cannot import {row['missing']}; {HINT}")
    if not row["sees_lake"]:
        raise SourceError(
            f"lake {lake_dir}: the executors of {where} do not see this directory; put the lake on storage they "
            "share (s3://bucket/prefix), or run them on this host"
        )


def check_lake(spark: SparkSession, where: str, lake_dir: str | None) -> None:
    """The lake half of `check_executors` without a Python task: a task reads one commit of the lake's `snapshots`
    table (made when the run's context was built); a SourceError naming `where` when it cannot."""
    if lake_dir is None:
        return
    try:
        spark.read.text(f"{lake_dir}/snapshots/_delta_log/*.json").limit(1).collect()
    except Exception as e:  # PATH_NOT_FOUND from the driver's listing, or the task's read failing
        raise SourceError(
            f"lake {lake_dir}: the executors of {where} do not see this directory ({_cause(e)}); put the lake on "
            "storage they share (s3://bucket/prefix), or run them on this host"
        ) from None


def _cause(error: Exception) -> str:
    """The line of a task failure that names the cause (a missing module, a missing interpreter), else the first."""
    text = str(error)
    for pattern in (r"ModuleNotFoundError: [^\n]+", r"Cannot run program [^\n]+", r"No such file or directory[^\n]*"):
        if found := re.search(pattern, text):
            return found[0].strip()
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[0] if lines else type(error).__name__
