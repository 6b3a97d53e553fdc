"""planner.invariants: each check catches what it names, and every built-in strategy passes them on random
groups, random member churn and random previous ownership, whatever PYTHONHASHSEED or key order."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from planner import assign
from planner.invariants import (
    assigned_exactly_once,
    at_most_once,
    balanced,
    check_plan,
    cooperative,
    moved,
    only_subscribed,
)

GROUP = {
    "topics": {"a": 2, "b": 2},
    "members": {
        "X": {"topics": ["a"], "owned": [["a", 0]], "generation": 1},
        "Y": {"topics": ["a", "b"], "owned": [["b", 0]], "generation": 1},
    },
}


def test_each_check_names_its_violation():
    assert assigned_exactly_once(GROUP, {"X": [("a", 0), ("a", 0)], "Y": [("b", 0), ("b", 1)]}) == [
        "a-0 assigned 2 times",
        "a-1 is not assigned",
    ]
    assert at_most_once(GROUP, {"X": [("a", 0)], "Y": [("a", 0)]}) == ["a-0 assigned 2 times"]
    assert only_subscribed(GROUP, {"X": [("b", 1)]}) == ["b-1 assigned to 'X', which does not subscribe to its topic"]
    assert assigned_exactly_once(GROUP, {"Z": [("a", 0)], "X": [("c", 0)]})[:2] == [
        "a-0 assigned to 'Z', not a member of the group",
        "c-0 assigned to 'X' does not exist",
    ]
    assert balanced(GROUP, {"X": [], "Y": [("a", 0), ("a", 1), ("b", 0), ("b", 1)]}) == [
        "unbalanced: 'X' has 0 partitions and could take a partitions from 'Y', which has 4"
    ]
    assert balanced(GROUP, {"X": [("a", 0), ("a", 1)], "Y": [("b", 0), ("b", 1)]}) == []
    assert cooperative(GROUP, {"X": [("b", 0)], "Y": []}) == ["b-0 goes to 'X' while 'Y' still owns it"]
    assert cooperative(GROUP, {"X": [("a", 0), ("a", 1)], "Y": [("b", 0)]}) == []
    assert moved(GROUP, {"X": [("a", 1)], "Y": [("a", 0), ("b", 0), ("b", 1)]}) == 1


def test_checks_accept_owner_arrays():
    assert check_plan(GROUP, np.array([0, 0, 1, 1]), balance=True) == []
    assert assigned_exactly_once(GROUP, np.array([0, -1, 1, 1])) == ["a-1 is not assigned"]


@st.composite
def groups(draw: st.DrawFn) -> dict:
    """Random topics, members (some static), subscriptions, generations and previous ownership."""
    topics = draw(st.dictionaries(st.sampled_from(["a", "b", "c", "d", "e"]), st.integers(0, 12), min_size=1))
    names = draw(st.lists(st.sampled_from([f"m{i}" for i in range(12)]), min_size=1, max_size=10, unique=True))
    parts = [(t, p) for t, n in topics.items() for p in range(n)] + [("gone", 1)]
    pool = [*sorted(topics), "gone"]
    return {
        "topics": topics,
        "members": {
            m: {
                "topics": draw(st.lists(st.sampled_from(pool), unique=True)),
                "owned": draw(st.lists(st.sampled_from(parts), max_size=10)),
                "generation": draw(st.one_of(st.none(), st.integers(1, 4))),
                "group_instance_id": draw(st.one_of(st.none(), st.sampled_from(["i0", "i1", "i2"]))),
            }
            for m in names
        },
    }


@pytest.mark.slow
@pytest.mark.parametrize("strategy", ["range", "roundrobin", "sticky", "cooperative-sticky"])
@settings(max_examples=150, deadline=None)
@given(group=groups())
def test_every_strategy_keeps_the_invariants(strategy: str, group: dict):
    r = assign(strategy, group)
    cooperative_target = r.target if strategy == "cooperative-sticky" else None
    assert check_plan(group, r.assignment, balance="sticky" in strategy, target=cooperative_target) == []
    assert r.target == r.assignment or strategy == "cooperative-sticky"
    shuffled = {"topics": dict(reversed(group["topics"].items())), "members": dict(reversed(group["members"].items()))}
    again = assign(strategy, shuffled)
    assert (again.assignment, again.target, again.revoked) == (r.assignment, r.target, r.revoked)


@pytest.mark.slow
@settings(max_examples=100, deadline=None)
@given(group=groups(), data=st.data())
def test_sticky_members_leaving_only_lose_what_balance_needs(group: dict, data: st.DataObject):
    """Churn: after a stable round, members leave; each survivor with at most the fair share keeps all."""
    first = assign("sticky", group).assignment
    names = sorted(group["members"])
    stay = data.draw(st.lists(st.sampled_from(names), min_size=1, unique=True))
    survivors = {
        "topics": group["topics"],
        "members": {m: {"topics": group["members"][m]["topics"], "owned": first[m], "generation": 5} for m in stay},
    }
    after = assign("sticky", survivors).assignment
    assert check_plan(survivors, after, balance=True) == []
    if all(
        np.array_equal(sorted(group["members"][m]["topics"]), sorted(group["members"][stay[0]]["topics"])) for m in stay
    ):
        total = sum(len(ps) for ps in after.values())
        for m in stay:  # identical subscriptions: nobody at or under the floor quota loses a partition
            if len(first[m]) <= total // len(stay):
                assert set(first[m]) <= set(after[m])


def test_same_answer_under_any_pythonhashseed(tmp_path: Path):
    script = (
        "import json; from planner import assign; "
        "g = {'topics': {'t%d' % i: 7 for i in range(6)}, 'members': {"
        "'m%d' % i: {'topics': ['t%d' % j for j in range(6) if (i + j) % 3]} for i in range(9)}}; "
        "print(json.dumps({s: assign(s, g).to_json()['assignment'] "
        "for s in ('range', 'roundrobin', 'sticky', 'cooperative-sticky')}, sort_keys=True))"
    )
    outputs = {
        subprocess.run(
            [sys.executable, "-c", script],
            capture_output=True,
            text=True,
            check=True,
            env={**os.environ, "PYTHONHASHSEED": seed},
        ).stdout
        for seed in ("0", "1", "4242")
    }
    assert len(outputs) == 1
