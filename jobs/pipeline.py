"""The whole nightly pipeline in one call, for the CLI and tests: ingest -> skew -> plan -> gate -> publish.

Airflow runs the same four functions as separate tasks (dags/rebalance_nightly.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from pyspark.sql import SparkSession

from jobs import gate, ingest, key_skew, plan, publish
from jobs.config import Config
from jobs.ingest import IngestResult
from jobs.lake import Lake
from jobs.spark import get_spark


@dataclass(frozen=True)
class PipelineResult:
    run_id: str
    ingest: IngestResult
    report: list[dict[str, Any]]


def new_run_id(trigger: str = "manual") -> str:
    """A run id in Airflow's style, e.g. manual__2026-11-21T02:00:00+00:00."""
    return f"{trigger}__{datetime.now(UTC).isoformat(timespec='seconds')}"


def measure_skew(spark: SparkSession, config: Config, run_id: str) -> dict[str, list[float]]:
    """Key skew of the run's key samples (if any); returns today's per-partition loads as plan weights."""
    from jobs.key_skew_options import SkewOptions, parse_what_if

    what_if = parse_what_if(config.what_if) if config.what_if else ()
    key_skew.run(spark, config, run_id, SkewOptions(sample_id=run_id, what_if=what_if))
    return key_skew.partition_weights(Lake(config.lake), run_id)


def run(config: Config, run_id: str, *, trigger: str = "manual", spark: SparkSession | None = None) -> PipelineResult:
    """Run every step for one run id; re-running the same run id rewrites the same rows."""
    ingested = ingest.run(config, run_id)
    session = spark or get_spark(config.spark_master)
    weights = measure_skew(session, config, run_id)
    plan.run(session, config, run_id, trigger=trigger, weights=weights)
    gate.run(session, config, run_id)
    return PipelineResult(run_id, ingested, publish.run(config, run_id))
