"""The server-side RangeAssignor ("server-range" here; Kafka's group coordinator calls it "range", KIP-848).

Mirrors org.apache.kafka.coordinator.group.assignor.RangeAssignor as shipped in Kafka 4.0 (KAFKA-16944 rewrote
it without stickiness). Guarantee: per topic, contiguous partition ranges to its subscribers, who are sorted
static members first by instance id, then the others by member id (sortMemberIds); each gets n // k of the
topic's n partitions and the first n % k one more. When members share subscriptions and topics share partition
counts, every member gets the same partition numbers of every topic (co-partitioning, for stream joins).
Its homogeneous and heterogeneous paths produce the same ranges, and the same ones as the client RangeAssignor
without racks, so both use `range.contiguous_ranges`. It ignores the current target assignment (the member's
owned partitions) and racks (KAFKA-16694 removed rack awareness from the server-side assignors).

Example (the class javadoc): M0 and M1 both subscribe to T1 and T2, 3 partitions each.

>>> from planner import assign
>>> both = {"topics": ["T1", "T2"]}
>>> assign("server-range", {"topics": {"T1": 3, "T2": 3}, "members": {"M0": both, "M1": both}}).assignment
{'M0': [('T1', 0), ('T1', 1), ('T2', 0), ('T2', 1)], 'M1': [('T1', 2), ('T2', 2)]}
"""

from __future__ import annotations

import numpy as np

from planner.assignors._member_info import subscribers_by_rank
from planner.assignors.range import contiguous_ranges
from planner.group import GroupSpec


class ServerRangeAssignor:
    """Kafka's server-side RangeAssignor (KIP-848)."""

    name = "server-range"
    rebalance_protocol = "eager"

    def assign(self, group: GroupSpec) -> np.ndarray:
        """The new target owner per partition id (-1 when no member subscribes to its topic)."""
        # sortMemberIds orders as MemberInfo does: instance ids first (String.compareTo), then member ids; Java
        # keeps equal instance ids in memberIds() order, member-id order here (Kafka's tests use a TreeMap).
        return contiguous_ranges(group, *subscribers_by_rank(group))
