"""Plan: every strategy's candidate assignment for every group of a run, computed by Spark tasks.

Extract the snapshot's members, partition counts and load measurements (`jobs.tables.plan_loads`); transform in
`jobs.kernels.candidates` inside mapInArrow (the planner is pure, so groups plan independently and in parallel): each
task writes its groups' plan rows, per-member diffs and partition loads as Parquet files and returns only each
candidate's metrics; load: the files are committed to `plans`, `plan_diffs` and `partition_loads`, the metrics to
`plan_metrics`, the chosen strategy and load source to `generations`. Nothing the size of a plan passes through
the driver.

Generation ids are allocated under the lake lock: they increase per group, are never reused, and a re-run of the
same run id gets the same ids back; each commit replaces every row of those generations (one Delta transaction
per table), so a re-run rewrites the same rows.
"""

from __future__ import annotations

import errno
import json
import os
import re
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import from_arrow_schema

from jobs.context import RunContext, StepResult
from jobs.io.delta_files import replace_generations, write_file
from jobs.io.lake import Lake, conform, rows_table
from jobs.io.spark import local_frame, session_conf
from jobs.kernels.candidates import OUTCOME, PlanSettings, plan_kernel
from jobs.kernels.loads import check_mode
from jobs.tables.plan_loads import measurements, previous_snapshots
from planner.assignors import load
from planner.errors import SourceError
from schemas.status import GenerationStatus
from schemas.tables import PARTITION_LOADS, PLAN_DIFFS, PLAN_METRICS, PLANS

MEMBER_COLUMNS = (
    "group_id",
    "member_id",
    "topics",
    "owned",
    "assignment",
    "target_assignment",
    "group_type",
    "kafka_generation",
    "group_instance_id",
    "rack",
)

# Member rows carry whole ownership lists (500,000 pairs for one member is possible): Spark sizes each Arrow batch
# it feeds a Python worker by re-measuring it after every row, quadratic in a batch of long lists, unless the byte
# limit is Int.MaxValue (BatchedPythonArrowInput.writeSizedBatch); batches stay bounded by maxRecordsPerBatch.
GENERATION_IDS = pa.schema([("group_id", pa.string()), ("generation_id", pa.int64())])
WRITTEN = (PLANS, PLAN_DIFFS, PARTITION_LOADS)  # the tables whose files the kernel's tasks write

KERNEL_CONF = {"spark.sql.execution.arrow.maxBytesPerBatch": str(2**31 - 1)}


def allocate_generations(
    lake: Lake,
    groups: Sequence[str],
    run_id: str,
    snapshot_id: str,
    trigger: str,
    parameters: Mapping[str, Any],
    created_at: datetime,
) -> dict[str, int]:
    """Next generation id per group (max + 1), or the ids this run already holds; recorded as candidates."""
    with lake.lock():
        existing = lake.generations([("group_id", "in", list(groups))])
        mine = {r["group_id"]: r["generation_id"] for r in existing if r["run_id"] == run_id}
        latest: dict[str, int] = {}
        for r in existing:
            latest[r["group_id"]] = max(latest.get(r["group_id"], 0), r["generation_id"])
        ids = {g: mine.get(g, latest.get(g, 0) + 1) for g in groups}
        fresh = [g for g in groups if g not in mine]
        lake.merge(
            "generations",
            rows_table(
                "generations",
                [
                    {
                        "group_id": g,
                        "generation_id": ids[g],
                        "created_at": created_at,
                        "trigger": trigger,
                        "run_id": run_id,
                        "parameters": json.dumps(dict(parameters), sort_keys=True),
                        "snapshot_id": snapshot_id,
                        "status": GenerationStatus.CANDIDATE.value,
                    }
                    for g in fresh
                ],
            ),
        )
    return ids


def run(ctx: RunContext, *, created_at: datetime | None = None) -> StepResult:
    """Plan every group of snapshot `ctx.run_id` with each configured strategy; a row per group: its generation."""
    spark, lake, run_id, config = ctx.spark, ctx.lake, ctx.run_id, ctx.config
    mode = check_mode(config.load_source)
    strategies = tuple(config.strategies)
    for strategy in strategies:
        load(strategy)  # an unknown strategy is named here, before any task starts
    snapshot = lake.scan(spark, "snapshots", "snapshot_id", [run_id])
    # The run's groups and partition counts are a few rows: read by delta-rs, no Spark job.
    members = lake.read_arrow("snapshots", [("snapshot_id", "=", run_id)], ["group_id"])
    groups = sorted(set(members.column("group_id").to_pylist()))
    if not groups:
        return StepResult()
    topic_rows = lake.read_arrow(
        "topic_partitions", [("snapshot_id", "=", run_id)], ["topic", "partition_count", "topic_id"]
    ).to_pylist()
    counts = {r["topic"]: r["partition_count"] for r in topic_rows}
    topic_ids = {r["topic"]: r["topic_id"] for r in topic_rows if r["topic_id"]}
    skewed = lake.read_arrow("key_skew", [("run_id", "=", run_id), ("current", "=", True)]).column("topic")
    parameters = {
        "strategies": list(strategies),
        "load_source": mode,
        "weighted_topics": sorted(set(skewed.to_pylist())),
    }
    ids = allocate_generations(lake, groups, run_id, run_id, ctx.trigger, parameters, created_at or datetime.now(UTC))
    settings = PlanSettings(strategies, counts, mode, lake.fs, tuple(t.name for t in WRITTEN), topic_ids)
    with session_conf(spark, KERNEL_CONF), tasks_writing(lake):
        outcome = (
            kernel_input(spark, lake, run_id, snapshot, ids)
            .mapInArrow(plan_kernel(settings), from_arrow_schema(OUTCOME))
            .toArrow()
        )
    written = outcome.filter(pc.is_valid(outcome.column("path")))
    for table in WRITTEN:
        files = written.filter(pc.equal(written.column("table"), table.name)).column("path").to_pylist()
        replace_generations(lake, table.name, files, ids)
    candidates = outcome.filter(pc.is_null(outcome.column("path")))
    metrics = conform(PLAN_METRICS, candidates)
    written_metrics = [write_file(lake, PLAN_METRICS.name, metrics)] if metrics.num_rows else []
    replace_generations(lake, PLAN_METRICS.name, written_metrics, ids)
    record_choices(lake, ids, candidates)
    return StepResult(tuple({"group_id": g, "generation_id": n} for g, n in sorted(ids.items())))


@contextmanager
def tasks_writing(lake: Lake) -> Iterator[None]:
    """The kernel's tasks write Parquet into the lake: a task that fails for an OS error there (a full disk, a
    permission) is one line naming the cause; its files were never committed, so the tables read as before."""
    from pyspark.errors import PythonException

    try:
        yield
    except PythonException as e:
        found = re.search(r"OSError: \[Errno (\d+)\]", str(e))
        if found is None:
            raise
        code = int(found[1])
        cause = f"{os.strerror(code)} ({errno.errorcode.get(code, code)})"
        raise SourceError(f"lake {lake.root}: writing the plans' files failed: {cause}") from None


def kernel_input(
    spark: SparkSession, lake: Lake, run_id: str, snapshot: DataFrame, ids: Mapping[str, int]
) -> DataFrame:
    """The kernel's rows: each group's members (with its generation id and previous snapshot) and its load
    measurements, hash-partitioned by group so that a task sees each of its groups whole."""
    # A broadcast join, not a literal map: Spark looks a map key up by scanning its entries, per row.
    generation_of = F.broadcast(local_frame(spark, list(ids.items()), GENERATION_IDS))
    previous = F.broadcast(previous_snapshots(spark, lake, run_id).select("group_id", "previous_snapshot"))
    members = snapshot.select(*MEMBER_COLUMNS).join(previous, "group_id", "left")
    rows = members.unionByName(measurements(spark, lake, run_id, snapshot), allowMissingColumns=True)
    tasks = max(1, min(len(ids), int(spark.conf.get("spark.sql.shuffle.partitions") or 8)))
    return rows.join(generation_of, "group_id").repartition(tasks, "group_id")


def record_choices(lake: Lake, ids: Mapping[str, int], candidates: pa.Table) -> None:
    """Each generation's chosen strategy and load source."""
    chosen = {r["group_id"]: r for r in candidates.filter(candidates.column("chosen")).to_pylist()}
    groups, labels = candidates.column("group_id").to_pylist(), candidates.column("load_source").to_pylist()
    sources = dict(zip(groups, labels, strict=True))
    lake.update(
        "generations",
        rows_table(
            "generations",
            [
                {
                    "group_id": g,
                    "generation_id": i,
                    "chosen_strategy": chosen[g]["strategy"] if g in chosen else None,
                    "load_source": sources.get(g),
                }
                for g, i in ids.items()
            ],
        ),
        ["chosen_strategy", "load_source"],
    )
