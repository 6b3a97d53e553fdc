"""RoundRobinAssignor: all partitions, topic by topic, dealt in turn to the members, skipping non-subscribers.

Mirrors org.apache.kafka.clients.consumer.RoundRobinAssignor (Kafka 4.x). Guarantee: bit-for-bit Kafka's
assignment. Members are sorted by MemberInfo.compareTo (KIP-345) into a CircularIterator; partitions are laid
out by topic name (a TreeSet, so Java string order) then partition number; each partition goes to the next
member in the circle that subscribes to its topic. With identical subscriptions counts differ by at most one;
with differing ones the result can be unbalanced.

Example (the class javadoc): C0 subscribes to t0; C1 to t0, t1; C2 to t0, t1, t2; with 1, 2, 3 partitions.

>>> from planner import assign
>>> subs = {"C0": ["t0"], "C1": ["t0", "t1"], "C2": ["t0", "t1", "t2"]}
>>> g = {"topics": {"t0": 1, "t1": 2, "t2": 3}, "members": {m: {"topics": t} for m, t in subs.items()}}
>>> for member, parts in assign("roundrobin", g).assignment.items():
...     print(member, parts)
C0 [('t0', 0)]
C1 [('t1', 0)]
C2 [('t1', 1), ('t2', 0), ('t2', 1), ('t2', 2)]
"""

from __future__ import annotations

import numpy as np

from planner.assignors._member_info import member_info_rank, subscribers_by_rank
from planner.group import GroupSpec


class RoundRobinAssignor:
    """Kafka's RoundRobinAssignor ("roundrobin"); one vectorized step per topic, not per partition."""

    name = "roundrobin"
    rebalance_protocol = "eager"

    def assign(self, group: GroupSpec) -> np.ndarray:
        """Owner per partition id (-1 when no member subscribes to its topic)."""
        rank = member_info_rank(group)
        by_rank = np.argsort(rank)  # circle position -> member id
        offsets, subscribers = subscribers_by_rank(group)
        owner = np.full(group.num_partitions, -1, dtype=np.int32)
        position = 0  # CircularIterator's index into the sorted members
        for t, n in enumerate(group.partition_counts.tolist()):
            circle = rank[subscribers[offsets[t] : offsets[t + 1]]]  # circle positions of t's subscribers
            if n == 0 or len(circle) == 0:  # allPartitionsSorted: topics without partitions add none
                continue
            # The `while (!subscribed(assigner.peek())) assigner.next()` skip: first subscriber at or after
            # `position`, wrapping around; then the topic's partitions go to its subscribers in circle order.
            first = int(np.searchsorted(circle, position)) % len(circle)
            chosen = circle[(first + np.arange(n)) % len(circle)]
            owner[group.topic_start[t] : group.topic_start[t + 1]] = by_rank[chosen]
            position = (int(chosen[-1]) + 1) % len(rank)
        return owner
