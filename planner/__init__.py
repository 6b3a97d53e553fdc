"""Rebalance Planner's domain, pure Python + NumPy: Kafka-exact partitioners, protocol codec and assignors.

`assign` and `AssignmentResult` load on first use, so `planner.errors` (standard library only) imports without
NumPy: a consumer application that applies plans (`jobs.apply`) needs neither.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from planner.assignment import AssignmentResult, assign

__all__ = ["AssignmentResult", "assign"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from planner import assignment

        return getattr(assignment, name)
    raise AttributeError(f"module 'planner' has no attribute {name!r}")
