"""Load figures of an assignment: member loads, max/mean and the bound the weights allow, load moved, Gini.

A partition's load is `GroupSpec.partition_loads` (lag, bytes/s, messages/s; 1.0 each when the group gives none).
The mean member load is the load of every partition someone subscribes to over ALL members, so a member that gets
nothing pulls the mean down exactly as it idles in the group (as `plan_metrics.max_mean_load` counts it).

>>> from planner.group import parse_group
>>> import numpy as np
>>> g = parse_group({"topics": {"t0": 3}, "loads": {"t0": [4.0, 1.0, 1.0]},
...                  "members": {"M0": {"topics": ["t0"]}, "M1": {"topics": ["t0"]}}})
>>> load_bound(g)  # t0p0 alone weighs 4 of the mean 3
1.3333333333333333
>>> max_mean_load(g, np.array([0, 1, 1], dtype=np.int32))
1.3333333333333333
"""

from __future__ import annotations

import numpy as np

from planner.errors import InputError
from planner.group import GroupSpec, previous_owners, subscribed_topics

_MAX_SUBSET_CLASSES = 512  # topic classes above this: the subset bound uses each class alone (still sound)


def partition_weights(group: GroupSpec) -> np.ndarray:
    """float64[P]: each partition's load; 1.0 each without `loads`. Raises InputError on a negative or NaN load."""
    if group.partition_loads is None:
        return np.ones(group.num_partitions, dtype=np.float64)
    w = np.asarray(group.partition_loads, dtype=np.float64)
    bad = np.flatnonzero(~np.isfinite(w) | (w < 0))
    if len(bad):
        p = int(bad[0])
        t = int(group.topic_of(np.asarray([p]))[0])
        raise InputError(
            f"loads[{group.topics[t]!r}][{p - int(group.topic_start[t])}]: a load must be a finite number >= 0, "
            f"got {w[p]!r}"
        )
    return w


def assignable(group: GroupSpec) -> np.ndarray:
    """bool[P]: the partition's topic has a subscriber, so some member must own it."""
    return np.repeat(subscribed_topics(group), group.partition_counts)


def member_loads(group: GroupSpec, owner: np.ndarray) -> np.ndarray:
    """float64[M]: the summed load of what each member owns in `owner` (-1 = nobody)."""
    held = owner >= 0
    w = partition_weights(group)
    return np.bincount(owner[held], weights=w[held], minlength=len(group.members)).astype(np.float64)


def mean_load(group: GroupSpec) -> float:
    """Load of every subscribed partition over all members (0.0 for a group without members)."""
    if not group.members:
        return 0.0
    return float(partition_weights(group)[assignable(group)].sum()) / len(group.members)


def max_mean_load(group: GroupSpec, owner: np.ndarray) -> float:
    """Heaviest member's load over the mean member load; 1.0 when nothing carries load."""
    mean = mean_load(group)
    if mean <= 0:
        return 1.0
    return float(member_loads(group, owner).max()) / mean


def topic_classes(group: GroupSpec) -> tuple[np.ndarray, np.ndarray]:
    """Topics grouped by their exact set of subscribers: the class of each topic (-1: nobody subscribes) and
    bool[K, M], each class's subscribers; fewest subscribers first, then by first topic (as AbstractStickyAssignor's
    TopicComparator orders topics)."""
    sub = group.subscribed_matrix()
    live = np.flatnonzero(sub.any(axis=0))
    # Rows packed to bytes and hashed: np.unique(axis=0) compares whole rows and is about 10x slower.
    set_of: dict[bytes, int] = {}
    inverse = np.asarray(
        [set_of.setdefault(row.tobytes(), len(set_of)) for row in np.packbits(sub[:, live].T, axis=1)], dtype=np.int64
    )
    first = np.full(len(set_of), len(group.topics), dtype=np.int64)
    np.minimum.at(first, inverse, live)
    sets = sub[:, first].T if len(first) else np.zeros((0, len(group.members)), dtype=bool)
    order = np.lexsort((first, sets.sum(axis=1)))
    rank = np.empty(len(order), dtype=np.int64)
    rank[order] = np.arange(len(order))
    tclass = np.full(len(group.topics), -1, dtype=np.int64)
    tclass[live] = rank[inverse]
    return tclass, sets[order]


def max_load_bound(sets: np.ndarray, class_load: np.ndarray, heaviest: np.ndarray, n_members: int) -> float:
    """Lower bound on the heaviest member's load (see `load_bound`), from the topic classes' subscriber sets
    (bool[K, M]) and loads, and the partition loads heaviest first."""
    best = max(float(class_load.sum()) / max(n_members, 1), _pigeonhole(heaviest, n_members))
    if len(sets) == 0:
        return best
    size = sets.sum(axis=1).astype(np.float64)
    if len(sets) <= _MAX_SUBSET_CLASSES:
        a = sets.astype(np.float32)
        contained = (a @ a.T) >= size[:, None] - 0.5  # contained[i, j]: class i's subscribers lie within j's
        carried = class_load @ contained  # what class j's subscribers must carry: every class inside it
    else:
        carried = class_load
    return max(best, float((carried / size).max()))


def _pigeonhole(heaviest: np.ndarray, n_members: int) -> float:
    """Among the k x M + 1 heaviest partitions one member holds k + 1, so it carries at least the k + 1 lightest of
    them (k = 0: the heaviest partition; k = 1: the classic w[M-1] + w[M] bound of P||Cmax scheduling)."""
    if len(heaviest) == 0 or n_members <= 0:
        return 0.0
    k = np.arange((len(heaviest) - 1) // n_members + 1)
    sums = np.concatenate([[0.0], np.cumsum(heaviest)])
    return float((sums[k * n_members + 1] - sums[k * n_members - k]).max())


def load_bound(group: GroupSpec) -> float:
    """A lower bound on max/mean over every assignment that respects the subscriptions (1.0 = perfectly even).

    Sound, not always tight: the maximum of (i) 1, the mean itself; (ii) the heaviest partition, which some member
    carries whole, and its pigeonhole extension (of the k x M + 1 heaviest, some member holds k + 1); (iii) for each
    set X of members that is the subscriber set of a topic, the load of every topic
    whose subscribers all lie in X, spread over |X| (those members must carry it, Hall's condition), which covers a
    member's exclusive partitions (X = that member alone).
    """
    mean = mean_load(group)
    if mean <= 0:
        return 1.0
    w = partition_weights(group)
    tclass, sets = topic_classes(group)
    pclass = np.repeat(tclass, group.partition_counts)
    live = pclass >= 0
    class_load = np.bincount(pclass[live], weights=w[live], minlength=len(sets))
    heaviest = -np.sort(-w[live])
    return max_load_bound(sets, class_load, heaviest, len(group.members)) / mean


def load_moved(group: GroupSpec, owner: np.ndarray) -> float:
    """Share of the group's load on partitions whose previous owner no longer holds them (0.0 .. 1.0)."""
    previous, _ = previous_owners(group)
    w = partition_weights(group)
    total = float(w[assignable(group)].sum())
    if total <= 0:
        return 0.0
    return float(w[(previous >= 0) & (owner != previous)].sum()) / total


def gini(loads: np.ndarray) -> float:
    """Gini coefficient of member loads (0 = all equal, towards 1 = one member carries everything)."""
    x = np.sort(np.asarray(loads, dtype=np.float64))
    n, total = len(x), float(x.sum())
    if n == 0 or total <= 0:
        return 0.0
    # Sorted ascending: sum((2i - n - 1) * x_i) / (n * sum x), i = 1..n.
    return float(((2 * np.arange(1, n + 1) - n - 1) * x).sum() / (n * total))


__all__ = [
    "assignable",
    "max_load_bound",
    "gini",
    "load_bound",
    "load_moved",
    "max_mean_load",
    "mean_load",
    "member_loads",
    "partition_weights",
    "topic_classes",
]
