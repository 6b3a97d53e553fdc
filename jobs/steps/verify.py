"""Verify: does the group run its approved plan? A snapshot compared with the plan in force when it was captured.

The plan in force is the group's latest generation that was approved (it may since be superseded), planned from an
earlier live snapshot (not a what-if scenario) and created no later than this snapshot was captured. The verdict is
`applied` when every planned partition is owned by the live member matched to its planned member (the rules of
`jobs.apply.matching`) and nothing else is owned, `drifted` otherwise. It is recorded on the generation
(`verification`, `verified_at`, `verification_detail`: the snapshot, unknown and missing members, and every differing
partition with its planned member and its owner); a later snapshot's verdict replaces it. The nightly run verifies
right after ingest, so the snapshot just pulled judges the plan approved by an earlier run.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from jobs.apply.matching import LiveMember, describe, match_members
from jobs.apply.plan_file import Plan
from jobs.context import RunContext, StepResult
from jobs.io.lake import rows_table
from jobs.tables.export import WAS_APPROVED, build_plan
from jobs.terminal import short
from planner.errors import InputError
from schemas.tables import WHAT_IF_SOURCE


def run(
    ctx: RunContext, group: str | None = None, snapshot_id: str | None = None, verified_at: datetime | None = None
) -> StepResult:
    """Verify the groups of snapshot `snapshot_id` (default: the run's; with `group`, that group's latest snapshot).

    A row per group verified (its generation, the verdict and how many partitions differ) and each verdict as text.
    Groups with no plan in force are skipped, unless `group` names one: then that is an InputError. Each table is
    read once for all the groups.
    """
    lake = ctx.lake
    verified_at = verified_at or datetime.now(UTC)
    if group is None:
        snapshot_id = snapshot_id or ctx.run_id
        groups = sorted(set(lake.read_arrow("snapshots", [("snapshot_id", "=", snapshot_id)])["group_id"].to_pylist()))
        history = lake.read_arrow("snapshots", [("group_id", "in", groups)]).to_pylist()
    else:
        history = lake.read_arrow("snapshots", [("group_id", "in", [group])]).to_pylist()
        if not history:
            raise InputError(f"group: no snapshot of group {group!r} in the lake")
        snapshot_id = snapshot_id or max((r["captured_at"], r["snapshot_id"]) for r in history)[1]
    now: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in history:
        if r["snapshot_id"] == snapshot_id:
            now[r["group_id"]].append(r)
    if group is not None and not now:
        raise InputError(f"snapshot: group {group!r} is not in snapshot {snapshot_id!r}")
    scenarios = {r["snapshot_id"] for r in history if r["source"] == WHAT_IF_SOURCE}
    generations = lake.read_arrow("generations", [("group_id", "in", list(now))]).to_pylist()
    in_force = {}
    for group_id, rows in now.items():
        generation = plan_in_force(
            [g for g in generations if g["group_id"] == group_id], scenarios, snapshot_id, rows[0]["captured_at"]
        )
        if generation is not None:
            in_force[group_id] = generation
        elif group is not None:
            raise InputError(
                f"group: no approved plan of group {group!r} older than snapshot {snapshot_id!r} to verify"
            )
    if not in_force:
        return StepResult()
    plans = lake.read_arrow("plans", [("generation_id", "in", sorted({g["generation_id"] for g in in_force.values()}))])
    counts = lake.read_arrow(
        "topic_partitions", [("snapshot_id", "in", sorted({g["snapshot_id"] for g in in_force.values()}))]
    )
    plan_rows, count_rows = plans.to_pylist(), counts.to_pylist()
    results = []
    for group_id, generation in sorted(in_force.items()):
        plan = build_plan(generation, history, count_rows, plan_rows)
        results.append(
            {
                "group_id": group_id,
                "generation_id": generation["generation_id"],
                "strategy": generation["chosen_strategy"],
                **compare(plan, [r for r in now[group_id] if r["member_id"]]),
                "snapshot_id": snapshot_id,
                "state": now[group_id][0]["state"],
            }
        )
    detail_keys = ("snapshot_id", "state", "partitions", "unknown_members", "missing_members", "differing")
    with lake.lock():
        lake.update(
            "generations",
            rows_table(
                "generations",
                [
                    {
                        "group_id": r["group_id"],
                        "generation_id": r["generation_id"],
                        "verification": r["verification"],
                        "verified_at": verified_at,
                        "verification_detail": json.dumps({k: r[k] for k in detail_keys}),
                    }
                    for r in results
                ],
            ),
            ["verification", "verified_at", "verification_detail"],
        )
    return StepResult(
        tuple(
            {k: r[k] for k in ("group_id", "generation_id", "verification")} | {"differing": len(r["differing"])}
            for r in results
        ),
        "\n".join(format_verdict(r) for r in results),
    )


def plan_in_force(
    generations: Sequence[dict[str, Any]], scenarios: set[str], snapshot_id: str, captured_at: datetime
) -> dict[str, Any] | None:
    """The latest generation approved at some time, planned from another live snapshot before `captured_at`."""
    candidates = [
        g
        for g in generations
        if g["status"] in WAS_APPROVED
        and g["snapshot_id"] != snapshot_id
        and g["snapshot_id"] not in scenarios
        and g["created_at"] <= captured_at
    ]
    return max(candidates, key=lambda g: g["generation_id"]) if candidates else None


def compare(plan: Plan, members: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The verdict of one group's snapshot rows against its plan, with the differing partitions."""
    live = [LiveMember(m["member_id"], m["group_instance_id"], m["client_id"]) for m in members]
    match = match_members(plan.members, live)
    live_of = {planned: live_id for live_id, planned in match.planned.items()}
    owner = {(tp["topic"], tp["partition"]): m["member_id"] for m in members for tp in m["assignment"]}
    planned = plan.owners()
    differing = [
        {"topic": t, "partition": p, "planned": planned.get((t, p)), "owner": owner.get((t, p))}
        for t, p in sorted(set(planned) | set(owner))
        if (t, p) not in planned or owner.get((t, p)) is None or owner[(t, p)] != live_of.get(planned[(t, p)])
    ]
    return {
        "verification": "drifted" if differing else "applied",
        "partitions": len(planned),
        "unknown_members": [describe(m) for m in match.unknown],
        "missing_members": [describe(p) for p in match.missing],
        "differing": differing,
    }


def format_verdict(result: dict[str, Any]) -> str:
    """One group's verdict as text: a headline, then the unknown and missing members and differing partitions."""
    head = (
        f"group {short(result['group_id'])}: generation {result['generation_id']} ({result['strategy']}) vs snapshot "
        f"{result['snapshot_id']} ({result['state']}): {result['verification']}"
    )
    if result["verification"] == "applied":
        return f"{head}, all {result['partitions']} partitions owned as planned"
    lines = [f"{head}, {len(result['differing'])} of {result['partitions']} partitions differ"]
    lines += [f"  member {short(m)} is not in the plan" for m in result["unknown_members"]]
    lines += [f"  planned member {short(m)} is missing" for m in result["missing_members"]]
    lines += [
        f"  {d['topic']}-{d['partition']}: planned for {short(d['planned'] or 'nobody')}, "
        f"owned by {short(d['owner'] or 'nobody')}"
        for d in result["differing"]
    ]
    return "\n".join(lines)
