"""RangeAssignor: per topic, contiguous ranges of partitions to the subscribers in MemberInfo order.

Mirrors org.apache.kafka.clients.consumer.RangeAssignor (Kafka 4.x). Guarantee: bit-for-bit Kafka's assignment.
For each topic the n partitions are split among its k subscribers, sorted by MemberInfo.compareTo (KIP-345),
into ranges of n // k, the first n % k subscribers taking one more. Topics are independent, so the first
members of every topic collect the extras.

Rack-aware (KIP-881), when members have racks, partitions have replica racks and some partitions live on only
some of the racks (useRackAwareAssignment): the same per-topic counts, but partitions are first matched to
members on their rack, best effort, and co-partitioning (topics with the same subscribers and partition
count get the same partition numbers per member) is kept before rack alignment. The remaining partitions
then go by plain ranges, so a member's partitions need not be contiguous any more.

Example (the class javadoc): C0 and C1 both subscribe to t0 and t1, 3 partitions each.

>>> from planner import assign
>>> both = {"topics": ["t0", "t1"]}
>>> g = {"topics": {"t0": 3, "t1": 3}, "members": {"C0": both, "C1": both}}
>>> assign("range", g).assignment
{'C0': [('t0', 0), ('t0', 1), ('t1', 0), ('t1', 1)], 'C1': [('t0', 2), ('t1', 2)]}
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from planner.assignors._member_info import subscribers_by_rank
from planner.group import NO_RACK, GroupSpec


class RangeAssignor:
    """Kafka's RangeAssignor ("range"), vectorized over all partitions at once."""

    name = "range"
    rebalance_protocol = "eager"

    def assign(self, group: GroupSpec, *, prefer_rack_aware_logic: bool = False) -> np.ndarray:
        """Owner per partition id (-1 when no member subscribes to its topic).

        `prefer_rack_aware_logic` is Kafka's test hook AbstractPartitionAssignor.preferRackAwareLogic: take the
        rack-aware path even when every partition is on every rack.
        """
        offsets, subscribers = subscribers_by_rank(group)
        states = _topic_states(group, offsets, subscribers, prefer_rack_aware_logic)
        # assignPartitions: "useRackAware = topicAssignmentStates.stream().anyMatch(t -> t.needsRackAwareAssignment)"
        if not states:
            return contiguous_ranges(group, offsets, subscribers)
        return _rack_aware_ranges(group, states)


def contiguous_ranges(group: GroupSpec, offsets: np.ndarray, subscribers: np.ndarray) -> np.ndarray:
    """Per topic, its n partitions split in order into ranges for its k ordered subscribers (CSR `offsets`,
    `subscribers`): n // k each, the first n % k one more. Shared with the server-side RangeAssignor."""
    counts = group.partition_counts
    # Per partition: its topic's subscriber count k, quota q = n // k and extras r = n % k
    # (RangeAssignor.TopicAssignmentState: numPartitionsPerConsumer, remainingConsumersWithExtra...).
    topic = np.repeat(np.arange(len(group.topics)), counts)
    local = np.arange(group.num_partitions, dtype=np.int64) - group.topic_start[topic]
    k = np.diff(offsets)[topic]
    safe_k = np.maximum(k, 1)
    q = counts[topic] // safe_k
    r = counts[topic] % safe_k
    big = r * (q + 1)  # partitions held by the first r consumers, q + 1 each
    index = np.where(local < big, local // (q + 1), r + (local - big) // np.maximum(q, 1))
    owner = np.full(group.num_partitions, -1, dtype=np.int32)
    has = k > 0  # topics nobody subscribes to stay unassigned
    owner[has] = subscribers[offsets[topic[has]] + index[has]]
    return owner


def _topic_states(group: GroupSpec, offsets: np.ndarray, subscribers: np.ndarray, prefer: bool) -> list[_TopicState]:
    """A TopicAssignmentState per subscribed topic with partitions, or none when no topic needs rack-aware
    assignment (always so without partition racks: Kafka then passes partitionInfosWithoutRacks)."""
    racks = group.partition_racks
    if racks is None:
        return []
    member_rack = racks.member_racks(group.racks)  # consumerRacks
    per_partition = np.diff(racks.offsets)
    needs, consumer_racks = [], []
    for t in range(len(group.topics)):
        subs = subscribers[offsets[t] : offsets[t + 1]]
        span = slice(int(racks.offsets[group.topic_start[t]]), int(racks.offsets[group.topic_start[t + 1]]))
        every = np.unique(racks.ids[span])  # allPartitionRacks of the topic
        mine = np.setdiff1d(member_rack[subs], [NO_RACK])  # allConsumerRacks of the topic
        consumer_racks.append(len(mine) > 0)
        # useRackAwareAssignment: racks shared, and (unless preferRackAwareLogic) some partition not on all of
        # them; a partition's racks are a subset of the topic's, so equal sets have equal sizes.
        shared = len(mine) > 0 and bool(np.isin(mine, every).any())
        on_all = bool((per_partition[group.topic_start[t] : group.topic_start[t + 1]] == len(every)).all())
        needs.append(shared and (prefer or not on_all))
    if not any(needs):
        return []
    states = []
    for t in range(len(group.topics)):
        consumers = subscribers[offsets[t] : offsets[t + 1]]
        n, first = int(group.partition_counts[t]), int(group.topic_start[t])
        if n == 0 or len(consumers) == 0:  # partitionsPerTopic holds subscribed topics with partitions
            continue
        pairs = None
        if consumer_racks[t]:  # the partition racks are read only when some consumer has a rack (else emptyMap)
            span = slice(int(racks.offsets[first]), int(racks.offsets[first + n]))
            local = np.repeat(np.arange(n, dtype=np.int64), per_partition[first : first + n])
            pairs = (local, racks.ids[span].astype(np.int64))
        states.append(_TopicState(first, n, consumers, member_rack[consumers], pairs, needs[t]))
    return states


class _TopicState:
    """RangeAssignor.TopicAssignmentState: one topic's consumers (in MemberInfo order) and their racks, its
    partition racks as (partition, rack id) pairs (None when no consumer has a rack: Kafka's empty map),
    the per-consumer quota and what is assigned so far."""

    def __init__(
        self,
        first: int,
        size: int,
        consumers: np.ndarray,
        racks: np.ndarray,
        pairs: tuple[np.ndarray, np.ndarray] | None,
        needs_rack_aware: bool,
    ):
        self.first, self.size, self.consumers, self.racks = first, size, consumers, racks
        self.pairs, self.needs_rack_aware = pairs, needs_rack_aware
        self.per_consumer, self.with_extra = divmod(size, len(consumers))  # numPartitionsPerConsumer, remaining...
        self.assigned = [0] * len(consumers)  # per consumer position
        self.taken = np.zeros(size, dtype=bool)
        self.left = size

    @property
    def rack_map_size(self) -> int:
        """partitionRacks.size(): the partition count, or 0 when no consumer of the topic has a rack."""
        return self.size if self.pairs is not None else 0

    def max_assignable(self, position: int) -> int:
        quota = self.per_consumer + (1 if self.with_extra > 0 else 0)
        return max(0, quota - self.assigned[position])

    def take(self, position: int, count: int) -> None:
        """onAssigned's bookkeeping for `count` more partitions to the consumer at `position`."""
        self.assigned[position] += count
        if self.assigned[position] > self.per_consumer:
            self.with_extra -= 1
        self.left -= count

    def place(self, partitions: list[int], positions: list[int], owner: np.ndarray) -> None:
        """Write what `take` counted: partitions[i] now belongs to the consumer at positions[i]."""
        parts = np.asarray(partitions, dtype=np.int64)
        self.taken[parts] = True
        owner[self.first + parts] = self.consumers[np.asarray(positions, dtype=np.int64)]


def _rack_aware_ranges(group: GroupSpec, states: list[_TopicState]) -> np.ndarray:
    """assignPartitions with useRackAware: assignWithRackMatching, then assignRanges without rack constraints."""
    owner = np.full(group.num_partitions, -1, dtype=np.int32)
    # assignWithRackMatching: topics grouped by their consumers (same members, so same racks), then by the size
    # of their partition-rack map. Groups touch disjoint topics, so Java's HashMap order of them does not matter.
    groups: dict[tuple[bytes, int], list[_TopicState]] = {}
    for state in states:
        groups.setdefault((state.consumers.tobytes(), state.rack_map_size), []).append(state)
    for co_partitioned in groups.values():
        if len(co_partitioned) > 1:
            _assign_co_partitioned(co_partitioned, owner)
        elif co_partitioned[0].needs_rack_aware:
            _assign_on_racks(co_partitioned[0], owner)
    for state in states:
        _assign_rest(state, owner)
    return owner


def _assign_on_racks(state: _TopicState, owner: np.ndarray) -> None:
    """assignRanges(state, state::racksMatch): each consumer in order takes its first maxAssignable unassigned
    partitions with a replica on its rack (any partition when it has no rack)."""
    local, rack = state.pairs if state.pairs is not None else (np.empty(0, np.int64), np.empty(0, np.int64))
    taken = state.taken.tolist()  # scalar loop below: plain lists
    lines: dict[int, list[int]] = {}  # per rack, its partitions in order; a cursor skips the assigned ones
    cursors: dict[int, int] = {}
    placed, positions = [], []
    for position, consumer_rack in enumerate(state.racks.tolist()):
        if state.left == 0:
            break
        limit = state.max_assignable(position)
        if limit == 0:
            continue
        if consumer_rack not in lines:
            on_rack = range(state.size) if consumer_rack == NO_RACK else local[rack == consumer_rack].tolist()
            lines[consumer_rack], cursors[consumer_rack] = list(on_rack), 0
        line, i, picks = lines[consumer_rack], cursors[consumer_rack], 0
        while i < len(line) and picks < limit:
            if not taken[line[i]]:
                taken[line[i]] = True
                placed.append(line[i])
                picks += 1
            i += 1
        cursors[consumer_rack] = i  # everything before i is assigned now
        if picks:
            state.take(position, picks)
            positions.extend([position] * picks)
    state.place(placed, positions, owner)


def _assign_rest(state: _TopicState, owner: np.ndarray) -> None:
    """assignRanges(state, (c, tp) -> true): each consumer in order takes its next maxAssignable unassigned
    partitions. The counts are a short loop over consumers; the partitions then go out in one slice each."""
    free = np.flatnonzero(~state.taken)
    takes = []
    for position in range(len(state.consumers)):
        if state.left == 0:
            break
        take = min(state.max_assignable(position), state.left)
        if take > 0:
            state.take(position, take)
        takes.append(take)
    state.place(free[: sum(takes)].tolist(), np.repeat(np.arange(len(takes)), takes).tolist(), owner)


def _assign_co_partitioned(states: list[_TopicState], owner: np.ndarray) -> None:
    """assignCoPartitionedWithRackMatching: partition p of every topic of the group goes to the first remaining
    consumer whose rack holds p in all of them and that may take more; a consumer that may take no more of any
    topic leaves the remaining set.

    The topics share consumers and partition count and are assigned together, so their quotas move in lockstep
    (the first topic's maxAssignable stands for all) and "racks match in every topic" is a test on the racks p
    has in every topic. A consumer that may take no more never may again (quotas only shrink), so each rack's
    consumers are scanned once, with a cursor; the match is the first eligible one over the racks of p.
    """
    lead, size = states[0], states[0].rack_map_size
    if size == 0:
        return
    width = int(max(int(s.pairs[1].max(initial=0)) for s in states if s.pairs is not None)) + 1
    keys = np.concatenate([s.pairs[0] * width + s.pairs[1] for s in states if s.pairs is not None])
    shared = np.flatnonzero(np.bincount(keys, minlength=size * width) == len(states))
    common: list[list[int]] = [[] for _ in range(size)]
    for key in shared.tolist():
        common[key // width].append(key % width)
    queues: dict[int, list[int]] = defaultdict(list)  # rack -> consumer positions in order
    for position, rack in enumerate(lead.racks.tolist()):
        queues[rack].append(position)
    cursors = dict.fromkeys(queues, 0)
    removed = [False] * len(lead.consumers)
    remaining = len(lead.consumers)

    def first_eligible(rack: int) -> int | None:
        queue = queues.get(rack)
        if queue is None:
            return None
        i = cursors[rack]
        while i < len(queue) and (removed[queue[i]] or lead.max_assignable(queue[i]) == 0):
            i += 1
        cursors[rack] = i
        return queue[i] if i < len(queue) else None

    placed, positions = [], []
    for p in range(size):
        heads = [c for r in (NO_RACK, *common[p]) if (c := first_eligible(r)) is not None]
        if not heads:
            continue
        match = min(heads)
        lead.take(match, 1)
        placed.append(p)
        positions.append(match)
        if lead.max_assignable(match) == 0:
            removed[match] = True
            remaining -= 1
            if remaining == 0:
                break
    for state in states:  # the same partitions to the same consumers in every topic of the group
        state.assigned, state.with_extra, state.left = list(lead.assigned), lead.with_extra, lead.left
        state.place(placed, positions, owner)
