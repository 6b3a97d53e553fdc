"""The steps that read snapshots in Arrow (documents, changes, migration readiness, a batch of group specs) give
what the document path gives: seeded random fleets, classic and KIP-848 groups, static members, topics the snapshot
does not know, empty groups, partitions out of range or listed twice, member ids Java and Python order apart."""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from jobs.io.snapshot_rows import SnapshotColumns
from jobs.kernels.group_spec import GroupBatch, group_spec
from jobs.steps.migration import _Today, _upgraded, readiness_by_group
from jobs.tables.snapshot_docs import documents, in_document_order
from planner.changes import group_changes
from planner.group_protocol import group_type
from planner.migration import _upgrade, readiness

T0 = datetime(2026, 11, 21, 2, 0, tzinfo=UTC)
TOPICS = ["orders", "refunds", "a", "B", "é", "\U0001d518", "\ue000x"]  # Java orders "\U0001d518" before "\ue000x"
MEMBER_NAMES = ["m", "M", "m-1", "é", "\U0001d518", "\ue000", "c-9", "z"]
PROTOCOLS = ["range", "roundrobin", "sticky", "cooperative-sticky", "custom.assignor:Custom", None]
SEEDS = range(12)


def pairs(rng: random.Random, names: Sequence[str], most: int) -> list[list[Any]]:
    """Random [topic, partition] pairs: some out of range, some listed twice."""
    return [[rng.choice(names), rng.randint(-1, 6)] for _ in range(rng.randint(0, most))]


def fleet(seed: int, groups: int = 14) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """Group documents of one snapshot and its partition count per topic (one topic it does not know)."""
    rng = random.Random(seed)
    counts = {t: rng.randint(1, 5) for t in TOPICS[:-1]}
    docs = []
    for g in range(groups):
        kind = rng.choice(["classic", "classic", "consumer", "empty"])
        ids = [] if kind == "empty" else rng.sample(MEMBER_NAMES, rng.randint(1, 6))
        members = []
        for member_id in ids:
            member: dict[str, Any] = {
                "member_id": f"{member_id}{rng.randint(0, 2)}",
                "topics": rng.sample(TOPICS, rng.randint(0, 3)),
                "owned": pairs(rng, TOPICS, 5),
                "assignment": pairs(rng, TOPICS, 6),
                "strategies": rng.sample(PROTOCOLS[:-1], rng.randint(0, 2)),
                "group_instance_id": rng.choice([None, f"static-{member_id}"]),
                "rack": rng.choice([None, "az1", "az2"]),
                "subscription_user_data": rng.choice([None, None, "c3Vi"]),
                "assignment_user_data": rng.choice([None, None, None, "YXNz"]),
            }
            if kind == "consumer":
                member["member_epoch"] = rng.randint(1, 9)
                if rng.random() < 0.7:
                    member["target_assignment"] = pairs(rng, TOPICS, 6)
            members.append(member)
        unique = {m["member_id"]: m for m in members}
        docs.append(
            {
                "group_id": f"g{g:02d}-{seed}",
                "group_type": "consumer" if kind == "consumer" else "classic",
                "protocol": rng.choice(PROTOCOLS),
                "protocol_type": rng.choice(["consumer", "consumer", "connect"]),
                "state": rng.choice(["Stable", "PreparingRebalance", "CompletingRebalance"]),
                "generation": rng.choice([None, rng.randint(0, 9)]),
                "server_assignor": rng.choice([None, "uniform", "range"]) if kind == "consumer" else None,
                "members": list(unique.values()),
            }
        )
    return docs, counts


def rows_of(docs: Sequence[Mapping[str, Any]], snapshot_id: str = "s1") -> pa.Table:
    """The documents' `snapshots` rows as ingest writes them, in document order."""
    columns = SnapshotColumns(snapshot_id, T0, "file")
    for doc in docs:
        columns.add(doc)
    return in_document_order(columns.table())


# --- the document path the steps took before (rows as Python dicts, partition lists as [topic, partition]) ----


def old_documents(table: pa.Table, counts: Mapping[str, int]) -> dict[str, dict[str, Any]]:
    """group id -> document, as the steps rebuilt documents from the rows before reading them in Arrow."""
    rows = table.to_pylist()
    for r in rows:
        for field in ("owned", "assignment", "target_assignment"):
            r[field] = None if r[field] is None else [[p["topic"], p["partition"]] for p in r[field]]
    by_group: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        by_group.setdefault(r["group_id"], []).append(r)
    return {g: old_document(members, counts) for g, members in sorted(by_group.items())}


def old_document(rows: Sequence[Mapping[str, Any]], counts: Mapping[str, int]) -> dict[str, Any]:
    first = rows[0]
    members = sorted((r for r in rows if r["member_id"]), key=lambda r: r["member_id"])
    used = {t for m in members for t in m["topics"]}
    used |= {t for m in members for field in ("assignment", "owned") for t, _ in m[field] or []}
    fields = ("state", "protocol_type", "protocol", "group_type", "state_reason", "server_assignor")
    return {
        "group_id": first["group_id"],
        "snapshot_id": first["snapshot_id"],
        "generation": first["kafka_generation"],
        **{f: first[f] for f in fields if first.get(f) is not None},
        **{f: first[f] for f in ("group_epoch", "assignment_epoch") if first.get(f) is not None},
        "topics": {t: counts[t] for t in sorted(used) if t in counts},
        "members": [old_member(m) for m in members],
    }


def old_member(row: Mapping[str, Any]) -> dict[str, Any]:
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


def without_partition_lists(doc: Mapping[str, Any]) -> dict[str, Any]:
    lists = ("owned", "assignment", "target_assignment")
    return {**doc, "members": [{k: v for k, v in m.items() if k not in lists} for m in doc["members"]]}


# --- the tests ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", SEEDS)
def test_documents_are_the_old_documents_without_their_partition_lists(seed: int) -> None:
    docs, counts = fleet(seed)
    rows = rows_of(docs)
    old = old_documents(rows, counts)
    assert documents(rows, counts) == {g: without_partition_lists(doc) for g, doc in old.items()}


@pytest.mark.parametrize("seed", SEEDS)
def test_changes_between_two_snapshots_are_the_old_ones(seed: int) -> None:
    before, counts_before = fleet(seed)
    after, counts_after = fleet(seed + 100)
    for doc in after:  # the same group ids a day later, other members and counts
        doc["group_id"] = doc["group_id"].removesuffix(f"-{seed + 100}") + f"-{seed}"
    old_before, old_after = old_documents(rows_of(before), counts_before), old_documents(rows_of(after), counts_after)
    new_before, new_after = documents(rows_of(before), counts_before), documents(rows_of(after), counts_after)
    assert new_after.keys() == old_after.keys()
    for g in old_after:
        assert group_changes(new_before.get(g), new_after[g]) == group_changes(old_before.get(g), old_after[g])
        assert group_changes(None, new_after[g]) == group_changes(None, old_after[g])


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize(("policy", "max_size"), [("bidirectional", 2**31 - 1), ("downgrade", 3)])
def test_migration_readiness_from_rows_is_the_documents_readiness(seed: int, policy: str, max_size: int) -> None:
    docs, counts = fleet(seed)
    rows = rows_of(docs)
    old = old_documents(rows, counts)
    expected = [
        readiness(old[g], policy=policy, max_size=max_size)  # type: ignore[arg-type]
        for g in sorted(old)
        if group_type(old[g]) == "classic"
    ]
    got = readiness_by_group(documents(rows, counts), rows, counts, policy=policy, max_size=max_size)  # type: ignore[arg-type]
    assert got == expected
    assert any(r.moves for r in got) and any(r.server_assignor is None for r in got)  # the fleet has both


@pytest.mark.parametrize("seed", SEEDS)
def test_each_group_is_converted_as_its_document_is(seed: int) -> None:
    docs, counts = fleet(seed)
    rows = rows_of(docs)
    old = old_documents(rows, counts)
    classic = [g for g in sorted(old) if group_type(old[g]) == "classic" and old[g]["members"]]
    members = rows.filter(pc.and_(pc.is_in(rows["group_id"], pa.array(classic)), pc.not_equal(rows["member_id"], "")))
    today = _Today(GroupBatch(_upgraded(members), counts, held_in=("owned", "assignment")))
    for g, group_id in enumerate(classic):
        doc = old[group_id]
        assigned = {(t, p): m["member_id"] for m in doc["members"] for t, p in m["assignment"]}
        expected, got = _upgrade(doc, doc["members"], assigned), today.upgrade(g)
        assert today.partitions(g) == len(assigned)
        assert (got.names, got.outside) == (tuple(expected.names), expected.outside)
        assert np.array_equal(got.owner, expected.owner)
        for field in ("topics", "members", "unknown_topics", "group_instance_ids", "racks", "member_listing"):
            assert getattr(got.group, field) == getattr(expected.group, field), field
        for field in ("topic_start", "generations", "claim_member", "claim_partition"):
            assert np.array_equal(getattr(got.group, field), getattr(expected.group, field)), field
        assert [s.tolist() for s in got.group.subscriptions] == [s.tolist() for s in expected.group.subscriptions]


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("held_in", [(), ("owned", "assignment")])
def test_a_batch_of_groups_gives_each_group_its_own_spec(seed: int, held_in: tuple[str, ...]) -> None:
    docs, counts = fleet(seed)
    rows = rows_of(docs)
    members = rows.filter(pc.not_equal(rows.column("member_id"), ""))
    batch = GroupBatch(members, counts, held_in=held_in)
    groups = sorted({d["group_id"] for d in docs if d["members"]})
    assert [batch.group_id(g) for g in range(batch.groups)] == groups
    for g, group_id in enumerate(groups):
        alone, current = group_spec(
            members.filter(pc.equal(members.column("group_id"), group_id)), counts, held_in=held_in
        )
        spec = batch.spec(g)
        for field in ("topics", "members", "unknown_topics", "group_instance_ids", "racks", "topic_uuids"):
            assert getattr(spec, field) == getattr(alone, field), field
        for field in ("topic_start", "generations", "claim_member", "claim_partition"):
            assert np.array_equal(getattr(spec, field), getattr(alone, field)), field
        assert [s.tolist() for s in spec.subscriptions] == [s.tolist() for s in alone.subscriptions]
        assert np.array_equal(batch.current(g), current)
