"""UniformAssignor ("uniform"): KIP-848's default server-side assignor, run by the group coordinator.

Mirrors org.apache.kafka.coordinator.group.assignor.UniformAssignor as shipped in Kafka 4.4: balance first, then
stickiness. It picks a builder from the group's subscription type (ModernGroup.subscriptionType: HOMOGENEOUS
when every member subscribes to the same topic names, existing or not): UniformHomogeneousAssignmentBuilder
(`uniform_homogeneous`) or UniformHeterogeneousAssignmentBuilder (`uniform_heterogeneous`).

Its input is the group's current *target* assignment (what the coordinator last computed, not what members
report owning): here the members' `owned` claims, read as `planner.group.previous_owners` reads them (the
coordinator never holds two targets for one partition). Its output is the new target; the coordinator then
revokes before it assigns, member by member (KIP-848 reconciliation), which this planner does not simulate,
hence the eager protocol: `assignment` is the target. Topics a member subscribes to that do not exist are
dropped before the assignor runs, as the coordinator resolves names to ids (TopicIds). Rack ids are not
used: Kafka removed rack awareness from the server-side assignors in 3.8 (KAFKA-16694).

Both builders walk Java hash collections, so which member keeps what depends on Java's iteration orders. The
`order` option says which: "coordinator" (the default) reproduces what the group coordinator passes, members
and each member's target in java.util.HashMap/HashSet order (`planner.assignors._topic_order`); "sorted" is the
order of Kafka's unit tests (a TreeMap of members, mkOrderedAssignment), which `UniformAssignor(order="sorted")`
needs to reproduce their expected assignments.

Example (UniformHomogeneousAssignmentBuilderTest.testReassignmentWhenOneMemberAddedAfterInitialAssignmentWith
TwoMembersTwoTopics): M0 and M1 share t0 and t1 (3 partitions each); M2 joins. Each member's quota is 2, so M0
keeps t0p0, t0p2 and gives up t1p0; M1 keeps t0p1, t1p1 and gives up t1p2; M2 takes both.

>>> from planner import assign
>>> both = ["t0", "t1"]
>>> members = {
...     "M0": {"topics": both, "owned": [["t0", 0], ["t0", 2], ["t1", 0]]},
...     "M1": {"topics": both, "owned": [["t0", 1], ["t1", 1], ["t1", 2]]},
...     "M2": {"topics": both},
... }
>>> for member, parts in assign("uniform", {"topics": {"t0": 3, "t1": 3}, "members": members}).assignment.items():
...     print(member, parts)
M0 [('t0', 0), ('t0', 2)]
M1 [('t0', 1), ('t1', 1)]
M2 [('t1', 0), ('t1', 2)]
"""

from __future__ import annotations

import numpy as np

from planner.assignors._topic_order import INPUT_ORDERS, InputOrder
from planner.assignors.uniform_heterogeneous import heterogeneous_assign
from planner.assignors.uniform_homogeneous import homogeneous_assign
from planner.group import GroupSpec, previous_owners


class UniformAssignor:
    """Kafka's server-side UniformAssignor ("uniform", KIP-848)."""

    name = "uniform"
    rebalance_protocol = "eager"

    def __init__(self, order: InputOrder = "coordinator") -> None:
        if order not in INPUT_ORDERS:
            raise ValueError(f"unknown input order {order!r}: use one of {INPUT_ORDERS}")
        self.order: InputOrder = order

    def assign(self, group: GroupSpec) -> np.ndarray:
        """The new target owner per partition id (-1 when no member subscribes to its topic)."""
        if not group.members:  # "if (groupSpec.memberIds().isEmpty()) return new GroupAssignment(emptyMap())"
            return np.full(group.num_partitions, -1, dtype=np.int32)
        target, _ = previous_owners(group)
        if is_homogeneous(group):
            return homogeneous_assign(group, target, self.order)
        return heterogeneous_assign(group, target, self.order)


def is_homogeneous(group: GroupSpec) -> bool:
    """ModernGroup.subscriptionType: HOMOGENEOUS when every subscribed topic name counts every member."""
    first, unknown = group.subscriptions[0].tobytes(), group.unknown_topics[0]
    return all(
        s.tobytes() == first and u == unknown for s, u in zip(group.subscriptions, group.unknown_topics, strict=True)
    )
