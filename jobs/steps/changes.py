"""Changes: what changed in each group since its previous snapshot (members, subscriptions, partition counts),
stored as JSON in the `changes` column of the run's generations."""

from __future__ import annotations

import json
from typing import Any

from jobs.context import RunContext
from jobs.io.lake import rows_table
from jobs.steps.snapshot_docs import previous_snapshot_id, run_generations, snapshot_documents
from planner.changes import group_changes


def run(ctx: RunContext) -> dict[str, Any]:
    """Compare each planned group of snapshot `ctx.run_id` with its previous snapshot; returns group -> changed."""
    generations = run_generations(ctx.lake, ctx.run_id)
    current = snapshot_documents(ctx.lake, ctx.run_id, set(generations))
    rows, out = [], {}
    for group_id, doc in current.items():
        previous_id = previous_snapshot_id(ctx.lake, group_id, ctx.run_id)
        previous = snapshot_documents(ctx.lake, previous_id, {group_id})[group_id] if previous_id else None
        changes = {"previous_snapshot_id": previous_id, **group_changes(previous, doc)}
        rows.append(
            {
                "group_id": group_id,
                "generation_id": generations[group_id],
                "changes": json.dumps(changes, sort_keys=True),
            }
        )
        out[group_id] = changes["changed"]
    ctx.lake.update("generations", rows_table("generations", rows), ["changes"])
    return out
