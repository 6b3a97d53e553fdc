"""CooperativeStickyAssignor: the sticky assignment, handed out over two rebalances (incremental, KIP-429).

Mirrors org.apache.kafka.clients.consumer.CooperativeStickyAssignor. Guarantees in priority order: balance,
then stickiness (AbstractStickyAssignor), and the cooperative rule: a partition changing owner is left out of
this round's assignment (adjustAssignment) so its current owner revokes it first; the follow-up rebalance
that the revoking member triggers hands it to the new owner. Owned partitions and generation come from each
member's subscription (memberData, ConsumerProtocolSubscription v2+, KIP-792).

Example: C0 owned all of t0; C1 joins. C1 gets nothing yet and C0 revokes t0p2 and t0p3, the half going
to C1); after the follow-up round C1 holds them.

>>> from planner import assign
>>> g = {"topics": {"t0": 4}, "members": {
...     "C0": {"topics": ["t0"], "owned": [["t0", p] for p in range(4)], "generation": 3},
...     "C1": {"topics": ["t0"]}}}
>>> r = assign("cooperative-sticky", g)
>>> r.assignment
{'C0': [('t0', 0), ('t0', 1)], 'C1': []}
>>> r.revoked
{'C0': [('t0', 2), ('t0', 3)], 'C1': []}
>>> r.target
{'C0': [('t0', 0), ('t0', 1)], 'C1': [('t0', 2), ('t0', 3)]}
"""

from __future__ import annotations

import numpy as np

from planner.assignors.abstract_sticky import sticky_assign
from planner.group import GroupSpec, claimed_by_others


class CooperativeStickyAssignor:
    """Kafka's CooperativeStickyAssignor ("cooperative-sticky")."""

    name = "cooperative-sticky"
    rebalance_protocol = "cooperative"

    def assign(self, group: GroupSpec, *, prefer_rack_aware_logic: bool = False) -> np.ndarray:
        """This round's owners: the sticky target minus partitions another member must revoke first.

        `prefer_rack_aware_logic` is Kafka's test hook AbstractPartitionAssignor.preferRackAwareLogic (sticky_assign).
        """
        owner = sticky_assign(group, prefer_rack_aware_logic=prefer_rack_aware_logic)
        # assignPartitions -> adjustAssignment(computePartitionsTransferringOwnership(...)): a partition newly
        # given to a member while another member still owns it is withheld until that member revoked it.
        return np.where(claimed_by_others(group, owner), -1, owner).astype(np.int32)
