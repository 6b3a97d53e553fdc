"""The lake: Delta tables written and committed with delta-rs, read by Spark through the snapshot's file list.

delta-rs needs no JVM jars, so this works on any machine; when the Spark session has the Delta connector the
same directories are also registered as Delta catalog tables (same protocol, same files).
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from deltalake import DeltaTable, write_deltalake
from deltalake import Schema as DeltaSchema
from deltalake.table import TableMerger
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.pandas.types import from_arrow_schema

from jobs.io.spark import has_delta_connector
from schemas import TABLES, TableSpec


class Lake:
    """A directory of Delta tables, one per `schemas.TABLES` entry."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root).resolve()

    def path(self, name: str) -> Path:
        return self.root / name

    def create_all(self) -> None:
        """Create every missing table with its contract schema, and add the contract's newer columns to old tables.

        A table written before a column joined its contract gets that column (nullable, so old rows read null) by
        Delta schema evolution, under the lake lock so processes starting together add it once; rows are kept.
        """
        self.root.mkdir(parents=True, exist_ok=True)
        for spec in TABLES.values():
            path = self.path(spec.name)
            if not DeltaTable.is_deltatable(str(path)):
                DeltaTable.create(
                    path,
                    schema=spec.schema,
                    mode="ignore",
                    partition_by=list(spec.partition_by) or None,
                    name=spec.name,
                    description=spec.description,
                )
            elif _missing_columns(spec, DeltaTable(path)):
                with self.lock():
                    table = DeltaTable(path)
                    if missing := _missing_columns(spec, table):
                        table.alter.add_columns(DeltaSchema.from_arrow(pa.schema(missing)).fields)

    def append(self, name: str, data: pa.Table) -> None:
        """Append rows as one Delta commit."""
        if data.num_rows:
            write_deltalake(self.path(name), conform(TABLES[name], data), mode="append")

    def merge(self, name: str, data: pa.Table) -> None:
        """Upsert rows on the table's keys as one Delta commit: re-running a step never duplicates rows."""
        if data.num_rows:
            self._on_keys(name, data).when_matched_update_all().when_not_matched_insert_all().execute()

    def update(self, name: str, data: pa.Table, columns: list[str]) -> None:
        """Set `columns` of existing rows matched on the table's keys (other columns keep their values)."""
        if data.num_rows:
            self._on_keys(name, data).when_matched_update({f"`{c}`": f"s.`{c}`" for c in columns}).execute()

    def _on_keys(self, name: str, data: pa.Table) -> TableMerger:
        """A MERGE of `data` (alias s) into the table (alias t) matching on the table's keys."""
        spec = TABLES[name]
        predicate = " AND ".join(f"t.`{k}` = s.`{k}`" for k in spec.keys)
        return DeltaTable(self.path(name)).merge(conform(spec, data), predicate, source_alias="s", target_alias="t")

    def read_arrow(self, name: str, filters: list[tuple[str, str, object]] | None = None) -> pa.Table:
        """The table's current snapshot as Arrow, optionally filtered by (column, "=" or "in", value) terms."""
        table = DeltaTable(self.path(name)).to_pyarrow_table().select(TABLES[name].schema.names)
        table = table.cast(TABLES[name].schema)
        for column, op, value in filters or []:
            table = table.filter(_term(column, op, value))
        return table

    def read(self, spark: SparkSession, name: str) -> DataFrame:
        """The table's current snapshot as a Spark DataFrame, read from the Delta log's file list."""
        spec = TABLES[name]
        schema = from_arrow_schema(spec.schema)
        files = DeltaTable(self.path(name)).file_uris()
        if not files:
            return spark.createDataFrame([], schema)
        reader = spark.read.schema(schema)
        if spec.partition_by:
            reader = reader.option("basePath", str(self.path(name)))
        return reader.parquet(*files)

    def register_views(self, spark: SparkSession) -> list[str]:
        """Expose every table to Spark SQL: a catalog Delta table with the connector, a temp view otherwise."""
        delta = has_delta_connector(spark)
        for name in TABLES:
            if delta:
                spark.sql(f"CREATE TABLE IF NOT EXISTS `{name}` USING delta LOCATION '{self.path(name)}'")
            else:
                # A projection over the files, not the file relation itself: Spark refuses INSERT into it.
                frame = self.read(spark, name)
                frame.select(*frame.columns).createOrReplaceTempView(name)
        return list(TABLES)

    @contextmanager
    def lock(self) -> Iterator[None]:
        """An exclusive lock over the lake, held while generation ids are allocated and published."""
        self.root.mkdir(parents=True, exist_ok=True)
        with open(self.root / ".lock", "w") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)


def rows_table(name: str, rows: list[dict[str, Any]]) -> pa.Table:
    """Rows (dicts) as an Arrow table of the named table's schema."""
    return pa.Table.from_pylist(rows, schema=TABLES[name].schema)


def conform(spec: TableSpec, data: pa.Table) -> pa.Table:
    """Select and cast the contract's columns in order; missing nullable columns become nulls."""
    columns = []
    for field in spec.schema:
        if field.name in data.column_names:
            columns.append(data.column(field.name).cast(field.type))
        elif field.nullable:
            columns.append(pa.nulls(data.num_rows, field.type))
        else:
            raise ValueError(f"{spec.name}: key column {field.name!r} is missing")
    return pa.Table.from_arrays(columns, schema=spec.schema)


def _missing_columns(spec: TableSpec, table: DeltaTable) -> list[pa.Field]:
    """The contract's columns that the stored table does not have yet, in contract order."""
    stored = set(table.schema().to_arrow().names)
    return [field for field in spec.schema if field.name not in stored]


def _term(column: str, op: str, value: object) -> pc.Expression:
    """A filter term: `=` or `in` (the lookups the pipeline makes by key)."""
    if op == "=":
        return pc.field(column) == value
    if op == "in":
        return pc.field(column).isin(list(value))  # type: ignore[call-overload]
    raise ValueError(f"unsupported filter operator {op!r}: use '=' or 'in'")
