"""Diff: each candidate of a run against today's assignment, per member (`planner.plan_diff`), into `plan_diffs`.

Computed by Spark over the run's plan rows (the rule of `planner.plan_diff.member_diffs`: a member gains the
partitions it holds after but not today, loses those it holds today but not after), so only the diff rows reach
the driver, never the plans.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from jobs.context import RunContext
from jobs.io.lake import Lake, conform
from jobs.steps.gate import run_plans
from jobs.steps.snapshot_docs import run_generations
from planner.errors import InputError
from schemas.tables import PLAN_DIFFS

CANDIDATE = ("generation_id", "group_id", "strategy")


def run(ctx: RunContext) -> dict[str, int]:
    """Diff every candidate of the run's generations; returns group -> diff rows written."""
    generations = run_generations(ctx.lake, ctx.run_id)
    if not generations:
        return {}
    spark = ctx.spark
    members = (
        ctx.lake.read(spark, "snapshots")
        .where((F.col("snapshot_id") == ctx.run_id) & (F.col("member_id") != ""))
        .select("group_id", F.col("member_id").alias("member"))
    )
    rows = conform(PLAN_DIFFS, plan_diffs(run_plans(spark, ctx.lake, generations), members).toArrow())
    ctx.lake.merge("plan_diffs", rows)
    counts = rows.group_by("group_id").aggregate([("group_id", "count")])
    return dict(zip(counts["group_id"].to_pylist(), counts["group_id_count"].to_pylist(), strict=True))


def plan_diffs(plans: DataFrame, members: DataFrame) -> DataFrame:
    """A row per candidate and member (the group's snapshot members and everyone its plan rows name), with the
    partitions held today and after and the sorted (topic, partition) lists gained and lost."""
    candidates = plans.select(*CANDIDATE).distinct()
    named = plans.select(*CANDIDATE, "member").unionByName(
        plans.select(*CANDIDATE, F.col("previous_member").alias("member"))
    )
    everyone = (candidates.join(members, "group_id").select(*CANDIDATE, "member").unionByName(named).distinct()).where(
        F.col("member").isNotNull()
    )
    after = _per_member(plans, "member", "previous_member", "partitions_after", "gained")
    before = _per_member(plans, "previous_member", "member", "partitions_before", "lost")
    none = F.array().cast("array<struct<topic:string,partition:int>>")
    return (
        everyone.join(after, [*CANDIDATE, "member"], "left")
        .join(before, [*CANDIDATE, "member"], "left")
        .select(
            *CANDIDATE,
            "member",
            F.coalesce("partitions_before", F.lit(0)).alias("partitions_before"),
            F.coalesce("partitions_after", F.lit(0)).alias("partitions_after"),
            F.coalesce("gained", none).alias("gained"),
            F.coalesce("lost", none).alias("lost"),
        )
    )


def _per_member(plans: DataFrame, holder: str, other: str, count: str, changed: str) -> DataFrame:
    """Per candidate and `holder` member: the partitions it holds, and the sorted ones `other` does not hold."""
    moved: Column = F.col(other).isNull() | (F.col(other) != F.col(holder))
    return (
        plans.where(F.col(holder).isNotNull())
        .groupBy(*CANDIDATE, F.col(holder).alias("member"))
        .agg(
            F.count("*").alias(count),
            F.sort_array(F.collect_list(F.when(moved, F.struct("topic", "partition")))).alias(changed),
        )
    )


def stored(lake: Lake, group_id: str, generation_id: int | None, strategy: str | None) -> list[dict[str, Any]]:
    """The stored diff rows of a group's generation (latest by default) and strategy (the chosen one by default)."""
    rows = lake.read_arrow("plan_diffs", [("group_id", "=", group_id)]).to_pylist()
    if not rows:
        raise InputError(f"--group: no plan diffs for group {group_id!r} in the lake at {lake.root}")
    generation_id = max(r["generation_id"] for r in rows) if generation_id is None else generation_id
    rows = [r for r in rows if r["generation_id"] == generation_id]
    if not rows:
        raise InputError(f"--generation: group {group_id!r} has no generation {generation_id} with plan diffs")
    if strategy is None:
        chosen = lake.read_arrow("generations", [("group_id", "=", group_id)]).to_pylist()
        strategy = next((g["chosen_strategy"] for g in chosen if g["generation_id"] == generation_id), None)
    strategies = sorted({r["strategy"] for r in rows})
    if strategy not in strategies:
        raise InputError(f"--strategy: {strategy!r} is not a candidate of generation {generation_id}: {strategies}")
    return sorted((r for r in rows if r["strategy"] == strategy), key=lambda r: r["member"])


def format_diff(rows: Sequence[Mapping[str, Any]]) -> str:
    """Per member: partitions before -> after, then what it gains (+) and loses (-)."""
    first = rows[0]
    moved = sum(len(r["gained"]) for r in rows)
    lines = [
        f"group {first['group_id']}, generation {first['generation_id']}, strategy {first['strategy']}: "
        f"{moved} partitions change owner"
    ]
    for r in rows:
        lines.append(f"  {r['member']}: {r['partitions_before']} -> {r['partitions_after']}")
        for sign, field in (("+", "gained"), ("-", "lost")):
            if r[field]:
                lines.append(f"    {sign} " + ", ".join(f"{tp['topic']}-{tp['partition']}" for tp in r[field]))
    return "\n".join(lines)
