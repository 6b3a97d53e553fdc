"""Key samples as Spark tasks read them: (file, row group) units read with pyarrow into standard batches.

The driver (`jobs.tables.skew_input`) resolves a sample source into a `SampleSource`; each map task then reads its
row groups here. Why pyarrow and not spark.read: the keys go from Parquet straight to NumPy; through the JVM's
row-to-Arrow conversion the same scan costs about four times as long.

Standard columns: topic, key (bytes; a string key is its UTF-8 bytes, as Kafka's StringSerializer writes it),
weight (records the row stands for, default 1), bytes (default 0) and partition (where the record was read,
null when unknown).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
import pyarrow.parquet as pq

# Columns of the samples as `read_units` yields them: one row per record (or per key with a `weight`). Weights
# are fractional (a Kafka tail sample stands for retained messages / records read): message counts are float64.
SAMPLE_SCHEMA = pa.schema(
    [
        ("topic", pa.string()),
        ("key", pa.binary()),
        ("weight", pa.float64()),
        ("bytes", pa.int64()),
        ("partition", pa.int32()),
    ]
)

# Standard column -> the file columns tried in order when the caller maps nothing.
DEFAULT_COLUMNS: Mapping[str, tuple[str, ...]] = {
    "topic": ("topic",),
    "key": ("key",),
    "weight": ("weight", "messages", "count"),
    "bytes": ("bytes", "value_size"),
    "partition": ("partition",),
}
REQUIRED = ("topic", "key")
DEFAULTS: Mapping[str, float] = {"weight": 1.0, "bytes": 0}
READ_BATCH_ROWS = 1 << 18


@dataclass(frozen=True)
class SampleSource:
    """What the Spark tasks read: (file, row group) units, the column choice and an optional sample-set filter."""

    units: tuple[tuple[str, int], ...]
    columns: Mapping[str, str | None]  # standard column -> file column (None: default value)
    constants: Mapping[str, Mapping[str, str]] = field(default_factory=dict)  # file -> Delta partition values
    sample_id: str | None = None
    filesystem: pafs.FileSystem | None = None  # where the unit paths are (the lake's); None: URIs or local paths


def read_units(source: SampleSource, units: Iterable[tuple[str, int]]) -> Iterator[pa.RecordBatch]:
    """Standard sample batches (`SAMPLE_SCHEMA`) of the given (file, row group) units, read with pyarrow."""
    wanted = {c for c in source.columns.values() if c is not None}
    for uri, row_group in units:
        if source.filesystem is not None:
            filesystem, path = source.filesystem, uri
        else:
            filesystem, path = pafs.FileSystem.from_uri(uri) if "://" in uri else (None, uri)
        parquet = pq.ParquetFile(path, filesystem=filesystem)
        present = [c for c in parquet.schema_arrow.names if c in wanted or c == "sample_id"]
        if parquet.num_row_groups == 0:
            continue
        for read in parquet.iter_batches(READ_BATCH_ROWS, row_groups=[row_group], columns=present):
            batch = _without_views(read)
            if source.sample_id is not None:
                batch = batch.filter(pc.equal(batch.column("sample_id"), source.sample_id))
            yield standardize(batch, source.columns, source.constants.get(uri, {}))


def _without_views(batch: pa.RecordBatch) -> pa.RecordBatch:
    """View columns (delta-rs MERGE writes string_view / binary_view) as plain ones, which every kernel takes."""
    plain = {pa.string_view(): pa.string(), pa.binary_view(): pa.binary()}
    if not any(f.type in plain for f in batch.schema):
        return batch
    schema = pa.schema([f.with_type(plain.get(f.type, f.type)) for f in batch.schema])
    return batch.cast(schema)


def standardize(
    batch: pa.RecordBatch, columns: Mapping[str, str | None], constants: Mapping[str, str]
) -> pa.RecordBatch:
    """One file batch in the standard columns: mapped, cast, defaults filled, nulls as Kafka has them."""
    n = batch.num_rows
    arrays = []
    for f in SAMPLE_SCHEMA:
        name = columns.get(f.name)
        if name is not None and name in batch.schema.names:
            column = batch.column(name)
        elif name is not None and name in constants:
            column = pa.array([constants[name]] * n, pa.string())
        else:
            column = pa.nulls(n, f.type)
        if pa.types.is_large_string(column.type) or pa.types.is_large_binary(column.type):
            column = column.cast(pa.large_binary())
        column = column.cast(f.type)
        if f.name in DEFAULTS:
            column = pc.fill_null(column, pa.scalar(DEFAULTS[f.name], f.type))
        elif f.name == "topic":
            column = pc.fill_null(column, "")
        arrays.append(column)
    return pa.RecordBatch.from_arrays(arrays, schema=SAMPLE_SCHEMA)
