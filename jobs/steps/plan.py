"""Plan: every strategy's candidate assignment for every group of a run, computed by Spark tasks.

Extract the snapshot's members, partition counts and load measurements (`jobs.tables.plan_loads`); transform in
`jobs.kernels.candidates` inside mapInArrow (the planner is pure, so groups plan independently and in parallel): each
task writes its groups' plan rows, per-member diffs and partition loads as Parquet files and returns only each
candidate's metrics; load: the files are committed to `plans`, `plan_diffs` and `partition_loads`, the metrics to
`plan_metrics`, the chosen strategy and load source to `generations`. Nothing the size of a plan passes through
the driver; the step's text names which executors ran the tasks. A run of one group (a what-if), or a small run on
a local master, runs the same kernel in this process, on the rows Spark read (`plan_here`): one group is one task's
work anyway, and a Python worker's start would cost more than its planning.

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
from jobs.io.spark import few_rows_conf, is_connect, session_conf
from jobs.io.spark_tasks import describe, job_group, task_split
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

# A load measurement's columns beyond the group (`jobs.tables.plan_loads.COLUMNS`), as Spark types them.
MEASUREMENT_COLUMNS = (("topic", "string"), ("partition", "int"), ("source", "string"), ("value", "double"))
WRITTEN = (PLANS, PLAN_DIFFS, PARTITION_LOADS)  # the tables whose files the kernel's tasks write
# Groups a kernel task plans at most: a task holds its groups' rows and their candidates' buffers (10,000 groups in
# 8 tasks: 0.56 GB per Python worker; in 40, about 0.25 GB).
TASK_GROUPS = 250
# A run of at most this many (group, topic partition) pairs plans in this process on a local master: about 2 s of
# planning at most (the kernel takes ~22 us a partition for five strategies), where starting the two Python workers
# of local[2] costs 2-4 s (the demo fleet, 5 x 373: plan step 8.9-10.8 -> 6.5-7.1 s).
SMALL_RUN = 100_000

# Member rows carry whole ownership lists (500,000 pairs for one member is possible): Spark sizes each Arrow batch
# it feeds a Python worker by re-measuring it after every row, quadratic in a batch of long lists, unless the byte
# limit is Int.MaxValue (BatchedPythonArrowInput.writeSizedBatch); batches stay bounded by maxRecordsPerBatch.
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
        "topic_partitions", [("snapshot_id", "=", run_id)], ["topic", "partition_count", "topic_id", "end_offset"]
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
    previous = previous_snapshots(lake, run_id, groups)
    before = dict(zip(*(previous.column(c).to_pylist() for c in ("group_id", "previous_snapshot")), strict=True))
    generations = {g: (n, before.get(g)) for g, n in ids.items()}
    settings = PlanSettings(strategies, counts, mode, lake.fs, tuple(t.name for t in WRITTEN), topic_ids, generations)
    loads = measurements(
        spark, lake, run_id, snapshot, previous, ended=any(r["end_offset"] is not None for r in topic_rows)
    )
    rows = kernel_input(snapshot, loads)
    with tasks_writing(lake):
        if plans_here(spark, len(ids), sum(counts.values())):
            # A small run's rows are few: its query runs interpreted, as a what-if's does (ONE_GROUP_CONF).
            with session_conf(spark, few_rows_conf()):
                batches = rows.toArrow().to_batches()
            if ctx.spark_until_plan:
                ctx.stop_spark()
            outcome = plan_here(batches, settings)
            split = f"plan: {len(ids)} groups planned in this process (a small run)" if len(ids) > 1 else ""
        else:
            with job_group(spark, "plan") as job:
                outcome = plan_in_tasks(spark, rows, settings, len(ids))
            split = f"plan: {len(ids)} groups in {describe(task_split(spark, job))}" if job else ""
    written = outcome.filter(pc.is_valid(outcome.column("path")))
    for table in WRITTEN:
        files = written.filter(pc.equal(written.column("table"), table.name)).column("path").to_pylist()
        replace_generations(lake, table.name, files, ids)
    candidates = outcome.filter(pc.is_null(outcome.column("path")))
    metrics = conform(PLAN_METRICS, candidates)
    written_metrics = [write_file(lake, PLAN_METRICS.name, metrics)] if metrics.num_rows else []
    replace_generations(lake, PLAN_METRICS.name, written_metrics, ids)
    record_choices(lake, ids, candidates)
    return StepResult(tuple({"group_id": g, "generation_id": n} for g, n in sorted(ids.items())), split)


def plans_here(spark: SparkSession, groups: int, partitions: int) -> bool:
    """Whether the kernel runs in this process: for one group, and for a small run on a local master, whose executors
    are this host's cores anyway; groups times the run's topic partitions (`partitions`) bounds a run's planning."""
    if groups == 1:
        return True
    local = not is_connect(spark) and (spark.sparkContext.master or "").startswith("local")
    return local and groups * partitions <= SMALL_RUN


def plan_here(batches: list[pa.RecordBatch], settings: PlanSettings) -> pa.Table:
    """The kernel run in this process on the rows Spark read: one group is one task's work anyway, and its rows are
    few, so it plans without a Python worker's start (1-2 s of a what-if, more on a Connect server, where each
    session starts its own) or the rows' round trip through it; the files are written and returned as a task's."""
    return pa.Table.from_batches(list(plan_kernel(settings)(batches)), schema=OUTCOME)


def plan_in_tasks(spark: SparkSession, rows: DataFrame, settings: PlanSettings, groups: int) -> pa.Table:
    """The kernel run by Spark tasks (mapInArrow) on the rows hash-partitioned by group, so that a task sees each of
    its groups whole; only the outcome rows come back. A task per shuffle partition, more for a run whose tasks
    would hold over TASK_GROUPS groups each, never more than groups."""
    shuffle = int(spark.conf.get("spark.sql.shuffle.partitions") or 8)
    tasks = max(1, min(groups, max(shuffle, -(-groups // TASK_GROUPS))))
    with session_conf(spark, KERNEL_CONF):
        return (
            rows.repartition(tasks, "group_id").mapInArrow(plan_kernel(settings), from_arrow_schema(OUTCOME)).toArrow()
        )


@contextmanager
def tasks_writing(lake: Lake) -> Iterator[None]:
    """The kernel writes Parquet into the lake: a kernel that fails for an OS error there (a full disk, a
    permission), in a task or in this process, is one line naming the cause; its files were never committed, so the
    tables read as before."""
    from pyspark.errors import PythonException

    try:
        yield
    except PythonException as e:
        found = re.search(r"OSError: \[Errno (\d+)\]", str(e))
        if found is None:
            raise
        raise SourceError(f"lake {lake.root}: writing the plans' files failed: {_strerror(int(found[1]))}") from None
    except OSError as e:
        if e.errno is None:
            raise
        raise SourceError(f"lake {lake.root}: writing the plans' files failed: {_strerror(e.errno)}") from None


def _strerror(code: int) -> str:
    return f"{os.strerror(code)} ({errno.errorcode.get(code, code)})"


def kernel_input(snapshot: DataFrame, loads: DataFrame | None) -> DataFrame:
    """The kernel's rows: each group's members and its load measurements (`loads`, None when there are none)."""
    members = snapshot.select(*MEMBER_COLUMNS)
    if loads is None:  # the kernel reads a measurement's columns on every row: null on a member's
        return members.select("*", *(F.lit(None).cast(kind).alias(name) for name, kind in MEASUREMENT_COLUMNS))
    return members.unionByName(loads, allowMissingColumns=True)


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
