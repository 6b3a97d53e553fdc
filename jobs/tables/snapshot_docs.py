"""Snapshots as the lake holds them, rebuilt as snapshot-file documents (both group protocols' fields), read in
Arrow: a document holds its group's and members' fields, and a step reads the partition lists (`owned`,
`assignment`, `target_assignment`) from the rows, as arrays, when it needs them."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from jobs.io.lake import Lake
from jobs.kernels.group_spec import bounds
from schemas.tables import WHAT_IF_SOURCE

_GROUP_FIELDS = ("state", "protocol_type", "protocol", "group_type", "state_reason", "server_assignor")
_EPOCHS = ("group_epoch", "assignment_epoch")
_OPTIONAL = ("member_epoch", "subscription_user_data", "topic_regex", "assignment_user_data")  # kept when set


def snapshot_rows(lake: Lake, snapshot_id: str, groups: set[str] | None = None) -> tuple[pa.Table, dict[str, int]]:
    """The `snapshots` rows of one snapshot (or of its named groups) sorted by group, then member id, and the
    snapshot's partition count per topic."""
    terms = [("snapshot_id", "=", snapshot_id)] + ([("group_id", "in", sorted(groups))] if groups is not None else [])
    rows = in_document_order(lake.read_arrow("snapshots", terms))
    partitions = lake.read_arrow("topic_partitions", [("snapshot_id", "=", snapshot_id)])
    topics = partitions.group_by("topic").aggregate([("partition_count", "max")])  # one count per topic
    counts = dict(zip(topics["topic"].to_pylist(), topics["partition_count_max"].to_pylist(), strict=True))
    return rows, counts


def in_document_order(rows: pa.Table) -> pa.Table:
    """`snapshots` rows sorted by group, then member id (as Python orders text: Arrow sorts UTF-8 bytes, the same
    order), the order of a document's members."""
    return rows.take(pc.sort_indices(rows, [("group_id", "ascending"), ("member_id", "ascending")]))


def snapshot_documents(lake: Lake, snapshot_id: str, groups: set[str] | None = None) -> dict[str, dict[str, Any]]:
    """group id -> document for every group of one snapshot (or the named ones), without partition lists."""
    return documents(*snapshot_rows(lake, snapshot_id, groups))


def documents(rows: pa.Table, counts: Mapping[str, int]) -> dict[str, dict[str, Any]]:
    """group id -> document of each group of `rows` (sorted by group, then member id), without partition lists:
    members sorted by id; the group's topics are those its members subscribe to or hold, with their counts."""
    rows = rows.combine_chunks()
    starts, ends = bounds(rows.column("group_id"))
    heads = rows.select(["group_id", "snapshot_id", "kafka_generation", *_GROUP_FIELDS, *_EPOCHS]).take(starts)
    group_of = np.repeat(np.arange(len(starts)), ends - starts)
    is_member = pc.not_equal(rows.column("member_id"), "").to_numpy(zero_copy_only=False)
    members = rows.filter(pa.array(is_member))
    used = _used_topics(members, group_of[is_member], len(starts), counts)
    by_group: list[list[dict[str, Any]]] = [[] for _ in starts]
    for g, member in zip(group_of[is_member].tolist(), _members(members), strict=True):
        by_group[g].append(member)
    return {
        first["group_id"]: {
            "group_id": first["group_id"],
            "snapshot_id": first["snapshot_id"],
            "generation": first["kafka_generation"],
            **{f: first[f] for f in _GROUP_FIELDS if first[f] is not None},
            **{f: first[f] for f in _EPOCHS if first[f] is not None},
            "topics": {t: counts[t] for t in sorted(topics)},
            "members": group_members,
        }
        for first, topics, group_members in zip(heads.to_pylist(), used, by_group, strict=True)
    }


def _members(rows: pa.Table) -> Iterator[dict[str, Any]]:
    """Each member row's fields as a document's member has them, partition lists left out."""
    optional = [f for f in _OPTIONAL if rows.column(f).null_count < rows.num_rows]  # a column of nulls: none set
    names = ("member_id", "group_instance_id", "rack", "strategies", "topics", *optional)
    for values in zip(*(rows.column(f).to_pylist() for f in names), strict=True):
        member_id, instance, rack, strategies, topics, *extra = values
        member = {
            "member_id": member_id,
            "group_instance_id": instance,
            "rack": rack,
            "strategies": strategies or [],
            "topics": topics or [],
        }
        member.update((f, v) for f, v in zip(optional, extra, strict=True) if v is not None)
        yield member


def _used_topics(members: pa.Table, group_of: np.ndarray, groups: int, counts: Mapping[str, int]) -> list[set[str]]:
    """Per group, the topics of `counts` its members subscribe to or list in `assignment` or `owned`."""
    pairs = []
    for column in ("topics", "assignment", "owned"):
        values = members.column(column).combine_chunks()
        flat = pc.list_flatten(values)
        parent = pc.list_parent_indices(values).to_numpy(zero_copy_only=False)
        pairs.append(
            pa.table({"group": group_of[parent], "topic": flat if column == "topics" else flat.field("topic")})
        )
    distinct = pa.concat_tables(pairs).group_by(["group", "topic"]).aggregate([])
    used: list[set[str]] = [set() for _ in range(groups)]
    for g, t in zip(distinct["group"].to_pylist(), distinct["topic"].to_pylist(), strict=True):
        if t in counts:
            used[g].add(t)
    return used


def previous_snapshot_ids(lake: Lake, groups: set[str], snapshot_id: str) -> dict[str, str]:
    """Each group's observed snapshot captured just before `snapshot_id` (by capture time, then id; what-if
    scenarios other than `snapshot_id` itself are skipped, as the plan step's throughput skips them), for the
    groups that have one; the snapshots table is read once for all of them."""
    columns = ["group_id", "snapshot_id", "captured_at", "source"]
    # A row per member: the distinct (group, snapshot) rows are a group's snapshots, read without the members' lists.
    rows = lake.read_arrow("snapshots", [("group_id", "in", sorted(groups))], columns).group_by(columns).aggregate([])
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
