"""StickyAssignor: articles A0 and A1, Kafka's AbstractStickyAssignorTest cases, ConstrainedAssignmentBuilder
transcribed line by line as the reference, and the balance and stickiness guarantees on random groups."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from planner import assign
from planner.assignment import assign_arrays
from planner.group import java_key, parse_group
from planner.invariants import check_plan, moved


def tps(*names: str) -> list[tuple[str, int]]:
    return [(n.split("p")[0], int(n.split("p")[1])) for n in names]


def _sticky(group: dict) -> dict[str, list[tuple[str, int]]]:
    spec = parse_group(group)
    assert check_plan(spec, assign_arrays("sticky", spec).assignment, balance=True) == []
    return assign("sticky", group).assignment


def _members(subs: dict[str, list[str]], owned: dict | None = None, generation: int = 1) -> dict:
    owned = owned or {}
    return {
        m: {"topics": ts, **({"owned": owned[m], "generation": generation} if m in owned else {})}
        for m, ts in subs.items()
    }


FOUR_TOPICS = {"t0": 2, "t1": 2, "t2": 2, "t3": 2}


def test_seed000_001_example1_fresh_assignment_equals_roundrobin():
    subs = {c: list(FOUR_TOPICS) for c in ("C0", "C1", "C2")}
    first = _sticky({"topics": FOUR_TOPICS, "members": _members(subs)})
    assert first == {"C0": tps("t0p0", "t1p1", "t3p0"), "C1": tps("t0p1", "t2p0", "t3p1"), "C2": tps("t1p0", "t2p1")}
    assert first == assign("roundrobin", {"topics": FOUR_TOPICS, "members": _members(subs)}).assignment


def test_seed000_001_example1_c1_leaves_everything_else_stays():
    subs = {c: list(FOUR_TOPICS) for c in ("C0", "C2")}
    owned = {"C0": tps("t0p0", "t1p1", "t3p0"), "C2": tps("t1p0", "t2p1")}
    group = {"topics": FOUR_TOPICS, "members": _members(subs, owned)}
    after = _sticky(group)
    # Every previous assignment survives. C1's t0p1, t2p0, t3p1 are dealt to C0 (3 owned) and C2 (2 owned) by
    # Kafka 4.x's ConstrainedAssignmentBuilder: round-robin over members under quota, so C2 takes two. The
    # article (written for the pre-2.8 algorithm) shows C0 taking t2p0 and C2 t0p1, t3p1: same counts and
    # same stickiness, different partitions; Kafka wins.
    assert after == {"C0": tps("t0p0", "t0p1", "t1p1", "t3p0"), "C2": tps("t1p0", "t2p0", "t2p1", "t3p1")}
    assert moved(group, after) == 0


THREE_TOPICS = {"t0": 1, "t1": 2, "t2": 3}


def test_seed001_example2_differing_subscriptions_fresh():
    subs = {"C0": ["t0"], "C1": ["t0", "t1"], "C2": ["t0", "t1", "t2"]}
    assert _sticky({"topics": THREE_TOPICS, "members": _members(subs)}) == {
        "C0": tps("t0p0"),
        "C1": tps("t1p0", "t1p1"),
        "C2": tps("t2p0", "t2p1", "t2p2"),
    }


def test_seed001_example2_c0_removed_keeps_five_assignments():
    subs = {"C1": ["t0", "t1"], "C2": ["t0", "t1", "t2"]}
    owned = {"C1": tps("t1p0", "t1p1"), "C2": tps("t2p0", "t2p1", "t2p2")}
    group = {"topics": THREE_TOPICS, "members": _members(subs, owned)}
    assert _sticky(group) == {"C1": tps("t0p0", "t1p0", "t1p1"), "C2": tps("t2p0", "t2p1", "t2p2")}
    assert moved(group, _sticky(group)) == 0


def test_kafka_one_consumer_no_topic_and_nonexistent_topic():
    # AbstractStickyAssignorTest.testOneConsumerNoTopic / testOneConsumerNonexistentTopic
    assert _sticky({"topics": {}, "members": {"c": {"topics": []}}}) == {"c": []}
    assert _sticky({"topics": {"t": 0}, "members": {"c": {"topics": ["t", "gone"]}}}) == {"c": []}


def test_kafka_add_remove_consumer_one_topic():
    # testAddRemoveConsumerOneTopic: 3 partitions, consumer1 alone, then consumer2 joins, then consumer1 leaves.
    alone = _sticky({"topics": {"t": 3}, "members": {"consumer1": {"topics": ["t"]}}})
    assert alone == {"consumer1": tps("tp0", "tp1", "tp2")}
    group = {
        "topics": {"t": 3},
        "members": {
            "consumer1": {"topics": ["t"], "owned": alone["consumer1"], "generation": 1},
            "consumer2": {"topics": ["t"]},
        },
    }
    joined = _sticky(group)
    assert joined == {"consumer1": tps("tp0", "tp1"), "consumer2": tps("tp2")}
    left = _sticky(
        {"topics": {"t": 3}, "members": {"consumer2": {"topics": ["t"], "owned": joined["consumer2"], "generation": 2}}}
    )
    assert left == {"consumer2": tps("tp0", "tp1", "tp2")}


def test_kafka_stickiness_when_owner_has_more_than_max_quota():
    # Owned partitions are kept in (partition, topic) order up to maxQuota; the rest is reassigned.
    owned = {"A": tps("ap0", "ap1", "bp0", "bp1")}
    group = {"topics": {"a": 2, "b": 2}, "members": _members({"A": ["a", "b"], "B": ["a", "b"]}, owned)}
    assert _sticky(group) == {"A": tps("ap0", "bp0"), "B": tps("ap1", "bp1")}


def test_conflicting_claims_higher_generation_wins():
    group = {
        "topics": {"t": 4},
        "members": {
            "a": {"topics": ["t"], "owned": tps("tp0", "tp1"), "generation": 7},
            "b": {"topics": ["t"], "owned": tps("tp0", "tp1", "tp2", "tp3"), "generation": 6},
        },
    }
    result = _sticky(group)
    assert result == {"a": tps("tp0", "tp1"), "b": tps("tp2", "tp3")}


def test_general_path_only_subscribed_and_balanced_with_a_member_without_topics():
    subs = {"A": ["x", "y"], "B": ["y"], "C": []}
    assert _sticky({"topics": {"x": 3, "y": 3}, "members": _members(subs)}) == {
        "A": tps("xp0", "xp1", "xp2"),
        "B": tps("yp0", "yp1", "yp2"),
        "C": [],
    }


def _java_constrained(group: dict) -> dict[str, list[tuple[str, int]]]:
    """ConstrainedAssignmentBuilder.build transcribed (no racks; member id order for Java's HashMap order).

    Expects valid input: one claim per partition, all members of one generation, identical subscriptions.
    """
    members = sorted(group["members"], key=java_key)
    topics = sorted({t for m in members for t in group["members"][m]["topics"] if t in group["topics"]}, key=java_key)
    all_parts = [(t, p) for t in topics for p in range(group["topics"][t])]
    total = len(all_parts)
    min_quota, max_quota = total // len(members), -(-total // len(members))
    expected_over, current_over = total % len(members), 0
    assignment: dict[str, list] = {m: [] for m in members}
    under, exactly, assigned = [], [], set()
    for c in members:
        owned = sorted(
            (tuple(tp) for tp in group["members"][c].get("owned", []) if tp[0] in topics),
            key=lambda tp: (tp[1], java_key(tp[0])),
        )
        if len(owned) < min_quota:
            assignment[c] += owned
            under.append(c)
        elif len(owned) >= max_quota and current_over < expected_over:
            current_over += 1
            if current_over == expected_over:
                exactly.clear()
            assignment[c] += owned[:max_quota]
        else:
            assignment[c] += owned[:min_quota]
            if current_over < expected_over:
                exactly.append(c)
        assigned.update(assignment[c])
    unassigned = [tp for tp in all_parts if tp not in assigned]
    i = 0  # the iterator over `under`, restarted when it runs off the end
    for tp in unassigned:
        if i < len(under):
            c = under[i]
            i += 1
        elif not under:
            c = exactly.pop(0)
        else:
            i = 1
            c = under[0]
        assignment[c].append(tp)
        if len(assignment[c]) == min_quota:
            i -= 1
            under.remove(c)
            exactly.append(c)
    return {m: sorted(ps, key=lambda tp: (java_key(tp[0]), tp[1])) for m, ps in assignment.items()}


@st.composite
def equal_groups(draw: st.DrawFn) -> dict:
    topics = draw(st.dictionaries(st.sampled_from(["a", "b", "c", "d"]), st.integers(0, 12), min_size=1))
    names = draw(st.lists(st.sampled_from([f"m{i}" for i in range(9)]), min_size=1, unique=True))
    parts = [(t, p) for t, n in topics.items() for p in range(n)]
    owner = draw(st.lists(st.one_of(st.none(), st.sampled_from(names)), min_size=len(parts), max_size=len(parts)))
    members = {
        m: {
            "topics": list(topics),
            "generation": 3,
            "owned": [list(tp) for tp, o in zip(parts, owner, strict=True) if o == m],
        }
        for m in names
    }
    return {"topics": topics, "members": members}


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(equal_groups())
def test_constrained_path_matches_the_java_transcription(group: dict):
    assert _sticky(group) == _java_constrained(group)


@st.composite
def random_groups(draw: st.DrawFn) -> dict:
    topics = draw(st.dictionaries(st.sampled_from(["a", "b", "c", "d", "e"]), st.integers(0, 10), min_size=1))
    names = draw(st.lists(st.sampled_from([f"m{i}" for i in range(10)]), min_size=1, unique=True))
    pool = [*topics, "gone"]
    parts = [(t, p) for t, n in topics.items() for p in range(n)] + [("gone", 0)]
    return {
        "topics": topics,
        "members": {
            m: {
                "topics": draw(st.lists(st.sampled_from(pool), unique=True)),
                "owned": draw(st.lists(st.sampled_from(parts), unique=True, max_size=8)),
                "generation": draw(st.one_of(st.none(), st.integers(1, 3))),
            }
            for m in names
        },
    }


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(random_groups())
def test_balanced_and_stable_on_random_groups(group: dict):
    first = _sticky(group)  # checks: exactly once, only subscribed, balanced
    # Stability: rejoining with what was handed out moves nothing.
    again = {
        "topics": group["topics"],
        "members": {m: {**spec, "owned": first[m], "generation": 9} for m, spec in group["members"].items()},
    }
    assert _sticky(again) == first
