"""UniformAssignor (KIP-848): Kafka's own unit tests of both builders, the builders transcribed line by line from
the Java as references, and the documented guarantees on random groups.

Upstream: apache/kafka group-coordinator, org.apache.kafka.coordinator.group.assignor, as of the Kafka 4.0 line
(OptimizedUniformAssignmentBuilderTest is the test class of UniformHomogeneousAssignmentBuilder; Kafka 4.1 renamed
it). Kafka's inputs use topic Uuids, which fix the order topics are walked in: the ports pass the same ids.
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from planner import assign
from planner.assignment import by_member
from planner.assignors._topic_order import hash_set_order, uuid_rank
from planner.assignors.uniform import UniformAssignor, is_homogeneous
from planner.assignors.uniform_heterogeneous import heterogeneous_assign
from planner.assignors.uniform_homogeneous import homogeneous_assign
from planner.errors import InputError
from planner.group import GroupSpec, parse_group, previous_owners
from planner.invariants import check_plan, moved

# The topic ids of Kafka's tests (Uuid.fromString of these strings).
TOPIC_IDS = {
    "topic1": "T1-A4s3VTwiI5CTbEp6POw",
    "topic2": "T2-B4s3VTwiI5YHbPp6YUe",
    "topic3": "T3-CU8fVTLCz5YMkLoDQsa",
    "topic4": "T4-Tw9fVTLCz5HbPp6YQsa",
}


def kafka_group(topics: dict[str, int], members: dict[str, tuple[list[str], dict[str, list[int]]]]) -> dict:
    """The compact form of a Kafka test's metadata and members: member -> (subscribed topics, target)."""
    return {
        "topics": topics,
        "topic_ids": {t: TOPIC_IDS[t] for t in topics},
        "members": {
            m: {"topics": subs, "owned": [[t, p] for t, ps in target.items() for p in ps]}
            for m, (subs, target) in members.items()
        },
    }


def run(builder, doc: dict) -> dict[str, dict[str, set[int]]]:
    """A builder's answer as Kafka's tests compare it: member -> {topic: partitions}, empty topics left out."""
    spec = parse_group(doc)
    owner = builder(spec, previous_owners(spec)[0]) if spec.members else np.full(spec.num_partitions, -1)
    assert check_plan(spec, owner) == []
    parts = np.flatnonzero(owner >= 0)
    result: dict[str, dict[str, set[int]]] = {}
    for m, pairs in by_member(spec, parts, owner[parts]).items():
        topics: dict[str, set[int]] = defaultdict(set)
        for t, p in pairs:
            topics[t].add(p)
        result[m] = dict(topics)
    return result


def homogeneous(doc: dict) -> dict[str, dict[str, set[int]]]:
    """The homogeneous builder, and UniformAssignor agreeing with it (the subscriptions are identical)."""
    assert is_homogeneous(parse_group(doc))
    result = run(homogeneous_assign, doc)
    assert run(lambda g, _: UniformAssignor().assign(g), doc) == result
    return result


def heterogeneous(doc: dict) -> dict[str, dict[str, set[int]]]:
    """The heterogeneous builder, which Kafka's tests call directly (their GroupSpec says HETEROGENEOUS)."""
    return run(heterogeneous_assign, doc)


NONE: dict[str, list[int]] = {}


# --- UniformHomogeneousAssignmentBuilder: Kafka's OptimizedUniformAssignmentBuilderTest ------------------------


def test_homogeneous_one_member_no_topic_subscription():
    """Kafka: OptimizedUniformAssignmentBuilderTest.testOneMemberNoTopicSubscription"""
    assert homogeneous(kafka_group({"topic1": 3}, {"A": ([], NONE)})) == {"A": {}}


def test_homogeneous_one_member_subscribed_to_nonexistent_topic():
    """Kafka: OptimizedUniformAssignmentBuilderTest.testOneMemberSubscribedToNonexistentTopic

    Kafka's builder throws for a topic id missing from the metadata; the coordinator never passes one, since it
    resolves subscribed names to ids of existing topics (TopicIds). A group lists names, so the name of a missing
    topic is dropped as the coordinator drops it, and the member gets nothing.
    """
    assert homogeneous(kafka_group({"topic1": 3}, {"A": (["topic2"], NONE)})) == {"A": {}}


def test_homogeneous_first_assignment_two_members_two_topics_no_member_racks():
    """Kafka: OptimizedUniformAssignmentBuilderTest.testFirstAssignmentTwoMembersTwoTopicsNoMemberRacks"""
    both = ["topic1", "topic3"]
    doc = kafka_group({"topic1": 3, "topic3": 2}, {"A": (both, NONE), "B": (both, NONE)})
    # The HashSet of the two Uuids iterates topic3 (bucket 9) before topic1 (bucket 10).
    assert homogeneous(doc) == {"A": {"topic1": {0}, "topic3": {0, 1}}, "B": {"topic1": {1, 2}}}


def test_homogeneous_first_assignment_num_members_greater_than_total_num_partitions():
    """Kafka: OptimizedUniformAssignmentBuilderTest.testFirstAssignmentNumMembersGreaterThanTotalNumPartitions"""
    doc = kafka_group({"topic3": 2}, {m: (["topic3"], NONE) for m in "ABC"})
    assert homogeneous(doc) == {"A": {"topic3": {0}}, "B": {"topic3": {1}}, "C": {}}


def test_homogeneous_validity_and_balance_for_large_sample_set():
    """Kafka: OptimizedUniformAssignmentBuilderTest.testValidityAndBalanceForLargeSampleSet (random Uuids there:
    topic-name order here; checkValidityAndBalance is check_plan with the balance rule)."""
    topics = {f"topic-{i}": 3 for i in range(1, 100)}
    doc = {"topics": topics, "members": {f"member{i}": {"topics": list(topics)} for i in range(1, 50)}}
    spec = parse_group(doc)
    owner = UniformAssignor().assign(spec)
    assert check_plan(spec, owner, balance=True) == []
    counts = np.bincount(owner, minlength=len(spec.members))
    assert counts.max() - counts.min() <= 1


def test_homogeneous_reassignment_given_unbalanced_prev_assignment():
    """Kafka: OptimizedUniformAssignmentBuilderTest.testReassignmentForTwoMembersTwoTopicsGivenUnbalancedPrevAssignment"""  # noqa: E501
    both = ["topic1", "topic2"]
    doc = kafka_group(
        {"topic1": 3, "topic2": 3},
        {"A": (both, {"topic1": [0, 1], "topic2": [0, 1]}), "B": (both, {"topic1": [2], "topic2": [2]})},
    )
    assert homogeneous(doc) == {"A": {"topic1": {0, 1}, "topic2": {0}}, "B": {"topic1": {2}, "topic2": {1, 2}}}


def test_homogeneous_reassignment_when_partitions_are_added():
    """Kafka: OptimizedUniformAssignmentBuilderTest.testReassignmentWhenPartitionsAreAddedForTwoMembersTwoTopics"""
    both = ["topic1", "topic2"]
    doc = kafka_group(
        {"topic1": 6, "topic2": 5},
        {"A": (both, {"topic1": [0, 2], "topic2": [0]}), "B": (both, {"topic1": [1], "topic2": [1, 2]})},
    )
    assert homogeneous(doc) == {
        "A": {"topic1": {0, 2, 3}, "topic2": {0, 3, 4}},
        "B": {"topic1": {1, 4, 5}, "topic2": {1, 2}},
    }


def test_homogeneous_reassignment_when_one_member_added():
    """Kafka: OptimizedUniformAssignmentBuilderTest.testReassignmentWhenOneMemberAddedAfterInitialAssignmentWithTwoMembersTwoTopics"""  # noqa: E501
    both = ["topic1", "topic2"]
    doc = kafka_group(
        {"topic1": 3, "topic2": 3},
        {
            "A": (both, {"topic1": [0, 2], "topic2": [0]}),
            "B": (both, {"topic1": [1], "topic2": [1, 2]}),
            "C": (both, NONE),
        },
    )
    assert homogeneous(doc) == {
        "A": {"topic1": {0, 2}},
        "B": {"topic1": {1}, "topic2": {1}},
        "C": {"topic2": {0, 2}},
    }


def test_homogeneous_reassignment_when_one_member_removed():
    """Kafka: OptimizedUniformAssignmentBuilderTest.testReassignmentWhenOneMemberRemovedAfterInitialAssignmentWithThreeMembersTwoTopics"""  # noqa: E501
    both = ["topic1", "topic2"]
    doc = kafka_group(
        {"topic1": 3, "topic2": 3},
        {"A": (both, {"topic1": [0], "topic2": [0]}), "B": (both, {"topic1": [1], "topic2": [1]})},
    )
    assert homogeneous(doc) == {"A": {"topic1": {0}, "topic2": {0, 2}}, "B": {"topic1": {1, 2}, "topic2": {1}}}


def test_homogeneous_reassignment_when_one_subscription_removed():
    """Kafka: OptimizedUniformAssignmentBuilderTest.testReassignmentWhenOneSubscriptionRemovedAfterInitialAssignmentWithTwoMembersTwoTopics"""  # noqa: E501
    doc = kafka_group(
        {"topic1": 2, "topic2": 2},
        {"A": (["topic2"], {"topic1": [0], "topic2": [0]}), "B": (["topic2"], {"topic1": [1], "topic2": [1]})},
    )
    assert homogeneous(doc) == {"A": {"topic2": {0}}, "B": {"topic2": {1}}}


# --- UniformHeterogeneousAssignmentBuilder: Kafka's UniformHeterogeneousAssignmentBuilderTest -----------------


def test_heterogeneous_two_members_no_topic_subscription():
    """Kafka: UniformHeterogeneousAssignmentBuilderTest.testTwoMembersNoTopicSubscription"""
    assert heterogeneous(kafka_group({"topic1": 3}, {"A": ([], NONE), "B": ([], NONE)})) == {"A": {}, "B": {}}


def test_heterogeneous_two_members_subscribed_to_nonexistent_topics():
    """Kafka: UniformHeterogeneousAssignmentBuilderTest.testTwoMembersSubscribedToNonexistentTopics

    Kafka's builder throws for topic ids missing from the metadata, which the coordinator never passes (see
    test_homogeneous_one_member_subscribed_to_nonexistent_topic): the missing names are dropped, nothing assigned.
    """
    doc = kafka_group({"topic1": 3}, {"A": (["topic3"], NONE), "B": (["topic2"], NONE)})
    assert heterogeneous(doc) == {"A": {}, "B": {}}
    assert run(lambda g, _: UniformAssignor().assign(g), doc) == {"A": {}, "B": {}}


def test_heterogeneous_first_assignment_two_members_two_topics():
    """Kafka: UniformHeterogeneousAssignmentBuilderTest.testFirstAssignmentTwoMembersTwoTopics"""
    doc = kafka_group({"topic1": 3, "topic3": 6}, {"A": (["topic1", "topic3"], NONE), "B": (["topic3"], NONE)})
    assert heterogeneous(doc) == {"A": {"topic1": {0, 1, 2}, "topic3": {4}}, "B": {"topic3": {0, 1, 2, 3, 5}}}


def test_heterogeneous_first_assignment_num_members_greater_than_total_num_partitions():
    """Kafka: UniformHeterogeneousAssignmentBuilderTest.testFirstAssignmentNumMembersGreaterThanTotalNumPartitions"""
    doc = kafka_group(
        {"topic3": 1, "topic1": 2}, {"A": (["topic3"], NONE), "B": (["topic3"], NONE), "C": (["topic1"], NONE)}
    )
    assert heterogeneous(doc) == {"A": {"topic3": {0}}, "B": {}, "C": {"topic1": {0, 1}}}


def test_heterogeneous_reassignment_given_unbalanced_prev_assignment():
    """Kafka: UniformHeterogeneousAssignmentBuilderTest.testReassignmentForTwoMembersThreeTopicsGivenUnbalancedPrevAssignment"""  # noqa: E501
    doc = kafka_group(
        {"topic1": 6, "topic2": 4, "topic3": 4},
        {
            "A": (["topic1"], {"topic1": [0, 1, 2]}),
            "B": (["topic1", "topic2"], {"topic1": [3], "topic2": [0]}),
            "C": (["topic1", "topic2", "topic3"], {"topic1": [4, 5], "topic2": [1, 2, 3], "topic3": [0, 1, 2, 3]}),
        },
    )
    assert heterogeneous(doc) == {
        "A": {"topic1": {0, 1, 2, 5}},
        "B": {"topic1": {3}, "topic2": {0, 1, 2, 3}},
        "C": {"topic1": {4}, "topic3": {0, 1, 2, 3}},
    }


def test_heterogeneous_reassignment_when_partitions_are_added():
    """Kafka: UniformHeterogeneousAssignmentBuilderTest.testReassignmentWhenPartitionsAreAddedForTwoMembers"""
    doc = kafka_group(
        {"topic1": 6, "topic2": 5, "topic3": 3, "topic4": 3},
        {
            "A": (["topic1", "topic3"], {"topic1": [0, 1, 2, 3], "topic3": [0, 1]}),
            "B": (["topic1", "topic2", "topic3", "topic4"], {"topic2": [0, 1, 2], "topic4": [0, 1, 2]}),
        },
    )
    assert heterogeneous(doc) == {
        "A": {"topic1": {0, 1, 2, 3, 4, 5}, "topic3": {0, 1, 2}},
        "B": {"topic2": {0, 1, 2, 3, 4}, "topic4": {0, 1, 2}},
    }


def test_heterogeneous_reassignment_when_one_member_added_and_partitions_added():
    """Kafka: UniformHeterogeneousAssignmentBuilderTest.testReassignmentWhenOneMemberAddedAndPartitionsAddedTwoMembersTwoTopics"""  # noqa: E501
    doc = kafka_group(
        {"topic1": 6, "topic2": 7},
        {
            "A": (["topic1"], {"topic1": [0, 2], "topic2": [0]}),
            "B": (["topic1", "topic2"], {"topic1": [1], "topic2": [1, 2]}),
            "C": (["topic1", "topic2"], NONE),
        },
    )
    assert heterogeneous(doc) == {
        "A": {"topic1": {0, 2, 3, 4, 5}},
        "B": {"topic1": {1}, "topic2": {1, 2, 6}},
        "C": {"topic2": {0, 3, 4, 5}},
    }


def test_heterogeneous_reassignment_when_one_member_removed():
    """Kafka: UniformHeterogeneousAssignmentBuilderTest.testReassignmentWhenOneMemberRemovedAfterInitialAssignmentWithThreeMembersThreeTopics"""  # noqa: E501
    doc = kafka_group(
        {"topic1": 3, "topic2": 8, "topic3": 3},
        {
            "A": (["topic1", "topic3"], {"topic1": [0, 1, 2], "topic3": [0, 1]}),
            "B": (["topic2"], {"topic2": [3, 4, 5, 6]}),
        },
    )
    assert heterogeneous(doc) == {
        "A": {"topic1": {0, 1, 2}, "topic3": {0, 1, 2}},
        "B": {"topic2": {0, 1, 2, 3, 4, 5, 6, 7}},
    }


def test_heterogeneous_reassignment_when_one_subscription_removed():
    """Kafka: UniformHeterogeneousAssignmentBuilderTest.testReassignmentWhenOneSubscriptionRemovedAfterInitialAssignmentWithTwoMembersTwoTopics"""  # noqa: E501
    doc = kafka_group(
        {"topic1": 3, "topic2": 5},
        {
            "A": (["topic1"], {"topic1": [0, 2], "topic2": [1, 3]}),
            "B": (["topic1", "topic2"], {"topic1": [1], "topic2": [0, 2, 4]}),
        },
    )
    assert heterogeneous(doc) == {"A": {"topic1": {0, 1, 2}}, "B": {"topic2": {0, 1, 2, 3, 4}}}


def test_heterogeneous_reassignment_when_topic_partitions_run_out():
    """Kafka: UniformHeterogeneousAssignmentBuilderTest.testReassignmentWhenTopicPartitionsRunOutAndMembersHaveNoPartitions"""  # noqa: E501
    three = ["topic1", "topic2", "topic3"]
    doc = kafka_group(
        {"topic1": 2, "topic2": 2, "topic3": 2},
        {"A": (three, {"topic1": [0, 1], "topic2": [0, 1], "topic3": [0, 1]}), "B": (three, NONE)},
    )
    assert heterogeneous(doc) == {"A": {"topic2": {0}, "topic3": {0, 1}}, "B": {"topic1": {0, 1}, "topic2": {1}}}


def test_heterogeneous_first_assignment_with_one_member_without_subscriptions():
    """Kafka: UniformHeterogeneousAssignmentBuilderTest.testFirstAssignmentWithTwoMembersIncludingOneWithoutSubscriptions"""  # noqa: E501
    doc = kafka_group({"topic1": 3}, {"A": (["topic1"], NONE), "B": ([], NONE)})
    assert heterogeneous(doc) == {"A": {"topic1": {0, 1, 2}}, "B": {}}
    assert run(lambda g, _: UniformAssignor().assign(g), doc) == {"A": {"topic1": {0, 1, 2}}, "B": {}}


# --- The choice of builder, Java's topic orders, racks, input -------------------------------------------------


def test_subscription_type_counts_names_of_missing_topics_too():
    """ModernGroup.subscriptionType compares subscribed names, existing or not: a missing topic makes a group
    heterogeneous even when the existing topics are the same."""
    same = parse_group({"topics": {"t": 2}, "members": {"a": {"topics": ["t", "x"]}, "b": {"topics": ["x", "t"]}}})
    differ = parse_group({"topics": {"t": 2}, "members": {"a": {"topics": ["t", "x"]}, "b": {"topics": ["t"]}}})
    assert is_homogeneous(same) and not is_homogeneous(differ)


def test_topic_walks_follow_java_hash_set_and_uuid_order():
    """HashSet<Uuid> iterates by bucket (Uuid.hashCode spread, 16 buckets here): topic2 (1), topic3 (9),
    topic1 (10); Uuid.compareTo orders them topic1 < topic2 < topic3 by their most significant bits."""
    doc = kafka_group({"topic1": 1, "topic2": 1, "topic3": 1}, {})
    spec = parse_group(doc)
    assert [spec.topics[t] for t in hash_set_order(spec, np.arange(3), 3)] == ["topic2", "topic3", "topic1"]
    assert uuid_rank(spec).tolist() == [0, 1, 2]
    del doc["topic_ids"]
    assert hash_set_order(parse_group(doc), np.asarray([2, 0, 1]), 3).tolist() == [0, 1, 2]


def test_server_side_assignors_ignore_racks():
    """KAFKA-16694 removed rack awareness from the server-side assignors: member and partition racks change
    nothing (Kafka 4.0's UniformAssignor never reads them)."""
    doc = kafka_group({"topic1": 6, "topic2": 3}, {"A": (["topic1", "topic2"], NONE), "B": (["topic1"], NONE)})
    racked = {**doc, "partition_racks": {"topic1": [["r1"]] * 6, "topic2": [["r2"]] * 3}}
    racked["members"] = {m: {**spec, "rack": "r2"} for m, spec in doc["members"].items()}
    assert assign("uniform", racked).assignment == assign("uniform", doc).assignment


@pytest.mark.parametrize(
    "ids, message",
    [
        ({"t": "T1-A4s3VTwiI5CTbEp6POw", "x": "T1-A4s3VTwiI5CTbEp6POw"}, r"topic_ids\['x'\]: not a topic"),
        ({}, "no id for topic 't'"),
        ({"t": "c2hvcnQ"}, "decodes to 5 bytes"),
        ({"t": "T1-A4s3VTwiI5CTbEp6PO!"}, "not base64url"),
        ({"t": 7}, "base64 topic id"),
    ],
)
def test_bad_topic_ids_are_rejected_naming_the_field(ids: dict, message: str):
    with pytest.raises(InputError, match=message):
        parse_group({"topics": {"t": 1}, "members": {}, "topic_ids": ids})


# --- The builders transcribed from the Java, as references on random groups -----------------------------------


def java_homogeneous(spec: GroupSpec) -> dict[int, int]:
    """UniformHomogeneousAssignmentBuilder.build, line by line over dicts and lists (partition id -> member)."""
    target = previous_owners(spec)[0]
    subscribed = [int(t) for t in spec.subscriptions[0]]
    if not subscribed:
        return {}
    walk = [int(t) for t in hash_set_order(spec, np.asarray(subscribed), len(subscribed) + len(spec.unknown_topics[0]))]
    unassigned, total = [], 0
    for t in walk:
        for p in range(int(spec.topic_start[t]), int(spec.topic_start[t + 1])):
            if target[p] < 0:  # !groupSpec.isPartitionAssigned(topicId, i)
                unassigned.append(p)
        total += int(spec.partition_counts[t])
    minimum, remaining_extra = divmod(total, len(spec.members))
    assignment: dict[int, int] = {}
    unfilled = []
    for m in range(len(spec.members)):
        quota = minimum
        if remaining_extra > 0:
            quota += 1
            remaining_extra -= 1
        by_topic: dict[int, list[int]] = defaultdict(list)
        for p in np.flatnonzero(target == m).tolist():
            by_topic[int(spec.topic_of(np.asarray([p]))[0])].append(p)
        for t, parts in sorted(by_topic.items()):
            if t not in subscribed:
                continue
            if len(parts) <= quota:
                quota -= len(parts)
                assignment.update(dict.fromkeys(parts, m))
            else:
                for p in parts:
                    if quota > 0:
                        quota -= 1
                        assignment[p] = m
                    else:
                        unassigned.append(p)
        if quota > 0:
            unfilled.append((m, quota))
    index = 0
    for m, quota in unfilled:
        for _ in range(quota):
            if index < len(unassigned):
                assignment[unassigned[index]] = m
                index += 1
    assert index == len(unassigned)
    return assignment


class JavaBalancer:
    """UniformHeterogeneousAssignmentBuilder.MemberAssignmentBalancer, line by line."""

    def __init__(self, sizes: list[int]):
        self.sizes = sizes

    def initialize(self, members: list[int]) -> int:
        self.sorted = sorted(members, key=lambda m: (self.sizes[m], m))
        self.least_end, self.least_level, self.least_next = 0, self.sizes[self.sorted[0]] - 1, 0
        n = len(self.sorted)
        self.most_start, self.most_end, self.most_next = n, n, n - 1
        self.most_level = self.sizes[self.sorted[-1]] + 1
        return self.sizes[self.sorted[-1]] - self.sizes[self.sorted[0]]

    def next_least(self) -> int:
        if self.least_next >= self.least_end:
            self.least_level += 1
            while self.least_end < len(self.sorted) and self.sizes[self.sorted[self.least_end]] == self.least_level:
                self.least_end += 1
            self.least_next = 0
        m = self.sorted[self.least_next]
        self.least_next += 1
        return m

    def next_most(self) -> int:
        if self.most_next < self.most_start:
            if self.most_end <= self.most_start and self.most_start > 0:
                self.most_level = self.sizes[self.sorted[self.most_start - 1]]
            else:
                self.most_level -= 1
            while self.most_start > 0 and self.sizes[self.sorted[self.most_start - 1]] == self.most_level:
                self.most_start -= 1
            self.most_next = self.most_end - 1
        if self.most_next < 0:
            return -1
        m = self.sorted[self.most_next]
        self.most_next -= 1
        return m

    def exclude_most(self) -> None:
        s, i, j = self.sorted, self.most_next + 1, self.most_end - 1
        s[i], s[j] = s[j], s[i]
        self.most_end -= 1

    def balanced(self) -> bool:
        return self.most_level - self.least_level <= 1


def java_heterogeneous(spec: GroupSpec) -> dict[int, int]:
    """UniformHeterogeneousAssignmentBuilder.build, line by line (partition id -> member)."""
    target = previous_owners(spec)[0]
    subscribers: dict[int, list[int]] = defaultdict(list)
    for m, subs in enumerate(spec.subscriptions):
        for t in subs.tolist():
            subscribers[t].append(m)
    if not subscribers:
        return {}
    count = {t: int(spec.partition_counts[t]) for t in subscribers}
    rank = uuid_rank(spec)

    def sort_topics(topics) -> list[int]:
        return sorted(topics, key=lambda t: (-(count[t] / len(subscribers[t])), len(subscribers[t]), rank[t]))

    owners = {t: [-1] * count[t] for t in subscribers}
    sizes = [0] * len(spec.members)
    for p, m in enumerate(target.tolist()):  # maybeRevokePartitions
        t = int(spec.topic_of(np.asarray([p]))[0])
        if m >= 0 and t in spec.subscriptions[m]:
            owners[t][p - int(spec.topic_start[t])] = m
            sizes[m] += 1
    balancer = JavaBalancer(sizes)

    def move(t: int, p: int, m: int) -> None:  # assignPartition
        if owners[t][p] >= 0:
            sizes[owners[t][p]] -= 1
        owners[t][p] = m
        sizes[m] += 1

    unassigned = {t: [p for p in range(count[t]) if owners[t][p] < 0] for t in subscribers}
    for t in sort_topics([t for t in subscribers if unassigned[t]]):  # assignRemainingPartitions
        balancer.initialize(subscribers[t])
        for p in unassigned[t]:
            move(t, p, balancer.next_least())

    def balance_topic(t: int) -> int:
        moved = 0
        if balancer.initialize(subscribers[t]) <= 1:
            return 0
        parts = sorted(range(count[t]), key=lambda p: (owners[t][p], p))
        start: dict[int, int] = {}
        end: dict[int, int] = {}
        for i, p in enumerate(parts):
            start.setdefault(owners[t][p], i)
            end[owners[t][p]] = i + 1
        while not balancer.balanced():
            most = -1
            while True:
                most = balancer.next_most()
                if most == -1:
                    break
                if most not in end or end[most] - start[most] <= 0:
                    balancer.exclude_most()
                    continue
                break
            if most == -1:
                break
            p = parts[end[most] - 1]
            end[most] -= 1
            least = balancer.next_least()
            if balancer.balanced():
                break
            move(t, p, least)
            moved += 1
        return moved

    topics = sort_topics([t for t in subscribers if len(subscribers[t]) >= 2])
    last = -1
    for _ in range(16):
        done = False
        for index, t in enumerate(topics):
            if index == last:
                done = True
                break
            if balance_topic(t) > 0 or last == -1:
                last = index
        if done:
            break
    return {int(spec.topic_start[t]) + p: m for t, ps in owners.items() for p, m in enumerate(ps) if m >= 0}


@st.composite
def groups(draw: st.DrawFn, same_subscriptions: bool) -> dict:
    """Random groups with current targets (often lopsided, sometimes stale, overlapping or unsubscribed)."""
    topics = {f"t{i}": draw(st.integers(0, 12)) for i in range(draw(st.integers(1, 5)))}
    pool = ["m0", "m1", "m2", "m3", "m4", "m5", "m6", "m7"]
    names = draw(st.lists(st.sampled_from(pool), min_size=1, max_size=8, unique=True))
    everyone = draw(st.lists(st.sampled_from(sorted(topics)), min_size=1, unique=True))
    partitions = [[t, p] for t, n in topics.items() for p in range(n)] or [["t0", 0]]
    members = {}
    for m in names:
        subs = everyone if same_subscriptions else draw(st.lists(st.sampled_from(sorted(topics)), unique=True))
        owned = draw(st.lists(st.sampled_from(partitions), max_size=draw(st.sampled_from([2, 6, 30]))))
        members[m] = {"topics": subs, "owned": owned, "generation": draw(st.integers(1, 2))}
    return {"topics": topics, "members": members}


def _pairs(owner: np.ndarray) -> dict[int, int]:
    parts = np.flatnonzero(owner >= 0)
    return dict(zip(parts.tolist(), owner[parts].tolist(), strict=True))


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(groups(same_subscriptions=True))
def test_homogeneous_matches_the_java_transcription(doc: dict):
    spec = parse_group(doc)
    assert _pairs(homogeneous_assign(spec, previous_owners(spec)[0])) == java_homogeneous(spec)


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(groups(same_subscriptions=False))
def test_heterogeneous_matches_the_java_transcription(doc: dict):
    spec = parse_group(doc)
    assert _pairs(heterogeneous_assign(spec, previous_owners(spec)[0])) == java_heterogeneous(spec)


# --- The documented guarantees on random groups ----------------------------------------------------------------


def _rejoin(doc: dict, result: dict[str, list[tuple[str, int]]]) -> dict:
    """The group again, each member's target being what the assignor just gave it."""
    members = {m: {**spec, "owned": [list(tp) for tp in result[m]]} for m, spec in doc["members"].items()}
    return {**doc, "members": members}


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(groups(same_subscriptions=True))
def test_homogeneous_is_valid_balanced_and_stable(doc: dict):
    """Each subscribed partition exactly once, to subscribers only; counts differ by at most one; assigning again
    with the same members and that target moves nothing."""
    spec = parse_group(doc)
    first = assign("uniform", doc).assignment
    assert check_plan(spec, first, balance=True) == []
    counts = [len(parts) for parts in first.values()]
    assert max(counts) - min(counts) <= 1
    again = _rejoin(doc, first)
    assert assign("uniform", again).assignment == first
    assert moved(again, first) == 0


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(groups(same_subscriptions=False))
def test_heterogeneous_is_valid_and_stable_once_each_topic_is_balanced(doc: dict):
    """Each subscribed partition exactly once, to subscribers only. When every topic's subscribers hold counts
    within one of each other (what balanceTopic aims at), assigning again with that target moves nothing."""
    spec = parse_group(doc)
    first = assign("uniform", doc).assignment
    assert check_plan(spec, first) == []
    counts = {m: len(parts) for m, parts in first.items()}
    subscribers = defaultdict(list)
    for m, member in doc["members"].items():
        for t in member["topics"]:
            if doc["topics"].get(t):
                subscribers[t].append(counts[m])
    if all(max(c) - min(c) <= 1 for c in subscribers.values()):
        assert assign("uniform", _rejoin(doc, first)).assignment == first


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(groups(same_subscriptions=True))
def test_homogeneous_members_keep_their_target_up_to_their_quota(doc: dict):
    """Stickiness (maybeRevokePartitions): a member releases target partitions only beyond its quota, so it
    keeps min(what it holds of the subscribed topics, total // members) of them at least."""
    spec = parse_group(doc)
    target = previous_owners(spec)[0]
    owner = UniformAssignor().assign(spec)
    subscribed = np.repeat(np.isin(np.arange(len(spec.topics)), spec.subscriptions[0]), spec.partition_counts)
    minimum_quota = int(subscribed.sum()) // len(spec.members)
    for m in range(len(spec.members)):
        held = (target == m) & subscribed
        assert np.count_nonzero(held & (owner == m)) >= min(np.count_nonzero(held), minimum_quota)
