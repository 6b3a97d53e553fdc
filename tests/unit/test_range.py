"""RangeAssignor: Kafka's javadoc, articles A1 and A4, static members, edge cases; every scenario checked."""

from __future__ import annotations

import pytest

from planner import assign
from planner.assignment import assign_arrays
from planner.group import parse_group
from planner.invariants import check_plan


def _group(topics: dict[str, int], subs: dict[str, list[str]], **extra: dict) -> dict:
    return {"topics": topics, "members": {m: {"topics": ts, **extra.get(m, {})} for m, ts in subs.items()}}


def _range(group: dict) -> dict[str, list[tuple[str, int]]]:
    spec = parse_group(group)
    assert check_plan(spec, assign_arrays("range", spec).assignment) == []
    return assign("range", group).assignment


def tp(s: str) -> tuple[str, int]:
    t, p = s.split("p")
    return t, int(p)


def tps(*names: str) -> list[tuple[str, int]]:
    return [tp(n) for n in names]


def test_javadoc_example():
    g = _group({"t0": 3, "t1": 3}, {"C0": ["t0", "t1"], "C1": ["t0", "t1"]})
    assert _range(g) == {"C0": tps("t0p0", "t0p1", "t1p0", "t1p1"), "C1": tps("t0p2", "t1p2")}


def test_seed001_one_topic_four_partitions_three_consumers():
    g = _group({"t1": 4}, {"c0": ["t1"], "c1": ["t1"], "c2": ["t1"]})
    assert _range(g) == {"c0": tps("t1p0", "t1p1"), "c1": tps("t1p2"), "c2": tps("t1p3")}


def test_seed001_two_topics_extras_pile_on_first_consumer():
    g = _group({"t1": 4, "t2": 4}, {c: ["t1", "t2"] for c in ("c0", "c1", "c2")})
    assert _range(g) == {
        "c0": tps("t1p0", "t1p1", "t2p0", "t2p1"),
        "c1": tps("t1p2", "t2p2"),
        "c2": tps("t1p3", "t2p3"),
    }


def test_seed004_five_partitions_two_consumers():
    g = _group({"t": 5}, {"C0": ["t"], "C1": ["t"]})
    assert _range(g) == {"C0": tps("tp0", "tp1", "tp2"), "C1": tps("tp3", "tp4")}


def test_seed004_four_partitions_two_consumers_kafka_not_the_article_typo():
    # The article says "P0, P1 -> C0, P3, P4 -> C1" for 4 partitions; there is no P4: C1 gets P2 and P3.
    g = _group({"t": 4}, {"C0": ["t"], "C1": ["t"]})
    assert _range(g) == {"C0": tps("tp0", "tp1"), "C1": tps("tp2", "tp3")}


def test_static_members_sort_by_group_instance_id_before_dynamic_ones():
    # MemberInfo.compareTo: static members first by group.instance.id, then dynamic by member id.
    g = _group(
        {"t0": 3, "t1": 3},
        {"C5": ["t0", "t1"], "C3": ["t0", "t1"], "C4": ["t0", "t1"]},
        C5={"group_instance_id": "I0"},
        C3={"group_instance_id": "I1"},
        C4={"group_instance_id": "I2"},
    )
    assert _range(g) == {"C3": tps("t0p1", "t1p1"), "C4": tps("t0p2", "t1p2"), "C5": tps("t0p0", "t1p0")}
    mixed = _group({"t": 3}, {"a": ["t"], "b": ["t"], "z": ["t"]}, z={"group_instance_id": "I9"})
    assert _range(mixed) == {"a": tps("tp1"), "b": tps("tp2"), "z": tps("tp0")}


def test_differing_subscriptions_topics_without_partitions_and_missing_topics():
    g = _group(
        {"t0": 1, "t1": 2, "t2": 3, "empty": 0},
        {"C0": ["t0", "empty"], "C1": ["t0", "t1", "missing"], "C2": ["t0", "t1", "t2"]},
    )
    assert _range(g) == {"C0": tps("t0p0"), "C1": tps("t1p0"), "C2": tps("t1p1", "t2p0", "t2p1", "t2p2")}


def test_more_consumers_than_partitions_and_unsubscribed_topics():
    g = _group({"t": 2, "nobody": 5}, {"a": ["t"], "b": ["t"], "c": ["t"], "d": []})
    assert _range(g) == {"a": tps("tp0"), "b": tps("tp1"), "c": [], "d": []}


def test_member_ids_compare_as_java_strings():
    # Java orders by UTF-16 code units: U+FF21 (one unit) sorts after U+1F600 (surrogates 0xD83D...).
    g = _group({"t": 2}, {"\uff21": ["t"], "\U0001f600": ["t"]})
    assert _range(g) == {"\U0001f600": tps("tp0"), "\uff21": tps("tp1")}


@pytest.mark.parametrize("n", [0, 1, 7, 100])
def test_key_order_does_not_matter(n: int):
    subs = {f"m{i}": ["a", "b"] for i in range(5)}
    g1 = _group({"a": n, "b": 3}, subs)
    g2 = {"topics": dict(reversed(list(g1["topics"].items()))), "members": dict(reversed(list(g1["members"].items())))}
    assert _range(g1) == _range(g2)
