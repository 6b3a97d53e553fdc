"""Where the key-skew job's samples come from: the lake's `key_samples` or a user's Parquet or Delta dataset.

The driver resolves a source into a `jobs.kernels.samples.SampleSource` (the Parquet row groups to read and which
file column feeds each standard column); Spark tasks read them with `jobs.kernels.samples.read_units`. Other column
names are mapped with `columns={"key": "message_key", ...}`.

Every file is read through Arrow's own local file system, as `Lake.read_arrow` reads: delta-rs's default Python
file handler leaves Python buffers in Arrow's IO threads, and one released while the interpreter exits aborts it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, cast
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.fs as pa_fs
import pyarrow.parquet as pq

from jobs.io.lake import Lake
from jobs.kernels.samples import DEFAULT_COLUMNS, REQUIRED, SampleSource
from planner.errors import InputError

if TYPE_CHECKING:
    from deltalake import DeltaTable


class SampleInputError(InputError):
    """The samples cannot be read as topic/key records; the message names the columns involved."""


def resolve(
    lake: Lake, source: str | None = None, *, columns: Mapping[str, str] | None = None, sample_id: str | None = None
) -> SampleSource:
    """The sample source for `source` (Parquet file or directory, or Delta table), else the lake's samples.

    From the lake, `sample_id` picks a sample set; without it the set holding the newest record is used.
    """
    physical: dict[str, str] = {}
    filesystem: pa_fs.FileSystem = pa_fs.LocalFileSystem()
    if source is None:
        filesystem = lake.fs
        with lake.latest("key_samples") as table:
            files, constants, schema, physical = _delta_files(table, filesystem, "key_samples")
        sample_id = sample_id or _latest_sample_id(lake)
    elif (Path(source) / "_delta_log").is_dir():
        from deltalake import DeltaTable

        root = str(Path(source).resolve())
        files, constants, schema, physical = _delta_files(DeltaTable(root), filesystem, root)
    else:
        files, constants = _parquet_files(source), {}
        schema = pq.read_schema(files[0], filesystem=filesystem)
    chosen = choose_columns(schema.names, columns or {})
    key_type = schema.field(chosen["key"]).type
    # delta-rs MERGE writes view types (binary_view / string_view); they hash like the plain ones.
    if not any(
        check(key_type)
        for check in (
            pa.types.is_binary,
            pa.types.is_string,
            pa.types.is_large_binary,
            pa.types.is_large_string,
            pa.types.is_binary_view,
            pa.types.is_string_view,
        )
    ):
        raise SampleInputError(
            f"key column {chosen['key']!r} is {key_type}; it must be binary or string (the serialized key)"
        )
    in_files = {name: None if c is None else physical.get(c, c) for name, c in chosen.items()}
    units = tuple((f, g) for f in files for g in range(max(_row_groups(filesystem, f), 1)))
    return SampleSource(units, in_files, constants, sample_id if source is None else None, filesystem)


def choose_columns(available: Iterable[str], columns: Mapping[str, str]) -> dict[str, str | None]:
    """Standard column -> file column: the mapped name first, then the defaults; topic and key are required."""
    available = set(available)
    unknown = set(columns) - set(DEFAULT_COLUMNS)
    if unknown:
        raise SampleInputError(f"cannot map {sorted(unknown)}: the sample columns are {list(DEFAULT_COLUMNS)}")
    chosen: dict[str, str | None] = {}
    for name, candidates in DEFAULT_COLUMNS.items():
        if name in columns and columns[name] not in available:
            raise SampleInputError(
                f"column {columns[name]!r} (mapped to {name}) is not in the input; it has {sorted(available)}"
            )
        wanted = (columns[name],) if name in columns else candidates
        chosen[name] = next((c for c in wanted if c in available), None)
    missing = [n for n in REQUIRED if chosen[n] is None]
    if missing:
        raise SampleInputError(
            f"the input has no {' or '.join(missing)} column (it has {sorted(available)}); "
            "map one with --column NAME=SOURCE"
        )
    return chosen


def _row_groups(filesystem: pa_fs.FileSystem, path: str) -> int:
    """How many row groups a Parquet file has (its footer, read through Arrow's file system)."""
    return int(pq.ParquetFile(path, filesystem=filesystem).num_row_groups)


def _parquet_files(source: str) -> list[str]:
    """A Parquet file, or every Parquet file under a directory (Spark's _ and . files skipped)."""
    path = Path(source)
    if path.is_file():
        return [str(path.resolve())]
    if not path.is_dir():
        raise SampleInputError(f"no such sample file or directory: {source}")
    files = sorted(
        str(p.resolve())
        for p in path.rglob("*.parquet")
        if not any(part.startswith(("_", ".")) for part in p.relative_to(path).parts)
    )
    if not files:
        raise SampleInputError(f"no Parquet files under {source}")
    return files


def _delta_files(
    delta: DeltaTable, filesystem: pa_fs.FileSystem, directory: str
) -> tuple[list[str], dict[str, dict[str, str]], pa.Schema, dict[str, str]]:
    """A Delta table's data files (paths in `filesystem`, the table being at `directory`), each file's partition
    values, its logical schema, and logical -> file names.

    With column mapping the files hold physical column names (the `delta.columnMapping.physicalName` field
    metadata); callers map logical names and read physical ones.
    """
    physical = {
        f.name: str((f.metadata or {}).get("delta.columnMapping.physicalName", f.name)) for f in delta.schema().fields
    }
    partition_columns = delta.metadata().partition_columns
    constants = {
        f"{directory}/{unquote(a['path'])}": {physical[c]: a.get(f"partition.{c}") for c in partition_columns}
        for a in pa.table(delta.get_add_actions(flatten=True)).to_pylist()
    }
    files = list(constants)
    schema = pa.schema([pa.field(name, pa.string()) for name in physical])
    if files:
        logical = {p: name for name, p in physical.items()}
        file_schema = pq.read_schema(files[0], filesystem=filesystem)
        schema = pa.schema(
            [pa.field(logical.get(f.name, f.name), f.type) for f in file_schema]
            + [pa.field(c, pa.string()) for c in partition_columns]
        )
    return files, constants, schema, physical


def _latest_sample_id(lake: Lake) -> str | None:
    """The sample set holding the newest record of the lake's key_samples table."""
    ids = lake.read_arrow("key_samples", columns=["sample_id", "timestamp"])
    if ids.num_rows == 0:
        return None
    newest = ids.group_by("sample_id").aggregate([("timestamp", "max")])
    newest = newest.sort_by([("timestamp_max", "descending"), ("sample_id", "descending")])
    return cast("str | None", newest["sample_id"][0].as_py())
