"""A custom assignor plug-in: each partition to a random subscriber (article A4's AfeiAssignor), seeded.

Load it with `rebalance assign --strategy planner.examples.random_assignor:RandomAssignor group.json` or
`planner.assign("planner.examples.random_assignor:RandomAssignor", group)`. A plug-in is any class built
with no arguments that has `name`, optionally `rebalance_protocol` ("eager" by default), and
`assign(group: GroupSpec)` returning {member: [(topic, partition), ...]} or an owner array per partition id.

>>> from planner import assign
>>> g = {"topics": {"t": 4}, "members": {"C0": {"topics": ["t"]}, "C1": {"topics": ["t"]}}}
>>> assign("planner.examples.random_assignor:RandomAssignor", g).assignment
{'C0': [('t', 0), ('t', 2)], 'C1': [('t', 1), ('t', 3)]}
"""

from __future__ import annotations

import random

from planner.group import GroupSpec


class RandomAssignor:
    """Every partition of a topic goes to a random member subscribed to it; a fixed seed keeps it repeatable."""

    name = "random"
    rebalance_protocol = "eager"

    def __init__(self, seed: int = 4) -> None:
        self.seed = seed

    def assign(self, group: GroupSpec) -> dict[str, list[tuple[str, int]]]:
        """AfeiAssignor.assign: for each topic, for each partition, a random consumer of that topic."""
        rng = random.Random(self.seed)  # seeded per call: same group, same answer
        assignment: dict[str, list[tuple[str, int]]] = {m: [] for m in group.members}
        consumers_per_topic: dict[int, list[str]] = {}
        for m, topics in zip(group.members, group.subscriptions, strict=True):
            for t in topics.tolist():
                consumers_per_topic.setdefault(t, []).append(m)
        for t, topic in enumerate(group.topics):
            consumers = consumers_per_topic.get(t)
            if not consumers:
                continue
            for p in range(int(group.partition_counts[t])):
                assignment[rng.choice(consumers)].append((topic, p))
        return assignment
