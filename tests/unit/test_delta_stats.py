"""Skipping a Delta table's files by their statistics: never a file that holds a wanted value."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable, write_deltalake

from jobs.io.delta_stats import _may_hold_string, current_files, files_holding

pytestmark = pytest.mark.unit

LONG = "scheduled__2026-11-27T02:00:00.000+00:00_"  # longer than the 32 characters Spark keeps in statistics


def table_of(tmp_path, batches):
    for batch in batches:
        write_deltalake(str(tmp_path), pa.table(batch), mode="append")
    return DeltaTable(str(tmp_path))


def holder(table, files, value):
    """The one file among `files` whose rows hold `value` (read back, not from statistics)."""
    [found] = [f for f in files if value in pq.read_table(f"{table.table_uri}/{f}").column(0).to_pylist()]
    return found


def test_string_keys_past_the_truncated_statistics_are_found(tmp_path):
    ids = [f"{LONG}{suffix}" for suffix in ("a", "b", "c")]
    table = table_of(tmp_path, [{"snapshot_id": [i]} for i in ids] + [{"snapshot_id": ["manual__x"]}])
    files = current_files(table)
    assert len(files) == 4
    for wanted in ids:
        kept = files_holding(table, "snapshot_id", [wanted])
        assert holder(table, files, wanted) in kept
        assert holder(table, files, "manual__x") not in kept
    assert files_holding(table, "snapshot_id", ["nothing-like-it"]) == []
    assert files_holding(table, "snapshot_id", []) == []


def test_integer_keys_skip_files_outside_their_range(tmp_path):
    table = table_of(tmp_path, [{"generation_id": [1, 2]}, {"generation_id": [5, 9]}, {"generation_id": [None, 3]}])
    files = current_files(table)
    assert len(files_holding(table, "generation_id", [7])) == 1  # [5, 9] only
    assert len(files_holding(table, "generation_id", [3, 4])) == 1  # [3, 3] (nulls aside) only
    assert len(files_holding(table, "generation_id", [1, 9])) == 2
    assert files_holding(table, "generation_id", [100]) == []
    assert set(files_holding(table, "other", [1])) == set(files)  # no statistics for it: every file may hold it


def test_truncated_string_statistics_keep_every_value_sharing_the_prefix():
    # Spark's connector keeps 32 characters of a string's min and max: the file's true max lies past the prefix.
    low, high = LONG[:32], LONG[:32]
    assert _may_hold_string(low, high, [LONG + "z"])
    assert _may_hold_string(low, high, [LONG[:32]])
    assert not _may_hold_string(low, high, ["scheduled__2026-11-28"])  # past the prefix: not in the file
    assert not _may_hold_string(low, high, ["manual__"])  # below the min
    assert _may_hold_string(None, high, ["anything"])
