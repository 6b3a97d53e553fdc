"""The training run that makes the driver JVM's class archive (`jobs.io.spark_cds`), once per Java and jars.

`make install` runs it: `python -m jobs.spark_archive` returns at once when the archive is there.
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from pathlib import Path

from jobs import pipeline
from jobs.cli.history import query
from jobs.config import Config
from jobs.context import RunContext
from jobs.io.spark import JVM_OPTIONS, SparkSettings, delta_jars, get_spark, stop_spark
from jobs.io.spark_cds import CDS_DIR, ROOT, archive_path


def train() -> Path:
    """Make the archive unless it is there: one embedded session plans the demo fleet, answers a what-if and a
    history query, then stops its JVM, which writes the classes it loaded."""
    archive = archive_path(JVM_OPTIONS, delta_jars())
    if archive.is_file():
        return archive
    CDS_DIR.mkdir(parents=True, exist_ok=True)
    os.environ["REBALANCE_SPARK_CDS_TRAINING"] = str(archive)
    with tempfile.TemporaryDirectory(prefix="rebalance-cds-") as lake:
        config = Config.from_env(lake=lake, snapshots=str(ROOT / "jobs" / "demo" / "data"), reports=f"{lake}/r")
        spark = get_spark(SparkSettings())  # embedded, whatever the environment names
        pipeline.run(config, "cds-training", spark=spark)
        ctx = RunContext.create(config, "cds-what-if", spark=spark)
        for name in pipeline.WHAT_IF:
            pipeline.step(ctx, name, {"group": "payments", "add_members": 1})
        query(ctx, "SELECT group_id, count(*) AS n FROM assignment_history GROUP BY group_id", 10)
        stop_spark(spark)
    os.environ.pop("REBALANCE_SPARK_CDS_TRAINING")
    archive.with_suffix(".tmp").replace(archive)
    for stale in CDS_DIR.glob("driver-*.jsa"):
        if stale != archive:
            stale.unlink()
    return archive


if __name__ == "__main__":
    with contextlib.redirect_stdout(sys.stderr):
        made = train()
    print(f"{made} ({made.stat().st_size / 2**20:.0f} MB)")
