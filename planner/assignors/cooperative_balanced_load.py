"""CooperativeBalancedLoadAssignor: the balanced-load assignment, handed out over two rebalances (KIP-429).

Guarantees in priority order: those of `balanced_load` (subscriptions, limits, load balance, then stickiness),
and the cooperative rule as CooperativeStickyAssignor applies it to the sticky assignment: a partition changing
owner is left out of this round (adjustAssignment) so its current owner revokes it first; the follow-up
rebalance that the revoking member triggers hands it to the new owner. Partitions whose owner left move at once.
The movement budget applies to each rebalance.

Two rebalances suffice (KIP-429: "revoke in the first rebalance, assign in the follow-up"): balanced-load is
not a fixed point of its own follow-up (with the revoked partitions unowned it places them afresh, and the
reshuffle that follows may take owned partitions again, a third rebalance), so this round simulates the
follow-up rebalances and revokes now whatever they would take from their owners (as far as this round's
movement budget allows); the follow-up then only hands out the freed partitions. The assignor remembers the
last group it solved (as Kafka's StickyAssignor kept its member assignment between rebalances), so the follow-up
it simulated costs nothing when it comes. A partition whose owner left
and which the follow-up would give to another member than this round's choice waits for the follow-up too
(rather than being taken back from its first new owner there).

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

import dataclasses
from collections.abc import Callable

import numpy as np

from planner.assignment import next_round
from planner.assignors.balanced_load import BalancedLoadAssignor, balanced_load_assign
from planner.group import GroupSpec, claimed_by_others, previous_owners
from planner.load import assignable, partition_weights

_LOOK_AHEAD = 8  # follow-up rebalances simulated at most (each one only shrinks what this round hands out)


class CooperativeBalancedLoadAssignor(BalancedLoadAssignor):
    """The cooperative variant of "balanced-load" ("cooperative-balanced-load"), same options."""

    name = "cooperative-balanced-load"
    rebalance_protocol = "cooperative"
    _solved: tuple[GroupSpec, np.ndarray] | None = None  # the last group `_target` solved, and its answer

    def assign(self, group: GroupSpec) -> np.ndarray:
        """This round's owners: the balanced-load target minus partitions another member must revoke first and
        minus what the follow-up rebalance would move again."""
        owner = self._target(group)
        # CooperativeStickyAssignor.adjustAssignment(computePartitionsTransferringOwnership(...)): a partition newly
        # given to a member while another member still owns it is withheld until that member revoked it.
        now = np.where(claimed_by_others(group, owner), -1, owner).astype(np.int32)
        # ConsumerCoordinator.onJoinComplete: only a member that revoked something rejoins at once (KIP-429), so
        # without revocations there is no follow-up rebalance to look ahead to.
        if not np.any(now[group.claim_partition] != group.claim_member):
            return now
        affordable = self._affordable(group)
        for _ in range(_LOOK_AHEAD):
            # The follow-up sees the members owning `now`; what it gives elsewhere is revoked (or, when nobody
            # owned it, withheld) in this round already, so the follow-up keeps all it finds owned.
            follow_up = self._target(next_round(group, now))
            again = (now >= 0) & (follow_up != now)
            if not again.any():
                break
            ahead = np.where(again, -1, now).astype(np.int32)
            if not affordable(ahead):
                break  # rule 2 outranks the round count: the follow-up may revoke the rest
            now = ahead
        return now

    def _affordable(self, group: GroupSpec) -> Callable[[np.ndarray], bool]:
        """Whether a round's owners keep what leaves a still-valid owner within `max_move_share` (balanced_load's
        rule 2, the budget of `_Builder.keep`); the group's ownership and weights are read once for every look-ahead."""
        if self.max_move_share is None:
            return lambda now: True
        owned, _ = previous_owners(group)
        topic = group.topic_of(np.arange(group.num_partitions))
        valid = (owned >= 0) & group.subscribed_matrix()[np.maximum(owned, 0), topic]
        unit = partition_weights(group) if self.move_budget == "load" else np.ones(group.num_partitions)
        budget = self.max_move_share * float(unit[assignable(group)].sum()) * (1 + 1e-12) + 1e-12
        return lambda now: float(unit[valid & (now != owned)].sum()) <= budget

    def _target(self, group: GroupSpec) -> np.ndarray:
        """The eager balanced-load assignment of `group` with this assignor's options (remembered for one group)."""
        if self._solved is not None and _same(self._solved[0], group):
            return self._solved[1].copy()
        owner = balanced_load_assign(
            group,
            tolerance=self.tolerance,
            max_move_share=self.max_move_share,
            move_budget=self.move_budget,
            max_count_spread=self.max_count_spread,
        )
        self._solved = (group, owner.copy())
        return owner


def _same(a: object, b: object) -> bool:
    """Whether two assignor inputs are equal field by field (arrays by dtype, shape and value)."""
    if a is b:
        return True
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return (
            isinstance(a, np.ndarray)
            and isinstance(b, np.ndarray)
            and a.dtype == b.dtype
            and bool(np.array_equal(a, b))
        )
    if isinstance(a, tuple) and isinstance(b, tuple):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if dataclasses.is_dataclass(a) and not isinstance(a, type):
        return type(a) is type(b) and all(_same(getattr(a, f.name), getattr(b, f.name)) for f in dataclasses.fields(a))
    return bool(a == b)
