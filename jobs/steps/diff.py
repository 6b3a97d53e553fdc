"""Diff: each candidate of a run against today's assignment, per member (`planner.plan_diff`), into `plan_diffs`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from jobs.context import RunContext
from jobs.io.lake import Lake, rows_table
from jobs.steps.snapshot_docs import run_generations
from planner.errors import InputError
from planner.plan_diff import member_diffs


def run(ctx: RunContext) -> dict[str, int]:
    """Diff every candidate of the run's generations; returns group -> diff rows written."""
    generations = run_generations(ctx.lake, ctx.run_id)
    if not generations:
        return {}
    plans = ctx.lake.read_arrow("plans", [("generation_id", "in", sorted(set(generations.values())))]).to_pylist()
    members = _members(ctx.lake, ctx.run_id)
    candidates: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in plans:
        if generations.get(r["group_id"]) == r["generation_id"]:
            candidates.setdefault((r["group_id"], r["strategy"]), []).append(r)
    rows: list[dict[str, Any]] = []
    for (group_id, strategy), partitions in sorted(candidates.items()):
        today = {(r["topic"], r["partition"]): r["previous_member"] for r in partitions if r["previous_member"]}
        after = {(r["topic"], r["partition"]): r["member"] for r in partitions if r["member"]}
        for d in member_diffs(today, after, members.get(group_id, ())):
            rows.append(
                {
                    "generation_id": generations[group_id],
                    "group_id": group_id,
                    "strategy": strategy,
                    "member": d.member,
                    "partitions_before": d.before,
                    "partitions_after": d.after,
                    "gained": [{"topic": t, "partition": p} for t, p in d.gained],
                    "lost": [{"topic": t, "partition": p} for t, p in d.lost],
                }
            )
    ctx.lake.merge("plan_diffs", rows_table("plan_diffs", rows))
    counts: dict[str, int] = {}
    for row in rows:
        counts[row["group_id"]] = counts.get(row["group_id"], 0) + 1
    return counts


def _members(lake: Lake, snapshot_id: str) -> dict[str, list[str]]:
    """Every member of every group of the snapshot, so a member idle today and after still gets its row."""
    rows = lake.read_arrow("snapshots", [("snapshot_id", "=", snapshot_id)]).select(["group_id", "member_id"])
    out: dict[str, list[str]] = {}
    for r in rows.to_pylist():
        if r["member_id"]:
            out.setdefault(r["group_id"], []).append(r["member_id"])
    return out


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
