"""The balanced-load assignor's local search (`planner.assignors.balanced_load`): after placement, single moves
and swaps between members until the group is settled.

In the order the assignor runs them: `repair_counts` brings every member inside the count window
(`max_count_spread`) by single moves; `improve` evens the load between the heaviest member that can give and the
lightest one (a move, a swap, one heavy partition for a bundle of lighter ones, or a hand-on through a third
member), each step lowering the sum of squared loads, until `settled`; `untangle` undoes crossed hand-overs of
interchangeable partitions so fewer move. `settled` is also the assignor's test for leaving a group alone.
"""

from __future__ import annotations

from bisect import bisect_left
from operator import neg

import numpy as np
from numpy.typing import NDArray

from planner.assignors._load_builder import NO_CEILING, LoadBuilder, pick

_DONORS = 8  # partners a member tries: the heaviest donors, or the lightest takers for a swap
_BUNDLE_TRIES = 8  # a member's heaviest partitions offered for a bundle of lighter ones


def repair_counts(builder: LoadBuilder) -> None:
    """With max_count_spread: members still above the ceiling or below the floor trade single partitions with the
    member furthest the other way that may take them, the one keeping loads closest chosen."""
    if builder.count_hi == NO_CEILING:
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


def _count_move(builder: LoadBuilder, a: int, takers: np.ndarray) -> bool:
    """Move one of a's partitions to the taker with the fewest partitions that may take it, the partition that
    leaves the two loads closest; False when no taker subscribes to any of a's topics."""
    parts = builder.holding(a).parts
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


def improve(builder: LoadBuilder) -> None:
    """Moves and swaps until settled; each one lowers the sum of squared loads by at least 2 x eps x the load
    it shifts, so the loop ends; the iteration cap bounds its time on huge groups."""
    for _ in range(4 * len(builder.load) + 1000):
        heaviest, lightest = _extremes(builder)
        step = _best_give(builder, heaviest, builder.eps) or _best_take(builder, lightest, builder.eps)
        if step is None:
            return
        builder.move(*step)


def settled(builder: LoadBuilder) -> bool:
    """Whether to leave the group as it is: counts inside their window, and neither the heaviest member can give
    nor the lightest member take a partition (or swap) that evens them by 2 x eps. Hysteresis: once it must move,
    `improve` evens the group to eps, so a group this assignor balanced is left alone next time."""
    if np.any(builder.count > builder.count_hi) or np.any(builder.count < builder.count_lo):
        return False
    heaviest, lightest = _extremes(builder)
    return (
        _best_give(builder, heaviest, 2 * builder.eps) is None
        and _best_take(builder, lightest, 2 * builder.eps) is None
    )


def _extremes(builder: LoadBuilder) -> tuple[int, int]:
    """The heaviest member that has something to give and the lightest member, ties MemberInfo order.

    A member holding a single partition cannot give it to a lighter member without that member ending heavier
    than it was (a heavy partition alone on its member is where the bound puts it), so it is passed over.
    """
    heaviest = next((m for m in builder.heaviest_first() if builder.count.item(m) > 1), -1)
    if heaviest < 0:  # nobody holds two: the heaviest of all
        heaviest = next(builder.heaviest_first())
    return heaviest, builder.by_load()[0][2]


def _best_give(builder: LoadBuilder, a: int, eps: float) -> tuple[np.ndarray, np.ndarray] | None:
    """The move from member a to the lightest member eligible for the partition that evens the pair most, else
    the best swap (single, then bundle) with one of the lightest members eligible for any of a's partitions; None
    if none lands the receiver `eps` below a's load. Moves respect the count window, swaps keep counts."""
    held = builder.holding(a)
    if len(held.parts) == 0:
        return None
    present = builder.holds[:, a] > 0  # the topic classes of a's partitions
    if builder.count.item(a) > builder.count_lo.item(a):
        receiver = [builder.lightest_open(k, a) if here else -1 for k, here in enumerate(present.tolist())]
        move = _best_move(builder, a, held.parts, held.w, np.asarray(receiver)[held.k], eps)
        if move is not None:
            return move
    eligible: NDArray[np.bool_] = np.any(builder.eligible[present], axis=0)  # members who may take any of them
    eligible[a] = False
    takers = builder.lightest_few(eligible, _DONORS)
    for b in takers:
        if builder.load.item(a) - builder.load.item(b) < 2 * eps:
            break  # a swap needs a gap of 2 x eps, and the takers come lightest first: the rest are closer still
        swap = _best_swap(builder, a, b, eps) or _bundle_swap(builder, a, b, eps)
        if swap is not None:
            return swap
    for b in _chain_takers(builder, a, takers, eps):
        chain = _chain(builder, a, b, eps)
        if chain is not None:
            return chain
    return None


def _chain_takers(builder: LoadBuilder, a: int, takers: list[int], eps: float) -> list[int]:
    """The takers a chain may pass through, in order: b must hold a q with lb + w(p) - w(q) <= la - eps for some p
    that a may give (la - w(p) <= la - eps) and b may take, and the lightest third member eligible for q must carry
    it within la - eps. The sums are those `_chain` makes, so no valid chain is passed over; most takers fail here,
    all in one pass."""
    if not takers or builder.count[a] <= builder.count_lo[a]:
        return []
    la = float(builder.load[a])
    top = la - eps
    mine = builder.holding(a)
    gives = (mine.w > 0) & (la - mine.w <= top)
    lightest = np.full(len(builder.classes), np.inf)  # per class, the lightest partition a may give
    np.minimum.at(lightest, mine.k[gives], mine.w[gives])
    to = np.asarray(takers)
    wp = np.where(builder.eligible[:, to], lightest[:, None], np.inf).min(axis=0)  # per taker
    # Per class, the two lightest members that may take more (a aside): the lightest but b, for each taker b.
    first = [builder.lightest_open(k, a) for k in range(len(builder.classes))]
    second = [builder.lightest_open(k, a, m) for k, m in enumerate(first)]
    load_of = np.append(builder.load, np.inf)  # -1 (none) carries nothing more
    least = np.where(to[:, None] == first, load_of[second], load_of[first])  # [taker, class]
    # A chain through b needs a q with w(q) >= lb + w(p) - top and w(q) <= top - least, so lb + w(p) + least <=
    # 2 x top (give or take rounding, allowed for): most takers fail this, and their holdings need not be read.
    given = builder.load[to] + wp
    nearest = least.min(axis=1)
    near = given + nearest <= 2 * top + 1e-9 * (abs(top) + np.abs(nearest))
    if not near.any():
        return []
    to, given, least = to[near], given[near], least[near]
    held = [builder.holding(b) for b in to.tolist()]
    of = np.repeat(np.arange(len(to)), [len(h.parts) for h in held])
    wq, kq = np.concatenate([h.w for h in held]), np.concatenate([h.k for h in held])
    fits = (wq > 0) & (given[of] - wq <= top) & (least[of, kq] + wq <= top)
    chained: list[int] = to[np.bincount(of[fits], minlength=len(to)) > 0].tolist()
    return chained


def _best_take(builder: LoadBuilder, b: int, eps: float) -> tuple[np.ndarray, np.ndarray] | None:
    """The move (or swap) to member b from one of the heaviest members holding partitions b may take."""
    mine = builder.eligible[:, b]
    holding = builder.holds[mine].any(axis=0).tolist()
    floor = builder.load.item(b) + eps
    donors: list[int] = []
    for a in builder.heaviest_first():
        if builder.load.item(a) <= floor or len(donors) == _DONORS:
            break
        # A donor with one partition cannot give it without ending below b (it is its whole load).
        if holding[a] and builder.count.item(a) > 1:
            donors.append(a)
    for a in donors:
        move = None
        held = builder.holding(a)
        # A move needs a partition of a's within the gap less eps: a's lightest one says whether any can be.
        if (
            builder.count[b] < builder.count_hi
            and builder.count[a] > builder.count_lo[a]
            and held.least_load() <= builder.load[a] - builder.load[b] - eps
        ):
            taken = mine[held.k]
            move = _best_move(builder, a, held.parts[taken], held.w[taken], np.full(int(taken.sum()), b), eps)
        move = move or _best_swap(builder, a, b, eps) or _bundle_swap(builder, a, b, eps)
        if move is not None:
            return move
    return None


def _best_move(
    builder: LoadBuilder, a: int, parts: np.ndarray, w: np.ndarray, to: np.ndarray, eps: float
) -> tuple[np.ndarray, np.ndarray] | None:
    """Among a's partitions (ascending, loads w) and their receivers (-1: none): the load nearest half the pair's
    gap, moving the receiver to at most a's load minus eps (so the pair's max falls); ties by partition id. When
    that partition covers less than half the gap by more than eps, several go to the same receiver at once (`pick`
    towards half the gap, at most the gap minus eps): the same outcome as that many single moves, in one step."""
    gap = builder.load[a] - builder.load[to]
    fine = (to >= 0) & (w > 0) & (w <= gap - eps)
    if builder.budget < np.inf:
        fine &= builder.spent + builder.cost(parts, to) <= builder.budget
    distance = np.where(fine, np.abs(w - gap / 2), np.inf)
    i = int(distance.argmin())  # the first of the nearest: the lowest partition id
    if distance[i] == np.inf:
        return None
    b, half = int(to[i]), float(gap[i]) / 2
    room = min(int(builder.count[a] - builder.count_lo[a]), builder.count_hi - int(builder.count[b]))
    if w[i] >= half - eps or room < 2:
        return parts[i : i + 1], to[i : i + 1]
    to_b = fine & (to == b)
    heaviest = np.argsort(-w[to_b], kind="stable")  # ties by id
    same, w_same = parts[to_b][heaviest], w[to_b][heaviest]
    several = same[pick(w_same.tolist(), half, 2 * half - eps)][:room]
    if len(several) < 2 or not builder.allows(several, b):
        return parts[i : i + 1], to[i : i + 1]
    return several, np.full(len(several), b)


def _best_swap(builder: LoadBuilder, a: int, b: int, eps: float) -> tuple[np.ndarray, np.ndarray] | None:
    """The swap of p (from a) and q (from b) that moves the least load per unit the pair's max falls; it must fall
    by at least eps (the load difference d = w(p) - w(q) within [eps, gap - eps]), ties by partition ids."""
    gap = float(builder.load[a] - builder.load[b])
    if gap < 2 * eps:
        return None
    held = builder.holding(a)
    gives = builder.eligible[held.k, b]
    mine, wm = held.parts[gives], held.w[gives]
    theirs, wt, kt = builder.holding(b).lightest_first()
    takes = builder.eligible[kt, a]
    theirs, wt = theirs[takes], wt[takes]
    if len(mine) == 0 or len(theirs) == 0:
        return None
    at = np.searchsorted(wt, wm - gap / 2)
    best: tuple[float, int, int] | None = None
    # For each p, the partners on either side of the ideal w(p) - gap / 2: at - 1 (if at > 0), and at (if < n).
    for j, there in ((np.maximum(at - 1, 0), at > 0), (np.minimum(at, len(theirs) - 1), at < len(theirs))):
        d = wm - wt[j]
        fine = there & (d >= eps) & (d <= gap - eps)
        if builder.budget < np.inf:
            fine &= builder.spent + builder.cost(mine, b) + builder.cost(theirs[j], a) <= builder.budget
        i = np.flatnonzero(fine)
        if len(i) == 0:
            continue
        score = (wm[i] + wt[j[i]]) / np.minimum(d[i], gap - d[i])
        k = int(np.lexsort((theirs[j[i]], mine[i], score))[0])
        option = (float(score[k]), int(mine[i[k]]), int(theirs[j[i[k]]]))
        best = option if best is None or option < best else best
    if best is None:
        return None
    return np.asarray([best[1], best[2]]), np.asarray([b, a])


def _bundle_swap(builder: LoadBuilder, a: int, b: int, eps: float) -> tuple[np.ndarray, np.ndarray] | None:
    """One of a's heaviest partitions for a bundle of b's lighter ones (the heaviest of them first) worth about
    half the gap less, when no single move or swap helps (three 30s against a 30 and many 1s); same rules."""
    gap = float(builder.load[a] - builder.load[b])
    if gap < 2 * eps:
        return None
    mine, wm, km = builder.holding(a).heaviest_first()
    gives = builder.eligible[km, b]
    mine, wm = mine[gives][:_BUNDLE_TRIES], wm[gives][:_BUNDLE_TRIES]
    theirs, wt, kt = builder.holding(b).heaviest_first()
    takes = builder.eligible[kt, a] & (wt > 0)
    theirs, loads = theirs[takes], wt[takes].tolist()
    if len(mine) == 0 or len(theirs) == 0:
        return None
    best: tuple[float, int, int, np.ndarray] | None = None
    for p, wp in zip(mine.tolist(), wm.tolist(), strict=True):
        start = bisect_left(loads, -(wp - eps), key=neg)  # a bundle member weighing more leaves nothing to gain
        ideal, sums = wp - gap / 2, [0.0]
        for x in loads[start:]:  # the heaviest fitting ones' running sums, to the first past the ideal
            sums.append(sums[-1] + x)
            if sums[-1] > ideal:
                break
        k = len(sums) - 1 - (len(sums) > 1 and sums[-1] > ideal)  # the heaviest prefix up to the ideal
        for n in (k, k + 1):
            if n == 0 or n >= len(sums):
                continue
            d = wp - sums[n]
            if not eps <= d <= gap - eps:
                continue
            if builder.count[a] + n - 1 > builder.count_hi or builder.count[b] - (n - 1) < builder.count_lo[b]:
                continue
            if builder.budget < np.inf and not builder.affordable(
                float(builder.cost(np.asarray([p]), b).sum() + builder.cost(theirs[start : start + n], a).sum())
            ):
                continue
            option = ((wp + sums[n]) / min(d, gap - d), n, p, theirs[start : start + n])
            best = option if best is None or option[:3] < best[:3] else best
    if best is None:
        return None
    return np.append(best[2], best[3]), np.append(b, np.full(best[1], a))


def _chain(builder: LoadBuilder, a: int, b: int, eps: float) -> tuple[np.ndarray, np.ndarray] | None:
    """a gives p to b while b passes q (of a topic class a cannot take) on to the lightest member eligible for it:
    with overlapping subscriptions the heaviest member may reach only members about as loaded, who can pass load on.
    Valid when a, b and the third member all end at least eps below a's load; least load moved per unit gained."""
    if builder.count[a] <= builder.count_lo[a]:
        return None
    mine, wm, km = builder.holding(a).lightest_first()
    gives = builder.eligible[km, b] & (wm > 0)
    mine, wm = mine[gives], wm[gives]
    held = builder.holding(b)
    loaded = held.w > 0
    theirs, wq, kq = held.parts[loaded], held.w[loaded], held.k[loaded]
    if len(mine) == 0 or len(theirs) == 0:
        return None
    present = np.unique(kq)
    onward = np.full(len(builder.classes), -1, dtype=np.int64)
    onward[present] = [builder.lightest_open(k, a, b) for k in present.tolist()]
    c = onward[kq]
    theirs, wq, c = theirs[c >= 0], wq[c >= 0], c[c >= 0]
    if len(theirs) == 0:
        return None
    la, lb, lc = float(builder.load[a]), float(builder.load[b]), builder.load[c]
    at = np.searchsorted(wm, (la - lb + wq) / 2)  # for each q, the p evening a and b
    best: tuple[float, int, int] | None = None
    for i, there in ((np.maximum(at - 1, 0), at > 0), (np.minimum(at, len(mine) - 1), at < len(mine))):
        top = np.maximum(np.maximum(la - wm[i], lb + wm[i] - wq), lc + wq)
        fine = there & (top <= la - eps)
        if builder.budget < np.inf:
            fine &= builder.spent + builder.cost(mine[i], b) + builder.cost(theirs, c) <= builder.budget
        j = np.flatnonzero(fine)
        if len(j) == 0:
            continue
        score = (wm[i[j]] + wq[j]) / (la - top[j])
        k = int(np.lexsort((theirs[j], mine[i[j]], score))[0])
        option = (float(score[k]), int(mine[i[j[k]]]), int(j[k]))
        best = option if best is None or option < best else best
    if best is None:
        return None
    return np.asarray([best[1], theirs[best[2]]]), np.asarray([b, c[best[2]]])


def untangle(builder: LoadBuilder) -> None:
    """Undo crossed hand-overs: partitions of one topic class and one load are interchangeable, so among those
    that changed hands each member first gets back its own previous ones (as many as it holds of the kind now),
    and the rest fill the remaining places, lowest ids first. Loads and counts stay as they are; only fewer
    partitions move (shed partitions re-placed, or equal loads such as unit loads, cross over easily)."""
    parts = np.flatnonzero((builder.owner >= 0) & (builder.owner != builder.previous))
    if len(parts) == 0:
        return  # nothing changed hands
    n = len(builder.load) + 1  # member ids, and n - 1 for "no previous owner"
    prev = np.where(builder.previous[parts] >= 0, builder.previous[parts], n - 1)
    parts = parts[np.lexsort((parts, prev, builder.w[parts], builder.pclass[parts]))]
    k, w = builder.pclass[parts], builder.w[parts]
    kind = np.cumsum(np.concatenate([[True], (k[1:] != k[:-1]) | (w[1:] != w[:-1])])) - 1
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
