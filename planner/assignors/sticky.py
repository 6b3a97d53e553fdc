"""StickyAssignor: balance first, then stickiness, over the eager protocol (every member revokes all first).

Mirrors org.apache.kafka.clients.consumer.StickyAssignor (KIP-54) through AbstractStickyAssignor; see
`planner.assignors.abstract_sticky` for the guarantees and what is mirrored step by step.

Example (seeds 000/001): C0, C1, C2 subscribe to t0..t3 (2 partitions each); then C1 leaves.

>>> from planner import assign
>>> topics = {"t0": 2, "t1": 2, "t2": 2, "t3": 2}
>>> first = assign("sticky", {"topics": topics, "members": {c: {"topics": list(topics)} for c in ("C0", "C1", "C2")}})
>>> first.assignment["C1"]
[('t0', 1), ('t2', 0), ('t3', 1)]
>>> after = {c: {"topics": list(topics), "owned": first.assignment[c], "generation": 1} for c in ("C0", "C2")}
>>> for member, parts in assign("sticky", {"topics": topics, "members": after}).assignment.items():
...     print(member, parts)
C0 [('t0', 0), ('t0', 1), ('t1', 1), ('t3', 0)]
C2 [('t1', 0), ('t2', 0), ('t2', 1), ('t3', 1)]
"""

from __future__ import annotations

import numpy as np

from planner.assignors.abstract_sticky import sticky_assign
from planner.group import GroupSpec


class StickyAssignor:
    """Kafka's StickyAssignor ("sticky")."""

    name = "sticky"
    rebalance_protocol = "eager"

    def assign(self, group: GroupSpec) -> np.ndarray:
        """Owner per partition id (-1 when no member subscribes to its topic)."""
        return sticky_assign(group)
