"""The pipeline's steps, each one call for an Airflow task or the CLI: ingest -> skew -> plan -> gate -> publish.

Steps share nothing but the lake, keyed by the run id, so each can run in its own process (an Airflow task) or
all in one (`run`, used by `rebalance run` and the tests). Their return values are small, for XCom.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from pyspark.sql import SparkSession

from jobs.config import Config
from jobs.io.lake import Lake
from jobs.io.spark import get_spark
from jobs.steps import gate, ingest, plan, publish, what_if
from jobs.steps import skew as key_skew
from jobs.steps.ingest import IngestResult


@dataclass(frozen=True)
class PipelineResult:
    run_id: str
    ingest: IngestResult
    report: list[dict[str, Any]]


def new_run_id(trigger: str = "manual") -> str:
    """A run id in Airflow's style, e.g. manual__2026-11-21T02:00:00+00:00."""
    return f"{trigger}__{datetime.now(UTC).isoformat(timespec='seconds')}"


def ingest_step(config: Config, run_id: str) -> dict[str, Any]:
    """Ingest the run's snapshots (Kafka or files); returns the groups and the quarantined sources."""
    result = ingest.run(config, run_id)
    return {"groups": result.groups, "quarantined": [source for source, _ in result.quarantined]}


def what_if_step(
    config: Config,
    run_id: str,
    group_id: str,
    *,
    partitions: Mapping[str, int] | None = None,
    add_members: int = 0,
    remove_members: Sequence[str] = (),
    snapshot_id: str | None = None,
) -> dict[str, Any]:
    """Write a what-if scenario of one group as the run's snapshot."""
    result = what_if.run(
        config,
        run_id,
        group_id,
        partitions=partitions,
        add_members=add_members,
        remove_members=remove_members,
        snapshot_id=snapshot_id,
    )
    return {"groups": result.groups, "quarantined": []}


def skew_step(config: Config, run_id: str, spark: SparkSession | None = None) -> dict[str, Any]:
    """Key skew of the run's key samples, if any; its per-partition loads weight the plans."""
    from jobs.steps.skew_options import SkewOptions, parse_what_if

    what_if_counts = parse_what_if(config.what_if) if config.what_if else ()
    summary = key_skew.run(
        spark or get_spark(config.spark_master), config, run_id, SkewOptions(sample_id=run_id, what_if=what_if_counts)
    )
    return {"topics": sorted(set(summary.column("topic").to_pylist()))}


def plan_step(config: Config, run_id: str, trigger: str, spark: SparkSession | None = None) -> dict[str, int]:
    """Plan every group of the run with each strategy, weighting partitions by the run's measured loads."""
    weights = key_skew.partition_weights(Lake(config.lake), run_id)
    return plan.run(spark or get_spark(config.spark_master), config, run_id, trigger=trigger, weights=weights)


def gate_step(config: Config, run_id: str, spark: SparkSession | None = None) -> dict[str, bool]:
    """Validate the run's chosen candidates with Great Expectations."""
    return gate.run(spark or get_spark(config.spark_master), config, run_id)


def publish_step(config: Config, run_id: str) -> list[dict[str, Any]]:
    """Approve or reject the run's generations and print the report."""
    report = publish.run(config, run_id)
    print(publish.format_report(report))
    return [{k: r[k] for k in ("group_id", "generation_id", "status")} for r in report]


def run(config: Config, run_id: str, *, trigger: str = "manual", spark: SparkSession | None = None) -> PipelineResult:
    """Run every step for one run id; re-running the same run id rewrites the same rows."""
    ingested = ingest.run(config, run_id)
    session = spark or get_spark(config.spark_master)
    skew_step(config, run_id, session)
    plan_step(config, run_id, trigger, session)
    gate_step(config, run_id, session)
    return PipelineResult(run_id, ingested, publish.run(config, run_id))
