"""The server-side RangeAssignor (KIP-848, "server-range"): Kafka's own RangeAssignorTest of the group coordinator
(org.apache.kafka.coordinator.group.assignor, Kafka 4.0 line), and its documented guarantees on random groups."""

from __future__ import annotations

from collections import defaultdict

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from planner import assign
from planner.group import parse_group
from planner.invariants import check_plan

NONE: dict[str, list[int]] = {}


def kafka_group(topics: dict[str, int], members: dict[str, tuple]) -> dict:
    """member -> (subscribed topics, current target[, instance id]) as in Kafka's tests."""
    doc: dict = {"topics": topics, "members": {}}
    for m, (subs, target, *instance) in members.items():
        owned = [[t, p] for t, ps in target.items() for p in ps]
        doc["members"][m] = {"topics": subs, "owned": owned, "group_instance_id": instance[0] if instance else None}
    return doc


def server_range(doc: dict) -> dict[str, dict[str, set[int]]]:
    """The assignment as Kafka's tests compare it: member -> {topic: partitions}, checked valid first."""
    result = assign("server-range", doc).assignment
    assert check_plan(parse_group(doc), result) == []
    out: dict[str, dict[str, set[int]]] = {}
    for m, pairs in result.items():
        topics: dict[str, set[int]] = defaultdict(set)
        for t, p in pairs:
            topics[t].add(p)
        out[m] = dict(topics)
    return out


def test_one_member_no_topic():
    """Kafka: RangeAssignorTest.testOneMemberNoTopic"""
    assert server_range(kafka_group({"topic1": 3}, {"A": ([], NONE)})) == {"A": {}}


def test_one_member_subscribed_to_non_existent_topic():
    """Kafka: RangeAssignorTest.testOneMemberSubscribedToNonExistentTopic

    Kafka's assignor throws for a topic id missing from the metadata, which the coordinator never passes: it
    resolves subscribed names to existing topics (TopicIds). A missing name is dropped and nothing is assigned.
    """
    assert server_range(kafka_group({"topic1": 3}, {"A": (["topic2"], NONE)})) == {"A": {}}


def test_first_assignment_two_members_two_topics_same_subscriptions():
    """Kafka: RangeAssignorTest.testFirstAssignmentTwoMembersTwoTopicsSameSubscriptions"""
    both = ["topic1", "topic3"]
    doc = kafka_group({"topic1": 3, "topic3": 2}, {"A": (both, NONE), "B": (both, NONE)})
    assert server_range(doc) == {"A": {"topic1": {0, 1}, "topic3": {0}}, "B": {"topic1": {2}, "topic3": {1}}}


def test_first_assignment_three_members_three_topics_different_subscriptions():
    """Kafka: RangeAssignorTest.testFirstAssignmentThreeMembersThreeTopicsDifferentSubscriptions"""
    doc = kafka_group(
        {"topic1": 3, "topic2": 3, "topic3": 2},
        {"A": (["topic1", "topic2"], NONE), "B": (["topic3"], NONE), "C": (["topic2", "topic3"], NONE)},
    )
    assert server_range(doc) == {
        "A": {"topic1": {0, 1, 2}, "topic2": {0, 1}},
        "B": {"topic3": {0}},
        "C": {"topic2": {2}, "topic3": {1}},
    }


def test_first_assignment_num_members_greater_than_num_partitions():
    """Kafka: RangeAssignorTest.testFirstAssignmentNumMembersGreaterThanNumPartitions"""
    both = ["topic1", "topic3"]
    doc = kafka_group({"topic1": 3, "topic3": 2}, {m: (both, NONE) for m in "ABC"})
    assert server_range(doc) == {
        "A": {"topic1": {0}, "topic3": {0}},
        "B": {"topic1": {1}, "topic3": {1}},
        "C": {"topic1": {2}},
    }


def test_static_membership():
    """Kafka: RangeAssignorTest.testStaticMembership"""
    members = {"A": (["topic1"], NONE, "instanceA"), "B": (["topic1"], NONE, "instanceB")}
    initial = server_range(kafka_group({"topic1": 3}, members))
    # Static member A leaves and comes back as memberA1 with the same instance id.
    del members["A"]
    members["memberA1"] = (["topic1"], NONE, "instanceA")
    again = server_range(kafka_group({"topic1": 3}, members))
    assert again["memberA1"] == initial["A"] and again["B"] == initial["B"]


def test_mixed_static_membership():
    """Kafka: RangeAssignorTest.testMixedStaticMembership"""
    members = {"A": (["topic1"], NONE, "instanceA"), "C": (["topic1"], NONE, "instanceC"), "B": (["topic1"], NONE)}
    initial = server_range(kafka_group({"topic1": 5}, members))
    del members["A"]
    members["memberA1"] = (["topic1"], NONE, "instanceA")
    again = server_range(kafka_group({"topic1": 5}, members))
    assert (again["memberA1"], again["B"], again["C"]) == (initial["A"], initial["B"], initial["C"])


def test_reassignment_num_members_greater_than_num_partitions_when_one_member_added():
    """Kafka: RangeAssignorTest.testReassignmentNumMembersGreaterThanNumPartitionsWhenOneMemberAdded"""
    both = ["topic1", "topic2"]
    doc = kafka_group(
        {"topic1": 2, "topic2": 2},
        {
            "A": (both, {"topic1": [0], "topic2": [0]}),
            "B": (both, {"topic1": [1], "topic2": [1]}),
            "C": (both, NONE),
        },
    )
    assert server_range(doc) == {"A": {"topic1": {0}, "topic2": {0}}, "B": {"topic1": {1}, "topic2": {1}}, "C": {}}


def test_reassignment_when_one_partition_added_for_two_members_two_topics():
    """Kafka: RangeAssignorTest.testReassignmentWhenOnePartitionAddedForTwoMembersTwoTopics"""
    both = ["topic1", "topic2"]
    doc = kafka_group(
        {"topic1": 4, "topic2": 4},
        {"A": (both, {"topic1": [0, 1], "topic2": [0, 1]}), "B": (both, {"topic1": [2], "topic2": [2]})},
    )
    assert server_range(doc) == {
        "A": {"topic1": {0, 1}, "topic2": {0, 1}},
        "B": {"topic1": {2, 3}, "topic2": {2, 3}},
    }


def test_reassignment_when_one_member_added_after_initial_assignment():
    """Kafka: RangeAssignorTest.testReassignmentWhenOneMemberAddedAfterInitialAssignmentWithTwoMembersTwoTopics"""  # noqa: E501
    both = ["topic1", "topic2"]
    doc = kafka_group(
        {"topic1": 3, "topic2": 3},
        {
            "A": (both, {"topic1": [0, 1], "topic2": [0, 1]}),
            "B": (both, {"topic1": [2], "topic2": [2]}),
            "C": (both, NONE),
        },
    )
    assert server_range(doc) == {
        "A": {"topic1": {0}, "topic2": {0}},
        "B": {"topic1": {1}, "topic2": {1}},
        "C": {"topic1": {2}, "topic2": {2}},
    }


def test_reassignment_when_one_member_added_and_one_partition_after_initial_assignment():
    """Kafka: RangeAssignorTest.testReassignmentWhenOneMemberAddedAndOnePartitionAfterInitialAssignmentWithTwoMembersTwoTopics"""  # noqa: E501
    both = ["topic1", "topic2"]
    doc = kafka_group(
        {"topic1": 4, "topic2": 3},
        {
            "A": (both, {"topic1": [0, 1], "topic2": [0, 1]}),
            "B": (both, {"topic1": [2], "topic2": [2]}),
            "C": (["topic1"], NONE),
        },
    )
    assert server_range(doc) == {
        "A": {"topic1": {0, 1}, "topic2": {0, 1}},
        "B": {"topic1": {2}, "topic2": {2}},
        "C": {"topic1": {3}},
    }


def test_reassignment_when_one_member_removed_after_initial_assignment():
    """Kafka: RangeAssignorTest.testReassignmentWhenOneMemberRemovedAfterInitialAssignmentWithTwoMembersTwoTopics"""  # noqa: E501
    doc = kafka_group({"topic1": 3, "topic2": 3}, {"B": (["topic1", "topic2"], {"topic1": [2], "topic2": [2]})})
    assert server_range(doc) == {"B": {"topic1": {0, 1, 2}, "topic2": {0, 1, 2}}}


def test_reassignment_when_multiple_subscriptions_removed_after_initial_assignment():
    """Kafka: RangeAssignorTest.testReassignmentWhenMultipleSubscriptionsRemovedAfterInitialAssignmentWithThreeMembersTwoTopics"""  # noqa: E501
    doc = kafka_group(
        {"topic1": 3, "topic2": 3, "topic3": 2},
        {
            "A": (["topic1"], {"topic1": [0, 1, 2], "topic2": [0]}),
            "B": (["topic1", "topic2", "topic3"], {"topic2": [1]}),
            "C": (["topic2"], {"topic2": [2], "topic3": [0, 1]}),
        },
    )
    assert server_range(doc) == {
        "A": {"topic1": {0, 1}},
        "B": {"topic1": {2}, "topic2": {0, 1}, "topic3": {0, 1}},
        "C": {"topic2": {2}},
    }


def test_javadoc_co_partitioning_and_instance_ids():
    """Kafka: the RangeAssignor javadoc: M0, M1 on T1, T2 of 3 partitions get the same partition numbers of both;
    after a rolling bounce (new member ids M3, M2) the ranges follow instance ids I0, I1, not member ids."""
    both = ["T1", "T2"]
    first = server_range(kafka_group({"T1": 3, "T2": 3}, {"M0": (both, NONE), "M1": (both, NONE)}))
    assert first == {"M0": {"T1": {0, 1}, "T2": {0, 1}}, "M1": {"T1": {2}, "T2": {2}}}
    bounced = server_range(kafka_group({"T1": 3, "T2": 3}, {"M3": (both, NONE), "M2": (both, NONE)}))
    assert bounced == {"M2": {"T1": {0, 1}, "T2": {0, 1}}, "M3": {"T1": {2}, "T2": {2}}}  # shuffled
    static = {"M3": (both, NONE, "I0"), "M2": (both, NONE, "I1")}
    assert server_range(kafka_group({"T1": 3, "T2": 3}, static)) == {"M2": first["M1"], "M3": first["M0"]}


# --- The documented guarantees on random groups ----------------------------------------------------------------


@st.composite
def groups(draw: st.DrawFn) -> dict:
    """Random groups: differing subscriptions, some static members, stale targets and racks (all ignored)."""
    topics = {f"t{i}": draw(st.integers(0, 9)) for i in range(draw(st.integers(1, 4)))}
    names = draw(st.lists(st.sampled_from([f"m{i}" for i in range(7)]), min_size=1, max_size=7, unique=True))
    partitions = [[t, p] for t, n in topics.items() for p in range(n)] or [["t0", 0]]
    members = {}
    for m in names:
        members[m] = {
            "topics": draw(st.lists(st.sampled_from([*sorted(topics), "gone"]), unique=True)),
            "owned": draw(st.lists(st.sampled_from(partitions), max_size=6)),
            "group_instance_id": draw(st.sampled_from([None, f"i-{m[::-1]}", f"j{m}"])),
            "rack": draw(st.sampled_from([None, "r0", "r1"])),
        }
    racks = {t: [["r0"] if p % 2 else ["r1"] for p in range(n)] for t, n in topics.items()}
    return {"topics": topics, "members": members, "partition_racks": racks}


def _sort_key(doc: dict, m: str) -> tuple:
    """sortMemberIds: static members first by instance id, then the others by member id (both UTF-16 order)."""
    instance = doc["members"][m]["group_instance_id"]
    return (0, instance, m) if instance is not None else (1, "", m)


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(groups())
def test_contiguous_ranges_in_member_order_sized_as_documented(doc: dict):
    """Each subscribed partition exactly once, to subscribers only; per topic, subscribers sorted as sortMemberIds
    sorts them hold consecutive ranges, in that order, of n // k partitions, the first n % k one more."""
    result = assign("server-range", doc).assignment
    assert check_plan(parse_group(doc), result) == []
    for t, n in doc["topics"].items():
        subs = sorted((m for m, s in doc["members"].items() if t in s["topics"]), key=lambda m: _sort_key(doc, m))
        if not subs:
            continue
        expected, start = [], 0
        for i, _ in enumerate(subs):
            size = n // len(subs) + (1 if i < n % len(subs) else 0)
            expected.append(list(range(start, start + size)))
            start += size
        assert [[p for tp, p in result[m] if tp == t] for m in subs] == expected


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(groups())
def test_ignores_the_current_target_and_racks(doc: dict):
    """KAFKA-16944 made the server RangeAssignor non-sticky and KAFKA-16694 removed racks: neither the members'
    target assignment nor any rack changes the result."""
    bare = {
        "topics": doc["topics"],
        "members": {
            m: {"topics": s["topics"], "group_instance_id": s["group_instance_id"]} for m, s in doc["members"].items()
        },
    }
    assert assign("server-range", doc).assignment == assign("server-range", bare).assignment


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 6), st.integers(1, 4), st.integers(0, 12))
def test_co_partitioned_when_subscriptions_and_partition_counts_match(members: int, topics: int, partitions: int):
    """The class javadoc: with the same subscriptions and equal partition counts, every member gets the same
    partition numbers of every topic (co-partitioning, for joins)."""
    names = [f"t{i}" for i in range(topics)]
    doc = {"topics": dict.fromkeys(names, partitions), "members": {f"m{i}": {"topics": names} for i in range(members)}}
    for parts in assign("server-range", doc).assignment.values():
        numbers = defaultdict(set)
        for t, p in parts:
            numbers[t].add(p)
        assert len({frozenset(numbers[t]) for t in names}) == 1
