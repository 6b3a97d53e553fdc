"""Changes: what changed in each group since its previous snapshot (members, subscriptions, partition counts),
stored as JSON in the `changes` column of the run's generations."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from jobs.context import RunContext, StepResult
from jobs.io.lake import Lake, rows_table
from jobs.tables.snapshot_docs import previous_snapshot_ids, run_generations, snapshot_documents
from planner.changes import group_changes


def run(ctx: RunContext) -> StepResult:
    """Compare each planned group of snapshot `ctx.run_id` with its previous snapshot; a row per group: changed."""
    generations = run_generations(ctx.lake, ctx.run_id)
    current = snapshot_documents(ctx.lake, ctx.run_id, set(generations))
    previous_ids = previous_snapshot_ids(ctx.lake, set(current), ctx.run_id)
    previous = previous_documents(ctx.lake, previous_ids)
    rows, out = [], []
    for group_id, doc in current.items():
        previous_id = previous_ids.get(group_id)
        changes = {"previous_snapshot_id": previous_id, **group_changes(previous.get(group_id), doc)}
        rows.append(
            {
                "group_id": group_id,
                "generation_id": generations[group_id],
                "changes": json.dumps(changes, sort_keys=True),
            }
        )
        out.append({"group_id": group_id, "changed": changes["changed"]})
    ctx.lake.update("generations", rows_table("generations", rows), ["changes"])
    return StepResult(tuple(out))


def previous_documents(lake: Lake, previous_ids: Mapping[str, str]) -> dict[str, dict[str, Any]]:
    """group id -> its document in its previous snapshot, each previous snapshot read once."""
    docs: dict[str, dict[str, Any]] = {}
    for snapshot_id in sorted(set(previous_ids.values())):
        docs |= snapshot_documents(lake, snapshot_id, {g for g, s in previous_ids.items() if s == snapshot_id})
    return docs
