"""BalancedLoadAssignor ("balanced-load"): a sticky assignor that balances partition LOAD, not partition count.

Kafka's assignors even out how many partitions each member gets; with skewed partitions (lag, bytes/s, hot keys)
the member holding the heavy ones falls behind. Users asked for assignment by load that stays sticky and keeps
counts in check (KAFKA-5337's LagBasedAssignor, apache/kafka#3158; kafkajs#25). Rules, in priority order:

1. subscriptions: a partition goes only to a member subscribed to its topic (-1 when nobody subscribes);
2. limits, when set: at most `max_move_share` of the load (`move_budget="load"`) or of the partitions
   (`"partitions"`) leaves a still-valid owner in one rebalance; partition counts stay within `max_count_spread`
   (a member whose topics hold too few partitions is exempt from the floor, as in AbstractStickyAssignor);
3. balance: lower max/mean load until the group is load-balanced: neither the heaviest member can hand load to
   lighter members subscribed to its topics (one partition, a swap, one partition for a bundle of lighter ones,
   or a hand-on through a third member), nor the lightest member take some, such that every receiver ends at
   least `tolerance` x mean below the giver's old load. For unit loads and tolerance x mean below 1/2 this is
   AbstractStickyAssignor's "counts differ by at most one";
4. stickiness: move the least load, then the fewest partitions, balance needs; a load-balanced group without
   orphaned partitions moves nothing.

Partitions without a given load weigh 1.0. Ownership is read as AbstractStickyAssignor reads it
(`previous_owners`: the highest generation wins, KAFKA-14639); a partition whose owner left or dropped its topic
is an orphan: it must move and never counts against the budget. Ties: members in Kafka's MemberInfo order
(static members by group.instance.id first, KIP-345, so a restarted static member keeps its place; then member
id), partitions by id, i.e. (topic, partition).

Phases, each a function below: keep valid ownership (and stop there when `_settled`); pin heavy partitions
(heavier than the mean of what is left, each alone on a member); member goals (water-filling each topic class's
load over its subscribers, fewest subscribers first, as UniformHeterogeneousAssignmentBuilder fills the
least-loaded member, but by load); place orphaned partitions (LPT for the heavier, one vectorized cut for the
light rest); shed what a member holds above its goal band and place it; pull for members below their band;
improve between the heaviest and the lightest member; untangle crossed hand-overs. When placing the orphans
already left the group settled, the reshuffle is kept only if it lowers the heaviest load by tolerance x mean.
Hysteresis: a group is left alone while no step would even it by 2 x tolerance x mean; once it must move, it is
evened to 1 x, so the next rebalance with the same members moves nothing.

Example: M0 owned t0 (loads 4, 3, 2, 1); M1 joins. Sticky moves two partitions and leaves loads 7 / 3;
balanced-load moves t0p0 and t0p3 (load 5, as little as balance allows) and leaves 5 / 5.

>>> from planner import assign
>>> g = {"topics": {"t0": 4}, "loads": {"t0": [4, 3, 2, 1]}, "members": {
...     "M0": {"topics": ["t0"], "owned": [["t0", p] for p in range(4)], "generation": 1},
...     "M1": {"topics": ["t0"]}}}
>>> assign("sticky", g).assignment
{'M0': [('t0', 0), ('t0', 1)], 'M1': [('t0', 2), ('t0', 3)]}
>>> assign("balanced-load", g).assignment
{'M0': [('t0', 1), ('t0', 2)], 'M1': [('t0', 0), ('t0', 3)]}
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
from numpy.typing import NDArray

from planner.assignors._member_info import member_info_rank
from planner.errors import InputError
from planner.group import GroupSpec, previous_owners
from planner.load import assignable, max_load_bound, partition_weights, topic_classes

MoveBudget = Literal["load", "partitions"]
_MAX_LPT = 50_000  # heaviest pool partitions placed one by one (heap); the lighter rest in one vectorized cut
_SWEEPS = 12  # water-filling sweeps for the goals of overlapping topic classes (one when subscriptions are equal)
_SCANS = 32  # parts_of answers by a scan of owner[] (about 1 ms per million) before it builds the index
_DONORS = 8  # partners a member tries: the heaviest donors, or the lightest takers for a swap
_BUNDLE_TRIES = 8  # a member's heaviest partitions offered for a bundle of lighter ones


class BalancedLoadAssignor:
    """Sticky assignment by load ("balanced-load"); the options are the limits of the module docstring."""

    name = "balanced-load"
    rebalance_protocol = "eager"

    def __init__(
        self,
        *,
        tolerance: float = 0.02,
        max_move_share: float | None = None,
        move_budget: MoveBudget = "load",
        max_count_spread: int | None = None,
    ) -> None:
        _check_options(tolerance, max_move_share, move_budget, max_count_spread)
        self.tolerance = tolerance
        self.max_move_share = max_move_share
        self.move_budget = move_budget
        self.max_count_spread = max_count_spread

    def assign(self, group: GroupSpec) -> np.ndarray:
        """Owner per partition id (-1 when no member subscribes to its topic)."""
        return balanced_load_assign(
            group,
            tolerance=self.tolerance,
            max_move_share=self.max_move_share,
            move_budget=self.move_budget,
            max_count_spread=self.max_count_spread,
        )


def _check_options(
    tolerance: float, max_move_share: float | None, move_budget: str, max_count_spread: int | None
) -> None:
    if not 0 < tolerance < 1:
        raise InputError(f"tolerance: must be > 0 and < 1, got {tolerance!r}")
    if max_move_share is not None and not 0 <= max_move_share <= 1:
        raise InputError(f"max_move_share: must be within 0 .. 1, got {max_move_share!r}")
    if move_budget not in ("load", "partitions"):
        raise InputError(f"move_budget: must be 'load' or 'partitions', got {move_budget!r}")
    if max_count_spread is not None and (isinstance(max_count_spread, bool) or max_count_spread < 1):
        raise InputError(f"max_count_spread: must be an integer >= 1, got {max_count_spread!r}")


def balanced_load_assign(
    group: GroupSpec,
    *,
    tolerance: float = 0.02,
    max_move_share: float | None = None,
    move_budget: MoveBudget = "load",
    max_count_spread: int | None = None,
) -> np.ndarray:
    """The load-balanced, sticky owner of every partition (int32, -1 where nobody subscribes)."""
    _check_options(tolerance, max_move_share, move_budget, max_count_spread)
    if not group.members or not assignable(group).any():
        return np.full(group.num_partitions, -1, dtype=np.int32)
    builder = _Builder.keep(group, tolerance, max_move_share, move_budget, max_count_spread)
    if not builder.pool.any() and _settled(builder):
        return builder.owner  # load-balanced and nothing orphaned: nothing moves
    builder.drop_index()
    _pin_heavy(builder)
    _goals(builder)
    _place(builder)
    placed, placed_max, placed_settled = builder.owner.copy(), float(builder.load.max()), _settled(builder)
    builder.drop_index()
    _shed(builder)
    _place(builder)
    _pull(builder)
    _repair_counts(builder)
    _improve(builder)
    _untangle(builder)
    if placed_settled and builder.load.max() > placed_max - builder.eps:
        return placed  # placing the orphans left the group settled and reshuffling does not pay: keep the rest
    return builder.owner


@dataclass
class _Builder:
    """The assignment under construction: owner per partition and each member's load, count and topic classes."""

    w: np.ndarray  # float64[P] partition loads
    pclass: np.ndarray  # int64[P] topic class of the partition (-1: nobody subscribes)
    classes: list[np.ndarray]  # per topic class, its subscribers (member ids), fewest subscribers first
    eligible: np.ndarray  # bool[K, M]: member m subscribes to class k's topics
    rank: np.ndarray  # int64[M] MemberInfo order, the member tie-break
    by_rank: np.ndarray  # int64[M] member ids in MemberInfo order (argmin over it breaks ties by rank)
    previous: np.ndarray  # int32[P] valid previous owner (-1: none, or an orphan)
    owner: np.ndarray  # int32[P]
    pool: np.ndarray  # bool[P] assignable partitions without owner
    load: np.ndarray  # float64[M]
    count: np.ndarray  # int64[M]
    holds: np.ndarray  # int64[K, M] partitions of class k member m holds
    mean: float
    eps: float  # tolerance x mean: the smallest gain balance acts on
    bound: float  # the heaviest member carries at least this in any assignment (planner.load.max_load_bound)
    budget: float  # voluntary move allowance (load or partitions), inf without a limit
    budget_by_load: bool
    count_lo: np.ndarray  # int64[M] count floor (0 without max_count_spread)
    count_hi: int  # count ceiling (huge without max_count_spread)
    spent: float = 0.0
    pinned: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))  # int64[M] heavy partition or -1
    goal: np.ndarray = field(default_factory=lambda: np.empty(0))  # float64[M]
    cap: np.ndarray = field(default_factory=lambda: np.empty(0))  # float64[M] top of the goal band
    index: tuple[np.ndarray, np.ndarray] | None = None  # CSR of partitions per member (rebuilt after bulk phases)
    scans: int = 0  # parts_of calls answered by a scan since the index was dropped
    added: dict[int, list[int]] = field(default_factory=dict)  # partitions moved to a member since the CSR

    @classmethod
    def keep(
        cls,
        group: GroupSpec,
        tolerance: float,
        max_move_share: float | None,
        move_budget: MoveBudget,
        max_count_spread: int | None,
    ) -> _Builder:
        """Claim phase: every owned partition stays with its owner while that owner still subscribes to it."""
        n_members = len(group.members)
        w = partition_weights(group)
        live = assignable(group)
        topic = group.topic_of(np.arange(group.num_partitions))
        sub = group.subscribed_matrix()
        tclass, eligible = topic_classes(group)  # topics with the same subscribers, fewest subscribers first
        pclass = tclass[topic]

        rank = member_info_rank(group)
        owned, _ = previous_owners(group)
        held = owned >= 0
        valid = held & sub[np.maximum(owned, 0), topic]
        previous = np.where(valid, owned, -1).astype(np.int32)
        owner = previous.copy()
        total = float(w[live].sum())
        mean = total / n_members
        holds = _tally(pclass[valid], owner[valid], len(eligible), n_members)
        count_lo = np.zeros(n_members, dtype=np.int64)
        count_hi = np.iinfo(np.int64).max
        if max_count_spread is not None:
            # The window [lo, lo + spread] holding the mean count; a member whose topics hold fewer partitions
            # than lo only needs what it can take.
            n_live = int(live.sum())
            lo = max(0, -(-n_live // n_members) - (max_count_spread + 1) // 2)
            reachable = np.bincount(pclass[live], minlength=len(eligible)) @ eligible
            count_lo = np.minimum(lo, reachable).astype(np.int64)
            count_hi = lo + max_count_spread
        if max_move_share is None:
            budget = np.inf
        else:
            budget = max_move_share * (total if move_budget == "load" else float(live.sum()))
        return cls(
            w=w,
            pclass=pclass,
            classes=[np.flatnonzero(row) for row in eligible],
            eligible=eligible,
            rank=rank,
            by_rank=np.argsort(rank),
            previous=previous,
            owner=owner,
            pool=live & ~valid,
            load=np.bincount(owner[valid], weights=w[valid], minlength=n_members).astype(np.float64),
            count=np.bincount(owner[valid], minlength=n_members).astype(np.int64),
            holds=holds,
            mean=mean,
            eps=tolerance * mean,
            bound=_bound(eligible, pclass, w, live, n_members),
            budget=budget,
            budget_by_load=move_budget == "load",
            count_lo=count_lo,
            count_hi=count_hi,
            pinned=np.full(n_members, -1, dtype=np.int64),
        )

    def cost(self, parts: np.ndarray, to: np.ndarray | int) -> np.ndarray:
        """Budget each partition would use moving to `to`: its unit when it leaves its valid previous owner,
        minus it when it returns there (orphans are free)."""
        unit = self.w[parts] if self.budget_by_load else np.ones(len(parts))
        prev = self.previous[parts]
        now = (prev >= 0) & (self.owner[parts] != prev)
        then = (prev >= 0) & (to != prev)
        cost: NDArray[np.float64] = unit * (then.astype(np.float64) - now)
        return cost

    def affordable(self, extra: float) -> bool:
        """Whether `extra` more voluntary movement stays within the budget."""
        return self.spent + extra <= self.budget * (1 + 1e-12) + 1e-12

    def move(self, parts: np.ndarray, to: np.ndarray) -> None:
        """Give `parts` to `to` (member ids, or -1 to release them into the pool), keeping the tallies."""
        parts = np.asarray(parts, dtype=np.int64)
        to = np.broadcast_to(np.asarray(to, dtype=np.int32), parts.shape)
        self.spent += float(self.cost(parts, to).sum())
        n = len(self.load)
        frm = self.owner[parts]
        k = self.pclass[parts]
        for members, sign in ((frm, -1), (to, 1)):
            some = members >= 0
            if len(parts) <= 64:  # a few: update in place; many: one tally per array
                np.add.at(self.load, members[some], sign * self.w[parts][some])
                np.add.at(self.count, members[some], sign)
                np.add.at(self.holds, (k[some], members[some]), sign)
                continue
            self.load += sign * np.bincount(members[some], weights=self.w[parts][some], minlength=n)
            self.count += sign * np.bincount(members[some], minlength=n)
            self.holds += sign * _tally(k[some], members[some], *self.holds.shape)
        self.owner[parts] = to
        self.pool[parts] = to < 0
        if self.index is not None:
            for p, m in zip(parts.tolist(), to.tolist(), strict=True):
                if m >= 0:
                    self.added.setdefault(m, []).append(p)

    def drop_index(self) -> None:
        """Forget the per-member index before moving many partitions at once (it is rebuilt when needed)."""
        self.index, self.scans, self.added = None, 0, {}

    def parts_of(self, m: int) -> np.ndarray:
        """Partitions member m holds now."""
        if self.index is None and self.scans < _SCANS:
            self.scans += 1
            return np.flatnonzero(self.owner == m)
        if self.index is None:
            order = np.argsort(self.owner, kind="stable")
            starts = np.searchsorted(self.owner[order], np.arange(len(self.load) + 1))
            self.index, self.added = (order, starts), {}
        order, starts = self.index
        parts = order[starts[m] : starts[m + 1]]
        if m in self.added:
            parts = np.unique(np.concatenate([parts, np.asarray(self.added[m], dtype=np.int64)]))
        held: NDArray[np.int64] = parts[self.owner[parts] == m]
        return held

    def first_member(self, candidates: np.ndarray, *keys: np.ndarray) -> int:
        """The candidate with the smallest keys (in priority order), ties by MemberInfo order."""
        if len(keys) == 1:  # without a sort: the smallest key, then the lowest rank among those holding it
            tied = candidates[keys[0] == keys[0].min()]
            return int(tied[np.argmin(self.rank[tied])])
        return int(candidates[np.lexsort((self.rank[candidates], *reversed(keys)))[0]])

    def lightest(self, allowed: np.ndarray, n: int = 1) -> np.ndarray:
        """Per row of allowed (bool[..., M]) the n least-loaded allowed members, ties by MemberInfo order; -1 where
        a row allows fewer (no sort of all members: a partial selection in MemberInfo order)."""
        loads = np.where(allowed[..., self.by_rank], self.load[self.by_rank], np.inf)
        if n == 1:
            j = np.argmin(loads, axis=-1)[..., None]
        else:
            k = min(n, loads.shape[-1])
            j = np.argpartition(loads, k - 1, axis=-1)[..., :k] if k < loads.shape[-1] else np.indices(loads.shape)[-1]
            picked = np.take_along_axis(loads, j, axis=-1)
            j = np.take_along_axis(j, np.lexsort((j, picked), axis=-1), axis=-1)
        found = np.isfinite(np.take_along_axis(loads, j, axis=-1))
        return np.where(found, self.by_rank[j], -1)


def _bound(eligible: np.ndarray, pclass: np.ndarray, w: np.ndarray, live: np.ndarray, n_members: int) -> float:
    """planner.load.max_load_bound with the pigeonhole term over the heaviest 8 x M partitions only (still sound;
    a full sort of a million loads costs more than the rarely binding larger terms are worth)."""
    top = w[live]
    if len(top) > 8 * n_members:
        top = top[np.argpartition(-top, 8 * n_members)[: 8 * n_members]]
    class_load = np.bincount(pclass[live], weights=w[live], minlength=len(eligible))
    return max_load_bound(eligible, class_load, -np.sort(-top), n_members)


def _tally(k: np.ndarray, m: np.ndarray, n_classes: int, n_members: int) -> np.ndarray:
    """int64[K, M]: how many of the (class, member) pairs fall on each cell."""
    flat = k.astype(np.int64) * n_members + m
    return np.bincount(flat, minlength=n_classes * n_members).reshape(n_classes, n_members).astype(np.int64)


def _pin_heavy(builder: _Builder) -> None:
    """Give each heavy partition a member of its own: heavier than the mean of the load left once it and every
    heavier one is set aside, it cannot share a member without raising the group's max (the weights' bound).

    A heavy partition stays with its owner unless that owner already keeps a heavier one; otherwise it goes to the
    subscriber without a heavy partition that holds the least load (it will shed the rest), ties MemberInfo order.
    """
    n_members = len(builder.load)
    live = np.flatnonzero(builder.pclass >= 0)
    if len(live) == 0:
        return
    k_max = min(n_members, len(live))
    top = live[np.argpartition(-builder.w[live], k_max - 1)[:k_max]] if k_max < len(live) else live
    top = top[np.lexsort((top, -builder.w[top]))]
    weights = np.append(builder.w[top], 0.0)
    before = np.concatenate([[0.0], np.cumsum(builder.w[top])])
    total = float(builder.w[live].sum())
    ks = np.arange(k_max + 1)
    left = n_members - ks
    # The first k where the next partition fits under the level of the rest: (total - S_k) / (M - k).
    fits = (left <= 0) | (weights * np.maximum(left, 1) <= total - before + 1e-9 * max(total, 1.0))
    n_heavy = int(np.argmax(fits))
    for p in top[:n_heavy].tolist():
        k = int(builder.pclass[p])
        held_by = int(builder.owner[p])
        if held_by >= 0 and builder.pinned[held_by] < 0:
            builder.pinned[held_by] = p
            continue
        subscribers = builder.classes[k]
        free = subscribers[builder.pinned[subscribers] < 0]
        if len(free) == 0:
            if held_by < 0:
                builder.move(
                    np.asarray([p]), np.asarray([builder.first_member(subscribers, builder.load[subscribers])])
                )
            continue
        to = builder.first_member(free, builder.load[free])
        if held_by >= 0 and not builder.affordable(float(builder.cost(np.asarray([p]), to)[0])):
            continue
        builder.move(np.asarray([p]), np.asarray([to]))
        builder.pinned[to] = p


def _goals(builder: _Builder) -> None:
    """Each member's fair load: pinned partitions where they sit, the rest water-filled class by class.

    Each sweep re-levels every topic class's light load over its subscribers, the others' shares fixed; this
    lowers the sum of squared member loads, so the sweeps approach the most even fractional split (one sweep is
    exact when all subscriptions are equal). The band is goal +- tolerance x mean, its top never below the bound
    the weights force on someone; a member holding a heavy partition and no share of the rest keeps just that.
    """
    n_classes = len(builder.classes)
    base = np.zeros(len(builder.load))
    pinned = np.flatnonzero(builder.pinned >= 0)
    base[pinned] = builder.w[builder.pinned[pinned]]
    light = builder.pclass >= 0
    light[builder.pinned[pinned]] = False
    light_load = np.bincount(builder.pclass[light], weights=builder.w[light], minlength=n_classes)
    shares = [np.zeros(len(s)) for s in builder.classes]
    level = base.copy()
    for _ in range(_SWEEPS if n_classes > 1 else 1):
        change = 0.0
        for k, members in enumerate(builder.classes):
            others = level[members] - shares[k]
            share = np.maximum(_water_level(others, light_load[k]) - others, 0.0)
            level[members] = others + share
            change = max(change, float(np.abs(share - shares[k]).max(initial=0.0)))
            shares[k] = share
        if change <= 1e-3 * builder.eps:
            break
    builder.goal = level
    # The top of the band: goal + eps, and never below what whole partitions force on some member anyway.
    builder.cap = np.where(
        (builder.pinned >= 0) & (level <= base), level, np.maximum(level + builder.eps, builder.bound)
    )


def _water_level(levels: np.ndarray, amount: float) -> float:
    """The level L with sum(max(0, L - levels)) == amount."""
    if len(levels) == 0:
        return 0.0
    v = np.sort(levels)
    fill = (amount + np.cumsum(v)) / np.arange(1, len(v) + 1)
    below_next = fill <= np.append(v[1:], np.inf)
    return float(fill[np.argmax(below_next)])


def _pick(w: np.ndarray, want: float, limit: float) -> np.ndarray:
    """Which of these partitions (loads heaviest first) to release: at least `want` load when possible, at most
    `limit`, the least load, then the fewest partitions. Either the lightest single partition reaching `want`, or
    the heaviest of those below `want` while they stay under it plus the lightest other one that closes the gap."""
    usable = np.flatnonzero((w > 0) & (w <= limit))
    if want <= 0 or len(usable) == 0:
        return usable[:0]
    ws = w[usable]
    reaching = np.flatnonzero(ws >= want)
    single = usable[reaching[-1:]]  # the lightest reaching partition (ties: the later, i.e. higher, id)
    small = np.flatnonzero(ws < want)
    sums = np.cumsum(ws[small])
    j = int(np.searchsorted(sums, want, side="left"))
    taken = small[:j]
    got = float(sums[j - 1]) if j else 0.0
    rest = np.setdiff1d(np.arange(len(ws)), taken, assume_unique=True)
    closing = rest[(ws[rest] >= want - got) & (ws[rest] <= limit - got)]
    if len(closing):
        several: NDArray[np.int64] = usable[np.append(taken, closing[-1])]
        if len(single) == 0 or w[several].sum() < w[single].sum():
            return several
    return single if len(single) else usable[taken]


def _holdings(builder: _Builder, members: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Partitions of `members`, grouped by member and heaviest first (ties by id), with each group's start."""
    wanted = np.zeros(len(builder.load), dtype=bool)
    wanted[members] = True
    mine = np.flatnonzero(wanted[np.maximum(builder.owner, 0)] & (builder.owner >= 0))
    mine = mine[np.lexsort((mine, -builder.w[mine], builder.owner[mine]))]
    held_by = builder.owner[mine]
    return mine, np.stack([np.searchsorted(held_by, members), np.searchsorted(held_by, members, "right")], axis=1)


def _release(builder: _Builder, members: np.ndarray, wants: np.ndarray) -> None:
    """Each member (in the given order) releases about `want` load into the pool (`_pick`), never its pinned
    partition; stops when the budget is spent."""
    if len(members) == 0:
        return
    mine, spans = _holdings(builder, members)
    for i, (m, (start, end)) in enumerate(zip(members.tolist(), spans.tolist(), strict=True)):
        parts = mine[start:end]
        parts = parts[parts != builder.pinned[m]]
        chosen = parts[_pick(builder.w[parts], float(wants[i]), np.inf)]
        if len(chosen) == 0:
            continue
        if not builder.affordable(float(builder.cost(chosen, -1).sum())):
            return
        builder.move(chosen, np.full(len(chosen), -1))


def _shed(builder: _Builder) -> None:
    """Members above the top of their band release the excess, the most overloaded first."""
    excess = builder.load - builder.cap
    over = np.flatnonzero(excess > 1e-12 * max(builder.mean, 1.0))
    over = over[np.lexsort((builder.rank[over], -excess[over]))]
    _release(builder, over, excess[over])
    # A member over the count ceiling releases its lightest partitions (rule 2 outranks balance).
    over = np.flatnonzero(builder.count > builder.count_hi)
    if len(over):
        mine, spans = _holdings(builder, over)
        for m, end in zip(over.tolist(), spans[:, 1].tolist(), strict=True):
            parts = mine[end - int(builder.count[m] - builder.count_hi) : end]
            if builder.affordable(float(builder.cost(parts, -1).sum())):
                builder.move(parts, np.full(len(parts), -1))


def _pull(builder: _Builder) -> None:
    """Members still below their band take from members above their goal, the largest surplus first: each donor
    releases about its surplus (never dropping below its band) and each partition goes straight to the eligible
    member furthest below its goal, until every such member reached its goal."""
    short = builder.goal - builder.load
    needy = np.flatnonzero(short > builder.eps)
    if len(needy) == 0:
        return
    surplus = builder.load - builder.goal
    donors = np.flatnonzero((surplus > 0) & (builder.pinned < 0))
    donors = donors[np.lexsort((builder.rank[donors], -surplus[donors]))]
    mine, spans = _holdings(builder, donors)
    needy = needy[np.argsort(builder.rank[needy], kind="stable")]  # argmax below then breaks ties by rank
    need = np.maximum(builder.goal[needy] - builder.load[needy], 0.0)
    for a, (start, end) in zip(donors.tolist(), spans.tolist(), strict=True):
        wanted: NDArray[np.bool_] = np.any(builder.eligible[:, needy[need > 0]], axis=1)  # per class
        if not wanted.any():
            return
        parts = mine[start:end]
        parts = parts[wanted[builder.pclass[parts]]]
        give = min(float(surplus[a]), float(need.sum()))
        chosen, to = [], []
        for p in parts[_pick(builder.w[parts], give, give + builder.eps)].tolist():
            ok = np.where((need > 0) & builder.eligible[builder.pclass[p], needy], need, -np.inf)
            i = int(np.argmax(ok))
            if ok[i] == -np.inf:
                continue
            chosen.append(p)
            to.append(int(needy[i]))
            need[i] -= builder.w[p]
        if not chosen:
            continue
        if not builder.affordable(float(builder.cost(np.asarray(chosen), np.asarray(to)).sum())):
            return
        builder.move(np.asarray(chosen), np.asarray(to))


def _place(builder: _Builder) -> None:
    """Give every pooled partition a subscriber: the heavier ones one by one, heaviest first, to the eligible
    member with the least load (LPT); then the light rest class by class (fewest subscribers first) in one cut
    along the members' room."""
    pooled = np.flatnonzero(builder.pool)
    pooled = pooled[np.argsort(-builder.w[pooled], kind="stable")]  # heaviest first, ties by id (stable)
    heavy = pooled[builder.w[pooled] > builder.eps / 2][:_MAX_LPT]
    if len(heavy):
        _place_lpt(builder, heavy)
    pooled = pooled[len(heavy) :]
    if len(builder.classes) > 1:
        pooled = pooled[np.argsort(builder.pclass[pooled], kind="stable")]  # grouped by class, order kept
    bounds = np.searchsorted(builder.pclass[pooled], np.arange(len(builder.classes) + 1))
    for k, subscribers in enumerate(builder.classes):
        parts = pooled[bounds[k] : bounds[k + 1]]
        if len(parts) == 0:
            continue
        open_ = subscribers[builder.count[subscribers] < builder.count_hi]
        members = open_ if len(open_) else subscribers
        positive = parts[builder.w[parts] > 0]
        if len(positive):
            _place_cut(builder, positive, members)
        zero = parts[builder.w[parts] <= 0]
        if len(zero):
            _place_by_count(builder, zero, members)
    builder.drop_index()


def _place_lpt(builder: _Builder, parts: np.ndarray) -> None:
    """Longest processing time first: each partition (heaviest first) to the eligible member with the least load,
    ties MemberInfo order; a member at the count ceiling takes no more unless every eligible one is there.

    One heap per topic class; an entry is stale once the member took a partition of another class, and is then
    pushed back with its new load (loads only grow here, so a stale entry surfaces before its true place).
    """
    load = builder.load.copy()
    count = builder.count.copy()
    heaps: dict[int, list[tuple[float, int, int]]] = {}
    to = np.empty(len(parts), dtype=np.int32)
    for i, (p, k) in enumerate(zip(parts.tolist(), builder.pclass[parts].tolist(), strict=True)):
        heap = heaps.get(k)
        if heap is None:
            members = builder.classes[k]
            open_ = members[count[members] < builder.count_hi]
            heap = heaps[k] = [
                (float(load[m]), int(builder.rank[m]), int(m)) for m in (open_ if len(open_) else members)
            ]
            heapq.heapify(heap)
        while True:
            key, r, m = heapq.heappop(heap)
            if key == load[m]:
                break
            heapq.heappush(heap, (float(load[m]), r, m))
        to[i] = m
        load[m] += builder.w[p]
        count[m] += 1
        if count[m] < builder.count_hi or len(heap) == 0:
            heapq.heappush(heap, (float(load[m]), r, m))
    builder.move(parts, to)


def _place_cut(builder: _Builder, parts: np.ndarray, members: np.ndarray) -> None:
    """Raise the lightest members' loads to one common level: lay their room end to end (MemberInfo order) and
    each partition goes to the member whose stretch holds its midpoint. The partitions are laid in van der Corput
    order of their load rank, so any stretch gets heavy and light ones alike and counts follow the room."""
    members = members[np.argsort(builder.rank[members], kind="stable")]
    slack = builder.load[members]
    room = np.maximum(_water_level(slack, float(builder.w[parts].sum())) - slack, 0.0)
    laid = parts[_van_der_corput(len(parts))]
    mid = np.cumsum(builder.w[laid]) - builder.w[laid] / 2
    slot = np.minimum(np.searchsorted(np.cumsum(room), mid), len(room) - 1)
    builder.move(laid, members[slot])


def _van_der_corput(n: int) -> np.ndarray:
    """A permutation of 0..n-1 (bit-reversed counting) whose every run samples the whole range evenly."""
    bits = max(1, int(n - 1).bit_length())
    i = np.arange(1 << bits, dtype=np.uint32)
    r = np.zeros_like(i)
    for shift in (0, 8, 16, 24):  # reverse 32 bits a byte at a time, then keep the top `bits`
        r |= _REVERSED_BYTE[(i >> shift) & 0xFF] << (24 - shift)
    r >>= 32 - bits
    return r[r < n].astype(np.int64)


_REVERSED_BYTE = np.asarray([int(f"{b:08b}"[::-1], 2) for b in range(256)], dtype=np.uint32)


def _place_by_count(builder: _Builder, parts: np.ndarray, members: np.ndarray) -> None:
    """Load-free partitions level the members' counts (fewest partitions first), the remainder in MemberInfo
    order."""
    members = members[np.argsort(builder.rank[members], kind="stable")]
    have = builder.count[members]
    lo, hi = int(have.min()), int(have.min()) + len(parts)
    while lo < hi:  # the highest level L with sum(max(0, L - have)) <= len(parts)
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if int(np.maximum(mid - have, 0).sum()) <= len(parts) else (lo, mid - 1)
    added = np.maximum(lo - have, 0)
    extra = np.flatnonzero(have + added == lo)[: len(parts) - int(added.sum())]
    added[extra] += 1
    builder.move(parts, np.repeat(members, added))


def _repair_counts(builder: _Builder) -> None:
    """With max_count_spread: members still above the ceiling or below the floor trade single partitions with the
    member furthest the other way that may take them, the one keeping loads closest chosen."""
    if builder.count_hi == np.iinfo(np.int64).max:
        return
    outside = (
        np.maximum(builder.count - builder.count_hi, 0).sum() + np.maximum(builder.count_lo - builder.count, 0).sum()
    )
    for _ in range(int(outside)):  # each trade brings one member one partition closer to the window
        over = np.flatnonzero(builder.count > builder.count_hi)
        under = np.flatnonzero(builder.count < builder.count_lo)
        if len(over):
            a = builder.first_member(over, -builder.count[over])
            takers = np.flatnonzero(builder.count < builder.count_hi)
        elif len(under):
            b = builder.first_member(under, builder.count[under])
            givers = np.flatnonzero(
                (builder.count > builder.count_lo) & builder.holds[builder.eligible[:, b]].any(axis=0)
            )
            takers = np.asarray([b])
            a = builder.first_member(givers, -builder.count[givers]) if len(givers) else -1
        else:
            return
        if a < 0 or not _count_move(builder, a, takers):
            return


def _count_move(builder: _Builder, a: int, takers: np.ndarray) -> bool:
    """Move one of a's partitions to the taker with the fewest partitions that may take it, the partition that
    leaves the two loads closest; False when no taker subscribes to any of a's topics."""
    parts = builder.parts_of(a)
    if len(parts) == 0 or len(takers) == 0:
        return False
    takers = takers[takers != a]
    b_of = np.full(len(builder.classes), -1, dtype=np.int64)
    for k in np.unique(builder.pclass[parts]).tolist():
        ok = takers[builder.eligible[k, takers]]
        if len(ok):
            b_of[k] = builder.first_member(ok, builder.count[ok], builder.load[ok])
    b = b_of[builder.pclass[parts]]
    parts, b = parts[b >= 0], b[b >= 0]
    if len(parts) == 0:
        return False
    gap = np.abs((builder.load[a] - builder.w[parts]) - (builder.load[b] + builder.w[parts]))
    i = int(np.lexsort((parts, gap))[0])
    builder.move(parts[i : i + 1], b[i : i + 1])
    return True


def _best_give(builder: _Builder, a: int, eps: float) -> tuple[np.ndarray, np.ndarray] | None:
    """The move from member a to the lightest member eligible for the partition that evens the pair most, else
    the best swap (single, then bundle) with one of the lightest members eligible for any of a's partitions; None
    if none lands the receiver `eps` below a's load. Moves respect the count window, swaps keep counts."""
    parts = builder.parts_of(a)
    if len(parts) == 0:
        return None
    ks = builder.pclass[parts]
    present = np.unique(ks)
    others = np.ones(len(builder.load), dtype=bool)
    others[a] = False
    if builder.count[a] > builder.count_lo[a]:
        receiver = np.full(len(builder.classes), -1, dtype=np.int64)
        receiver[present] = builder.lightest(builder.eligible[present] & others & (builder.count < builder.count_hi))[
            :, 0
        ]
        move = _best_move(builder, a, parts, receiver[ks], eps)
        if move is not None:
            return move
    takers = builder.lightest(builder.eligible[present].any(axis=0) & others, _DONORS)
    takers = takers[takers >= 0].tolist()
    for b in takers:
        swap = _best_swap(builder, a, b, eps) or _bundle_swap(builder, a, b, eps)
        if swap is not None:
            return swap
    for b in takers:
        chain = _chain(builder, a, b, eps)
        if chain is not None:
            return chain
    return None


def _best_take(builder: _Builder, b: int, eps: float) -> tuple[np.ndarray, np.ndarray] | None:
    """The move (or swap) to member b from one of the heaviest members holding partitions b may take."""
    mine = builder.eligible[:, b]
    donors = np.flatnonzero(builder.holds[mine].any(axis=0) & (builder.load > builder.load[b] + eps))
    # A donor with one partition cannot give it without ending below b (it is its whole load).
    donors = donors[builder.count[donors] > 1]
    for a in donors[np.lexsort((builder.rank[donors], -builder.load[donors]))][:_DONORS].tolist():
        move = None
        if builder.count[b] < builder.count_hi and builder.count[a] > builder.count_lo[a]:
            parts = builder.parts_of(a)
            parts = parts[mine[builder.pclass[parts]]]
            move = _best_move(builder, a, parts, np.full(len(parts), b), eps)
        move = move or _best_swap(builder, a, b, eps) or _bundle_swap(builder, a, b, eps)
        if move is not None:
            return move
    return None


def _best_move(
    builder: _Builder, a: int, parts: np.ndarray, to: np.ndarray, eps: float
) -> tuple[np.ndarray, np.ndarray] | None:
    """Among a's partitions and their receivers: the load nearest half the pair's gap, moving the receiver to at
    most a's load minus eps (so the pair's max falls); ties by partition id. When that partition covers less than
    half the gap by more than eps, several go to the same receiver at once (`_pick` towards half the gap, at most
    the gap minus eps): the same outcome as that many single moves, in one step."""
    ok = to >= 0
    parts, to = parts[ok], to[ok]
    w = builder.w[parts]
    gap = builder.load[a] - builder.load[to]
    fine = (w > 0) & (w <= gap - eps)
    if builder.budget < np.inf:
        fine &= builder.spent + builder.cost(parts, to) <= builder.budget
    if not fine.any():
        return None
    parts, to, w, gap = parts[fine], to[fine], w[fine], gap[fine]
    i = int(np.lexsort((parts, np.abs(w - gap / 2)))[0])
    b, half = int(to[i]), float(gap[i]) / 2
    room = min(int(builder.count[a] - builder.count_lo[a]), builder.count_hi - int(builder.count[b]))
    if w[i] >= half - eps or room < 2:
        return parts[i : i + 1], to[i : i + 1]
    same = parts[to == b]
    same = same[np.lexsort((same, -builder.w[same]))]
    several = same[_pick(builder.w[same], half, 2 * half - eps)][:room]
    if len(several) < 2 or not builder.affordable(float(builder.cost(several, b).sum())):
        return parts[i : i + 1], to[i : i + 1]
    return several, np.full(len(several), b)


def _best_swap(builder: _Builder, a: int, b: int, eps: float) -> tuple[np.ndarray, np.ndarray] | None:
    """The swap of p (from a) and q (from b) that moves the least load per unit the pair's max falls; it must fall
    by at least eps (the load difference d = w(p) - w(q) within [eps, gap - eps]), ties by partition ids."""
    gap = float(builder.load[a] - builder.load[b])
    if gap < 2 * eps:
        return None
    mine, theirs = builder.parts_of(a), builder.parts_of(b)
    mine = mine[builder.eligible[builder.pclass[mine], b]]
    theirs = theirs[builder.eligible[builder.pclass[theirs], a]]
    if len(mine) == 0 or len(theirs) == 0:
        return None
    theirs = theirs[np.lexsort((theirs, builder.w[theirs]))]
    wt, wm = builder.w[theirs], builder.w[mine]
    at = np.searchsorted(wt, wm - gap / 2)
    best: tuple[float, int, int] | None = None
    for side in (at - 1, at):  # for each p, the partners on either side of the ideal w(p) - gap / 2
        j = np.clip(side, 0, len(theirs) - 1)
        d = wm - wt[j]
        fine = (side >= 0) & (side < len(theirs)) & (d >= eps) & (d <= gap - eps)
        if builder.budget < np.inf:
            fine &= builder.spent + builder.cost(mine, b) + builder.cost(theirs[j], a) <= builder.budget
        i = np.flatnonzero(fine)
        if len(i) == 0:
            continue
        score = (wm[i] + wt[j[i]]) / np.minimum(d[i], gap - d[i])
        k = int(np.lexsort((theirs[j[i]], mine[i], score))[0])
        cand = (float(score[k]), int(mine[i[k]]), int(theirs[j[i[k]]]))
        best = cand if best is None or cand < best else best
    if best is None:
        return None
    return np.asarray([best[1], best[2]]), np.asarray([b, a])


def _bundle_swap(builder: _Builder, a: int, b: int, eps: float) -> tuple[np.ndarray, np.ndarray] | None:
    """One of a's heaviest partitions for a bundle of b's lighter ones (the heaviest of them first) worth about
    half the gap less, when no single move or swap helps (three 30s against a 30 and many 1s); same rules."""
    gap = float(builder.load[a] - builder.load[b])
    if gap < 2 * eps:
        return None
    mine, theirs = builder.parts_of(a), builder.parts_of(b)
    mine = mine[builder.eligible[builder.pclass[mine], b]]
    theirs = theirs[builder.eligible[builder.pclass[theirs], a] & (builder.w[theirs] > 0)]
    if len(mine) == 0 or len(theirs) == 0:
        return None
    mine = mine[np.lexsort((mine, -builder.w[mine]))][:_BUNDLE_TRIES]
    theirs = theirs[np.lexsort((theirs, -builder.w[theirs]))]
    best: tuple[float, int, int, np.ndarray] | None = None
    for p in mine.tolist():
        wp = float(builder.w[p])
        fits = theirs[builder.w[theirs] <= wp - eps]  # a bundle member weighing more would leave nothing to gain
        sums = np.cumsum(builder.w[fits])
        k = int(np.searchsorted(sums, wp - gap / 2, side="right"))  # the heaviest prefix up to the ideal
        for n in (k, k + 1):
            if n == 0 or n > len(fits):
                continue
            d = wp - float(sums[n - 1])
            if not eps <= d <= gap - eps:
                continue
            if builder.count[a] + n - 1 > builder.count_hi or builder.count[b] - (n - 1) < builder.count_lo[b]:
                continue
            if builder.budget < np.inf and not builder.affordable(
                float(builder.cost(np.asarray([p]), b).sum() + builder.cost(fits[:n], a).sum())
            ):
                continue
            cand = ((wp + float(sums[n - 1])) / min(d, gap - d), n, p, fits[:n])
            best = cand if best is None or cand[:3] < best[:3] else best
    if best is None:
        return None
    return np.append(best[2], best[3]), np.append(b, np.full(best[1], a))


def _chain(builder: _Builder, a: int, b: int, eps: float) -> tuple[np.ndarray, np.ndarray] | None:
    """a gives p to b while b passes q (of a topic class a cannot take) on to the lightest member eligible for it:
    with overlapping subscriptions the heaviest member may reach only members about as loaded, who can pass load on.
    Valid when a, b and the third member all end at least eps below a's load; least load moved per unit gained."""
    if builder.count[a] <= builder.count_lo[a]:
        return None
    mine, theirs = builder.parts_of(a), builder.parts_of(b)
    mine = mine[builder.eligible[builder.pclass[mine], b] & (builder.w[mine] > 0)]
    theirs = theirs[builder.w[theirs] > 0]
    if len(mine) == 0 or len(theirs) == 0:
        return None
    third = builder.count < builder.count_hi
    third[[a, b]] = False
    present = np.unique(builder.pclass[theirs])
    onward = np.full(len(builder.classes), -1, dtype=np.int64)
    onward[present] = builder.lightest(builder.eligible[present] & third)[:, 0]
    c = onward[builder.pclass[theirs]]
    theirs, c = theirs[c >= 0], c[c >= 0]
    if len(theirs) == 0:
        return None
    mine = mine[np.lexsort((mine, builder.w[mine]))]
    wm, wq = builder.w[mine], builder.w[theirs]
    la, lb, lc = float(builder.load[a]), float(builder.load[b]), builder.load[c]
    at = np.searchsorted(wm, (la - lb + wq) / 2)  # for each q, the p evening a and b
    best: tuple[float, int, int] | None = None
    for side in (at - 1, at):
        i = np.clip(side, 0, len(mine) - 1)
        top = np.maximum(np.maximum(la - wm[i], lb + wm[i] - wq), lc + wq)
        fine = (side >= 0) & (side < len(mine)) & (top <= la - eps)
        if builder.budget < np.inf:
            fine &= builder.spent + builder.cost(mine[i], b) + builder.cost(theirs, c) <= builder.budget
        j = np.flatnonzero(fine)
        if len(j) == 0:
            continue
        score = (wm[i[j]] + wq[j]) / (la - top[j])
        k = int(np.lexsort((theirs[j], mine[i[j]], score))[0])
        cand = (float(score[k]), int(mine[i[j[k]]]), int(j[k]))
        best = cand if best is None or cand < best else best
    if best is None:
        return None
    return np.asarray([best[1], theirs[best[2]]]), np.asarray([b, c[best[2]]])


def _untangle(builder: _Builder) -> None:
    """Undo crossed hand-overs: partitions of one topic class and one load are interchangeable, so among those
    that changed hands each member first gets back its own previous ones (as many as it holds of the kind now),
    and the rest fill the remaining places, lowest ids first. Loads and counts stay as they are; only fewer
    partitions move (shed partitions re-placed, or equal loads such as unit loads, cross over easily)."""
    parts = np.flatnonzero((builder.owner >= 0) & (builder.owner != builder.previous))
    n = len(builder.load) + 1  # member ids, and n - 1 for "no previous owner"
    prev = np.where(builder.previous[parts] >= 0, builder.previous[parts], n - 1)
    parts = parts[np.lexsort((parts, prev, builder.w[parts], builder.pclass[parts]))]
    kind_key = np.stack([builder.pclass[parts].astype(np.float64), builder.w[parts]])
    kind = np.cumsum(np.concatenate([[True], np.any(kind_key[:, 1:] != kind_key[:, :-1], axis=0)])) - 1
    shared = np.bincount(kind)[kind] > 1  # a kind of one partition has nothing to exchange
    parts, kind = parts[shared], kind[shared].astype(np.int64)
    if len(parts) == 0:
        return
    prev = np.where(builder.previous[parts] >= 0, builder.previous[parts], n - 1)
    held = kind * n + builder.owner[parts]  # (kind, member now): the places
    cells, places = np.unique(held, return_counts=True)
    was = kind * n + prev  # (kind, previous member), sorted by the order above
    at = np.minimum(np.searchsorted(cells, was), len(cells) - 1)
    room = np.where((prev < n - 1) & (cells[at] == was), places[at], 0)
    home = np.arange(len(parts)) - np.searchsorted(was, was) < room
    free = places - np.bincount(at[home], minlength=len(cells))
    rest = parts[~home]  # already in (kind, id) order within each previous owner: re-sort by (kind, id)
    rest = rest[np.lexsort((rest, kind[~home]))]
    target = np.empty(len(builder.w), dtype=np.int64)
    target[parts[home]] = prev[home]
    target[rest] = np.repeat(cells % n, free)  # the free places, kind by kind, member by member
    change = parts[target[parts] != builder.owner[parts]]
    if len(change):
        builder.move(change, target[change])


def _extremes(builder: _Builder) -> tuple[int, int]:
    """The heaviest member that has something to give and the lightest member, ties MemberInfo order.

    A member holding a single partition cannot give it to a lighter member without that member ending heavier
    than it was (a heavy partition alone on its member is where the bound puts it), so it is passed over.
    """
    givers = builder.count > 1
    givers = givers if givers.any() else np.ones(len(builder.load), dtype=bool)
    heaviest = np.where(givers[builder.by_rank], builder.load[builder.by_rank], -np.inf)
    return int(builder.by_rank[np.argmax(heaviest)]), int(builder.by_rank[np.argmin(builder.load[builder.by_rank])])


def _settled(builder: _Builder) -> bool:
    """Whether to leave the group as it is: counts inside their window, and neither the heaviest member can give
    nor the lightest member take a partition (or swap) that evens them by 2 x eps. Hysteresis: once it must move,
    `_improve` evens the group to eps, so a group this assignor balanced is left alone next time."""
    if np.any(builder.count > builder.count_hi) or np.any(builder.count < builder.count_lo):
        return False
    heaviest, lightest = _extremes(builder)
    return (
        _best_give(builder, heaviest, 2 * builder.eps) is None
        and _best_take(builder, lightest, 2 * builder.eps) is None
    )


def _improve(builder: _Builder) -> None:
    """Moves and swaps until settled; each one lowers the sum of squared loads by at least 2 x eps x the load
    it shifts, so the loop ends; the iteration cap bounds its time on huge groups."""
    for _ in range(4 * len(builder.load) + 1000):
        heaviest, lightest = _extremes(builder)
        step = _best_give(builder, heaviest, builder.eps) or _best_take(builder, lightest, builder.eps)
        if step is None:
            return
        builder.move(*step)
