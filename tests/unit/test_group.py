"""GroupSpec parsing: dense ids, Kafka's reading of previous ownership, snapshot conversion, bad input."""

from __future__ import annotations

import numpy as np
import pytest

from planner import assign
from planner.group import from_snapshot, parse_group, previous_owners

SNAPSHOT = {
    "group_id": "payments",
    "captured_at": "2026-11-21T02:00:00Z",
    "state": "Stable",
    "protocol": "cooperative-sticky",
    "generation": 41,
    "topics": {"orders": 4, "refunds": 2},
    "members": [
        {
            "member_id": "c-1-9f0e",
            "client_id": "c-1",
            "host": "/10.0.0.7",
            "group_instance_id": None,
            "rack": "az1",
            "strategies": ["cooperative-sticky", "range"],
            "topics": ["orders", "refunds"],
            "owned": [["orders", 0], ["orders", 1]],
            "assignment": [["orders", 0], ["orders", 1], ["orders", 2]],
        },
        {
            "member_id": "c-2-0a1b",
            "client_id": "c-2",
            "host": "/10.0.0.8",
            "group_instance_id": "i2",
            "rack": None,
            "strategies": ["range"],
            "topics": ["orders"],
            "owned": [],
            "assignment": [["orders", 3]],
        },
    ],
    "offsets": [{"topic": "orders", "partition": 0, "committed": 1200, "end": 1450}],
}


def test_from_snapshot_builds_the_compact_form():
    assert from_snapshot(SNAPSHOT) == {
        "topics": {"orders": 4, "refunds": 2},
        "members": {
            "c-1-9f0e": {
                "topics": ["orders", "refunds"],
                "owned": [["orders", 0], ["orders", 1]],
                "generation": 41,
                "group_instance_id": None,
                "rack": "az1",
            },
            "c-2-0a1b": {
                "topics": ["orders"],
                "owned": [["orders", 3]],
                "generation": 41,
                "group_instance_id": "i2",
                "rack": None,
            },
        },
    }


def test_assign_accepts_a_snapshot_document():
    assert assign("range", SNAPSHOT).assignment == assign("range", from_snapshot(SNAPSHOT)).assignment


def test_dense_ids_follow_topic_and_partition_order():
    members = {"y": {"topics": ["b"]}, "x": {"topics": ["a", "b"]}}
    g = parse_group({"topics": {"b": 2, "a": 3}, "members": members})
    assert g.topics == ("a", "b") and g.members == ("x", "y")
    assert g.topic_start.tolist() == [0, 3, 5]
    assert g.topic_of(np.arange(5)).tolist() == [0, 0, 0, 1, 1]
    assert [s.tolist() for s in g.subscriptions] == [[0, 1], [1]]


def test_previous_owner_highest_generation_wins_and_same_generation_conflicts_are_dropped():
    g = parse_group(
        {
            "topics": {"t": 4},
            "members": {
                "old": {"topics": ["t"], "owned": [["t", 0], ["t", 3]], "generation": 4},
                "a": {"topics": ["t"], "owned": [["t", 0], ["t", 1]], "generation": 5},
                "b": {"topics": ["t"], "owned": [["t", 1], ["t", 2], ["gone", 0], ["t", 9]], "generation": 5},
                "new": {"topics": ["t"]},
            },
        }
    )
    owner, multiple = previous_owners(g)
    a, b, old = g.members.index("a"), g.members.index("b"), g.members.index("old")
    # t0: gen 5 beats gen 4; t1: claimed twice in gen 5 -> nobody; t3: uncontested, so the old claim stands.
    assert owner.tolist() == [a, -1, b, old]
    assert multiple.tolist() == [False, True, False, False]


def test_members_without_generation_count_when_nobody_sent_one():
    g = parse_group({"topics": {"t": 2}, "members": {"a": {"topics": ["t"], "owned": [["t", 1]]}}})
    assert previous_owners(g)[0].tolist() == [-1, 0]


@pytest.mark.parametrize(
    "doc, message",
    [
        ({"members": {}}, "group.topics"),
        ({"topics": {"t": -1}}, "partition counts"),
        ({"topics": {"t": "3"}}, "must be an integer"),
        ({"topics": {"t": 1}, "members": {"m": {}}}, r"members\['m'\]\.topics"),
        ({"topics": {"t": 1}, "members": {"m": {"topics": ["t"], "owned": [["t"]]}}}, "pairs"),
        ({"topics": {"t": 1}, "members": {"m": {"topics": ["t"], "generation": "x"}}}, "generation"),
    ],
)
def test_bad_input_is_rejected_with_a_clear_message(doc: dict, message: str):
    with pytest.raises(ValueError, match=message):
        parse_group(doc)
