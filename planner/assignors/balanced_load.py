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

Phases, each a function: keep valid ownership (`LoadBuilder.keep`, `_load_builder`; stop there when `settled`);
then placement, below: pin heavy partitions (heavier than the mean of what is left, each alone on a member);
member goals (water-filling each topic class's load over its subscribers, fewest subscribers first, as
UniformHeterogeneousAssignmentBuilder fills the least-loaded member, but by load); place orphaned partitions (LPT
for the heavier, one vectorized cut for the light rest); shed what a member holds above its goal band and place
it; pull for members below their band; then the local search of `_load_local_search`: repair counts, improve
between the heaviest and the lightest member, untangle crossed hand-overs. When placing the orphans
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

import numpy as np

from planner.assignors._load_builder import LoadBuilder, MoveBudget, pick
from planner.assignors._load_local_search import improve, repair_counts, settled, untangle
from planner.errors import InputError
from planner.group import GroupSpec
from planner.load import assignable

__all__ = ["BalancedLoadAssignor", "MoveBudget", "balanced_load_assign"]

_MAX_LPT = 50_000  # heaviest pool partitions placed one by one (heap); the lighter rest in one vectorized cut
_SWEEPS = 12  # water-filling sweeps for the goals of overlapping topic classes (one when subscriptions are equal)


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
    builder = LoadBuilder.keep(group, tolerance, max_move_share, move_budget, max_count_spread)
    orphans = bool(builder.pool.any())
    if not orphans and settled(builder):
        return builder.owner  # load-balanced and nothing orphaned: nothing moves
    kept = builder.moves
    builder.drop_index()
    _pin_heavy(builder)
    _goals(builder)
    _place(builder)
    placed, placed_max = builder.owner.copy(), float(builder.load.max())
    placed_settled = (orphans or builder.moves > kept) and settled(builder)  # unmoved, it is still unsettled
    builder.drop_index()
    _shed(builder)
    _place(builder)
    _pull(builder)
    repair_counts(builder)
    improve(builder)
    untangle(builder)
    if placed_settled and builder.load.max() > placed_max - builder.eps:
        return placed  # placing the orphans left the group settled and reshuffling does not pay: keep the rest
    return builder.owner


def _pin_heavy(builder: LoadBuilder) -> None:
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
                builder.move([p], [builder.first_member(subscribers, builder.load[subscribers])])
            continue
        to = builder.first_member(free, builder.load[free])
        if held_by >= 0 and not builder.allows([p], to):
            continue
        builder.move([p], [to])
        builder.pinned[to] = p


def _goals(builder: LoadBuilder) -> None:
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


def _holdings(builder: LoadBuilder, members: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Partitions of `members`, grouped by member and heaviest first (ties by id), with each group's start."""
    wanted = np.zeros(len(builder.load), dtype=bool)
    wanted[members] = True
    mine = np.flatnonzero(wanted[np.maximum(builder.owner, 0)] & (builder.owner >= 0))
    mine = mine[np.lexsort((-builder.w[mine], builder.owner[mine]))]  # stable: ties stay in id order
    held_by = builder.owner[mine]
    return mine, np.stack([np.searchsorted(held_by, members), np.searchsorted(held_by, members, "right")], axis=1)


def _release(builder: LoadBuilder, members: np.ndarray, wants: np.ndarray) -> None:
    """Each member (in the given order) releases about `want` load into the pool (`pick`), never its pinned
    partition; stops when the budget is spent."""
    if len(members) == 0:
        return
    mine, spans = _holdings(builder, members)
    ids, loads, pinned = mine.tolist(), builder.w[mine].tolist(), builder.pinned.tolist()
    for m, want, (start, end) in zip(members.tolist(), wants.tolist(), spans.tolist(), strict=True):
        parts, w = ids[start:end], loads[start:end]
        if pinned[m] in parts:
            at = parts.index(pinned[m])
            del parts[at], w[at]
        chosen = [parts[i] for i in pick(w, want, np.inf)]
        if not chosen:
            continue
        if not builder.allows(chosen, -1):
            return
        builder.move(chosen, [-1] * len(chosen))


def _shed(builder: LoadBuilder) -> None:
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
            if builder.allows(parts, -1):
                builder.move(parts, [-1] * len(parts))


def _pull(builder: LoadBuilder) -> None:
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
    loads, kinds = builder.w[mine], builder.pclass[mine]
    needy = needy[np.argsort(builder.rank[needy], kind="stable")]  # positions in MemberInfo order: ties by rank
    need = np.maximum(builder.goal[needy] - builder.load[needy], 0.0)
    takers = needy.tolist()
    # Per class, a heap of (-need, position) over the needy members that may take it: the one furthest below its
    # goal on top, ties by rank. Needs only shrink, so a stale entry surfaces before its true place (`_neediest`).
    takes = builder.eligible[:, needy] & (need > 0)
    heaps = [[(-need.item(i), i) for i in np.flatnonzero(row).tolist()] for row in takes]
    for heap in heaps:
        heapq.heapify(heap)
    wanted = np.asarray([_neediest(heap, need) >= 0 for heap in heaps])  # per class; changes only as a need is met
    total, everything = float(need.sum()), bool(wanted.all())
    for surplus_a, (start, end) in zip(surplus[donors].tolist(), spans.tolist(), strict=True):
        if not everything and not wanted.any():
            return
        parts, w, k = mine[start:end], loads[start:end], kinds[start:end]
        if not everything:
            offered = wanted[k]
            parts, w, k = parts[offered], w[offered], k[offered]
        give = min(surplus_a, total)
        chosen, to, met = [], [], False
        w_list, k_list = w.tolist(), k.tolist()
        for j in pick(w_list, give, give + builder.eps):
            i = _neediest(heaps[k_list[j]], need)
            if i < 0:
                continue
            chosen.append(int(parts[j]))
            to.append(takers[i])
            need[i] -= w_list[j]
            met = met or need[i] <= 0
        if not chosen:
            continue
        if not builder.allows(chosen, to):
            return
        builder.move(chosen, to)
        total = float(need.sum())
        if met:
            wanted = np.asarray([_neediest(heap, need) >= 0 for heap in heaps])
            everything = bool(wanted.all())


def _neediest(heap: list[tuple[float, int]], need: np.ndarray) -> int:
    """The position with the largest positive need in this heap, the lowest among equals; -1 if none is left. An
    entry whose need shrank since it was pushed goes back with its current need, or leaves once that is met."""
    while heap:
        key, i = heap[0]
        now = need.item(i)
        if -key == now:
            return i
        if now > 0:
            heapq.heapreplace(heap, (-now, i))
        else:
            heapq.heappop(heap)
    return -1


def _place(builder: LoadBuilder) -> None:
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


def _place_lpt(builder: LoadBuilder, parts: np.ndarray) -> None:
    """Longest processing time first: each partition (heaviest first) to the eligible member with the least load,
    ties MemberInfo order; a member at the count ceiling takes no more unless every eligible one is there.

    One heap per topic class; an entry is stale once the member took a partition of another class, and is then
    pushed back with its new load (loads only grow here, so a stale entry surfaces before its true place).
    """
    load, count, rank = builder.load.tolist(), builder.count.tolist(), builder.rank.tolist()  # Python scalars
    heaps: dict[int, list[tuple[float, int, int]]] = {}
    to = []
    for w, k in zip(builder.w[parts].tolist(), builder.pclass[parts].tolist(), strict=True):
        heap = heaps.get(k)
        if heap is None:
            members = builder.classes[k].tolist()
            open_ = [m for m in members if count[m] < builder.count_hi]
            heap = heaps[k] = [(load[m], rank[m], m) for m in (open_ or members)]
            heapq.heapify(heap)
        while True:
            key, r, m = heapq.heappop(heap)
            if key == load[m]:
                break
            heapq.heappush(heap, (load[m], r, m))
        to.append(m)
        load[m] += w
        count[m] += 1
        if count[m] < builder.count_hi or len(heap) == 0:
            heapq.heappush(heap, (load[m], r, m))
    builder.move(parts, to)


def _place_cut(builder: LoadBuilder, parts: np.ndarray, members: np.ndarray) -> None:
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


def _place_by_count(builder: LoadBuilder, parts: np.ndarray, members: np.ndarray) -> None:
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
