"""Diffs: each candidate against today's assignment, per member, as the plan step stores them in `plan_diffs`.

The plan kernel writes them beside the plan rows (`jobs.kernels.candidates.add_diff_rows`, the rule of
`planner.plan_diff.member_diffs`); this module reads and prints them for `rebalance diff`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from jobs.io.lake import Lake
from planner.errors import InputError


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
        chosen = lake.generations([("group_id", "=", group_id)])
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
