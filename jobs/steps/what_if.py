"""What-if scenarios: a group's latest observed snapshot with new partition counts and members, planned as a run.

The scenario is written as a new snapshot (source `what-if`) through the same validation as real input, so the
plan, gate and publish steps need no special case, and the history shows what was asked and what it would do.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, cast

from jobs.context import RunContext, StepResult
from jobs.io.lake import Lake
from jobs.io.snapshot_pieces import RawDocument
from jobs.steps import ingest
from planner.errors import InputError, LimitError
from schemas.rules import Limits, check_group
from schemas.tables import WHAT_IF_SOURCE


class ScenarioError(InputError):
    """A what-if request that cannot describe a real group (names the parameter and the problem)."""


def latest_document(lake: Lake, group_id: str, snapshot_id: str | None = None) -> dict[str, Any]:
    """The group's latest observed snapshot (an earlier scenario is not reality), or the named one, rebuilt as a
    snapshot-file document."""
    rows = lake.read_arrow("snapshots", [("group_id", "=", group_id)]).to_pylist()
    if snapshot_id is not None:
        rows = [r for r in rows if r["snapshot_id"] == snapshot_id]
    else:
        rows = [r for r in rows if r["source"] != WHAT_IF_SOURCE]
    if not rows:
        which = f"snapshot {snapshot_id!r}" if snapshot_id else "observed snapshot"
        raise ScenarioError(f"group: no {which} of group {group_id!r} in the lake")
    newest = max((r["captured_at"], r["snapshot_id"]) for r in rows)[1]
    members = sorted((r for r in rows if r["snapshot_id"] == newest and r["member_id"]), key=lambda r: r["member_id"])
    subscribed = {t for m in members for t in m["topics"]}
    counts = {
        r["topic"]: r["partition_count"]
        for r in lake.read_arrow("topic_partitions", [("snapshot_id", "=", newest)]).to_pylist()
        if r["topic"] in subscribed
    }
    first = next(r for r in rows if r["snapshot_id"] == newest)
    return {
        "group_id": group_id,
        "state": first["state"],
        "protocol": first["protocol"],
        "generation": first["kafka_generation"],
        "topics": dict(sorted(counts.items())),
        "members": [
            {
                "member_id": m["member_id"],
                "client_id": m["client_id"],
                "host": m["host"],
                "group_instance_id": m["group_instance_id"],
                "rack": m["rack"],
                "strategies": m["strategies"],
                "topics": m["topics"],
                "owned": [[tp["topic"], tp["partition"]] for tp in m["owned"]],
                "assignment": [[tp["topic"], tp["partition"]] for tp in m["assignment"]],
            }
            for m in members
        ],
        "what_if_of": newest,
    }


def apply(
    doc: Mapping[str, Any],
    *,
    partitions: Mapping[str, int] | None = None,
    add_members: int = 0,
    remove_members: Sequence[str] = (),
) -> dict[str, Any]:
    """The document with new partition counts, members removed and new members (subscribed to every topic)."""
    scenario = json.loads(json.dumps(doc))
    for topic, count in (partitions or {}).items():
        if topic not in scenario["topics"]:
            raise ScenarioError(
                f"partitions.{topic}: unknown topic; the group subscribes to {sorted(scenario['topics'])}"
            )
        if count < scenario["topics"][topic]:
            # Kafka can add partitions to a topic but never remove them (CreatePartitions only grows a topic).
            raise ScenarioError(
                f"partitions.{topic}: {count} is fewer than today's {scenario['topics'][topic]}; "
                "Kafka cannot remove partitions"
            )
        scenario["topics"][topic] = count
    present = {m["member_id"] for m in scenario["members"]}
    if unknown := sorted(set(remove_members) - present):
        raise ScenarioError(f"remove_members: {unknown} are not members of group {scenario['group_id']!r}")
    if add_members < 0:
        raise ScenarioError(f"add_members: must be zero or more, got {add_members}")
    scenario["members"] = [m for m in scenario["members"] if m["member_id"] not in set(remove_members)]
    strategies = sorted({s for m in scenario["members"] for s in m["strategies"]}) or [scenario["protocol"] or "range"]
    limits = Limits.from_env()
    if len(scenario["members"]) + add_members > limits.max_members:
        raise LimitError(
            f"add_members: {add_members} would make {len(scenario['members']) + add_members} members, over the "
            f"limit of {limits.max_members} (REBALANCE_MAX_MEMBERS)"
        )
    names = (f"what-if-{n}" for n in itertools.count(1) if f"what-if-{n}" not in present)
    for name in itertools.islice(names, add_members):
        scenario["members"].append(
            {
                "member_id": name,
                "client_id": name,
                "strategies": strategies,
                "topics": sorted(scenario["topics"]),
                "owned": [],
                "assignment": [],
            }
        )
    check_group(scenario, limits)
    return cast("dict[str, Any]", scenario)


def run(
    ctx: RunContext,
    group_id: str,
    *,
    partitions: Mapping[str, int] | None = None,
    add_members: int = 0,
    remove_members: Sequence[str] = (),
    snapshot_id: str | None = None,
    received_at: datetime | None = None,
) -> StepResult:
    """Write the scenario as snapshot `ctx.run_id` (source what-if); plan, gate and publish then treat it as any run."""
    doc = apply(
        latest_document(ctx.lake, group_id, snapshot_id),
        partitions=partitions,
        add_members=add_members,
        remove_members=remove_members,
    )
    raw = RawDocument(f"what-if:{group_id}", json.dumps(doc), doc=doc)
    result = ingest.run(ctx, received_at=received_at, documents=[raw], source=WHAT_IF_SOURCE)
    if result.quarantined:
        raise ScenarioError(result.quarantined[0][1])
    return result
