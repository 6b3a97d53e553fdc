"""Status moves that follow from a group's other generations: abandoned candidates and superseded approvals.

The steps that set a status (publish, review) call `settle` under the lake lock for the groups they touched, so a
group's history always reads consistently: at most one approved generation (the newest approved), and no candidate
left behind a generation published after it.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from datetime import datetime

from jobs.io.lake import Lake, rows_table
from schemas.rows import Generation
from schemas.status import GenerationStatus as S

SETTLED_COLUMNS = ["status", "status_reason", "status_at"]


def settle(lake: Lake, groups: Iterable[str], now: datetime) -> list[Generation]:
    """Abandon and supersede what the groups' newer generations imply; returns the rows it changed.

    Abandoned: a candidate older than a published generation of its group (its run crashed or was stopped before
    publishing; a run still going that publishes later sets its status again). Superseded: an approved generation
    older than the group's newest approved one.
    """
    by_group: dict[str, list[Generation]] = defaultdict(list)
    for row in lake.generations([("group_id", "in", sorted(set(groups)))]):
        by_group[row["group_id"]].append(row)
    changed: list[Generation] = []
    for rows in by_group.values():
        published = [r for r in rows if r["status"] not in (S.CANDIDATE, None)]
        approved = [r for r in rows if r["status"] == S.APPROVED]
        newest = max(published, key=lambda r: r["generation_id"], default=None)
        newest_approved = max(approved, key=lambda r: r["generation_id"], default=None)
        for r in rows:
            if r["status"] == S.CANDIDATE and newest and r["generation_id"] < newest["generation_id"]:
                reason = (
                    f"run {r['run_id']} ended without publishing it; generation {newest['generation_id']} "
                    f"(run {newest['run_id']}) was published after it"
                )
                changed.append({**r, "status": S.ABANDONED.value, "status_reason": reason, "status_at": now})
            elif (
                r["status"] == S.APPROVED and newest_approved and r["generation_id"] < newest_approved["generation_id"]
            ):
                reason = f"generation {newest_approved['generation_id']} was approved"
                changed.append({**r, "status": S.SUPERSEDED.value, "status_reason": reason, "status_at": now})
    lake.update("generations", rows_table("generations", changed), SETTLED_COLUMNS)
    return changed
