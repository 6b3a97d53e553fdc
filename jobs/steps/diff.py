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
    changed = member_changes(run_plans(spark, ctx.lake, generations)).persist()
    try:
        rows = conform(PLAN_DIFFS, with_idle_members(changed, members).toArrow())
    finally:
        changed.unpersist()
    ctx.lake.merge("plan_diffs", rows)
    counts = rows.group_by("group_id").aggregate([("group_id", "count")])
    return dict(zip(counts["group_id"].to_pylist(), counts["group_id_count"].to_pylist(), strict=True))


def member_changes(plans: DataFrame) -> DataFrame:
    """Per candidate and every member its plan rows name: the partitions it holds today and after, and the sorted
    (topic, partition) lists it gains and loses. Counted in one pass over the plan rows (each row once for its
    member, once for its previous member); the lists are built from the moved rows alone."""
    keys = [*CANDIDATE, "member"]
    held = (
        plans.select(*CANDIDATE, F.posexplode(F.array("member", "previous_member")).alias("before", "member"))
        .where(F.col("member").isNotNull())
        .groupBy(*keys)
        .agg(
            F.count_if(F.col("before") == 1).alias("partitions_before"),
            F.count_if(F.col("before") == 0).alias("partitions_after"),
        )
    )
    moved = plans.where(~F.col("member").eqNullSafe(F.col("previous_member"))).select(
        *CANDIDATE, "member", "previous_member", F.struct("topic", "partition").alias("tp")
    )
    gained = _sorted_lists(moved, "member", "gained")
    lost = _sorted_lists(moved, "previous_member", "lost")
    none = _no_partitions()
    return (
        held.join(gained, keys, "left")
        .join(lost, keys, "left")
        .withColumns({"gained": F.coalesce("gained", none), "lost": F.coalesce("lost", none)})
    )


def _no_partitions() -> Column:
    """An empty (topic, partition) list: gained or lost by a member with no moved rows."""
    return F.array().cast("array<struct<topic:string,partition:int>>")


def _sorted_lists(moved: DataFrame, who: str, name: str) -> DataFrame:
    """Per candidate and `who` member: the sorted (topic, partition) list of the moved rows naming it."""
    return (
        moved.where(F.col(who).isNotNull())
        .groupBy(*CANDIDATE, F.col(who).alias("member"))
        .agg(F.sort_array(F.collect_list("tp")).alias(name))
    )


def with_idle_members(changed: DataFrame, members: DataFrame) -> DataFrame:
    """`changed` and a row for each snapshot member of a candidate's group that its plan rows do not name."""
    none = _no_partitions()
    idle = (
        changed.select(*CANDIDATE)
        .distinct()
        .join(members, "group_id")
        .join(changed, [*CANDIDATE, "member"], "left_anti")
        .select(*CANDIDATE, "member", *(F.lit(0).alias(c) for c in ("partitions_before", "partitions_after")))
        .withColumns({"gained": none, "lost": none})
    )
    return changed.unionByName(idle)


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
