"""The balanced-load assignment under construction (`planner.assignors.balanced_load`): who owns each partition,
each member's load, count and topic classes, the move budget spent, and the moves every phase makes through it.

`LoadBuilder.keep` is the claim phase (every still-valid owner keeps its partitions); `move` keeps the tallies as
partitions change hands; `holding`, `first_member`, `by_load`, `heaviest_first`, `lightest_open` and `lightest_few`
answer the phases' questions in MemberInfo order. `pick` chooses which of a member's partitions to release or hand
over.

Most groups are small (hundreds of partitions, tens of members), where an array call costs more than the work it
does: what the local search asks again and again is kept until a move changes it (each member's `Holding`, the
members in (load, MemberInfo) order), and a move of a few partitions updates the tallies in Python scalars. Work
over many partitions stays in array calls.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right, insort
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from operator import neg
from typing import Literal

import numpy as np
from numpy.typing import NDArray

from planner.assignors._member_info import member_info_rank
from planner.group import GroupSpec, previous_owners
from planner.load import max_load_bound, partition_weights, topic_classes

MoveBudget = Literal["load", "partitions"]
_SCANS = 32  # `holding` answers by a scan of owner[] (about 1 ms per million) before it builds the index
_FEW = 64  # moves of at most this many partitions update the tallies one by one, more with one tally per array
NO_CEILING = int(np.iinfo(np.int64).max)  # count_hi without max_count_spread (np.iinfo costs ~20 us a call)


class Holding:
    """One member's partitions as the local search reads them: ids ascending with their loads and topic classes,
    and the same ordered by load either way (ties by id), each sorted once while the holding lasts."""

    def __init__(self, parts: np.ndarray, w: np.ndarray, k: np.ndarray) -> None:
        self.parts, self.w, self.k = parts, w, k
        self._lightest: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
        self._heaviest: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
        self._least: float | None = None

    def least_load(self) -> float:
        """The lightest partition that carries load (inf if none): whether any could fit a gap."""
        if self._least is None:
            self._least = float(self.w.min(where=self.w > 0, initial=np.inf))
        return self._least

    def lightest_first(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(parts, loads, classes) by load, ties by id (a stable sort of the ascending ids)."""
        if self._lightest is None:
            order = np.argsort(self.w, kind="stable")
            self._lightest = self.parts[order], self.w[order], self.k[order]
        return self._lightest

    def heaviest_first(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(parts, loads, classes) heaviest first, ties by id."""
        if self._heaviest is None:
            order = np.argsort(-self.w, kind="stable")
            self._heaviest = self.parts[order], self.w[order], self.k[order]
        return self._heaviest


@dataclass
class LoadBuilder:
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
    scans: int = 0  # `holding` calls answered by a scan since the index was dropped
    added: dict[int, list[int]] = field(default_factory=dict)  # partitions moved to a member since the CSR
    held: dict[int, Holding] = field(default_factory=dict)  # `holding`'s answers, dropped as moves change them
    ranking: list[tuple[float, int, int]] | None = None  # (load, rank, member) ascending, as `by_load` last saw it
    ranked_load: list[float] = field(default_factory=list)  # each member's load in `ranking`
    stale: set[int] = field(default_factory=set)  # members whose load changed since then
    moves: int = 0  # calls of `move` so far

    @classmethod
    def keep(
        cls,
        group: GroupSpec,
        tolerance: float,
        max_move_share: float | None,
        move_budget: MoveBudget,
        max_count_spread: int | None,
    ) -> LoadBuilder:
        """Claim phase: every owned partition stays with its owner while that owner still subscribes to it."""
        n_members = len(group.members)
        w = partition_weights(group)
        tclass, eligible = topic_classes(group)  # topics with the same subscribers, fewest subscribers first
        pclass = np.repeat(tclass, group.partition_counts)
        live = pclass >= 0  # planner.load.assignable: the topic has a subscriber

        rank = member_info_rank(group)
        owned, _ = previous_owners(group)
        # A topic's subscribers are its class's: an owner still subscribes to the partition iff it may take its class.
        valid = (owned >= 0) & live
        valid[valid] = eligible[pclass[valid], owned[valid]]
        previous = np.where(valid, owned, -1).astype(np.int32)
        owner = previous.copy()
        total = float(w[live].sum())
        mean = total / n_members
        holds = _tally(pclass[valid], owner[valid], len(eligible), n_members)
        count_lo = np.zeros(n_members, dtype=np.int64)
        count_hi = NO_CEILING
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

    def allows(self, parts: Sequence[int] | np.ndarray, to: Sequence[int] | np.ndarray | int) -> bool:
        """Whether moving `parts` to `to` stays within the budget (always without one: nothing to sum)."""
        return self.budget == np.inf or self.affordable(float(self.cost(np.asarray(parts), np.asarray(to)).sum()))

    def move(self, parts: Sequence[int] | np.ndarray, to: Sequence[int] | np.ndarray) -> None:
        """Give `parts` to `to` (member ids, or -1 to release them into the pool), keeping the tallies."""
        self.moves += 1
        if len(parts) > _FEW:
            self._move_many(np.asarray(parts, dtype=np.int64), np.asarray(to, dtype=np.int32))
            return
        ps, ts = _ints(parts), _ints(to)
        if self.budget < np.inf:  # what was spent matters only against a budget
            self.spent += float(self.cost(np.asarray(ps, dtype=np.int64), np.asarray(ts)).sum())
        owner, load, count, holds, pool = self.owner, self.load, self.count, self.holds, self.pool
        frm = [owner.item(p) for p in ps]
        wps = [self.w.item(p) for p in ps]
        kps = [self.pclass.item(p) for p in ps]
        # One partition at a time, releases first, in order: the sums np.add.at makes, in Python scalars (`item`
        # and a store cost less than NumPy's scalar arithmetic, and far less than np.add.at on a few).
        for m, wp, kp in zip(frm, wps, kps, strict=True):
            if m >= 0:
                load[m] = load.item(m) - wp
                count[m] = count.item(m) - 1
                holds[kp, m] = holds.item(kp, m) - 1
        for m, wp, kp in zip(ts, wps, kps, strict=True):
            if m >= 0:
                load[m] = load.item(m) + wp
                count[m] = count.item(m) + 1
                holds[kp, m] = holds.item(kp, m) + 1
        for p, m in zip(ps, ts, strict=True):
            owner[p] = m
            pool[p] = m < 0
        if self.index is not None:
            for p, m in zip(ps, ts, strict=True):
                if m >= 0:
                    self.added.setdefault(m, []).append(p)
        touched = set(frm)
        touched.update(ts)
        touched.discard(-1)
        self.stale |= touched
        for m in touched:
            self.held.pop(m, None)

    def _move_many(self, parts: np.ndarray, to: np.ndarray) -> None:
        """`move` for many partitions: one tally per array."""
        if self.budget < np.inf:
            self.spent += float(self.cost(parts, to).sum())
        n = len(self.load)
        frm = self.owner[parts]
        k = self.pclass[parts]
        for members, sign in ((frm, -1), (to, 1)):
            some = members >= 0
            self.load += sign * np.bincount(members[some], weights=self.w[parts][some], minlength=n)
            self.count += sign * np.bincount(members[some], minlength=n)
            self.holds += sign * _tally(k[some], members[some], *self.holds.shape)
        self.owner[parts] = to
        self.pool[parts] = to < 0
        self.held.clear()
        self.ranking = None
        if self.index is not None:
            for p, m in zip(parts.tolist(), to.tolist(), strict=True):
                if m >= 0:
                    self.added.setdefault(m, []).append(p)

    def drop_index(self) -> None:
        """Forget the per-member index before moving many partitions at once (it is rebuilt when needed)."""
        self.index, self.scans, self.added = None, 0, {}
        self.held.clear()

    def holding(self, m: int) -> Holding:
        """The partitions member m holds now (kept until a move changes them)."""
        held = self.held.get(m)
        if held is not None:
            return held
        if self.index is None and self.scans < _SCANS:
            self.scans += 1
            parts = np.flatnonzero(self.owner == m)
        else:
            if self.index is None:
                order = np.argsort(self.owner, kind="stable")
                starts = np.searchsorted(self.owner[order], np.arange(len(self.load) + 1))
                self.index, self.added = (order, starts), {}
            order, starts = self.index
            parts = order[starts[m] : starts[m + 1]]
            if m in self.added:
                parts = np.unique(np.concatenate([parts, np.asarray(self.added[m], dtype=np.int64)]))
            parts = parts[self.owner[parts] == m]
        held = self.held[m] = Holding(parts, self.w[parts], self.pclass[parts])
        return held

    def first_member(self, members: np.ndarray, *keys: np.ndarray) -> int:
        """The one of `members` with the smallest keys (in priority order), ties by MemberInfo order."""
        if len(keys) == 1:  # without a sort: the smallest key, then the lowest rank among those holding it
            tied = members[keys[0] == keys[0].min()]
            return int(tied[np.argmin(self.rank[tied])])
        return int(members[np.lexsort((self.rank[members], *reversed(keys)))[0]])

    def by_load(self) -> list[tuple[float, int, int]]:
        """Every member as (load, rank, member), ascending: least loaded first, ties by MemberInfo order. Kept up to
        date by re-inserting the members moves changed (re-sorted after a bulk move), so the phases' questions about
        the lightest or heaviest members cost a few steps, not an array call over every member."""
        if self.ranking is None or 8 * len(self.stale) > len(self.load):
            self.ranked_load = self.load.tolist()
            order = np.lexsort((self.rank, self.load))  # what sorting the tuples gives, without comparing them
            self.ranking = list(zip(self.load[order].tolist(), self.rank[order].tolist(), order.tolist(), strict=True))
        else:
            for m in self.stale:
                r = self.rank.item(m)
                del self.ranking[bisect_left(self.ranking, (self.ranked_load[m], r, m))]
                self.ranked_load[m] = self.load.item(m)
                insort(self.ranking, (self.ranked_load[m], r, m))
        self.stale.clear()
        return self.ranking

    def heaviest_first(self) -> Iterator[int]:
        """Members by load, heaviest first, ties by MemberInfo order."""
        ranking = self.by_load()
        end = len(ranking)
        while end:
            start = bisect_left(ranking, (ranking[end - 1][0],), 0, end)  # the members sharing the next load
            for _, _, m in ranking[start:end]:
                yield m
            end = start

    def lightest_open(self, k: int, *others: int) -> int:
        """The least-loaded member of topic class k below the count ceiling, but `others`, ties by MemberInfo order;
        -1 if none."""
        for _, _, m in self.by_load():
            if self.eligible.item(k, m) and m not in others and self.count.item(m) < self.count_hi:
                return m
        return -1

    def lightest_few(self, allowed: np.ndarray, n: int) -> list[int]:
        """The n least-loaded of the allowed members (bool[M]), lightest first, ties by MemberInfo order; fewer when
        fewer are allowed. Read off `by_load`, unless the n-th and the next allowed member weigh the same: then the
        ones a partial selection picks (argpartition's choice among them, not MemberInfo order, as it always was)."""
        few: list[int] = []
        last = np.nan
        for load, _, m in self.by_load():
            if allowed.item(m):
                if len(few) == n:
                    if load == last:
                        return self._partial_selection(allowed, n)
                    break
                few.append(m)
                last = load
        return few

    def _partial_selection(self, allowed: np.ndarray, n: int) -> list[int]:
        """`lightest_few` by argpartition over the members in MemberInfo order, then sorted by (load, rank)."""
        loads = np.where(allowed[self.by_rank], self.load[self.by_rank], np.inf)
        k = min(n, len(loads))
        j = np.argpartition(loads, k - 1)[:k] if k < len(loads) else np.arange(len(loads))
        j = j[np.lexsort((j, loads[j]))]
        few: list[int] = self.by_rank[j[np.isfinite(loads[j])]].tolist()
        return few


def _ints(ids: Sequence[int] | np.ndarray) -> list[int]:
    """Ids as a list of Python ints."""
    return ids.tolist() if isinstance(ids, np.ndarray) else list(map(int, ids))


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


def pick(loads: list[float], want: float, limit: float) -> list[int]:
    """Which of these partitions (loads heaviest first) to release: at least `want` load when possible, at most
    `limit`, the least load, then the fewest partitions. Either the lightest single partition reaching `want`, or
    the heaviest of those below `want` while they stay under it plus the lightest other one that closes the gap.

    Positions in `loads`, found by binary search on the sorted loads (a walk only over the partitions taken): the
    groups are small, and array calls cost more than these few steps.
    """
    lo = bisect_left(loads, -limit, key=neg)  # the usable ones, 0 < load <= limit: positions lo .. hi
    hi = bisect_left(loads, 0.0, lo, key=neg)
    if want <= 0 or lo == hi:
        return []
    reach = bisect_right(loads, -want, lo, hi, key=neg)  # lo .. reach reach `want` alone
    got, end = 0.0, reach
    while end < hi and got + loads[end] < want:  # the heaviest short ones while their sum stays below `want`
        got += loads[end]
        end += 1
    # The closing one: the lightest other partition reaching want - got (the lightest reaching one when no short
    # one is left to close with), if it stays within limit - got.
    close = bisect_right(loads, -(want - got), end, hi, key=neg) - 1
    if close < end:
        close = reach - 1
    if close >= lo and loads[close] <= limit - got:
        several = [*range(reach, end), close]
        if reach == lo or np.asarray([loads[i] for i in several]).sum() < loads[reach - 1]:  # NumPy's sum order
            return several
    return [reach - 1] if reach > lo else list(range(reach, end))  # the lightest reaching one (ties: higher id)
