"""Data contracts: Delta tables, the snapshot-file JSON Schema and the data-quality suites, kept as data.

`TABLES` and `TableSpec` load on first use: they bring pyarrow (0.15-0.25 s), which reading and checking a group
(`schemas.reader`, `schemas.rules`, `rebalance assign`) does not need.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from schemas.tables import TABLES, TableSpec

__all__ = ["TABLES", "TableSpec"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from schemas import tables

        return getattr(tables, name)
    raise AttributeError(f"module 'schemas' has no attribute {name!r}")
