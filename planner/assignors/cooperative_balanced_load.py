"""CooperativeBalancedLoadAssignor: the balanced-load assignment, handed out over two rebalances (KIP-429).

Guarantees in priority order: those of `balanced_load` (subscriptions, limits, load balance, then stickiness),
and the cooperative rule as CooperativeStickyAssignor applies it to the sticky assignment: a partition changing
owner is left out of this round (adjustAssignment) so its current owner revokes it first; the follow-up
rebalance that the revoking member triggers hands it to the new owner. Partitions whose owner left move at once.
The movement budget applies to each rebalance.

Example: M0 owned t0 (loads 4, 3, 2, 1); M1 joins. M0 revokes t0p0 and t0p3 now; M1 gets them next round.

>>> from planner import assign
>>> g = {"topics": {"t0": 4}, "loads": {"t0": [4, 3, 2, 1]}, "members": {
...     "M0": {"topics": ["t0"], "owned": [["t0", p] for p in range(4)], "generation": 1},
...     "M1": {"topics": ["t0"]}}}
>>> r = assign("cooperative-balanced-load", g)
>>> r.assignment
{'M0': [('t0', 1), ('t0', 2)], 'M1': []}
>>> r.revoked
{'M0': [('t0', 0), ('t0', 3)], 'M1': []}
>>> r.target
{'M0': [('t0', 1), ('t0', 2)], 'M1': [('t0', 0), ('t0', 3)]}
"""

from __future__ import annotations

import numpy as np

from planner.assignors.balanced_load import BalancedLoadAssignor, balanced_load_assign
from planner.group import GroupSpec, claimed_by_others


class CooperativeBalancedLoadAssignor(BalancedLoadAssignor):
    """The cooperative variant of "balanced-load" ("cooperative-balanced-load"), same options."""

    name = "cooperative-balanced-load"
    rebalance_protocol = "cooperative"

    def assign(self, group: GroupSpec) -> np.ndarray:
        """This round's owners: the balanced-load target minus partitions another member must revoke first."""
        owner = balanced_load_assign(
            group,
            tolerance=self.tolerance,
            max_move_share=self.max_move_share,
            move_budget=self.move_budget,
            max_count_spread=self.max_count_spread,
        )
        # CooperativeStickyAssignor.adjustAssignment(computePartitionsTransferringOwnership(...)): a partition
        # newly given to a member while another member still owns it is withheld until that member revoked it.
        return np.where(claimed_by_others(group, owner), -1, owner).astype(np.int32)
