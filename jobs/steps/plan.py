"""Plan: one candidate assignment per group and strategy, computed by Spark one task per group.

Extract the snapshot's members and partition counts, transform with `jobs.kernels.plan` inside applyInPandas
(the planner is pure, so each group plans independently and in parallel), load `plans`, `plan_metrics` and a
`generations` row per group. Generation ids are allocated under the lake lock: they increase per group, are never
reused, and a re-run of the same run id gets the same ids back, so MERGE makes it idempotent.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import from_arrow_schema

from jobs.context import RunContext
from jobs.io.lake import Lake, rows_table
from jobs.kernels.plan import plan_kernel
from schemas.status import GenerationStatus
from schemas.tables import PLANS


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
        existing = lake.read_arrow("generations", [("group_id", "in", list(groups))]).to_pylist()
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


def metrics(plans: DataFrame, snapshot: DataFrame) -> DataFrame:
    """`plan_metrics` from the plans: count spread and max/mean load over all members, moves, stickiness."""
    members = (
        snapshot.where(F.col("member_id") != "").groupBy("group_id").agg(F.countDistinct("member_id").alias("members"))
    )
    per_member = plans.groupBy("generation_id", "group_id", "strategy", "member").agg(
        F.count("*").alias("n"), F.sum("weight").alias("load")
    )
    counts = per_member.groupBy("generation_id", "group_id", "strategy").agg(
        F.max("n").alias("max_n"),
        F.min("n").alias("min_n"),
        F.count("member").alias("holders"),
        F.max("load").alias("max_load"),
        F.sum("load").alias("total_load"),
    )
    moves = plans.groupBy("generation_id", "group_id", "strategy").agg(
        F.count("*").alias("partitions"),
        F.sum(F.col("moved").cast("int")).alias("partitions_moved"),
        F.count("previous_member").alias("owned_before"),
    )
    out = (
        counts.join(moves, ["generation_id", "group_id", "strategy"])
        .join(members, "group_id")
        .withColumn("mean_load", F.col("total_load") / F.col("members"))
        # A member with no partition has count 0, so the spread runs down to zero when anyone is idle.
        .withColumn(
            "count_spread", F.col("max_n") - F.when(F.col("holders") < F.col("members"), 0).otherwise(F.col("min_n"))
        )
        .withColumn("max_mean_load", F.col("max_load") / F.col("mean_load"))
        .withColumn(
            "stickiness", F.when(F.col("owned_before") > 0, 1 - F.col("partitions_moved") / F.col("owned_before"))
        )
    )
    # The chosen candidate: best balance (lowest max/mean load), then fewest moves, then strategy name.
    best = Window.partitionBy("generation_id", "group_id").orderBy("max_mean_load", "partitions_moved", "strategy")
    return out.withColumn("chosen", F.row_number().over(best) == 1)


def run(
    ctx: RunContext,
    *,
    weights: Mapping[str, Sequence[float]] | None = None,
    created_at: datetime | None = None,
) -> dict[str, int]:
    """Plan every group of snapshot `ctx.run_id` with each configured strategy; returns group -> generation id."""
    spark, lake, run_id, config, trigger = ctx.spark, ctx.lake, ctx.run_id, ctx.config, ctx.trigger
    snapshot = lake.read(spark, "snapshots").where(F.col("snapshot_id") == run_id)
    groups = sorted(r.group_id for r in snapshot.select("group_id").distinct().collect())
    if not groups:
        return {}
    counts = {
        r.topic: r.partition_count
        for r in lake.read(spark, "topic_partitions")
        .where(F.col("snapshot_id") == run_id)
        .select("topic", "partition_count")
        .distinct()
        .collect()
    }
    weights = dict(weights or {})
    strategies = list(config.strategies)
    ids = allocate_generations(
        lake,
        groups,
        run_id,
        run_id,
        trigger,
        {"strategies": strategies, "weighted_topics": sorted(weights)},
        created_at or datetime.now(UTC),
    )
    generation_of = F.create_map(*[x for g in groups for x in (F.lit(g), F.lit(ids[g]))])
    kernel = plan_kernel(strategies, counts, weights)  # executors import only the shipped jobs.kernels
    plans = (
        snapshot.withColumn("generation_id", generation_of[F.col("group_id")])
        .groupBy("group_id")
        .applyInPandas(kernel, schema=from_arrow_schema(PLANS.schema))
        .cache()
    )
    lake.merge("plans", plans.toArrow())
    plan_metrics = metrics(plans, snapshot).toArrow()
    lake.merge("plan_metrics", plan_metrics)
    chosen = {r["group_id"]: r["strategy"] for r in plan_metrics.to_pylist() if r["chosen"]}
    lake.update(
        "generations",
        rows_table(
            "generations", [{"group_id": g, "generation_id": ids[g], "chosen_strategy": chosen.get(g)} for g in groups]
        ),
        ["chosen_strategy"],
    )
    plans.unpersist()
    return ids
