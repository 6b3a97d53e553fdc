"""RangeAssignor: per topic, contiguous ranges of partitions to the subscribers in MemberInfo order.

Mirrors org.apache.kafka.clients.consumer.RangeAssignor (Kafka 4.x) without rack matching (KIP-881 applies
only when partitions carry racks; ours do not). Guarantee: bit-for-bit Kafka's assignment. For each topic the
n partitions are split among its k subscribers, sorted by MemberInfo.compareTo (KIP-345), into ranges of
n // k, the first n % k subscribers taking one more. Topics are independent, so the first members of every
topic collect the extras.

Example (the class javadoc): C0 and C1 both subscribe to t0 and t1, 3 partitions each.

>>> from planner import assign
>>> both = {"topics": ["t0", "t1"]}
>>> g = {"topics": {"t0": 3, "t1": 3}, "members": {"C0": both, "C1": both}}
>>> assign("range", g).assignment
{'C0': [('t0', 0), ('t0', 1), ('t1', 0), ('t1', 1)], 'C1': [('t0', 2), ('t1', 2)]}
"""

from __future__ import annotations

import numpy as np

from planner.assignors._member_info import subscribers_by_rank
from planner.group import GroupSpec


class RangeAssignor:
    """Kafka's RangeAssignor ("range"), vectorized over all partitions at once."""

    name = "range"
    rebalance_protocol = "eager"

    def assign(self, group: GroupSpec) -> np.ndarray:
        """Owner per partition id (-1 when no member subscribes to its topic)."""
        return contiguous_ranges(group, *subscribers_by_rank(group))


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
