"""The whole nightly pipeline in one call, for the CLI and tests: ingest -> plan -> gate -> publish.

Airflow runs the same four functions as separate tasks (dags/rebalance_nightly.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from pyspark.sql import SparkSession

from jobs import gate, ingest, plan, publish
from jobs.config import Config
from jobs.ingest import IngestResult
from jobs.spark import get_spark


@dataclass(frozen=True)
class PipelineResult:
    run_id: str
    ingest: IngestResult
    report: list[dict[str, Any]]


def new_run_id(trigger: str = "manual") -> str:
    """A run id in Airflow's style, e.g. manual__2026-11-21T02:00:00+00:00."""
    return f"{trigger}__{datetime.now(UTC).isoformat(timespec='seconds')}"


def run(config: Config, run_id: str, *, trigger: str = "manual", spark: SparkSession | None = None) -> PipelineResult:
    """Run every step for one run id; re-running the same run id rewrites the same rows."""
    ingested = ingest.run(config, run_id)
    session = spark or get_spark(config.spark_master)
    plan.run(session, config, run_id, trigger=trigger)
    gate.run(session, config, run_id)
    return PipelineResult(run_id, ingested, publish.run(config, run_id))
