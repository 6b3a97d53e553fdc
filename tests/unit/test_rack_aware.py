"""KIP-881 rack-aware client assignors: RangeAssignor and the sticky assignors' constrained (equal subscriptions)
and general (differing subscriptions) builders. Kafka's test cases with racks, Java transcriptions as references on
random groups, the documented guarantees, and the `partition_racks` input of the compact form.

Upstream: apache/kafka clients, RangeAssignorTest, AbstractStickyAssignorTest (run as StickyAssignorTest and
CooperativeStickyAssignorTest) and the helpers of AbstractPartitionAssignorTest (partitionInfos,
verifyRackAssignment), Kafka 4.0 line. Kafka's replica layout is rebuilt here: broker b has rack brokerRacks[b],
partition i of the topic whose layout starts at `next_index` has replicas on brokers (i + j + next_index) % B.
"""

from __future__ import annotations

from collections import Counter, defaultdict

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from planner import assign
from planner.assignment import by_member
from planner.assignors.abstract_sticky import sticky_assign
from planner.assignors.cooperative_sticky import CooperativeStickyAssignor
from planner.assignors.range import RangeAssignor
from planner.errors import InputError
from planner.group import NO_RACK, UNKNOWN_RACK, parse_group
from planner.invariants import check_plan

ALL_RACKS = ["a", "b", "c", "d", "e", "f"]  # AbstractPartitionAssignorTest.ALL_RACKS


def racks(n: int) -> list[str | None]:
    """AbstractPartitionAssignorTest.racks"""
    return [ALL_RACKS[i % len(ALL_RACKS)] for i in range(n)]


def null_racks(n: int) -> list[str | None]:
    """AbstractPartitionAssignorTest.nullRacks"""
    return [None] * n


def replica_racks(n: int, rf: int, broker_racks: list[str | None], next_index: int) -> list[list[str]]:
    """AbstractPartitionAssignorTest.partitionInfos: the racks of each partition's replicas (null racks dropped)."""
    brokers = len(broker_racks)
    return [
        sorted({r for j in range(rf) if (r := broker_racks[(i + j + next_index) % brokers]) is not None})
        for i in range(n)
    ]


def layout(topics: dict[str, int], rf: int, broker_racks: list[str | None]) -> dict[str, list[list[str]]]:
    """AbstractPartitionAssignorTest.partitionsPerTopic: topics laid out one after another (mkMap order)."""
    result, next_index = {}, 0
    for t, n in topics.items():
        result[t] = replica_racks(n, rf, broker_racks, next_index)
        next_index += n
    return result


def range_assign(doc: dict, prefer: bool = False) -> dict[str, list[tuple[str, int]]]:
    spec = parse_group(doc)
    owner = RangeAssignor().assign(spec, prefer_rack_aware_logic=prefer)
    assert check_plan(spec, owner) == []
    parts = np.flatnonzero(owner >= 0)
    return by_member(spec, parts, owner[parts])


def tps(text: str) -> set[tuple[str, int]]:
    """ "t1-0, t1-3" -> {("t1", 0), ("t1", 3)}"""
    return {(tp.rsplit("-", 1)[0], int(tp.rsplit("-", 1)[1])) for tp in text.split(", ") if tp}


def verify_rack_assignment(
    topics: dict[str, int],
    rf: int,
    broker_racks: list[str | None],
    consumer_racks: list[str | None],
    consumer_topics: list[list[str]],
    expected: list[str],
    mismatches: int,
    prefer: bool = False,
) -> None:
    """AbstractPartitionAssignorTest.verifyRackAssignment: consumers consumer0.. with the given racks and
    subscriptions; the expected partitions per consumer and, unless -1, the number assigned off-rack."""
    partition_racks = layout(topics, rf, broker_racks)
    members = {
        f"consumer{i}": {"topics": subs, "rack": rack}
        for i, (subs, rack) in enumerate(zip(consumer_topics, consumer_racks, strict=True))
    }
    result = range_assign({"topics": topics, "members": members, "partition_racks": partition_racks}, prefer)
    assert {m: set(parts) for m, parts in result.items()} == {f"consumer{i}": tps(e) for i, e in enumerate(expected)}
    if mismatches >= 0:
        off_rack = [
            (t, p)
            for i, rack in enumerate(consumer_racks)
            if rack is not None
            for t, p in result[f"consumer{i}"]
            if rack not in partition_racks[t][p]
        ]
        assert len(off_rack) == mismatches, off_rack


def verify_non_rack_aware_assignment(topics: dict[str, int], consumer_topics: list[list[str]], expected: list[str]):
    """RangeAssignorTest.verifyNonRackAwareAssignment: the combinations where racks change nothing."""
    verify_rack_assignment(topics, 3, null_racks(3), racks(3), consumer_topics, expected, -1)
    verify_rack_assignment(topics, 3, racks(3), null_racks(3), consumer_topics, expected, -1)
    verify_rack_assignment(topics, 3, racks(3), racks(3), consumer_topics, expected, 0)
    verify_rack_assignment(topics, 4, racks(4), racks(3), consumer_topics, expected, 0)
    verify_rack_assignment(topics, 3, racks(3), ["d", "e", "f"], consumer_topics, expected, -1)
    verify_rack_assignment(topics, 3, racks(3), [None, "e", "f"], consumer_topics, expected, -1)
    verify_rack_assignment(topics, 3, racks(3), racks(3), consumer_topics, expected, 0, prefer=True)


def test_rack_aware_assignment_with_uniform_subscription():
    """Kafka: RangeAssignorTest.testRackAwareAssignmentWithUniformSubscription"""
    topics = {"t1": 6, "t2": 7, "t3": 2}
    subs = [["t1", "t2", "t3"]] * 3
    verify_non_rack_aware_assignment(
        topics, subs, ["t1-0, t1-1, t2-0, t2-1, t2-2, t3-0", "t1-2, t1-3, t2-3, t2-4, t3-1", "t1-4, t1-5, t2-5, t2-6"]
    )
    verify_rack_assignment(
        topics,
        1,
        racks(3),
        racks(3),
        subs,
        ["t1-0, t1-3, t2-0, t2-3, t2-6", "t1-1, t1-4, t2-1, t2-4, t3-0", "t1-2, t1-5, t2-2, t2-5, t3-1"],
        0,
    )
    verify_rack_assignment(
        topics,
        2,
        racks(3),
        racks(3),
        subs,
        ["t1-0, t1-2, t2-0, t2-2, t2-3, t3-1", "t1-1, t1-3, t2-1, t2-4, t3-0", "t1-4, t1-5, t2-5, t2-6"],
        1,
    )
    # One consumer on a rack with no partitions.
    verify_rack_assignment(
        topics,
        3,
        racks(2),
        racks(3),
        subs,
        ["t1-0, t1-1, t2-0, t2-1, t2-2, t3-0", "t1-2, t1-3, t2-3, t2-4, t3-1", "t1-4, t1-5, t2-5, t2-6"],
        4,
    )


def test_rack_aware_assignment_with_non_equal_subscription():
    """Kafka: RangeAssignorTest.testRackAwareAssignmentWithNonEqualSubscription"""
    topics = {"t1": 6, "t2": 7, "t3": 2}
    subs = [["t1", "t2", "t3"], ["t1", "t2", "t3"], ["t1", "t3"]]
    verify_non_rack_aware_assignment(
        topics, subs, ["t1-0, t1-1, t2-0, t2-1, t2-2, t2-3, t3-0", "t1-2, t1-3, t2-4, t2-5, t2-6, t3-1", "t1-4, t1-5"]
    )
    verify_rack_assignment(
        topics,
        1,
        racks(3),
        racks(3),
        subs,
        ["t1-0, t1-3, t2-0, t2-2, t2-3, t2-6", "t1-1, t1-4, t2-1, t2-4, t2-5, t3-0", "t1-2, t1-5, t3-1"],
        2,
    )
    verify_rack_assignment(
        topics,
        2,
        racks(3),
        racks(3),
        subs,
        ["t1-0, t1-2, t2-0, t2-2, t2-3, t2-5, t3-1", "t1-1, t1-3, t2-1, t2-4, t2-6, t3-0", "t1-4, t1-5"],
        0,
    )
    verify_rack_assignment(
        topics,
        3,
        racks(2),
        racks(3),
        subs,
        ["t1-0, t1-1, t2-0, t2-1, t2-2, t2-3, t3-0", "t1-2, t1-3, t2-4, t2-5, t2-6, t3-1", "t1-4, t1-5"],
        2,
    )


def test_rack_aware_assignment_with_uniform_partitions():
    """Kafka: RangeAssignorTest.testRackAwareAssignmentWithUniformPartitions (co-partitioning before racks)"""
    topics = {"t1": 5, "t2": 5, "t3": 5}
    subs = [["t1", "t2", "t3"]] * 3
    plain = ["t1-0, t1-1, t2-0, t2-1, t3-0, t3-1", "t1-2, t1-3, t2-2, t2-3, t3-2, t3-3", "t1-4, t2-4, t3-4"]
    verify_non_rack_aware_assignment(topics, subs, plain)
    verify_rack_assignment(topics, 1, racks(3), racks(3), subs, plain, 10)
    verify_rack_assignment(topics, 2, racks(3), racks(3), subs, plain, 5)
    verify_rack_assignment(topics, 3, racks(2), racks(3), subs, plain, 3)


def test_rack_aware_assignment_with_uniform_partitions_non_equal_subscription():
    """Kafka: RangeAssignorTest.testRackAwareAssignmentWithUniformPartitionsNonEqualSubscription"""
    topics = {"t1": 5, "t2": 5, "t3": 5}
    subs = [["t1", "t2", "t3"], ["t1", "t2", "t3"], ["t1", "t3"]]
    verify_non_rack_aware_assignment(
        topics, subs, ["t1-0, t1-1, t2-0, t2-1, t2-2, t3-0, t3-1", "t1-2, t1-3, t2-3, t2-4, t3-2, t3-3", "t1-4, t3-4"]
    )
    verify_rack_assignment(
        topics,
        1,
        racks(3),
        racks(3),
        subs,
        ["t1-0, t1-1, t2-0, t2-1, t2-4, t3-0, t3-1", "t1-2, t1-3, t2-2, t2-3, t3-2, t3-3", "t1-4, t3-4"],
        9,
    )
    verify_rack_assignment(
        topics,
        2,
        racks(3),
        racks(3),
        subs,
        ["t1-2, t2-0, t2-1, t2-3, t3-2", "t1-0, t1-3, t2-2, t2-4, t3-0, t3-3", "t1-1, t1-4, t3-1, t3-4"],
        0,
    )
    verify_rack_assignment(
        topics,
        3,
        racks(2),
        racks(3),
        subs,
        ["t1-0, t1-1, t2-0, t2-1, t2-2, t3-0, t3-1", "t1-2, t1-3, t2-3, t2-4, t3-2, t3-3", "t1-4, t3-4"],
        2,
    )


def test_rack_aware_assignment_with_co_partitioning():
    """Kafka: RangeAssignorTest.testRackAwareAssignmentWithCoPartitioning"""
    topics = {"t1": 6, "t2": 6, "t3": 2, "t4": 2}
    subs = [["t1", "t2"], ["t1", "t2"], ["t3", "t4"], ["t3", "t4"]]
    consumer_racks = ["a", "b", "b", "a"]
    plain = ["t1-0, t1-1, t1-2, t2-0, t2-1, t2-2", "t1-3, t1-4, t1-5, t2-3, t2-4, t2-5", "t3-0, t4-0", "t3-1, t4-1"]
    verify_rack_assignment(topics, 3, racks(2), consumer_racks, subs, plain, -1)
    verify_rack_assignment(topics, 2, racks(2), consumer_racks, subs, plain, 0)
    verify_rack_assignment(
        topics,
        1,
        racks(2),
        consumer_racks,
        subs,
        ["t1-0, t1-2, t1-4, t2-0, t2-2, t2-4", "t1-1, t1-3, t1-5, t2-1, t2-3, t2-5", "t3-1, t4-1", "t3-0, t4-0"],
        0,
    )
    subs = [["t1", "t2", "t3", "t4"]] * 4
    plain = ["t1-0, t1-1, t2-0, t2-1, t3-0, t4-0", "t1-2, t1-3, t2-2, t2-3, t3-1, t4-1", "t1-4, t2-4", "t1-5, t2-5"]
    verify_rack_assignment(topics, 3, racks(2), consumer_racks, subs, plain, -1)
    verify_rack_assignment(topics, 2, racks(2), consumer_racks, subs, plain, 0)
    verify_rack_assignment(
        topics,
        1,
        racks(2),
        consumer_racks,
        subs,
        ["t1-0, t1-2, t2-0, t2-2, t3-0, t4-0", "t1-1, t1-3, t2-1, t2-3, t3-1, t4-1", "t1-5, t2-5", "t1-4, t2-4"],
        0,
    )
    verify_rack_assignment(
        topics,
        1,
        racks(3),
        consumer_racks,
        subs,
        ["t1-0, t1-3, t2-0, t2-3, t3-0, t4-0", "t1-1, t1-4, t2-1, t2-4, t3-1, t4-1", "t1-2, t2-2", "t1-5, t2-5"],
        6,
    )


def test_co_partitioned_assignment_with_same_subscription():
    """Kafka: RangeAssignorTest.testCoPartitionedAssignmentWithSameSubscription"""
    topics = {"t1": 6, "t2": 6, "t3": 2, "t4": 2, "t5": 4, "t6": 4}
    subs = [["t1", "t2", "t3", "t4", "t5", "t6", "t7", "t8", "t9"]] * 3
    consumer_racks = ["a", "b", "c"]
    plain = [
        "t1-0, t1-1, t2-0, t2-1, t3-0, t4-0, t5-0, t5-1, t6-0, t6-1",
        "t1-2, t1-3, t2-2, t2-3, t3-1, t4-1, t5-2, t6-2",
        "t1-4, t1-5, t2-4, t2-5, t5-3, t6-3",
    ]
    verify_rack_assignment(topics, 3, null_racks(3), consumer_racks, subs, plain, -1)
    verify_rack_assignment(topics, 3, racks(3), consumer_racks, subs, plain, 0, prefer=True)
    rack_aware = [
        "t1-0, t1-2, t2-0, t2-2, t3-0, t4-0, t5-1, t6-1",
        "t1-1, t1-3, t2-1, t2-3, t3-1, t4-1, t5-2, t6-2",
        "t1-4, t1-5, t2-4, t2-5, t5-0, t5-3, t6-0, t6-3",
    ]
    verify_rack_assignment(topics, 2, racks(3), consumer_racks, subs, rack_aware, 0, prefer=True)


def test_rack_aware_static_member_range_assignment_persistent_after_member_id_changes():
    """Kafka: RangeAssignorTest.testRackAwareStaticMemberRangeAssignmentPersistentAfterMemberIdChanges"""
    # partitionInfos(topic, 5, replicationFactor 2, numBrokerRacks 3, 0): six brokers on racks a, b, c, a, b, c.
    partition_racks = {t: replica_racks(5, 2, racks(3) * 2, 0) for t in ("topic1", "topic2")}
    both = ["topic1", "topic2"]
    members = {
        f"consumer{i + 1}": {"topics": both, "group_instance_id": f"instance{i + 1}", "rack": racks(3)[i]}
        for i in range(3)
    }
    doc = {"topics": {"topic1": 5, "topic2": 5}, "members": members, "partition_racks": partition_racks}
    expected = {
        "instance1": {("topic1", 0), ("topic1", 2), ("topic2", 0), ("topic2", 2)},
        "instance2": {("topic1", 1), ("topic1", 3), ("topic2", 1), ("topic2", 3)},
        "instance3": {("topic1", 4), ("topic2", 4)},
    }

    def by_instance(doc: dict) -> dict[str, set[tuple[str, int]]]:
        result = range_assign(doc, prefer=True)  # initializeRacks sets preferRackAwareLogic
        return {doc["members"][m]["group_instance_id"]: set(parts) for m, parts in result.items()}

    assert by_instance(doc) == expected
    # Switch member ids: consumer3 -> consumer4, consumer2 -> consumer5; the assignment follows the instances.
    renamed = {"consumer1": members["consumer1"], "consumer4": members["consumer3"], "consumer5": members["consumer2"]}
    assert by_instance({**doc, "members": renamed}) == expected


# RangeAssignorTest's parameterized cases: initializeRacks(rackConfig) puts every partition on all three racks
# (replication factor 3 over brokers on racks a, b, c, ...) and sets preferRackAwareLogic, so the rack-aware
# path runs and must give plain ranges.
RACK_CONFIGS = ["NO_BROKER_RACK", "NO_CONSUMER_RACK", "BROKER_AND_CONSUMER_RACK"]


def rack_config_group(config: str, topics: dict[str, int], members: dict[str, tuple], max_consumers: int = 3) -> dict:
    """RangeAssignorTest.initializeRacks + setupPartitionsPerTopic + subscription(topics, consumerIndex)."""
    broker_racks = 0 if config == "NO_BROKER_RACK" else max_consumers
    brokers = max_consumers if broker_racks == 0 else broker_racks * max_consumers
    broker_rack_list = [None if broker_racks == 0 else ALL_RACKS[i % broker_racks] for i in range(brokers)]
    partition_racks = {t: replica_racks(n, max_consumers, broker_rack_list, 0) for t, n in topics.items()}
    rack_count = broker_racks if broker_racks > 0 else len(ALL_RACKS)
    doc_members = {}
    for m, (subs, index, *instance) in members.items():
        rack = ALL_RACKS[index % rack_count] if config != "NO_CONSUMER_RACK" else None
        doc_members[m] = {"topics": subs, "rack": rack, "group_instance_id": instance[0] if instance else None}
    return {"topics": topics, "members": doc_members, "partition_racks": partition_racks}


def assigned(doc: dict) -> dict[str, set[tuple[str, int]]]:
    return {m: set(parts) for m, parts in range_assign(doc, prefer=True).items()}


@pytest.mark.parametrize("config", RACK_CONFIGS)
def test_one_consumer_one_topic(config: str):
    """Kafka: RangeAssignorTest.testOneConsumerOneTopic and testOnlyAssignsPartitionsFromSubscribedTopics"""
    doc = rack_config_group(config, {"topic1": 3, "other": 3}, {"consumer1": (["topic1"], 0)})
    assert assigned(doc) == {"consumer1": tps("topic1-0, topic1-1, topic1-2")}


@pytest.mark.parametrize("config", RACK_CONFIGS)
def test_one_consumer_multiple_topics(config: str):
    """Kafka: RangeAssignorTest.testOneConsumerMultipleTopics"""
    doc = rack_config_group(config, {"topic1": 1, "topic2": 2}, {"consumer1": (["topic1", "topic2"], 0)})
    assert assigned(doc) == {"consumer1": tps("topic1-0, topic2-0, topic2-1")}


@pytest.mark.parametrize("config", RACK_CONFIGS)
@pytest.mark.parametrize("partitions, second", [(1, ""), (2, "topic1-1")])
def test_two_consumers_one_topic(config: str, partitions: int, second: str):
    """Kafka: RangeAssignorTest.testTwoConsumersOneTopicOnePartition and testTwoConsumersOneTopicTwoPartitions"""
    doc = rack_config_group(
        config, {"topic1": partitions}, {"consumer1": (["topic1"], 0), "consumer2": (["topic1"], 1)}
    )
    assert assigned(doc) == {"consumer1": tps("topic1-0"), "consumer2": tps(second)}


@pytest.mark.parametrize("config", RACK_CONFIGS)
def test_multiple_consumers_mixed_topics(config: str):
    """Kafka: RangeAssignorTest.testMultipleConsumersMixedTopics"""
    members = {"consumer1": (["topic1"], 0), "consumer2": (["topic1", "topic2"], 1), "consumer3": (["topic1"], 2)}
    doc = rack_config_group(config, {"topic1": 3, "topic2": 2}, members)
    assert assigned(doc) == {
        "consumer1": tps("topic1-0"),
        "consumer2": tps("topic1-1, topic2-0, topic2-1"),
        "consumer3": tps("topic1-2"),
    }


@pytest.mark.parametrize("config", RACK_CONFIGS)
@pytest.mark.parametrize("high_instance", ["instance2", None])
def test_two_consumers_two_topics_six_partitions(config: str, high_instance: str | None):
    """Kafka: RangeAssignorTest.testTwoStaticConsumersTwoTopicsSixPartitions and
    testOneStaticConsumerAndOneDynamicConsumerTwoTopicsSixPartitions (instance ids rank before member ids)"""
    both = ["topic1", "topic2"]
    high = (both, 1, high_instance) if high_instance else (both, 1)
    doc = rack_config_group(
        config, {"topic1": 3, "topic2": 3}, {"consumer-b": (both, 0, "instance1"), "consumer-a": high}
    )
    assert assigned(doc) == {
        "consumer-b": tps("topic1-0, topic1-1, topic2-0, topic2-1"),
        "consumer-a": tps("topic1-2, topic2-2"),
    }


@pytest.mark.parametrize("config", RACK_CONFIGS)
def test_static_member_range_assignment_persistent(config: str):
    """Kafka: RangeAssignorTest.testStaticMemberRangeAssignmentPersistent"""
    both = ["topic1", "topic2"]
    members = {f"consumer{i + 1}": (both, i, f"instance{i + 1}") for i in range(3)}
    expected = {
        "consumer1": tps("topic1-0, topic1-1, topic2-0"),
        "consumer2": tps("topic1-2, topic2-1"),
        "consumer3": tps("topic1-3, topic2-2"),
    }
    topics = {"topic1": 5, "topic2": 4}
    first = assigned(rack_config_group(config, topics, {**members, "consumer4": (both, 3)}, max_consumers=5))
    assert first == {**expected, "consumer4": tps("topic1-4, topic2-3")}
    # Replace dynamic member 4 with a new dynamic member 5.
    second = assigned(rack_config_group(config, topics, {**members, "consumer5": (both, 4)}, max_consumers=5))
    assert second == {**expected, "consumer5": tps("topic1-4, topic2-3")}


@pytest.mark.parametrize("config", RACK_CONFIGS)
def test_static_member_range_assignment_persistent_after_member_id_changes(config: str):
    """Kafka: RangeAssignorTest.testStaticMemberRangeAssignmentPersistentAfterMemberIdChanges"""
    both = ["topic1", "topic2"]
    members = {f"consumer{i + 1}": (both, i, f"instance{i + 1}") for i in range(3)}
    expected = {
        "instance1": tps("topic1-0, topic1-1, topic2-0, topic2-1"),
        "instance2": tps("topic1-2, topic1-3, topic2-2, topic2-3"),
        "instance3": tps("topic1-4, topic2-4"),
    }

    def by_instance(members: dict) -> dict[str, set[tuple[str, int]]]:
        result = assigned(rack_config_group(config, {"topic1": 5, "topic2": 5}, members))
        return {members[m][2]: parts for m, parts in result.items()}

    assert by_instance(members) == expected
    renamed = {"consumer1": members["consumer1"], "consumer4": members["consumer3"], "consumer5": members["consumer2"]}
    assert by_instance(renamed) == expected


# --- The documented guarantees on random groups ----------------------------------------------------------------


@st.composite
def racked_groups(draw: st.DrawFn) -> dict:
    """Random groups whose members and partitions carry racks (some members without one)."""
    rack_names = ["a", "b", "c", "d"]
    topics = {f"t{i}": draw(st.integers(0, 9)) for i in range(draw(st.integers(1, 4)))}
    names = draw(st.lists(st.sampled_from([f"m{i}" for i in range(6)]), min_size=1, max_size=6, unique=True))
    members = {
        m: {
            "topics": draw(st.lists(st.sampled_from(sorted(topics)), min_size=1, unique=True)),
            "rack": draw(st.sampled_from([None, *rack_names])),
        }
        for m in names
    }
    partition_racks = {
        t: [draw(st.lists(st.sampled_from(rack_names), max_size=3, unique=True)) for _ in range(n)]
        for t, n in topics.items()
    }
    return {"topics": topics, "members": members, "partition_racks": partition_racks}


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(racked_groups())
def test_rack_aware_range_keeps_the_per_topic_balance(doc: dict):
    """Kafka's javadoc, "prioritizing balanced assignment over rack alignment": with racks, each topic's n
    partitions still go n // k to each of its k subscribers and one more to n % k of them, all to subscribers."""
    result = range_assign(doc)
    spec = parse_group(doc)
    assert check_plan(spec, {m: list(p) for m, p in result.items()}) == []
    for t, n in doc["topics"].items():
        subs = [m for m, s in doc["members"].items() if t in s["topics"]]
        if not subs:
            continue
        quota, extra = divmod(n, len(subs))
        counts = [len([1 for tp, _ in result[m] if tp == t]) for m in subs]
        assert sorted(counts) == [quota] * (len(subs) - extra) + [quota + 1] * extra


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(["a", "b", "c"]), min_size=1, max_size=6), st.integers(1, 4), st.data())
def test_rack_aware_range_aligns_every_partition_when_racks_can_hold_their_consumers_share(
    consumer_racks: list[str], quota: int, data: st.DataObject
):
    """ "Match consumer racks with partition replica racks on a best-effort basis": one topic, each partition on
    one rack, each rack holding exactly its consumers' share: every partition is assigned on its rack."""
    per_rack = Counter(consumer_racks)
    layout_racks = [r for r in sorted(per_rack) for _ in range(per_rack[r] * quota)]
    shuffled = data.draw(st.permutations(layout_racks))
    members = {f"m{i}": {"topics": ["t"], "rack": r} for i, r in enumerate(consumer_racks)}
    doc = {"topics": {"t": len(shuffled)}, "members": members, "partition_racks": {"t": [[r] for r in shuffled]}}
    for m, parts in range_assign(doc).items():
        assert all(shuffled[p] == doc["members"][m]["rack"] for _, p in parts)
        assert len(parts) == quota


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(["a", "b", "c"]), min_size=1, max_size=6), st.integers(1, 4), st.data())
def test_rack_aware_sticky_aligns_every_partition_when_racks_can_hold_their_consumers_share(
    consumer_racks: list[str], quota: int, data: st.DataObject
):
    """AbstractStickyAssignor's javadoc, "match consumer racks with partition replica racks on a best-effort
    basis, prioritizing balanced assignment": equal subscriptions, each partition on one rack, each rack
    holding exactly its consumers' share: balanced, and every partition on its consumer's rack."""
    per_rack = Counter(consumer_racks)
    shuffled = data.draw(st.permutations([r for r in sorted(per_rack) for _ in range(per_rack[r] * quota)]))
    split = data.draw(st.integers(0, len(shuffled)))
    topics = {"t": split, "u": len(shuffled) - split}
    members = {f"m{i}": {"topics": ["t", "u"], "rack": r} for i, r in enumerate(consumer_racks)}
    layout_racks = {"t": [[r] for r in shuffled[:split]], "u": [[r] for r in shuffled[split:]]}
    result = sticky({"topics": topics, "members": members, "partition_racks": layout_racks})
    for m, parts in result.items():
        assert all(layout_racks[t][p] == [members[m]["rack"]] for t, p in parts)
        assert len(parts) == quota


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(racked_groups())
def test_without_member_racks_or_partition_racks_it_is_plain_range(doc: dict):
    """useRackAwareAssignment is false without member racks or without partition racks: plain ranges."""
    plain = range_assign({"topics": doc["topics"], "members": doc["members"]})
    no_member_racks = {m: {**s, "rack": None} for m, s in doc["members"].items()}
    assert range_assign({**doc, "members": no_member_racks}) == plain
    bare = {m: {"topics": s["topics"]} for m, s in doc["members"].items()}
    assert range_assign({"topics": doc["topics"], "members": bare}) == plain


def java_range(doc: dict) -> dict[str, set[tuple[str, int]]]:
    """RangeAssignor.assignPartitions transcribed line by line (sets and lists, no cursors, no lockstep)."""
    spec = parse_group(doc)
    order = sorted(spec.members)  # no static members in these groups: MemberInfo order is member-id order
    rack_of = {m: s.get("rack") or None for m, s in doc["members"].items()}
    states = []
    for t, n in doc["topics"].items():
        consumers = [m for m in order if t in doc["members"][m]["topics"]]
        if n == 0 or not consumers:
            continue
        consumer_racks = {rack_of[c] for c in consumers} - {None}
        part_racks = [set(doc["partition_racks"][t][p]) for p in range(n)] if consumer_racks else []
        every = set().union(*part_racks)
        needs = bool(consumer_racks) and not consumer_racks.isdisjoint(every) and any(r != every for r in part_racks)
        states.append(
            {
                "t": t,
                "n": n,
                "consumers": consumers,
                "racks": part_racks,
                "needs": needs,
                "left": list(range(n)),
                "done": dict.fromkeys(consumers, 0),
                "q": n // len(consumers),
                "extra": n % len(consumers),
            }
        )
    result: dict[str, set[tuple[str, int]]] = {m: set() for m in order}

    def match(state: dict, c: str, p: int) -> bool:
        return rack_of[c] is None or (bool(state["racks"]) and rack_of[c] in state["racks"][p])

    def room(state: dict, c: str) -> int:
        return max(0, state["q"] + (1 if state["extra"] > 0 else 0) - state["done"][c])

    def give(state: dict, c: str, parts: list[int]) -> None:
        result[c].update((state["t"], p) for p in parts)
        state["done"][c] += len(parts)
        if state["done"][c] > state["q"]:
            state["extra"] -= 1
        state["left"] = [p for p in state["left"] if p not in parts]

    def ranges(state: dict, with_racks: bool) -> None:
        for c in state["consumers"]:
            if not state["left"]:
                break
            picks = [p for p in state["left"] if not with_racks or match(state, c, p)][: room(state, c)]
            if picks:
                give(state, c, picks)

    if any(s["needs"] for s in states):
        groups: dict = defaultdict(list)
        for state in states:
            groups[(tuple(state["consumers"]), len(state["racks"]))].append(state)
        for (consumers, size), co in groups.items():
            if len(co) > 1:
                remaining = list(consumers)
                for p in range(size):
                    found = [c for c in remaining if all(match(s, c, p) and room(s, c) > 0 for s in co)]
                    if found:
                        for s in co:
                            give(s, found[0], [p])
                        if not any(room(s, found[0]) > 0 for s in co):
                            remaining.remove(found[0])
                            if not remaining:
                                break
            elif co[0]["needs"]:
                ranges(co[0], True)
    for state in states:
        ranges(state, False)
    return result


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(racked_groups())
def test_rack_aware_range_matches_the_java_transcription(doc: dict):
    assert {m: set(p) for m, p in range_assign(doc).items()} == java_range(doc)


# --- Sticky assignors, constrained builder (AbstractStickyAssignor.ConstrainedAssignmentBuilder, KIP-881) ----------


def sticky(doc: dict, prefer: bool = False) -> dict[str, set[tuple[str, int]]]:
    spec = parse_group(doc)
    owner = sticky_assign(spec, prefer_rack_aware_logic=prefer)
    assert check_plan(spec, owner, balance=True) == []
    parts = np.flatnonzero(owner >= 0)
    return {m: set(p) for m, p in by_member(spec, parts, owner[parts]).items()}


def rack_doc(
    topics: dict[str, int],
    rf: int,
    broker_racks: list,
    consumer_racks: list,
    owned: list[str] | None,
    consumer_topics: list[list[str]] | None = None,
) -> dict:
    """verifyRackAssignment's group: consumer0.. on `consumer_racks`, subscribed to `consumer_topics` (default:
    every topic)."""
    members = {
        f"consumer{i}": {
            "topics": consumer_topics[i] if consumer_topics else list(topics),
            "rack": rack,
            "owned": [list(tp) for tp in sorted(tps(owned[i]))] if owned else [],
        }
        for i, rack in enumerate(consumer_racks)
    }
    return {"topics": topics, "members": members, "partition_racks": layout(topics, rf, broker_racks)}


def verify_uniform_subscription(
    rf: int, broker_racks: list, consumer_racks: list, expected: list[str], mismatches: int, prefer: bool = False
) -> None:
    """AbstractStickyAssignorTest.verifyUniformSubscription for StickyAssignor: without and with owned partitions
    (StickyAssignor reads ownership from its user data, which these subscriptions lack, so both runs are fresh)."""
    topics = {"t1": 6, "t2": 7, "t3": 2}
    doc = rack_doc(topics, rf, broker_racks, consumer_racks, None)
    result = sticky(doc, prefer)
    assert result == {f"consumer{i}": tps(e) for i, e in enumerate(expected)}
    if mismatches >= 0:
        racks_of = doc["partition_racks"]
        off = [
            tp
            for i, r in enumerate(consumer_racks)
            if r
            for tp in result[f"consumer{i}"]
            if r not in racks_of[tp[0]][tp[1]]
        ]
        assert len(off) == mismatches, off


STICKY_UNIFORM = ["t1-0, t1-3, t2-0, t2-3, t2-6", "t1-1, t1-4, t2-1, t2-4, t3-0", "t1-2, t1-5, t2-2, t2-5, t3-1"]


def test_sticky_rack_aware_assignment_with_uniform_subscription():
    """Kafka: AbstractStickyAssignorTest.testRackAwareAssignmentWithUniformSubscription (StickyAssignorTest)"""
    verify_uniform_subscription(3, null_racks(3), racks(3), STICKY_UNIFORM, -1)
    verify_uniform_subscription(3, racks(3), null_racks(3), STICKY_UNIFORM, -1)
    verify_uniform_subscription(3, racks(3), racks(3), STICKY_UNIFORM, 0, prefer=True)
    verify_uniform_subscription(4, racks(4), racks(3), STICKY_UNIFORM, 0, prefer=True)
    verify_uniform_subscription(3, racks(3), racks(3), STICKY_UNIFORM, 0)
    verify_uniform_subscription(3, racks(3), ["d", "e", "f"], STICKY_UNIFORM, -1)
    verify_uniform_subscription(3, racks(3), [None, "e", "f"], STICKY_UNIFORM, -1)
    # Rack-aligned for lower replication factors, where brokers hold a subset of the partitions.
    verify_uniform_subscription(1, racks(3), racks(3), STICKY_UNIFORM, 0)
    verify_uniform_subscription(2, racks(3), racks(3), STICKY_UNIFORM, 0)
    # One consumer on a rack with no partitions: misaligned partitions go to it to keep the balance.
    verify_uniform_subscription(3, racks(2), racks(3), STICKY_UNIFORM, 5)


OWNED = ["t1-0, t1-1, t1-2, t1-3, t1-4", "t1-5, t2-0, t2-1, t2-2, t2-3", "t2-4, t2-5, t2-6, t3-0, t3-1"]


def test_cooperative_sticky_rack_aware_assignment_improves_misaligned_ownership():
    """Kafka: AbstractStickyAssignorTest.testRackAwareAssignmentWithUniformSubscription (CooperativeStickyAssignorTest):
    owned partitions off their owner's rack are given up; the first round hands out only what nobody else owns."""
    doc = rack_doc({"t1": 6, "t2": 7, "t3": 2}, 1, racks(3), racks(3), OWNED)
    result = assign("cooperative-sticky", doc)
    first = ["t1-0, t1-3", "t2-1", "t2-5, t3-1"]
    assert {m: set(p) for m, p in result.assignment.items()} == {f"consumer{i}": tps(e) for i, e in enumerate(first)}
    assert {m: set(p) for m, p in result.target.items()} == {
        f"consumer{i}": tps(e) for i, e in enumerate(STICKY_UNIFORM)
    }


def test_sticky_keeps_owned_partitions_when_racks_match():
    """Kafka: AbstractStickyAssignorTest.testRackAwareAssignmentWithUniformSubscription, "stickiness is retained
    when racks match" (preferRackAwareLogic, every partition on every rack), with the ownership read."""
    doc = rack_doc({"t1": 6, "t2": 7, "t3": 2}, 3, racks(3), racks(3), STICKY_UNIFORM)
    assert sticky(doc, prefer=True) == {f"consumer{i}": tps(e) for i, e in enumerate(STICKY_UNIFORM)}


def sticky_rack_config_group(config: str, topics: dict[str, int], members: dict[str, tuple]) -> dict:
    """AbstractStickyAssignorTest.initializeRacks + partitionInfos (layout offset +1 per topic) + subscription."""
    broker_racks = 0 if config == "NO_BROKER_RACK" else 3
    brokers = 3 if broker_racks == 0 else 9
    broker_rack_list = [None if broker_racks == 0 else ALL_RACKS[i % broker_racks] for i in range(brokers)]
    partition_racks = {t: replica_racks(n, 3, broker_rack_list, k) for k, (t, n) in enumerate(topics.items())}
    rack_count = broker_racks if broker_racks > 0 else len(ALL_RACKS)
    doc_members = {}
    for m, (subs, index, *owned) in members.items():
        if owned:  # buildSubscriptionV2Above: owned partitions and generation 1, no rack
            doc_members[m] = {"topics": subs, "owned": [list(tp) for tp in sorted(tps(owned[0]))], "generation": 1}
        else:
            rack = ALL_RACKS[index % rack_count] if config != "NO_CONSUMER_RACK" else None
            doc_members[m] = {"topics": subs, "rack": rack}
    return {"topics": topics, "members": doc_members, "partition_racks": partition_racks}


@pytest.mark.parametrize("config", RACK_CONFIGS)
def test_sticky_two_consumers_two_topics_six_partitions(config: str):
    """Kafka: AbstractStickyAssignorTest.testTwoConsumersTwoTopicsSixPartitions"""
    both = ["topic1", "topic2"]
    doc = sticky_rack_config_group(config, {"topic1": 3, "topic2": 3}, {"consumer1": (both, 0), "consumer2": (both, 1)})
    assert sticky(doc, prefer=True) == {
        "consumer1": tps("topic1-0, topic1-2, topic2-1"),
        "consumer2": tps("topic1-1, topic2-0, topic2-2"),
    }


@pytest.mark.parametrize("config", RACK_CONFIGS)
def test_sticky_small_groups(config: str):
    """Kafka: AbstractStickyAssignorTest.testOneConsumerMultipleTopics and testTwoConsumersOneTopicTwoPartitions"""
    one = sticky_rack_config_group(config, {"topic1": 1, "topic2": 2}, {"consumer": (["topic1", "topic2"], 0)})
    assert sticky(one, prefer=True) == {"consumer": tps("topic1-0, topic2-0, topic2-1")}
    two = sticky_rack_config_group(config, {"topic": 2}, {"consumer1": (["topic"], 0), "consumer2": (["topic"], 1)})
    assert sticky(two, prefer=True) == {"consumer1": tps("topic-0"), "consumer2": tps("topic-1")}


@pytest.mark.parametrize("config", RACK_CONFIGS)
def test_sticky_add_remove_consumer_one_topic(config: str):
    """Kafka: AbstractStickyAssignorTest.testAddRemoveConsumerOneTopic"""
    topics = {"topic": 3}
    first = sticky(sticky_rack_config_group(config, topics, {"consumer1": (["topic"], 0)}), prefer=True)
    assert first == {"consumer1": tps("topic-0, topic-1, topic-2")}
    members = {"consumer1": (["topic"], 0, "topic-0, topic-1, topic-2"), "consumer2": (["topic"], 1, "")}
    second = sticky(sticky_rack_config_group(config, topics, members), prefer=True)
    assert second == {"consumer1": tps("topic-0, topic-1"), "consumer2": tps("topic-2")}
    third = sticky(sticky_rack_config_group(config, topics, {"consumer2": (["topic"], 1, "topic-2")}), prefer=True)
    assert third == {"consumer2": tps("topic-0, topic-1, topic-2")}


@pytest.mark.parametrize("config", RACK_CONFIGS)
def test_sticky_all_consumers_are_under_min_quota(config: str):
    """Kafka: AbstractStickyAssignorTest.testAllConsumersAreUnderMinQuota"""
    both = ["topic1", "topic2"]
    members = {"consumer1": (both, 0, "topic1-0"), "consumer2": (both, 1, "topic1-1"), "consumer3": (both, 2, "")}
    doc = sticky_rack_config_group(config, {"topic1": 2, "topic2": 3}, members)
    assert sticky(doc, prefer=True) == {
        "consumer1": tps("topic1-0, topic2-1"),
        "consumer2": tps("topic1-1, topic2-2"),
        "consumer3": tps("topic2-0"),
    }


def java_constrained(doc: dict) -> dict[str, set[tuple[str, int]]]:
    """ConstrainedAssignmentBuilder.build with RackInfo, transcribed line by line (members in id order)."""
    spec = parse_group(doc)
    topics = sorted(t for t in doc["topics"] if any(t in m["topics"] for m in doc["members"].values()))
    all_parts = [(t, p) for t in topics for p in range(doc["topics"][t])]
    consumers = sorted(doc["members"])
    consumer_rack = {m: r for m, s in doc["members"].items() if (r := s.get("rack"))}
    racks_of = {
        (t, p): set(doc["partition_racks"].get(t, [[]] * 0)[p]) if p < len(doc["partition_racks"].get(t, [])) else set()
        for t, p in all_parts
    }
    every = set().union(*racks_of.values()) if racks_of else set()
    use = bool(consumer_rack) and not set(consumer_rack.values()).isdisjoint(every)
    use = use and any(r != every for r in racks_of.values())
    member_rack = consumer_rack if use else {}
    by_rack = Counter(consumer_rack.values())
    on = {tp: sum(by_rack[r] for r in rs) for tp, rs in racks_of.items()} if consumer_rack else {}
    previous = previous_owned(spec)
    total, n = len(all_parts), len(consumers)
    min_q, max_q, expected = total // n, -(-total // n), total % n
    over = 0
    assignment: dict[str, list] = {c: [] for c in consumers}
    under, exactly, assigned = [], [], set()
    for c in consumers:
        owned = [tp for tp in previous.get(c, []) if not (c in member_rack and member_rack[c] not in racks_of[tp])]
        owned.sort(key=lambda tp: (tp[1], tp[0]))
        if len(owned) < min_q:
            assignment[c] += owned
            under.append(c)
        elif len(owned) >= max_q and over < expected:
            over += 1
            if over == expected:
                exactly.clear()
            assignment[c] += owned[:max_q]
        else:
            assignment[c] += owned[:min_q]
            if over < expected:
                exactly.append(c)
        assigned.update(assignment[c])
    unassigned = [tp for tp in all_parts if tp not in assigned]
    if on:
        unassigned.sort(key=lambda tp: on.get(tp, 0))

    def next_rack(tp, members, first):
        rs = racks_of[tp] if member_rack else set()
        if not rs:
            return -1
        for i in range(len(members)):
            index = (first + i) % len(members)
            if member_rack.get(members[index]) in rs:
                return index
        return -1

    if member_rack:
        nxt, left = 0, []
        for tp in unassigned:
            consumer = None
            index = next_rack(tp, under, nxt)
            if index >= 0:
                consumer = under[index]
                count = len(assignment[consumer]) + 1
                if count >= min_q:
                    under.remove(consumer)
                    if count < max_q and over < expected:
                        exactly.append(consumer)
                else:
                    index += 1
                nxt = 0 if not under else index % len(under)
            elif exactly:
                first = next_rack(tp, exactly, 0)
                if first >= 0:
                    consumer = exactly[first]
                    if len(assignment[consumer]) + 1 == max_q:
                        exactly.pop(first)
                        over += 1
                        if over == expected:
                            exactly.clear()
            if consumer is not None:
                assignment[consumer].append(tp)
            else:
                left.append(tp)
        unassigned = left
    i = 0
    for tp in unassigned:  # assignRoundRobin with Java's iterator over `under`
        if i < len(under):
            consumer = under[i]
            i += 1
        elif not under:
            consumer = exactly.pop(0)
        else:
            i = 1
            consumer = under[0]
        assignment[consumer].append(tp)
        if len(assignment[consumer]) == min_q and consumer in under:
            under.remove(consumer)
            i -= 1
            exactly.append(consumer)
    return {c: set(ps) for c, ps in assignment.items()}


def previous_owned(spec) -> dict[str, list[tuple[str, int]]]:
    """The owned partitions each member keeps as Kafka reads them (planner.group.previous_owners)."""
    from planner.group import previous_owners

    owner = previous_owners(spec)[0]
    parts = np.flatnonzero(owner >= 0)
    return by_member(spec, parts, owner[parts])


@st.composite
def racked_equal_groups(draw: st.DrawFn) -> dict:
    """Random groups with one subscription for all, racks on members and partitions, sometimes owned partitions."""
    doc = draw(racked_groups())
    subs = sorted(doc["topics"])
    partitions = [[t, p] for t, n in doc["topics"].items() for p in range(n)] or [["t0", 0]]
    for member in doc["members"].values():
        member["topics"] = subs
        member["owned"] = draw(st.lists(st.sampled_from(partitions), max_size=6))
    return doc


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(racked_equal_groups())
def test_sticky_constrained_rack_path_matches_the_java_transcription(doc: dict):
    assert sticky(doc) == java_constrained(doc)


# --- Sticky assignors, general builder (AbstractStickyAssignor.GeneralAssignmentBuilder, KIP-881) -------------


NON_EQUAL_TOPICS = {"t1": 6, "t2": 7, "t3": 2}
NON_EQUAL_SUBSCRIPTIONS = [["t1", "t2", "t3"], ["t1", "t2", "t3"], ["t1", "t3"]]


def off_rack(doc: dict, result: dict[str, set[tuple[str, int]]]) -> list[tuple[str, int]]:
    """verifyRackAssignment's numMismatched: partitions of a consumer with a rack that holds no replica there."""
    racks_of = doc["partition_racks"]
    return [
        tp
        for m, spec in doc["members"].items()
        if spec["rack"]
        for tp in sorted(result[m])
        if spec["rack"] not in racks_of[tp[0]][tp[1]]
    ]


def cooperative_round(doc: dict, prefer: bool = False) -> dict[str, set[tuple[str, int]]]:
    """One CooperativeStickyAssignor.assignPartitions call: this round's partitions per member."""
    spec = parse_group(doc)
    owner = CooperativeStickyAssignor().assign(spec, prefer_rack_aware_logic=prefer)
    assert check_plan(spec, owner, target=sticky_assign(spec, prefer_rack_aware_logic=prefer), balance=True) == []
    parts = np.flatnonzero(owner >= 0)
    return {m: set(p) for m, p in by_member(spec, parts, owner[parts]).items()}


def verify_cooperative(
    rf: int, broker_racks: list, owned: list[str], expected: list[str], mismatches: int, prefer: bool = False
) -> None:
    """verifyRackAssignment for CooperativeStickyAssignor with owned partitions, racks(3) consumers, non-equal
    subscriptions: this round's assignment and its partitions off their consumer's rack."""
    doc = rack_doc(NON_EQUAL_TOPICS, rf, broker_racks, racks(3), owned, NON_EQUAL_SUBSCRIPTIONS)
    result = cooperative_round(doc, prefer)
    assert result == {f"consumer{i}": tps(e) for i, e in enumerate(expected)}
    assert len(off_rack(doc, result)) == mismatches, off_rack(doc, result)


def verify_non_equal_subscription(
    rf: int, broker_racks: list, consumer_racks: list, expected: list[str], mismatches: int, prefer: bool = False
) -> None:
    """AbstractStickyAssignorTest.verifyNonEqualSubscription: fresh (StickyAssignorTest: StickyAssignor reads no
    ownership from these subscriptions), then owning the expected assignment (CooperativeStickyAssignorTest),
    both giving the expected assignment with `mismatches` partitions off-rack (-1: not counted)."""
    fresh = rack_doc(NON_EQUAL_TOPICS, rf, broker_racks, consumer_racks, None, NON_EQUAL_SUBSCRIPTIONS)
    owning = rack_doc(NON_EQUAL_TOPICS, rf, broker_racks, consumer_racks, expected, NON_EQUAL_SUBSCRIPTIONS)
    want = {f"consumer{i}": tps(e) for i, e in enumerate(expected)}
    for doc, result in ((fresh, sticky(fresh, prefer)), (owning, cooperative_round(owning, prefer))):
        assert result == want
        if mismatches >= 0:
            assert len(off_rack(doc, result)) == mismatches, off_rack(doc, result)


STICKY_NON_EQUAL = ["t1-5, t2-0, t2-2, t2-4, t2-6", "t1-3, t2-1, t2-3, t2-5, t3-0", "t1-0, t1-1, t1-2, t1-4, t3-1"]
STICKY_NON_EQUAL_RF1 = ["t1-3, t2-0, t2-2, t2-3, t2-6", "t1-4, t2-1, t2-4, t2-5, t3-0", "t1-0, t1-1, t1-2, t1-5, t3-1"]


def test_sticky_rack_aware_assignment_with_non_equal_subscription():
    """Kafka: AbstractStickyAssignorTest.testRackAwareAssignmentWithNonEqualSubscription (StickyAssignorTest and
    CooperativeStickyAssignorTest), the verifyNonEqualSubscription cases. StickyAssignorTest's owned-partition
    cases are these fresh runs again: its subscriptions carry no user data, so it reads no ownership."""
    verify_non_equal_subscription(3, null_racks(3), racks(3), STICKY_NON_EQUAL, -1)
    verify_non_equal_subscription(3, racks(3), null_racks(3), STICKY_NON_EQUAL, -1)
    verify_non_equal_subscription(3, racks(3), racks(3), STICKY_NON_EQUAL, 0, prefer=True)
    verify_non_equal_subscription(4, racks(4), racks(3), STICKY_NON_EQUAL, 0, prefer=True)
    verify_non_equal_subscription(3, racks(3), racks(3), STICKY_NON_EQUAL, 0)
    verify_non_equal_subscription(3, racks(3), ["d", "e", "f"], STICKY_NON_EQUAL, -1)
    verify_non_equal_subscription(3, racks(3), [None, "e", "f"], STICKY_NON_EQUAL, -1)
    # Rack-aligned for lower replication factors, best effort: consumer2 (t1 and t3 only) is the one consumer on
    # rack c, so t2's partitions on c go elsewhere, and balance takes two partitions of t1 off their racks.
    verify_non_equal_subscription(1, racks(3), racks(3), STICKY_NON_EQUAL_RF1, 4)
    rf2 = ["t1-3, t2-0, t2-2, t2-5, t2-6", "t1-0, t2-1, t2-3, t2-4, t3-0", "t1-1, t1-2, t1-4, t1-5, t3-1"]
    verify_non_equal_subscription(2, racks(3), racks(3), rf2, 0)
    # One consumer on a rack with no partitions: it gets misaligned partitions to keep the balance.
    verify_non_equal_subscription(3, racks(2), racks(3), STICKY_NON_EQUAL, 5)


def test_cooperative_sticky_rack_aware_non_equal_subscription_improves_misaligned_ownership():
    """Kafka: AbstractStickyAssignorTest.testRackAwareAssignmentWithNonEqualSubscription, run as
    CooperativeStickyAssignorTest: owned partitions off their owner's rack are given up (racksMismatch,
    revocationRequired); the first round keeps only what stays, the next one completes the rack-aware
    assignment (alignment attempted, not guaranteed)."""
    intermediate = ["t1-3", "t2-1", "t3-1"]
    verify_cooperative(1, racks(3), OWNED, intermediate, 0)
    verify_cooperative(1, racks(3), intermediate, STICKY_NON_EQUAL_RF1, 4)


@pytest.mark.parametrize("prefer", [False, True])
def test_cooperative_sticky_non_equal_subscription_with_matching_racks_is_the_plain_result(prefer: bool):
    """Kafka: AbstractStickyAssignorTest.testRackAwareAssignmentWithNonEqualSubscription, run as
    CooperativeStickyAssignorTest: "result is same as non-rack-aware assignment if all racks match", with and
    without preferRackAwareLogic"""
    intermediate = ["t1-2, t1-3, t1-4", "t2-0, t2-1, t2-2, t2-3", "t3-0, t3-1"]
    final = ["t1-2, t1-3, t1-4, t2-4, t2-5", "t2-0, t2-1, t2-2, t2-3, t2-6", "t1-0, t1-1, t1-5, t3-0, t3-1"]
    verify_cooperative(3, racks(3), OWNED, intermediate, 0, prefer)
    verify_cooperative(3, racks(3), intermediate, final, 0, prefer)
    # Without any rack, the same two rounds.
    plain = rack_doc(NON_EQUAL_TOPICS, 3, null_racks(3), null_racks(3), OWNED, NON_EQUAL_SUBSCRIPTIONS)
    assert cooperative_round(plain) == {f"consumer{i}": tps(e) for i, e in enumerate(intermediate)}


def java_general_assign(doc: dict) -> tuple[dict[str, set[tuple[str, int]]], bool]:
    """GeneralAssignmentBuilder.build with RackInfo up to balance()'s two maybeAssign passes, transcribed line
    by line (members in id order, one generation), and whether isBalanced then holds (performReassignments
    moves nothing)."""
    spec = parse_group(doc)
    partitions_per_topic = {
        t: n for t, n in doc["topics"].items() if any(t in m["topics"] for m in doc["members"].values())
    }
    topic2consumers: dict[str, list[str]] = {t: [] for t in partitions_per_topic}
    consumer2topics = {}
    for c in sorted(doc["members"]):
        consumer2topics[c] = [t for t in doc["members"][c]["topics"] if t in partitions_per_topic]
        for t in consumer2topics[c]:
            topic2consumers[t].append(c)
    racks_of = {
        (t, p): set(doc["partition_racks"][t][p]) for t in partitions_per_topic for p in range(doc["topics"][t])
    }
    every = set().union(*racks_of.values()) if racks_of else set()
    consumer_rack = {m: r for m, s in doc["members"].items() if (r := s.get("rack"))}
    use = bool(consumer_rack) and not set(consumer_rack.values()).isdisjoint(every)
    use = use and any(r != every for r in racks_of.values())
    member_rack = consumer_rack if use else {}

    def racks_mismatch(c: str, tp: tuple[str, int]) -> bool:
        return c in member_rack and member_rack[c] not in racks_of[tp]

    current: dict[str, list[tuple[str, int]]] = {c: [] for c in doc["members"]}
    for c, parts in previous_owned(spec).items():  # assignOwnedPartitions
        current[c] = [tp for tp in parts if tp[0] in consumer2topics[c] and not racks_mismatch(c, tp)]
    kept = {tp for parts in current.values() for tp in parts}
    sorted_topics = sorted(partitions_per_topic, key=lambda t: (len(topic2consumers[t]), t))
    unassigned = [(t, p) for t in sorted_topics for p in range(partitions_per_topic[t]) if (t, p) not in kept]

    def maybe_assign(partitions: list[tuple[str, int]], rack_aware: bool) -> list[tuple[str, int]]:
        left = []
        for tp in partitions:
            for c in sorted(current, key=lambda c: (len(current[c]), c)):  # sortedCurrentSubscriptions
                if tp[0] in consumer2topics[c] and not (rack_aware and racks_mismatch(c, tp)):
                    current[c].append(tp)
                    break
            else:
                left.append(tp)
        return left

    if member_rack:  # "First assign with rack matching and then assign any remaining without rack matching"
        unassigned = maybe_assign(unassigned, True)
    maybe_assign(unassigned, False)
    counts = {c: len(parts) for c, parts in current.items()}
    owner_of = {tp: c for c, parts in current.items() for tp in parts}
    balanced = all(  # isBalanced
        counts[c] + 1 >= counts[owner_of[(t, p)]]
        for c in current
        for t in consumer2topics[c]
        for p in range(partitions_per_topic[t])
    )
    return {c: set(parts) for c, parts in current.items()}, balanced


@st.composite
def racked_general_groups(draw: st.DrawFn) -> dict:
    """Random groups with differing subscriptions, racks on members and partitions, sometimes owned partitions."""
    doc = draw(racked_groups())
    partitions = [[t, p] for t, n in doc["topics"].items() for p in range(n)] or [["t0", 0]]
    for member in doc["members"].values():
        member["owned"] = draw(st.lists(st.sampled_from(partitions), max_size=6))
    assume(len({tuple(sorted(m["topics"])) for m in doc["members"].values()}) > 1)
    return doc


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(racked_general_groups())
def test_sticky_general_rack_path_matches_the_java_transcription_when_no_reassignment_is_needed(doc: dict):
    """Where Kafka's assignment is balanced after the rack-matching and plain maybeAssign passes, its
    performReassignments moves nothing, and neither does the levelling here: both results are the same."""
    expected, balanced = java_general_assign(doc)
    assume(balanced)
    assert sticky(doc) == expected


@settings(max_examples=100, deadline=None)
@given(racked_general_groups())
def test_sticky_general_rack_path_is_valid_and_balanced(doc: dict):
    """AbstractStickyAssignor's guarantees with racks: every partition once, only to subscribers, balanced as
    isBalanced asks, and the cooperative round revokes before it reassigns."""
    sticky(doc)  # checks: exactly once, only subscribed, balanced
    cooperative_round(doc)  # checks: at most once, the cooperative rule, its target exactly once and balanced


@pytest.mark.slow
@settings(max_examples=100, deadline=None)
@given(racked_general_groups(), st.data())
def test_sticky_general_with_racks_that_all_match_is_the_plain_result(doc: dict, data: st.DataObject):
    """testRackAwareAssignmentWithNonEqualSubscription's "same as non-rack-aware assignment if all racks match":
    every partition on every rack and each member on one of them or on none (preferRackAwareLogic or not),
    or every member on a rack holding no replica: the assignment without racks, owned partitions included."""
    plain = {m: {**s, "rack": None} for m, s in doc["members"].items()}
    expected = sticky({"topics": doc["topics"], "members": plain})
    everywhere = {t: [["a", "b", "c"]] * n for t, n in doc["topics"].items()}
    matching = {m: {**s, "rack": data.draw(st.sampled_from([None, "a", "b", "c"]))} for m, s in plain.items()}
    elsewhere = {m: {**s, "rack": data.draw(st.sampled_from(["x", "y"]))} for m, s in plain.items()}
    for members in (matching, elsewhere):
        for prefer in (False, True):
            assert (
                sticky({"topics": doc["topics"], "members": members, "partition_racks": everywhere}, prefer) == expected
            )
    assert sticky({**doc, "members": elsewhere}) == expected


# --- The compact form's partition_racks ------------------------------------------------------------------------


def test_partition_racks_are_parsed_per_partition():
    spec = parse_group(
        {
            "topics": {"t": 3, "u": 2},
            "members": {},
            "partition_racks": {"t": [["r2", "r1", "r2"], []], "u": [["r3"]]},
        }
    )
    racks = spec.partition_racks
    assert racks is not None and racks.names == ("r1", "r2", "r3")
    assert [racks.of(p) for p in range(5)] == [("r1", "r2"), (), (), ("r3",), ()]
    assert racks.contains(np.asarray([0, 0, 1, 3, 4]), np.asarray([0, 2, 0, 2, 2])).tolist() == [
        True,
        False,
        False,
        True,
        False,
    ]
    assert racks.member_racks(["r3", "zz", None, ""]).tolist() == [2, UNKNOWN_RACK, NO_RACK, NO_RACK]


@pytest.mark.parametrize(
    "racks, message",
    [
        ([["a"]], "must be an object"),
        ({"x": [["a"]]}, r"partition_racks\['x'\]: not a topic"),
        ({"t": [["a"], ["b"], ["c"]]}, "at most 2 rack lists"),
        ({"t": ["a"]}, r"partition_racks\['t'\]\[0\] must be a list of rack names"),
        ({"t": [[1]]}, r"partition_racks\['t'\]\[0\] must be a list of rack names"),
    ],
)
def test_bad_partition_racks_are_rejected_naming_the_field(racks: object, message: str):
    with pytest.raises(InputError, match=message):
        parse_group({"topics": {"t": 2}, "members": {}, "partition_racks": racks})


def test_racks_per_topic_are_counted_once():
    """A partition's replicas on one rack twice count as one rack (Kafka collects them into a set)."""
    spec = parse_group({"topics": {"t": 1}, "members": {}, "partition_racks": {"t": [["a", "a", "b"]]}})
    assert spec.partition_racks is not None
    assert spec.partition_racks.of(0) == ("a", "b")
