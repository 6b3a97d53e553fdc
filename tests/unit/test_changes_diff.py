"""Triggers between two snapshots of a group, and a candidate's per-member diff against today."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from planner.changes import group_changes
from planner.plan_diff import member_diffs

BEFORE = {
    "protocol": "range",
    "topics": {"orders": 4, "audit": 1},
    "members": [{"member_id": "a", "topics": ["orders"]}, {"member_id": "b", "topics": ["orders", "audit"]}],
}


def test_the_first_snapshot_has_no_changes():
    assert group_changes(None, BEFORE) == {"first": True, "changed": False}


def test_the_same_snapshot_twice_changed_nothing():
    assert group_changes(BEFORE, BEFORE) == {
        "first": False,
        "members_joined": [],
        "members_left": [],
        "subscriptions": {},
        "partition_counts": {},
        "changed": False,
    }


def test_joins_leaves_subscriptions_partition_counts_and_protocol_are_named():
    after = {
        "group_type": "consumer",
        "topics": {"orders": 8, "refunds": 2},
        "members": [{"member_id": "b", "topics": ["orders", "refunds"]}, {"member_id": "c", "topics": ["orders"]}],
    }
    assert group_changes(BEFORE, after) == {
        "first": False,
        "members_joined": ["c"],
        "members_left": ["a"],
        "subscriptions": {"b": {"added": ["refunds"], "removed": ["audit"]}},
        "partition_counts": {"audit": [1, None], "orders": [4, 8], "refunds": [None, 2]},
        "protocol": ["range", None],
        "group_type": ["classic", "consumer"],
        "changed": True,
    }


_owner = st.sampled_from(["m0", "m1", "m2"])
_assignment = st.dictionaries(st.tuples(st.sampled_from(["t", "u"]), st.integers(0, 5)), _owner, max_size=12)


@given(today=_assignment, candidate=_assignment)
def test_gains_and_losses_turn_today_into_the_candidate(today, candidate):
    diffs = member_diffs(today, candidate, ["idle"])
    assert [d.member for d in diffs] == sorted(set(today.values()) | set(candidate.values()) | {"idle"})
    owners = dict(today)
    for d in diffs:
        for tp in d.lost:
            assert owners.pop(tp) == d.member
    for d in diffs:
        for tp in d.gained:
            assert tp not in owners
            owners[tp] = d.member
        assert d.after == sum(1 for m in candidate.values() if m == d.member)
        assert d.before == sum(1 for m in today.values() if m == d.member)
    assert owners == candidate
