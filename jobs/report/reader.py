"""A `read(name, filters)` that loads each lake table once and answers lookups from in-memory indexes.

Reports for a thousand groups make thousands of small lookups (one group, one generation, one run); reading the
Delta table for each would read it a thousand times. The first filter term of a lookup picks an index on that
column (built once per table and column); the remaining terms filter the few rows it returns. Tables too large to
hold whole (a row per partition) can be left to `read`, which then answers each lookup itself. A `scan` streams a
table's rows instead (`jobs.report.regroup` reads those tables once that way); `filtered` applies lookup terms to
rows in memory as the lake applies them in a read.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from typing import Any, Protocol

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

Filters = Sequence[tuple[str, str, Any]] | None
Read = Callable[[str, Filters], pa.Table]


class Scan(Protocol):
    """`read`'s rows a record batch at a time (the shape of `Lake.read_batches`); `share` (k, n): the k-th of n
    consecutive runs of them, which n scans read in turn."""

    def __call__(self, name: str, filters: Filters = None, share: tuple[int, int] = (0, 1)) -> pa.RecordBatchReader:
        """The rows of table `name` that `filters` match."""


def indexed(read: Read, *, read_through: Collection[str] = ()) -> Read:
    """Wrap `read` (the shape of `Lake.read_arrow`): same answers, each table read once (those in `read_through`
    read by every lookup, its filters passed on)."""
    tables: dict[str, pa.Table] = {}
    indexes: dict[tuple[str, str], dict[Any, np.ndarray]] = {}

    def lookup(name: str, filters: Filters = None) -> pa.Table:
        if name in read_through:
            return read(name, filters)
        if name not in tables:
            # One chunk per column: taking rows from many chunks costs ~20x more than from one.
            tables[name] = read(name, None).combine_chunks()
        table = tables[name]
        terms = list(filters or [])
        if terms:
            column, op, value = terms.pop(0)
            if (name, column) not in indexes:
                indexes[(name, column)] = _index(table, column)
            index = indexes[(name, column)]
            wanted = [value] if op == "=" else _values(op, value)
            rows = [index[v] for v in wanted if v in index]
            table = table.take(np.sort(np.concatenate(rows))) if rows else table.slice(0, 0)
        return filtered(table, terms)

    return lookup


def whole(read: Read) -> Scan:
    """A `scan` that reads each table whole with `read`, once: for a `read` of tables in memory, or a small lake.
    Its first share holds every row, the others none."""

    def scan(name: str, filters: Filters = None, share: tuple[int, int] = (0, 1)) -> pa.RecordBatchReader:
        if share[0]:
            return pa.RecordBatchReader.from_batches(pa.schema([]), [])
        found = read(name, filters)
        return pa.RecordBatchReader.from_batches(found.schema, found.to_batches())

    return scan


def filtered(table: pa.Table, filters: Filters) -> pa.Table:
    """The rows of `table` that every (column, "=" or "in", value) term matches, as `Lake.read_arrow` filters (a null
    matches nothing)."""
    for column, op, value in filters or []:
        values = table.column(column)
        kind = values.type.value_type if pa.types.is_dictionary(values.type) else values.type
        wanted = pa.array([value] if op == "=" else _values(op, value), kind)
        table = table.filter(pc.is_in(values, value_set=wanted))
    return table


def _index(table: pa.Table, column: str) -> dict[Any, np.ndarray]:
    """Row numbers per distinct value of `column` (nulls left out: they never equal a lookup value)."""
    import pandas as pd  # here: a report's worker processes import this module but never index (0.2-0.5 s each)

    values = table.column(column).to_pandas()
    return dict(pd.Series(np.arange(len(values))).groupby(values.to_numpy(), sort=False).indices)


def _values(op: str, value: Any) -> list[Any]:
    """The values of an `in` term (the only other operator `Lake.read_arrow` accepts)."""
    if op != "in":
        raise ValueError(f"unsupported filter operator {op!r}: use '=' or 'in'")
    return list(value)
