"""RoundRobinAssignor: Kafka's javadoc, articles A1 and A4, static members, a Java transcription."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from planner import assign
from planner.assignment import assign_arrays
from planner.group import java_key, parse_group
from planner.invariants import check_plan


def _group(topics: dict[str, int], subs: dict[str, list[str]], **extra: dict) -> dict:
    return {"topics": topics, "members": {m: {"topics": ts, **extra.get(m, {})} for m, ts in subs.items()}}


def _rr(group: dict) -> dict[str, list[tuple[str, int]]]:
    spec = parse_group(group)
    assert check_plan(spec, assign_arrays("roundrobin", spec).assignment) == []
    return assign("roundrobin", group).assignment


def tps(*names: str) -> list[tuple[str, int]]:
    return [(n.split("p")[0], int(n.split("p")[1])) for n in names]


def test_javadoc_identical_subscriptions():
    g = _group({"t0": 3, "t1": 3}, {"C0": ["t0", "t1"], "C1": ["t0", "t1"]})
    assert _rr(g) == {"C0": tps("t0p0", "t0p2", "t1p1"), "C1": tps("t0p1", "t1p0", "t1p2")}


def test_seed001_differing_subscriptions_skip_non_subscribers():
    g = _group({"t0": 1, "t1": 2, "t2": 3}, {"C0": ["t0"], "C1": ["t0", "t1"], "C2": ["t0", "t1", "t2"]})
    assert _rr(g) == {"C0": tps("t0p0"), "C1": tps("t1p0"), "C2": tps("t1p1", "t2p0", "t2p1", "t2p2")}


def test_seed001_static_membership_survives_new_member_ids():
    # Dynamic ids C0..C2 -> C5, C3, C4 after a restart shuffle the assignment ...
    before = _rr(_group({"t0": 3, "t1": 3}, {c: ["t0", "t1"] for c in ("C0", "C1", "C2")}))
    assert before == {"C0": tps("t0p0", "t1p0"), "C1": tps("t0p1", "t1p1"), "C2": tps("t0p2", "t1p2")}
    after = _rr(_group({"t0": 3, "t1": 3}, {c: ["t0", "t1"] for c in ("C5", "C3", "C4")}))
    assert after == {"C3": tps("t0p0", "t1p0"), "C4": tps("t0p1", "t1p1"), "C5": tps("t0p2", "t1p2")}
    # ... while static members keep theirs: instance ids I0..I2 order the circle whatever the member ids.
    static = {c: {"group_instance_id": i} for c, i in (("C5", "I0"), ("C3", "I1"), ("C4", "I2"))}
    kept = _rr(_group({"t0": 3, "t1": 3}, {c: ["t0", "t1"] for c in static}, **static))
    assert kept == {"C3": tps("t0p1", "t1p1"), "C4": tps("t0p2", "t1p2"), "C5": tps("t0p0", "t1p0")}


def test_seed000_and_001_sticky_comparison_roundrobin_side():
    subs = {c: ["t0", "t1", "t2", "t3"] for c in ("C0", "C1", "C2")}
    g = _group({"t0": 2, "t1": 2, "t2": 2, "t3": 2}, subs)
    assert _rr(g) == {"C0": tps("t0p0", "t1p1", "t3p0"), "C1": tps("t0p1", "t2p0", "t3p1"), "C2": tps("t1p0", "t2p1")}
    del subs["C1"]
    assert _rr(_group(g["topics"], subs)) == {
        "C0": tps("t0p0", "t1p0", "t2p0", "t3p0"),
        "C2": tps("t0p1", "t1p1", "t2p1", "t3p1"),
    }


def test_seed001_c0_removed_roundrobin_side():
    g = _group({"t0": 1, "t1": 2, "t2": 3}, {"C1": ["t0", "t1"], "C2": ["t0", "t1", "t2"]})
    assert _rr(g) == {"C1": tps("t0p0", "t1p1"), "C2": tps("t1p0", "t2p0", "t2p1", "t2p2")}


def test_seed004_three_topics_three_consumers_trace():
    # The article's trace ends "T0-P3 -> C2"; T0 has 3 partitions, Kafka gives T2-P3 to C2.
    g = _group({"T0": 3, "T1": 2, "T2": 4}, {"C0": ["T0", "T1"], "C1": ["T1", "T2"], "C2": ["T2", "T0"]})
    assert _rr(g) == {
        "C0": tps("T0p0", "T0p2", "T1p1"),
        "C1": tps("T1p0", "T2p0", "T2p2"),
        "C2": tps("T0p1", "T2p1", "T2p3"),
    }


def test_seed004_five_partitions_two_consumers():
    assert _rr(_group({"t": 5}, {"C0": ["t"], "C1": ["t"]})) == {
        "C0": tps("tp0", "tp2", "tp4"),
        "C1": tps("tp1", "tp3"),
    }


def test_missing_and_empty_topics_do_not_advance_the_circle():
    g = _group({"a": 1, "b": 0, "c": 2}, {"x": ["a", "b", "zz"], "y": ["a", "b", "c"]})
    assert _rr(g) == {"x": tps("ap0"), "y": tps("cp0", "cp1")}


def _java_round_robin(group: dict) -> dict[str, list[tuple[str, int]]]:
    """RoundRobinAssignor.assign transcribed line by line (per partition), as the reference."""
    members = group["members"]

    def member_info(m: str) -> tuple:
        gid = members[m].get("group_instance_id")
        return (0, java_key(gid), java_key(m)) if gid is not None else (1, b"", java_key(m))

    circle = sorted(members, key=member_info)
    assignment: dict[str, list[tuple[str, int]]] = {m: [] for m in members}
    topics = sorted({t for m in members.values() for t in m["topics"]}, key=java_key)
    i = 0
    for topic in topics:
        for p in range(group["topics"].get(topic, 0)):
            while topic not in members[circle[i]]["topics"]:
                i = (i + 1) % len(circle)
            assignment[circle[i]].append((topic, p))
            i = (i + 1) % len(circle)
    return {m: sorted(ps) for m, ps in assignment.items()}


@st.composite
def groups(draw: st.DrawFn) -> dict:
    topics = draw(st.dictionaries(st.sampled_from("abcdefg"), st.integers(0, 9), min_size=1))
    names = draw(st.lists(st.sampled_from(["m0", "m1", "m2", "m3", "m4", "m5", "m6", "m7"]), min_size=1, unique=True))
    pool = [*topics, "missing"]
    return {
        "topics": topics,
        "members": {
            m: {
                "topics": draw(st.lists(st.sampled_from(pool), unique=True)),
                "group_instance_id": draw(st.one_of(st.none(), st.sampled_from(["i0", "i1", "i2"]))),
            }
            for m in names
        },
    }


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(groups())
def test_matches_the_java_transcription(group: dict):
    assert assign("roundrobin", group).assignment == _java_round_robin(group)
