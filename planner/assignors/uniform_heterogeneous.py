"""UniformHeterogeneousAssignmentBuilder: the uniform assignor when members subscribe to different topics.

Mirrors org.apache.kafka.coordinator.group.assignor.UniformHeterogeneousAssignmentBuilder as shipped in Kafka 4.4
(KIP-848; KAFKA-17710 reworked it for speed). Guarantees, in priority order (its javadoc):
1. balance: counts differ by at most one among the subscribers of each topic (overall balance is approached
   by at most MAX_ITERATION_COUNT passes, so overlapping subscriptions can stay slightly uneven);
2. stickiness: a member keeps every partition of its current target assignment it still subscribes to,
   unless balancing moves it.

Phases: maybeRevokePartitions (drop what a member no longer subscribes to), assignRemainingPartitions (each
topic's unassigned partitions, topics in TopicComparator order, dealt to its least loaded subscribers) and
balance (per topic, move partitions from its most to its least loaded subscribers, up to 16 passes).

Members are indexed as the builder indexes them (`memberIds = new ArrayList<>(groupSpec.memberIds())`), which
breaks every tie between equally loaded members (MemberComparator): in the coordinator's HashMap order by
default, in member-id order for Kafka's unit tests (`planner.assignors._topic_order.member_order`). Topic ties
break on Uuid.compareTo when topic ids are given, on the name otherwise. Racks are not used (KAFKA-16694).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from planner.assignors._arrays import concat_ranges
from planner.assignors._topic_order import InputOrder, member_order, uuid_rank
from planner.group import GroupSpec

MAX_ITERATION_COUNT = 16  # UniformHeterogeneousAssignmentBuilder.MAX_ITERATION_COUNT


def heterogeneous_assign(group: GroupSpec, target: np.ndarray, order: InputOrder = "coordinator") -> np.ndarray:
    """UniformHeterogeneousAssignmentBuilder.build: owner per partition id from the current target owners.

    The phases below work on the builder's member indices (position in `memberIds`); the answer is mapped back.
    """
    walk = member_order(group, order)  # walk[i]: the member at builder index i
    index = np.empty(len(walk), dtype=np.int64)
    index[walk] = np.arange(len(walk))
    member, topic = group.subscription_pairs()
    member = index[member]
    by_topic = member[np.lexsort((member, topic))]
    offsets = np.zeros(len(group.topics) + 1, dtype=np.int64)
    np.cumsum(np.bincount(topic, minlength=len(group.topics)), out=offsets[1:])
    # topicSubscribers: per topic, its subscribers in ascending member index.
    subscribers = [by_topic[offsets[t] : offsets[t + 1]] for t in range(len(group.topics))]
    sorted_topics = _sort_topics(group, subscribers)
    if len(sorted_topics) == 0:  # "if (subscribedTopicIds.isEmpty()) return new GroupAssignment(emptyMap())"
        return np.full(group.num_partitions, -1, dtype=np.int32)

    kept = _revoke(group, target)
    owner = np.where(kept >= 0, index[np.maximum(kept, 0)], -1).astype(np.int32)
    sizes = np.bincount(owner[owner >= 0], minlength=len(group.members)).astype(np.int64)
    for t in sorted_topics:
        _assign_remaining(group, owner, sizes, t, subscribers[t])
    _balance(group, owner, sizes, [t for t in sorted_topics if len(subscribers[t]) >= 2], subscribers)
    return np.where(owner >= 0, walk[np.maximum(owner, 0)], -1).astype(np.int32)


def _sort_topics(group: GroupSpec, subscribers: list[np.ndarray]) -> np.ndarray:
    """Subscribed topics in topicComparator order: partitions per subscriber descending (as doubles, like
    Double.compare), then subscriber count ascending, then topic id (Uuid.compareTo) ascending."""
    k = np.asarray([len(s) for s in subscribers], dtype=np.int64)
    topics = np.flatnonzero(k > 0)
    per_subscriber = group.partition_counts[topics].astype(np.float64) / k[topics]
    return topics[np.lexsort((uuid_rank(group)[topics], k[topics], -per_subscriber))]


def _revoke(group: GroupSpec, target: np.ndarray) -> np.ndarray:
    """maybeRevokePartitions: a member keeps its target partitions on topics it still subscribes to."""
    topic = group.topic_of(np.arange(group.num_partitions))
    held = target >= 0
    still = group.subscribed_matrix()[np.maximum(target, 0), topic]
    return np.where(held & still, target, -1).astype(np.int32)


def _assign_remaining(group: GroupSpec, owner: np.ndarray, sizes: np.ndarray, t: int, subs: np.ndarray) -> None:
    """assignRemainingPartitions for one topic: each unassigned partition, ascending, to nextLeastLoadedMember.

    MemberAssignmentBalancer sorts the subscribers by (size, index) and fills them level by level: at each level
    L it deals one partition to every member of the range (those that started at L or below), in sorted order,
    then raises the level. So the pick sequence is every slot (level, position in the sorted order) from the
    bottom, sorted by level then position: computed here at once from the water level the partitions reach.
    """
    span = np.arange(group.topic_start[t], group.topic_start[t + 1])
    free = span[owner[span] < 0]
    if len(free) == 0:
        return
    ranked = subs[np.argsort(sizes[subs], kind="stable")]  # subs ascend, so ties stay in member order
    base = sizes[ranked]
    slots = _fill(base, len(free))
    levels = np.repeat(base, slots) + concat_ranges(slots)
    position = np.repeat(np.arange(len(ranked)), slots)
    owner[free] = ranked[position[np.lexsort((position, levels))]]
    sizes[ranked] += slots


def _fill(base: np.ndarray, units: int) -> NDArray[np.int64]:
    """Slots per member (sorted ascending by `base`) taken by the first `units` (level, position) slots."""
    # Units needed to lift the members below base[i] up to it: i * base[i] - sum(base[:i]), nondecreasing in i.
    below = np.concatenate([[0], np.cumsum(base)[:-1]])
    lifted = np.arange(len(base)) * base - below
    i = int(np.searchsorted(lifted, units, side="right"))  # members reached: the level stops below base[i]
    level = (units + int(below[i - 1]) + int(base[i - 1])) // i  # highest level the first i members fill
    slots: NDArray[np.int64] = np.maximum(level - base, 0)
    extra = units - int(slots.sum())  # at `level`, one more for the first `extra` members in sorted order
    slots[:extra] += 1
    return slots


def _balance(
    group: GroupSpec, owner: np.ndarray, sizes: np.ndarray, topics: list[int], subscribers: list[np.ndarray]
) -> None:
    """balance / balanceTopics: pass over the topics (two or more subscribers) until a whole pass moves nothing
    (lastRebalanceTopicIndex) or MAX_ITERATION_COUNT passes are done."""
    last = -1
    for _ in range(MAX_ITERATION_COUNT):
        for index, t in enumerate(topics):
            if index == last:  # a full pass since the last move: done
                return
            moved = _balance_topic(group, owner, sizes, t, subscribers[t])
            if moved > 0 or last == -1:
                last = index


def _balance_topic(group: GroupSpec, owner: np.ndarray, sizes: np.ndarray, t: int, subs: np.ndarray) -> int:
    """balanceTopic: move topic t's partitions from its most to its least loaded subscribers; returns the moves.

    A literal port of the loop and of MemberAssignmentBalancer (ranges of least and most loaded members that
    widen level by level, members without partitions of t excluded from the most loaded range by swapping),
    over positions in the subscriber list. It runs only for topics whose subscribers differ by two or more.
    """
    local = sizes[subs]
    if int(local.max()) - int(local.min()) <= 1:  # initialize(...) returned imbalance <= 1
        return 0
    size = local.tolist()  # per position in subs; plain ints: the loop below is scalar
    ranked = sorted(range(len(subs)), key=lambda j: (size[j], j))  # memberComparator
    # The topic's partitions grouped by owner position, then partition: each member's run [start, end).
    parts = np.arange(group.topic_start[t], group.topic_start[t + 1])
    holder = np.searchsorted(subs, owner[parts])
    order = np.lexsort((parts, holder))
    parts, holder = parts[order], holder[order]
    start = np.searchsorted(holder, np.arange(len(subs)), side="left").tolist()
    end = np.searchsorted(holder, np.arange(len(subs)), side="right").tolist()
    partitions = parts.tolist()

    n = len(ranked)
    least_end, least_level, least_next = 0, size[ranked[0]] - 1, 0
    most_start, most_end, most_level, most_next = n, n, size[ranked[-1]] + 1, n - 1
    moves: list[tuple[int, int]] = []
    while most_level - least_level > 1:  # !isBalanced()
        # nextMostLoadedMember, skipping (and excluding) members with no partition of t left.
        giver = -1
        while True:
            if most_next < most_start:
                if most_end <= most_start and most_start > 0:
                    most_level = size[ranked[most_start - 1]]  # range emptied by exclusions: restart below it
                else:
                    most_level -= 1
                while most_start > 0 and size[ranked[most_start - 1]] == most_level:
                    most_start -= 1
                most_next = most_end - 1
            if most_next < 0:
                break
            giver = ranked[most_next]
            most_next -= 1
            if end[giver] - start[giver] > 0:
                break
            # excludeMostLoadedMember: swap it to the end of the range and shrink the range.
            ranked[most_next + 1], ranked[most_end - 1] = ranked[most_end - 1], ranked[most_next + 1]
            most_end -= 1
            giver = -1
        if giver == -1:
            break
        end[giver] -= 1
        partition = partitions[end[giver]]
        # nextLeastLoadedMember.
        if least_next >= least_end:
            least_level += 1
            while least_end < n and size[ranked[least_end]] == least_level:
                least_end += 1
            least_next = 0
        taker = ranked[least_next]
        least_next += 1
        if most_level - least_level <= 1:
            break
        moves.append((partition, taker))
        size[giver] -= 1
        size[taker] += 1
    if moves:
        moved = np.asarray(moves, dtype=np.int64)
        owner[moved[:, 0]] = subs[moved[:, 1]]
        sizes[subs] = size
    return len(moves)
