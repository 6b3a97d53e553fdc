"""Snapshots as the lake holds them, rebuilt as snapshot-file documents (both group protocols' fields)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, cast

import pyarrow as pa
import pyarrow.compute as pc

from jobs.io.lake import Lake
from schemas.tables import WHAT_IF_SOURCE

_GROUP_FIELDS = ("state", "protocol_type", "protocol", "group_type", "state_reason", "server_assignor")
_EPOCHS = ("group_epoch", "assignment_epoch")
PAIR_COLUMNS = ("owned", "assignment", "target_assignment")


def snapshot_documents(lake: Lake, snapshot_id: str, groups: set[str] | None = None) -> dict[str, dict[str, Any]]:
    """group id -> document for every group of one snapshot (or the named ones), members sorted by id."""
    terms = [("snapshot_id", "=", snapshot_id)] + ([("group_id", "in", sorted(groups))] if groups is not None else [])
    rows = member_rows(lake.read_arrow("snapshots", terms))
    partitions = lake.read_arrow("topic_partitions", [("snapshot_id", "=", snapshot_id)])
    topics = partitions.group_by("topic").aggregate([("partition_count", "max")])  # one count per topic
    counts = dict(zip(topics["topic"].to_pylist(), topics["partition_count_max"].to_pylist(), strict=True))
    by_group: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        by_group.setdefault(r["group_id"], []).append(r)
    return {g: document(members, counts) for g, members in sorted(by_group.items())}


def document(rows: Sequence[Mapping[str, Any]], counts: Mapping[str, int]) -> dict[str, Any]:
    """One group's rows of one snapshot as a document; its topics are those its members subscribe to or hold."""
    first = rows[0]
    members = sorted((r for r in rows if r["member_id"]), key=lambda r: r["member_id"])
    used = {t for m in members for t in m["topics"]}
    used |= {t for m in members for field in ("assignment", "owned") for t, _ in m[field] or []}
    doc: dict[str, Any] = {
        "group_id": first["group_id"],
        "snapshot_id": first["snapshot_id"],
        "generation": first["kafka_generation"],
        **{f: first[f] for f in _GROUP_FIELDS if first.get(f) is not None},
        **{f: first[f] for f in _EPOCHS if first.get(f) is not None},
        "topics": {t: counts[t] for t in sorted(used) if t in counts},
        "members": [_member(m) for m in members],
    }
    return doc


def _member(row: Mapping[str, Any]) -> dict[str, Any]:
    member = {
        "member_id": row["member_id"],
        "group_instance_id": row["group_instance_id"],
        "rack": row["rack"],
        "strategies": list(row["strategies"] or []),
        "topics": list(row["topics"] or []),
        "owned": row["owned"] or [],
        "assignment": row["assignment"] or [],
    }
    for field in ("member_epoch", "subscription_user_data", "topic_regex", "assignment_user_data"):
        if row.get(field) is not None:
            member[field] = row[field]
    if row.get("target_assignment") is not None:
        member["target_assignment"] = row["target_assignment"]
    return member


def member_rows(table: pa.Table) -> list[dict[str, Any]]:
    """`snapshots` rows as dicts whose partition lists are [topic, partition] pairs, built from the Arrow columns
    (a million-partition group would otherwise be millions of {topic, partition} dicts)."""
    rows = table.drop_columns(list(PAIR_COLUMNS)).to_pylist()
    for column in PAIR_COLUMNS:
        for row, pairs in zip(rows, _pair_lists(table.column(column).combine_chunks()), strict=True):
            row[column] = pairs
    return cast("list[dict[str, Any]]", rows)


def _pair_lists(column: pa.Array) -> list[list[list[Any]] | None]:
    """Each row's list of (topic, partition) structs as [topic, partition] pairs (None for a null list)."""
    flat = pc.list_flatten(column)
    pairs = [list(p) for p in zip(flat.field("topic").to_pylist(), flat.field("partition").to_pylist(), strict=True)]
    out: list[list[list[Any]] | None] = []
    start = 0
    for n in pc.list_value_length(column).to_pylist():
        out.append(None if n is None else pairs[start : start + n])
        start += n or 0
    return out


def previous_snapshot_ids(lake: Lake, groups: set[str], snapshot_id: str) -> dict[str, str]:
    """Each group's observed snapshot captured just before `snapshot_id` (by capture time, then id; what-if
    scenarios other than `snapshot_id` itself are skipped, as the plan step's throughput skips them), for the
    groups that have one; the snapshots table is read once for all of them."""
    rows = lake.read_arrow("snapshots", [("group_id", "in", sorted(groups))]).select(
        ["group_id", "snapshot_id", "captured_at", "source"]
    )
    moments: dict[str, set[tuple[Any, str]]] = {}
    for r in rows.to_pylist():
        if r["source"] == WHAT_IF_SOURCE and r["snapshot_id"] != snapshot_id:
            continue
        moments.setdefault(r["group_id"], set()).add((r["captured_at"], r["snapshot_id"]))
    out = {}
    for group_id, taken in moments.items():
        ids = [s for _, s in sorted(taken)]
        at = ids.index(snapshot_id) if snapshot_id in ids else 0
        if at > 0:
            out[group_id] = ids[at - 1]
    return out


def run_generations(lake: Lake, run_id: str) -> dict[str, int]:
    """group id -> the generation id this run holds (allocated by the plan step)."""
    rows = lake.read_arrow("generations", [("run_id", "=", run_id)]).select(["group_id", "generation_id"])
    return {r["group_id"]: r["generation_id"] for r in rows.to_pylist()}
