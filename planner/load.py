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


def load_bound(group: GroupSpec) -> float:
    """A lower bound on max/mean over every assignment that respects the subscriptions (1.0 = perfectly even).

    Sound, not always tight: the maximum of (i) 1, the mean itself; (ii) the heaviest partition, which some member
    carries whole; (iii) for each set X of members that is the subscriber set of a topic, the load of every topic
    whose subscribers all lie in X, spread over |X| (those members must carry it, Hall's condition), which covers a
    member's exclusive partitions (X = that member alone).
    """
    mean = mean_load(group)
    if mean <= 0:
        return 1.0
    w = partition_weights(group)
    live = assignable(group)
    best = max(mean, float(w[live].max(initial=0.0)))
    topics = np.flatnonzero(subscribed_topics(group))
    if len(topics) == 0:
        return best / mean
    topic_load = np.bincount(group.topic_of(np.flatnonzero(live)), weights=w[live], minlength=len(group.topics))
    # One row per distinct subscriber set; its load is that of every topic with exactly those subscribers.
    sets, inverse = np.unique(group.subscribed_matrix()[:, topics].T, axis=0, return_inverse=True)
    own = np.bincount(inverse.ravel(), weights=topic_load[topics], minlength=len(sets))
    size = sets.sum(axis=1).astype(np.float64)
    if len(sets) <= _MAX_SUBSET_CLASSES:
        a = sets.astype(np.float32)
        contained = (a @ a.T) >= size[:, None] - 0.5  # contained[i, j]: set i lies inside set j
        carried = own @ contained  # load set j's members must carry: every set inside it
    else:
        carried = own
    return max(best, float((carried / size).max())) / mean


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
    "gini",
    "load_bound",
    "load_moved",
    "max_mean_load",
    "mean_load",
    "member_loads",
    "partition_weights",
]
