"""UniformHomogeneousAssignmentBuilder: the uniform assignor when every member subscribes to the same topics.

Mirrors org.apache.kafka.coordinator.group.assignor.UniformHomogeneousAssignmentBuilder as shipped in Kafka 4.4
(KIP-848; KAFKA-16864 rewrote it for speed). Guarantees, in priority order (its javadoc):
1. balance: member partition counts differ by at most one;
2. stickiness: a member keeps as much of its current target assignment as its quota allows.

The build is two phases. maybeRevokePartitions walks the members: each gets a quota of `total // members`,
plus one while `remainingMembersToGetAnExtraPartition` (initially `total % members`) lasts; it keeps its current
partitions up to that quota and releases the others. A member that could not fill its extra partition gives it
up when enough members remain to take the extra ones, so extras go to the members that already hold them, the
last members walked taking the rest (Kafka 4.0 gave them to the first `total % members` members walked).
assignRemainingPartitions: the unassigned partitions (those nobody held, topic by topic in the order Java's
HashSet<Uuid> of subscribed topics iterates, then the released ones in release order) are dealt out in one pass,
each member under quota taking the next `quota - kept` of them.

The walks follow Java's hash orders (`planner.assignors._topic_order`): members in the coordinator's HashMap
order, a member's current partitions topic by topic as its HashMap<Uuid, Set<Integer>> iterates and partition by
partition as its HashSet<Integer> does ("coordinator" input order), or in the orders of Kafka's unit tests
(member ids, topic names, ascending partitions: "sorted"). Racks are not used: Kafka removed rack awareness from
the server-side assignors (KAFKA-16694).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from planner.assignors._arrays import concat_ranges
from planner.assignors._topic_order import (
    InputOrder,
    hash_set_order,
    member_order,
    member_topic_keys,
    partition_keys,
)
from planner.group import GroupSpec


def homogeneous_assign(group: GroupSpec, target: np.ndarray, order: InputOrder = "coordinator") -> np.ndarray:
    """UniformHomogeneousAssignmentBuilder.build: owner per partition id from the current target owners."""
    owner = np.full(group.num_partitions, -1, dtype=np.int32)
    subscribed = group.subscriptions[0].astype(np.int64)  # every member's subscription is this one
    if len(subscribed) == 0:  # "if (subscribedTopicIds.isEmpty()) return new GroupAssignment(emptyMap())"
        return owner
    walk = member_order(group, order)  # groupSpec.memberIds(): walk[i] is the i-th member iterated
    names = len(subscribed) + len(group.unknown_topics[int(walk[0])])  # the first member's subscribedTopicIds
    held, holder = _held(group, target, subscribed, walk, order, names)
    rank = np.empty(len(walk), dtype=np.int64)
    rank[walk] = np.arange(len(walk))
    held_count = np.bincount(rank[holder], minlength=len(walk))  # per walk position
    keep, room = _quotas(int(group.partition_counts[subscribed].sum()), held_count)

    first = np.concatenate([[0], np.cumsum(held_count)[:-1]])
    kept = (np.arange(len(held)) - first[rank[holder]]) < keep[rank[holder]]
    owner[held[kept]] = holder[kept]
    unassigned = np.concatenate([_never_assigned(group, target, subscribed, names), held[~kept]])
    # assignRemainingPartitions: unfilledMembers, in walk order, each take the next `room` unassigned partitions.
    takers = np.repeat(walk.astype(np.int32), room)
    if len(takers) < len(unassigned):  # cannot happen: quotas sum to the partition count
        raise AssertionError("Partitions were left unassigned")
    owner[unassigned] = takers[: len(unassigned)]
    return owner


def _held(
    group: GroupSpec, target: np.ndarray, subscribed: np.ndarray, walk: np.ndarray, order: InputOrder, names: int
) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """The current target partitions on subscribed topics and their holders, in maybeRevokePartitions' walk order.

    Members in `walk` order; a member's partitions topic by topic as its Map<Uuid, Set<Integer>> iterates, then
    as each Set<Integer> does. Topics outside the subscription are dropped without counting, so they are left
    out here. Partitions are sorted by member, each (member, topic) run by its place in the member's map, and
    partitions within runs only when a set iterates out of ascending order.
    """
    on_subscribed = np.zeros(len(group.topics), dtype=bool)
    on_subscribed[subscribed] = True
    held = np.flatnonzero((target >= 0) & np.repeat(on_subscribed, group.partition_counts)).astype(np.int64)
    rank = np.empty(len(walk), dtype=np.int64)
    rank[walk] = np.arange(len(walk))
    by_member = rank[target[held]]
    if len(walk) <= 1 << 16:  # a stable sort of 16-bit keys is a radix sort
        by_member = by_member.astype(np.uint16)
    held = held[np.argsort(by_member, kind="stable")]  # by member; then by partition id, topic-major
    holder = target[held].astype(np.int64)
    topic = np.repeat(np.arange(len(group.topics), dtype=np.int64), group.partition_counts)[held]
    # The runs of one (member, topic): a member's Set<Integer> of that topic.
    first = np.ones(len(held), dtype=bool)
    first[1:] = (holder[1:] != holder[:-1]) | (topic[1:] != topic[:-1])
    starts = np.flatnonzero(first)
    lengths = np.diff(np.append(starts, len(held)))
    major, minor = member_topic_keys(group, order, holder[starts], topic[starts], names)  # minor: one per topic
    runs = np.lexsort((minor, major, rank[holder[starts]]))
    lengths = lengths[runs]
    sequence = np.repeat(starts[runs], lengths) + concat_ranges(lengths)
    local = held[sequence] - group.topic_start[topic[sequence]]
    bucket = partition_keys(order, local, np.repeat(lengths, lengths))
    if np.any(bucket != local):  # some set iterates out of ascending order: sort within the runs, stably
        run = np.repeat(np.arange(len(runs), dtype=np.int64), lengths)
        sequence = sequence[np.argsort((run << 32) | bucket, kind="stable")]
    return held[sequence], holder[sequence]


def _quotas(total: int, held_count: np.ndarray) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """maybeRevokePartitions' quotas, per member in walk order: how many held partitions it keeps (a prefix of
    its walk) and its remaining quota (unfilledMembers' remainingQuota, 0 for a filled member).

    Kafka 4.4 (not 4.0): quota = minimumMemberQuota, plus one (quotaHasExtraPartition) while
    remainingMembersToGetAnExtraPartition > 0. After the walk, a member with quota left gives the extra back when
    `memberCount - memberIndex > remainingMembersToGetAnExtraPartition` (others can still take it); a member that
    keeps its extra partition, filled or not, consumes one of the remaining extras.
    """
    count = len(held_count)
    minimum, remaining = divmod(total, count)
    keep = np.zeros(count, dtype=np.int64)
    room = np.zeros(count, dtype=np.int64)
    for index, held in enumerate(held_count.tolist()):
        extra = remaining > 0
        quota = minimum + int(extra)
        keep[index] = min(quota, held)
        quota -= keep[index]
        if quota > 0 and extra and count - index > remaining:
            quota -= 1
            extra = False
        room[index] = quota
        if extra:
            remaining -= 1
    return keep, room


def _never_assigned(group: GroupSpec, target: np.ndarray, subscribed: np.ndarray, names: int) -> NDArray[np.int64]:
    """The partitions `!groupSpec.isPartitionAssigned`, topic by topic as the HashSet of subscribed ids iterates.

    The set is built from the first member's subscribedTopicIds, whose size() counts every subscribed name,
    existing or not (TopicIds.size), and that size fixes the HashSet's table.
    """
    walk = hash_set_order(group, subscribed, names)
    lengths = group.partition_counts[walk]
    parts = np.repeat(group.topic_start[walk], lengths) + concat_ranges(lengths)
    never: NDArray[np.int64] = parts[target[parts] < 0]
    return never
