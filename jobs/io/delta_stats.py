"""Which of a Delta table's current files may hold given key values, from the per-file statistics of its log.

Readers skip the rest: the gate reads only the plan files of its generations, the plan step only the snapshot
files of its run. A file without statistics for the column may hold anything, so it is always kept.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import cast

import numpy as np
import pyarrow as pa
from deltalake import DeltaTable


def current_files(table: DeltaTable) -> list[str]:
    """Names of the table's current files (relative to its directory)."""
    return cast("list[str]", pa.table(table.get_add_actions(flatten=True)).column("path").to_pylist())


def files_holding(table: DeltaTable, column: str, values: Iterable[int | str]) -> list[str]:
    """Names of the table's current files whose [min, max] of `column` may hold one of `values`."""
    wanted = sorted(set(values))
    files = pa.table(table.get_add_actions(flatten=True))
    if not wanted or not files.num_rows:
        return []
    paths = files.column("path")
    if f"min.{column}" not in files.column_names or f"max.{column}" not in files.column_names:
        return cast("list[str]", paths.to_pylist())
    low, high = files.column(f"min.{column}"), files.column(f"max.{column}")
    if strings := [v for v in wanted if isinstance(v, str)]:
        keep = [_may_hold_string(lo, hi, strings) for lo, hi in zip(low.to_pylist(), high.to_pylist(), strict=True)]
        return cast("list[str]", paths.filter(pa.array(keep)).to_pylist())
    ids = np.asarray(wanted, dtype=np.int64)
    unknown = np.asarray(low.is_null()) | np.asarray(high.is_null())
    lo = np.nan_to_num(low.to_numpy(zero_copy_only=False).astype(np.float64))
    hi = np.nan_to_num(high.to_numpy(zero_copy_only=False).astype(np.float64))
    # A value lies in [lo, hi] when fewer values are below lo than at or below hi.
    overlaps = np.searchsorted(ids, lo, side="left") < np.searchsorted(ids, hi, side="right")
    return cast("list[str]", paths.filter(pa.array(unknown | overlaps)).to_pylist())


def _may_hold_string(low: str | None, high: str | None, wanted: list[str]) -> bool:
    """Whether a file with these string statistics may hold one of `wanted`.

    Delta writers truncate string statistics (delta-rs to 32 characters): a truncated min is a prefix, below the
    true min; a truncated max may be a prefix too, below the true max. So a value is compared with the max on the
    max's length: every value sharing the max's prefix may be in the file.
    """
    if low is None or high is None:
        return True
    return any(low <= v and v[: len(high)] <= high for v in wanted)
