"""The plan kernel's pure parts: groups built from Arrow rows equal the planner's own parse, and load choice."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pyarrow import fs

from jobs.io.snapshot_rows import SnapshotColumns
from jobs.kernels.candidates import (
    Group,
    PlanSettings,
    add_diff_rows,
    add_plan_rows,
    build_groups,
    candidate,
    measured_loads,
    task_rows,
)
from jobs.kernels.columns import Columns
from jobs.kernels.group_spec import group_spec
from jobs.kernels.loads import choose
from planner.group import from_snapshot, frozen, java_key, parse_group
from planner.plan_diff import member_diffs
from schemas.tables import PLAN_DIFFS, PLANS

T0 = datetime(2026, 11, 21, 2, 0, tzinfo=UTC)
MEMBER_COLUMNS = [  # the snapshot columns the plan step gives its kernel (`jobs.steps.plan.MEMBER_COLUMNS`)
    *("group_id", "member_id", "topics", "owned", "assignment", "target_assignment", "group_type"),
    *("kafka_generation", "group_instance_id", "rack"),
]
NAMES = ["a", "B", "b", "é", "\U0001d518", "ab", "Z9"]  # Java orders "\U0001d518" (surrogates) before "é"


@st.composite
def documents(draw: st.DrawFn) -> dict:
    """Snapshot documents, valid or not as the rules go: unknown topics, partitions out of range, repeated
    claims, classic or KIP-848 consumer groups with or without a target assignment."""
    topics = draw(st.dictionaries(st.sampled_from(NAMES), st.integers(1, 4), min_size=1, max_size=4))
    names = [*topics, "gone"]
    pair = st.tuples(st.sampled_from(names), st.integers(-1, 5)).map(list)
    members = []
    for member_id in draw(st.lists(st.sampled_from(NAMES), min_size=1, max_size=5, unique=True)):
        member = {
            "member_id": member_id,
            "topics": draw(st.lists(st.sampled_from(names), max_size=4)),
            "owned": draw(st.lists(pair, max_size=6)),
            "assignment": draw(st.lists(pair, max_size=6)),
            "group_instance_id": draw(st.none() | st.just(f"static-{member_id}")),
            "rack": draw(st.none() | st.sampled_from(["az1", "az2"])),
        }
        if draw(st.booleans()):
            member["target_assignment"] = draw(st.lists(pair, max_size=6))
        members.append(member)
    return {
        "group_id": "g",
        "group_type": draw(st.sampled_from(["classic", "consumer"])),
        "generation": draw(st.none() | st.integers(0, 9)),
        "topics": topics,
        "members": members,
    }


def member_table(doc: dict) -> pa.Table:
    """The document's rows as the plan step reads them from `snapshots` (written by ingest's own mapping)."""
    rows = SnapshotColumns("s1", T0, "file")
    rows.add(doc)
    return rows.table()


@settings(deadline=None)
@given(documents())
def test_a_group_built_from_arrow_rows_is_the_planners_own_parse(doc):
    spec, current = group_spec(member_table(doc), doc["topics"])
    # The snapshot tables keep each topic's count per snapshot, not per group: a group is planned over the topics
    # its members subscribe to (the others hold nothing any assignor may give out).
    compact = from_snapshot(doc)
    subscribed = {t for m in doc["members"] for t in m["topics"]}
    expected = parse_group(compact | {"topics": {t: n for t, n in compact["topics"].items() if t in subscribed}})
    for field in ("topics", "members", "unknown_topics", "group_instance_ids", "racks"):
        assert getattr(spec, field) == getattr(expected, field), field
    for field in ("topic_start", "generations", "claim_member", "claim_partition"):
        assert np.array_equal(getattr(spec, field), getattr(expected, field)), field
    assert [s.tolist() for s in spec.subscriptions] == [s.tolist() for s in expected.subscriptions]
    assigned: dict[int, str] = {}  # a partition two members list (input the rules reject) is the first one's
    for m in sorted(doc["members"], key=lambda m: java_key(m["member_id"])):
        for t, p in m["assignment"]:
            if t in spec.topics and 0 <= p < doc["topics"][t]:
                assigned.setdefault(int(expected.topic_start[spec.topics.index(t)]) + p, m["member_id"])
    assert {p: spec.members[m] for p, m in enumerate(current) if m >= 0} == assigned


@settings(deadline=None)
@given(documents(), st.sampled_from(["range", "sticky", "cooperative-sticky", "balanced-load"]))
def test_the_kernels_diff_rows_are_the_planners_member_diffs_of_its_plan_rows(doc, strategy):
    spec, current = group_spec(member_table(doc), doc["topics"])
    loads = choose("uniform", {}, spec.num_partitions, has_previous=False)
    group = Group("g", 4, dataclasses.replace(spec, partition_loads=frozen(loads.values)), current, loads)
    chosen = candidate(group, strategy, 1.0)
    plans, diffs = Columns(PLANS.schema), Columns(PLAN_DIFFS.schema)
    add_plan_rows(plans, group, chosen)
    add_diff_rows(diffs, group, chosen)
    rows = plans.table().to_pylist()
    today = {(r["topic"], r["partition"]): r["previous_member"] for r in rows if r["previous_member"] is not None}
    after = {(r["topic"], r["partition"]): r["member"] for r in rows}
    expected = [
        {
            "generation_id": 4,
            "group_id": "g",
            "strategy": strategy,
            "member": d.member,
            "partitions_before": d.before,
            "partitions_after": d.after,
            "gained": [{"topic": t, "partition": p} for t, p in d.gained],
            "lost": [{"topic": t, "partition": p} for t, p in d.lost],
        }
        for d in member_diffs(today, after, spec.members)
    ]
    assert sorted(diffs.table().to_pylist(), key=lambda r: r["member"]) == expected


def kernel_rows(doc: dict, lag: list[float]) -> pa.Table:
    """A group's rows as the plan step hands them to its kernel: members, then a lag measurement per value of
    `lag` (partitions 0, 1, ... of its first topic)."""
    members = member_table(doc).select(MEMBER_COLUMNS)
    n, topic = members.num_rows, sorted(doc["topics"])[0]
    for name, kind in (("topic", pa.string()), ("partition", pa.int32()), ("source", pa.string())):
        members = members.append_column(name, pa.nulls(n, kind))
    members = members.append_column("value", pa.nulls(n, pa.float64()))
    loads = {"group_id": [doc["group_id"]] * len(lag)}
    loads |= {"topic": [topic] * len(lag), "partition": list(range(len(lag))), "source": ["lag"] * len(lag)}
    measured = pa.table(loads | {"value": lag}).cast(members.select(list(loads) + ["value"]).schema)
    return pa.concat_tables([members, measured], promote_options="default")


@settings(deadline=None, max_examples=50)
@given(st.lists(documents(), min_size=1, max_size=4), st.randoms(use_true_random=False))
def test_a_tasks_groups_are_each_built_as_the_group_alone_in_group_id_order(docs, random):
    topics = docs[0]["topics"]  # a snapshot's partition counts are the same for all its groups
    docs = [doc | {"group_id": f"g{i}", "topics": topics} for i, doc in enumerate(docs)]
    rows = pa.concat_tables([kernel_rows(d, [2.0 * i + 1]) for i, d in enumerate(docs)])
    order = list(range(rows.num_rows))
    random.shuffle(order)  # a task's rows arrive in any order
    generations = {d["group_id"]: (i + 1, "s0" if i % 2 else None) for i, d in enumerate(docs)}
    plan_settings = PlanSettings(("range",), topics, "lag", fs.LocalFileSystem(), (), generations=generations)
    built = list(build_groups(task_rows(rows.take(pa.array(order)).to_batches(max_chunksize=3)), plan_settings))
    assert [g.group_id for g in built] == [d["group_id"] for d in docs]
    for group, doc in zip(built, docs, strict=True):
        spec, current = group_spec(member_table(doc), topics)
        for field in ("topics", "members", "unknown_topics", "group_instance_ids", "racks"):
            assert getattr(group.spec, field) == getattr(spec, field), field
        for field in ("topic_start", "generations", "claim_member", "claim_partition"):
            assert np.array_equal(getattr(group.spec, field), getattr(spec, field)), field
        assert [s.tolist() for s in group.spec.subscriptions] == [s.tolist() for s in spec.subscriptions]
        assert np.array_equal(group.current, current)
        i = docs.index(doc)
        alone = kernel_rows(doc, [2.0 * i + 1])
        lag = measured_loads(alone.filter(pc.is_valid(alone.column("source"))), spec)
        loads = choose("lag", lag, spec.num_partitions, has_previous=i % 2 == 1)
        assert group.generation_id == i + 1 and group.loads.label == loads.label
        assert group.loads.values.tolist() == loads.values.tolist()


def test_a_groups_generation_and_previous_snapshot_come_from_the_settings():
    doc = {"group_id": "g", "topics": {"t": 2}, "members": [{"member_id": "m", "topics": ["t"]}]}
    rows = pa.concat_tables([kernel_rows(doc | {"group_id": g}, []) for g in ("a", "b")])
    generations = {"a": (7, None), "b": (3, "s0")}
    built = list(
        build_groups(rows, PlanSettings(("range",), {"t": 2}, "throughput", fs.LocalFileSystem(), (), {}, generations))
    )
    assert [(g.group_id, g.generation_id, g.loads.label) for g in built] == [
        ("a", 7, "uniform (no previous snapshot)"),
        ("b", 3, "uniform (no end-offset growth since the previous snapshot)"),
    ]


def test_a_task_without_rows_builds_no_group():
    assert task_rows(iter([])) is None
    assert list(build_groups(None, PlanSettings((), {}, "auto", fs.LocalFileSystem(), ()))) == []


def measured(*pairs: tuple[str, list[int], list[float]]) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    return {s: (np.asarray(p), np.asarray(v, dtype=np.float64)) for s, p, v in pairs}


def test_auto_takes_the_first_measure_that_carries_load():
    both = measured(("lag", [0, 1], [5.0, 7.0]), ("throughput", [0, 1], [0.0, 0.0]), ("messages", [0], [0.0]))
    loads = choose("auto", both, 2, has_previous=True)
    assert loads.label == "lag" and loads.values.tolist() == [5.0, 7.0] and loads.sources.tolist() == ["lag", "lag"]
    nothing = choose("auto", measured(("lag", [0, 1], [0.0, 0.0])), 2, has_previous=True)
    assert nothing.label == "uniform (no key samples, no end-offset growth since the previous snapshot, no lag)"
    assert nothing.values.tolist() == [1.0, 1.0] and nothing.sources.tolist() == ["uniform", "uniform"]


def test_unmeasured_and_unreadable_partitions_get_the_groups_mean():
    rates = measured(("throughput", [0, 2, 3, 9], [4.0, -3.0, 8.0, 100.0]))  # -3: offsets reset; 9: no such one
    loads = choose("throughput", rates, 4, has_previous=True)
    assert loads.values.tolist() == [4.0, 6.0, 6.0, 8.0]
    assert loads.sources.tolist() == ["throughput", "mean", "mean", "throughput"]
    assert loads.label == "throughput (2 of 4 partitions unmeasured: the group's mean)"


@pytest.mark.parametrize(
    ("mode", "label"),
    [("bytes", "uniform (no key samples)"), ("throughput", "uniform (no previous snapshot)"), ("uniform", "uniform")],
)
def test_a_configured_measure_never_falls_through_to_another(mode, label):
    loads = choose(mode, measured(("lag", [0], [3.0]), ("messages", [0], [2.0])), 1, has_previous=False)
    assert loads.label == label and loads.values.tolist() == [1.0]


def test_gathered_columns_become_one_table_in_the_order_added_with_nulls_and_lists():
    diffs = Columns(PLAN_DIFFS.schema)
    for group, members in (("g1", ["a", "b"]), ("g2", ["c"])):
        first = diffs.name_ids([group, "range", "orders", *members])
        diffs.add(
            len(members),
            generation_id=7,
            group_id=first,
            strategy=first + 1,
            member=first + 3 + np.arange(len(members)),
            partitions_before=np.zeros(len(members), dtype=np.int32),
            partitions_after=np.ones(len(members), dtype=np.int32),
        )
        lengths = np.array([1] + [0] * (len(members) - 1))
        diffs.add_pairs("gained", lengths, np.array([first + 2]), np.array([len(members)]))
        diffs.add_pairs("lost", np.zeros(len(members), dtype=np.int64), np.empty(0, np.int64), np.empty(0, np.int64))
    table = diffs.table()
    assert table.schema == PLAN_DIFFS.schema and diffs.rows == 0
    assert [(r["group_id"], r["member"], r["gained"], r["lost"]) for r in table.to_pylist()] == [
        ("g1", "a", [{"topic": "orders", "partition": 2}], []),
        ("g1", "b", [], []),
        ("g2", "c", [{"topic": "orders", "partition": 1}], []),
    ]
    assert Columns(PLANS.schema).table().num_rows == 0
