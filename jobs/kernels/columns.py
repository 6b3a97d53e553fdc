"""Rows of many groups gathered as NumPy columns, then made into one Arrow table at once.

A task plans thousands of small groups, five candidates each; building each candidate's table on its own cost a
few Arrow calls per column, a quarter of the plan kernel's time. Here string columns hold ids into one list of
names (null: -1) and list columns their lengths and flat values, so a table of many candidates is one `take` per
string column.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa


class Columns:
    """The rows gathered so far for one table schema; `table` hands them over as Arrow and starts again."""

    def __init__(self, schema: pa.Schema) -> None:
        self.schema = schema
        self.rows = 0
        self._start()

    def _start(self) -> None:
        self.names: list[str] = []
        self.values: dict[str, list[np.ndarray]] = {f.name: [] for f in self.schema}
        self.lengths: dict[str, list[np.ndarray]] = {f.name: [] for f in self.schema if pa.types.is_list(f.type)}
        self.rows = 0
        self.held = 0  # rows plus the values of their list columns: what a flush threshold weighs

    def name_ids(self, names: Sequence[str]) -> int:
        """Add `names`; the id of the first (the others follow in order)."""
        first = len(self.names)
        self.names.extend(names)
        return first

    def add(self, rows: int, **columns: np.ndarray | int) -> None:
        """`rows` rows: per column its values (a scalar repeats); a string column's values are name ids."""
        for name, values in columns.items():
            self.values[name].append(np.broadcast_to(values, rows) if np.ndim(values) == 0 else np.asarray(values))
        self.rows += rows
        self.held += rows

    def add_pairs(self, column: str, lengths: np.ndarray, topics: np.ndarray, partitions: np.ndarray) -> None:
        """A list-of-(topic, partition) column of the rows just added: each row's length, then the pairs in order."""
        self.lengths[column].append(lengths)
        self.values[column].append(np.stack([topics, partitions]))
        self.held += len(topics)

    def table(self) -> pa.Table:
        """The rows gathered, in the order added, as one table of the schema; then empty again."""
        names = pa.array(self.names, pa.string())
        arrays = [self._array(field, names) for field in self.schema]
        self._start()
        return pa.Table.from_arrays(arrays, schema=self.schema)

    def _array(self, field: pa.Field, names: pa.Array) -> pa.Array:
        parts = self.values[field.name]
        if pa.types.is_list(field.type):
            pairs = _joined(parts, axis=1) if parts else np.empty((2, 0), dtype=np.int64)
            lengths = self.lengths[field.name]
            offsets = np.zeros(sum(len(n) for n in lengths) + 1, dtype=np.int32)
            if lengths:
                np.cumsum(np.concatenate(lengths), out=offsets[1:])
            struct = field.type.value_type
            values = pa.StructArray.from_arrays(
                [_strings(names, pairs[0]), pa.array(pairs[1], struct.field(1).type)], fields=list(struct)
            )
            return pa.ListArray.from_arrays(pa.array(offsets), values, type=field.type)
        values = _joined(parts)
        if pa.types.is_string(field.type):
            return _strings(names, values)
        return pa.array(values, field.type)


def _strings(names: pa.Array, ids: np.ndarray) -> pa.Array:
    ids = np.asarray(ids, dtype=np.int64)
    return names.take(pa.array(ids, mask=ids < 0))


def _joined(parts: list[np.ndarray], axis: int = 0) -> np.ndarray:
    """The parts as one array: the part itself when there is one (a large candidate's column, not copied)."""
    if not parts:
        return np.empty(0, dtype=np.int64)
    return parts[0] if len(parts) == 1 else np.concatenate(parts, axis=axis)
