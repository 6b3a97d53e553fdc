"""Parquet files written outside delta-rs (by Spark tasks), committed to a Delta table in place of older rows.

The plan step's executors write each task's rows as one Parquet file into the table's directory; nothing reads
such a file until `replace_generations` commits it. That commit also removes every older row of the same
generations (files holding only such rows are dropped, mixed files rewritten without them), all in one Delta
transaction made under the lake lock, so re-running a run id rewrites the same rows, readers never see both
versions or neither, and a concurrent run's commit never lands between reading the table and committing.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, cast

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pa_fs
import pyarrow.parquet as pq
from deltalake import DeltaTable
from deltalake.transaction import AddAction, RemoveAction

from jobs.io.delta_stats import files_holding
from jobs.io.lake import Lake
from schemas import TABLES

KEY = ("generation_id", "group_id")  # a generation is numbered per group


def write_file(lake: Lake, table: str, data: pa.Table) -> str:
    """Write `data` as a new Parquet file in the table's directory (uncommitted); returns its name."""
    name = f"part-{uuid.uuid4().hex}.snappy.parquet"
    pq.write_table(data, f"{table}/{name}", filesystem=lake.fs)
    return name


def replace_generations(lake: Lake, name: str, files: Sequence[str], generations: Mapping[str, int]) -> None:
    """Commit `files` (names in table `name`'s directory) and remove every other row of the generations
    {group: id}, as one Delta commit under the lake lock, so a concurrent run's commit cannot come in between
    reading the table and committing; files must hold only rows of those generations, in the table's schema."""
    with lake.committing(name):
        _replace(lake.table(name), pa_fs.SubTreeFileSystem(name, lake.fs), files, generations, TABLES[name].schema)


def _replace(
    table: DeltaTable, fs: pa_fs.FileSystem, files: Sequence[str], generations: Mapping[str, int], schema: pa.Schema
) -> None:
    """The commit of `replace_generations`, made on the table as it is now (`fs` rooted at its directory)."""
    actions: list[AddAction | RemoveAction] = []
    now = int(time.time() * 1000)
    for name in files_holding(table, "generation_id", generations.values()):
        matching = _matching_rows(fs, name, generations)
        if matching == 0:
            continue  # its id range overlaps, but it holds none of these generations
        actions.append(RemoveAction(name, True, now, fs.get_file_info(name).size))
        if matching < pq.read_metadata(name, filesystem=fs).num_rows:
            actions.append(add_action(fs, _rewrite_without(fs, name, generations, schema)))
    actions += [add_action(fs, name) for name in files]
    if actions:
        table.create_write_transaction(actions, "append", table.schema())


def add_action(fs: pa_fs.FileSystem, name: str) -> AddAction:
    """The Delta add action of a Parquet file in the table's directory (`fs` rooted there), with statistics from
    its footer."""
    info = fs.get_file_info(name)
    modified = int(info.mtime.timestamp() * 1000) if info.mtime else int(time.time() * 1000)
    return AddAction(name, info.size, {}, modified, True, stats(pq.read_metadata(name, filesystem=fs)))


def stats(meta: pq.FileMetaData) -> str:
    """Delta per-file statistics (numRecords; min, max of integer and string columns; null counts) as JSON,
    merged over the file's row groups, so readers can skip files by key."""
    low: dict[str, Any] = {}
    high: dict[str, Any] = {}
    nulls: dict[str, int] = {}
    for g in range(meta.num_row_groups):
        group = meta.row_group(g)
        for c in range(group.num_columns):
            column = group.column(c)
            name, s = column.path_in_schema, column.statistics
            if "." in name or s is None:
                continue
            nulls[name] = nulls.get(name, 0) + s.null_count
            if s.has_min_max and column.physical_type in ("INT32", "INT64", "BYTE_ARRAY"):
                low[name] = s.min if name not in low else min(low[name], s.min)
                high[name] = s.max if name not in high else max(high[name], s.max)
    return json.dumps({"numRecords": meta.num_rows, "minValues": low, "maxValues": high, "nullCount": nulls})


def _matching_rows(fs: pa_fs.FileSystem, name: str, generations: Mapping[str, int]) -> int:
    """How many of the file's rows belong to the generations, read batch by batch (two columns)."""
    return sum(int(pc.sum(_mine(batch, generations)).as_py() or 0) for batch in _batches(fs, name, list(KEY)))


def _rewrite_without(fs: pa_fs.FileSystem, name: str, generations: Mapping[str, int], schema: pa.Schema) -> str:
    """A new file holding the rows of `name` outside the generations, copied batch by batch; returns its name."""
    kept = f"part-{uuid.uuid4().hex}.snappy.parquet"
    with pq.ParquetWriter(kept, schema, filesystem=fs) as writer:
        for batch in _batches(fs, name, schema.names):
            writer.write_batch(batch.filter(pc.invert(_mine(batch, generations))).cast(schema))
    return kept


def _batches(fs: pa_fs.FileSystem, name: str, columns: list[str]) -> Iterable[pa.RecordBatch]:
    return cast("Iterable[Any]", pq.ParquetFile(name, filesystem=fs).iter_batches(batch_size=1 << 16, columns=columns))


def _mine(batch: pa.RecordBatch, generations: Mapping[str, int]) -> pa.Array:
    """bool per row: its (group_id, generation_id) is one of the generations (groups matched once per distinct
    name through a dictionary, not once per row)."""
    groups = pc.dictionary_encode(batch.column("group_id"))
    wanted = np.asarray([generations.get(g, -1) for g in groups.dictionary.to_pylist()], dtype=np.int64)
    indices = groups.indices.to_numpy(zero_copy_only=False)
    ids = batch.column("generation_id").to_numpy(zero_copy_only=False)
    return pa.array(wanted[indices] == ids if len(wanted) else np.zeros(len(ids), dtype=bool))
