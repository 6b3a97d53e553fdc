"""UniformHomogeneousAssignmentBuilder: the uniform assignor when every member subscribes to the same topics.

Mirrors org.apache.kafka.coordinator.group.assignor.UniformHomogeneousAssignmentBuilder as shipped in Kafka 4.0
(KIP-848; KAFKA-16864 rewrote it for speed). Guarantees, in priority order (its javadoc):
1. balance: member partition counts differ by at most one;
2. stickiness: a member keeps as much of its current target assignment as its quota allows.

The build is two phases. maybeRevokePartitions: walking members in order, the first `total % members` get a
quota of `total // members + 1`, the rest `total // members`; each keeps its current partitions up to its
quota and releases the others. assignRemainingPartitions: the unassigned partitions (those nobody held, topic by
topic in the order Java's HashSet<Uuid> of subscribed topics iterates, then the released ones in release order)
are dealt out in one pass, each member under quota taking the next `quota - kept` of them.

Orders Java leaves to hash maps are fixed here: members walk in member-id order (Kafka's tests use a TreeMap;
the coordinator a HashMap), a member's current partitions walk topic by topic in name order, partitions
ascending (the tests' mkOrderedAssignment order), and subscribed topics walk in HashSet<Uuid> order when topic
ids are given, name order otherwise (`planner.assignors._topic_order`). Racks are not used: Kafka removed rack
awareness from the server-side assignors (KAFKA-16694) and 4.0 ships without it.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from planner.assignors._topic_order import hash_set_order
from planner.group import GroupSpec


def homogeneous_assign(group: GroupSpec, target: np.ndarray) -> np.ndarray:
    """UniformHomogeneousAssignmentBuilder.build: owner per partition id from the current target owners."""
    owner = np.full(group.num_partitions, -1, dtype=np.int32)
    subscribed = group.subscriptions[0].astype(np.int64)  # every member's subscription is this one
    if len(subscribed) == 0:  # "if (subscribedTopicIds.isEmpty()) return new GroupAssignment(emptyMap())"
        return owner
    counts = group.partition_counts
    n_members = len(group.members)
    minimum_quota, extra = divmod(int(counts[subscribed].sum()), n_members)
    # remainingMembersToGetAnExtraPartition: the first `extra` members walked get minimumMemberQuota + 1.
    quota = np.full(n_members, minimum_quota, dtype=np.int64)
    quota[:extra] += 1

    kept, released = _revoke(group, target, subscribed, quota, owner)
    unassigned = np.concatenate([_never_assigned(group, target, subscribed), released])
    _assign_remaining(owner, unassigned, quota - kept)
    return owner


def _revoke(
    group: GroupSpec, target: np.ndarray, subscribed: np.ndarray, quota: np.ndarray, owner: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """maybeRevokePartitions: each member keeps the first `quota` partitions of its target on subscribed topics.

    Java walks the member's topics and keeps a whole topic while it fits the remaining quota, else partitions
    one by one until the quota is spent: the kept set is a prefix of the walk. Topics outside the subscription
    are dropped without counting. Returns the kept count per member and the released partitions in release
    order (member by member, then walk order), which Java appends to unassignedPartitions.
    """
    on_subscribed = np.zeros(len(group.topics), dtype=bool)
    on_subscribed[subscribed] = True
    held = np.flatnonzero((target >= 0) & np.repeat(on_subscribed, group.partition_counts))
    # Partition ids order a member's partitions by (topic name, partition): a stable sort by member keeps it.
    held = held[np.argsort(target[held], kind="stable")]
    holder = target[held].astype(np.int64)
    first = np.searchsorted(holder, np.arange(len(group.members)))
    keep = (np.arange(len(held)) - first[holder]) < quota[holder]
    owner[held[keep]] = holder[keep]
    return np.bincount(holder[keep], minlength=len(group.members)), held[~keep]


def _never_assigned(group: GroupSpec, target: np.ndarray, subscribed: np.ndarray) -> NDArray[np.int64]:
    """The partitions `!groupSpec.isPartitionAssigned`, topic by topic as the HashSet of subscribed ids iterates.

    The set is built from the first member's subscribedTopicIds, whose size() counts every subscribed name,
    existing or not (TopicIds.size), and that size fixes the HashSet's table.
    """
    walk = hash_set_order(group, subscribed, len(subscribed) + len(group.unknown_topics[0]))
    lengths = group.partition_counts[walk]
    parts = np.repeat(group.topic_start[walk], lengths) + _ranges(lengths)
    never: NDArray[np.int64] = parts[target[parts] < 0]
    return never


def _assign_remaining(owner: np.ndarray, unassigned: np.ndarray, room: np.ndarray) -> None:
    """assignRemainingPartitions: unfilledMembers in member order each take the next `room` unassigned partitions."""
    takers = np.repeat(np.arange(len(room), dtype=np.int32), room)
    if len(takers) < len(unassigned):  # cannot happen: quotas sum to the partition count
        raise AssertionError("Partitions were left unassigned")
    owner[unassigned] = takers[: len(unassigned)]


def _ranges(lengths: np.ndarray) -> NDArray[np.int64]:
    """concatenate([arange(n) for n in lengths]) without a Python loop."""
    ranges: NDArray[np.int64] = np.arange(int(lengths.sum()), dtype=np.int64) - np.repeat(
        np.cumsum(lengths) - lengths, lengths
    )
    return ranges
