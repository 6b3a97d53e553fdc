"""The shape of a lake table, shared by every table module of `schemas`."""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa


@dataclass(frozen=True)
class TableSpec:
    """A lake table: its Arrow schema, the columns a MERGE matches on, and its partition columns."""

    name: str
    schema: pa.Schema
    keys: tuple[str, ...]
    partition_by: tuple[str, ...] = ()
    description: str = ""


TS = pa.timestamp("us", tz="UTC")
TOPIC_PARTITION = pa.struct([("topic", pa.string()), ("partition", pa.int32())])


def table(name: str, keys: tuple[str, ...], fields: list[tuple[str, pa.DataType]], description: str) -> TableSpec:
    """Declare a table: key columns are non-null (MERGE matches on them), every other column is nullable."""
    schema = pa.schema([pa.field(n, t, nullable=n not in keys) for n, t in fields])
    return TableSpec(name, schema, keys, (), description)
