"""Export: one approved generation of a group as a plan document (`jobs.apply.plan_file`) consumers can apply.

The plan is the generation's chosen candidate (its `plans` rows of the chosen strategy), each member's identity
(client id, group.instance.id) and subscription from the snapshot it was planned from, and that snapshot's partition
counts and topic ids (when it knew every one). By default the group's latest approved generation; a generation asked
for by number may also be one that was approved and later superseded, to go back to it. What-if generations plan
scenarios, not the live group: they are exported only by number.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC
from typing import Any

from jobs.apply.plan_file import FORMAT, Plan, parse_plan
from jobs.io.lake import Lake
from planner.errors import InputError, PlanError
from schemas.rows import Generation
from schemas.tables import WHAT_IF_SOURCE

APPROVED = "approved"
WAS_APPROVED = ("approved", "superseded")  # statuses of generations that passed every check at some time


def select_generation(lake: Lake, group: str, generation: int | None = None) -> Generation:
    """The group's latest approved generation row, or generation `generation` if it was approved."""
    rows = lake.generations([("group_id", "=", group)])
    if not rows:
        raise InputError(f"group: no generation of group {group!r} in the lake")
    latest = max(rows, key=lambda r: r["generation_id"])
    if generation is None:
        scenarios = what_if_snapshots(lake, group)
        approved = [r for r in rows if r["status"] == APPROVED and r["snapshot_id"] not in scenarios]
        if not approved:
            raise InputError(
                f"group: group {group!r} has no approved generation of its live snapshots (latest: generation "
                f"{latest['generation_id']}, {latest['status']})"
            )
        return max(approved, key=lambda r: r["generation_id"])
    chosen = next((r for r in rows if r["generation_id"] == generation), None)
    if chosen is None:
        raise InputError(
            f"generation: group {group!r} has no generation {generation} (generations 1 to {latest['generation_id']})"
        )
    if chosen["status"] not in WAS_APPROVED:
        raise InputError(
            f"generation: generation {generation} of group {group!r} is {chosen['status']}, not approved; "
            "only approved plans are exported"
        )
    return chosen


def what_if_snapshots(lake: Lake, group: str) -> set[str]:
    """Ids of the group's what-if scenarios (snapshots written by `rebalance what-if`, source what-if)."""
    rows = lake.read_arrow("snapshots", [("group_id", "=", group)]).select(["snapshot_id", "source"]).to_pylist()
    return {r["snapshot_id"] for r in rows if r["source"] == WHAT_IF_SOURCE}


def plan_of(lake: Lake, generation: Generation) -> Plan:
    """The generation's chosen candidate as a checked Plan (reads its snapshot, partition counts and plan rows)."""
    group, snapshot_id = generation["group_id"], generation["snapshot_id"]
    return build_plan(
        generation,
        lake.read_arrow("snapshots", [("snapshot_id", "=", snapshot_id), ("group_id", "=", group)]).to_pylist(),
        lake.read_arrow("topic_partitions", [("snapshot_id", "=", snapshot_id)]).to_pylist(),
        lake.read_arrow(
            "plans",
            [
                ("generation_id", "=", generation["generation_id"]),
                ("group_id", "=", group),
                ("strategy", "=", generation["chosen_strategy"]),
            ],
        ).to_pylist(),
    )


def build_plan(
    generation: Mapping[str, Any],
    snapshot_rows: Sequence[dict[str, Any]],
    partition_rows: Sequence[dict[str, Any]],
    plan_rows: Sequence[dict[str, Any]],
) -> Plan:
    """A generation's Plan from its snapshot's member rows, that snapshot's `topic_partitions` rows and the chosen
    candidate's `plans` rows (callers may pass wider row sets: only the generation's own rows are used)."""
    group, gid, strategy = generation["group_id"], generation["generation_id"], generation["chosen_strategy"]
    members, counts, topic_ids = plan_inputs(generation, snapshot_rows, partition_rows)
    assignment: dict[str, dict[str, list[int]]] = {m["member_id"]: {} for m in members}
    mine = [r for r in plan_rows if (r["generation_id"], r["group_id"], r["strategy"]) == (gid, group, strategy)]
    for r in sorted(mine, key=lambda r: (r["topic"], r["partition"])):
        if r["member"] not in assignment:
            raise InputError(
                f"plans: {_where(generation)} gives {r['topic']}-{r['partition']} to {r['member']!r}, "
                f"a member snapshot {generation['snapshot_id']!r} does not have"
            )
        assignment[r["member"]].setdefault(r["topic"], []).append(r["partition"])
    return checked_plan(generation, members, counts, topic_ids, assignment)


def plan_inputs(
    generation: Mapping[str, Any], snapshot_rows: Sequence[dict[str, Any]], partition_rows: Sequence[dict[str, Any]]
) -> tuple[list[dict[str, Any]], dict[str, int], dict[str, str | None]]:
    """A generation's planned members (its snapshot's member rows), the partition count and topic id of each topic
    they subscribe to; InputError when the generation has no chosen candidate."""
    group, snapshot_id = generation["group_id"], generation["snapshot_id"]
    if not generation["chosen_strategy"]:
        raise InputError(f"generation: {_where(generation)} has no chosen candidate")
    members = [
        r for r in snapshot_rows if r["snapshot_id"] == snapshot_id and r["group_id"] == group and r["member_id"]
    ]
    subscribed = {t for m in members for t in m["topics"]}
    rows = [r for r in partition_rows if r["snapshot_id"] == snapshot_id and r["topic"] in subscribed]
    counts = {r["topic"]: r["partition_count"] for r in rows}
    # A broker-side assignor knows topics by id only: the plan carries them when the snapshot knew every one.
    topic_ids = {r["topic"]: r.get("topic_id") for r in rows}
    return members, counts, topic_ids


def checked_plan(
    generation: Mapping[str, Any],
    members: Sequence[dict[str, Any]],
    counts: dict[str, int],
    topic_ids: dict[str, str | None],
    assignment: dict[str, dict[str, list[int]]],
) -> Plan:
    """The plan document of a generation's members and their `assignment` (member -> topic -> partitions, topics
    in name order), checked (`jobs.apply.plan_file.parse_plan`; InputError naming what is wrong)."""
    doc = {
        "format": FORMAT,
        "group_id": generation["group_id"],
        "generation_id": generation["generation_id"],
        "strategy": generation["chosen_strategy"],
        "created_at": generation["created_at"].astimezone(UTC).isoformat().replace("+00:00", "Z"),
        "snapshot_id": generation["snapshot_id"],
        "topics": dict(sorted(counts.items())),
        **({"topic_ids": dict(sorted(topic_ids.items()))} if topic_ids and all(topic_ids.values()) else {}),
        "members": {
            m["member_id"]: {
                "client_id": m["client_id"],
                "group_instance_id": m["group_instance_id"],
                "topics": sorted(m["topics"]),
                "assignment": assignment[m["member_id"]],
            }
            for m in sorted(members, key=lambda m: m["member_id"])
        },
    }
    try:
        return parse_plan(doc, _where(generation))
    except PlanError as e:
        raise InputError(str(e)) from None


def _where(generation: Mapping[str, Any]) -> str:
    return f"generation {generation['generation_id']} of group {generation['group_id']!r}"
