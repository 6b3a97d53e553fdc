"""`rebalance migration`: a group's stored migration readiness (`jobs.steps.migration`), as text."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from jobs.io.lake import Lake
from planner.errors import InputError


def latest(lake: Lake, group_id: str, generation_id: int | None = None) -> dict[str, Any]:
    """The group's stored readiness (its latest generation, or the one named); InputError naming what is missing."""
    rows = lake.read_arrow("migration_readiness", [("group_id", "=", group_id)]).to_pylist()
    if generation_id is not None:
        rows = [r for r in rows if r["generation_id"] == generation_id]
    if rows:
        return max(rows, key=lambda r: r["generation_id"])
    kinds = {r["group_type"] for r in lake.read_arrow("snapshots", [("group_id", "=", group_id)]).to_pylist()}
    if kinds == {"consumer"}:
        raise InputError(f"--group: {group_id!r} is already a consumer group (KIP-848): nothing to migrate")
    at = f" generation {generation_id}" if generation_id is not None else ""
    raise InputError(
        f"--group: no migration readiness for group {group_id!r}{at} in the lake at {lake.root} "
        "(run the nightly pipeline, e.g. `rebalance run`, first)"
    )


def format_readiness(row: Mapping[str, Any]) -> str:
    """The stored readiness as the lines `rebalance migration` prints."""
    server = row["server_assignor"] or "none (nothing keeps the client assignor's logic)"
    lines = [
        f"group {row['group_id']}, generation {row['generation_id']} (snapshot {row['snapshot_id']})",
        f"  client assignor {row['client_assignor'] or '-'} -> server assignor {server}",
        f"  ready for group.protocol=consumer: {'yes' if row['ready'] else 'no'}",
    ]
    for title, items in (("blockers", row["blockers"]), ("warnings", row["warnings"])):
        lines += [f"  {title}:"] + [f"    - {item}" for item in items] if items else []
    lines.append(f"  partitions moved by the server assignor: {row['partitions_moved']} of {row['partitions']}")
    lines += [
        f"    {m['topic']}-{m['partition']}: {m['from_member'] or '(none)'} -> {m['to_member'] or '(none)'}"
        for m in row["moves"]
    ]
    return "\n".join(lines)
