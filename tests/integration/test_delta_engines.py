"""One lake, two engines: every table written by delta-rs is read and appended by Spark's Delta connector, and every
table Spark appended to is read and appended by delta-rs again, at the pinned protocol (reader 1, writer 2, no
table features), timestamps UTC-aware throughout; on a local lake and on a lake in an S3 bucket alike."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import write_deltalake

from jobs import pipeline
from jobs.config import Config
from jobs.io.lake import PROTOCOL, Lake
from schemas import TABLES

pytestmark = pytest.mark.spark

DEMO = Path(__file__).resolve().parents[2] / "jobs" / "demo" / "data"


@pytest.fixture(scope="module", params=["local", "s3"])
def lake(request: pytest.FixtureRequest, spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lake]:
    """A lake after one nightly run on the demo's snapshot files: every table delta-rs (or the plan kernel) wrote."""
    with pytest.MonkeyPatch.context() as env:
        if request.param == "s3":
            server = request.getfixturevalue("s3")
            for name, value in server.env().items():
                env.setenv(name, value)
            root = f"s3://{server.bucket()}/lake"
        else:
            root = str(tmp_path_factory.mktemp("engines") / "lake")
        reports = str(tmp_path_factory.mktemp("reports"))  # an S3 lake's reports would go to ./reports
        config = Config(lake=root, snapshots=str(DEMO), strategies=("range", "uniform"), reports=reports)
        pipeline.run(config, "run-1", spark=spark)
        yield Lake(root)


def one_row(lake: Lake, name: str) -> pa.Table:
    """A row of the table as it is (or, for an empty table, a row of nulls and fillers in its contract schema)."""
    rows = lake.read_arrow(name)
    if rows.num_rows:
        return rows.slice(0, 1)
    schema = TABLES[name].schema
    return pa.table({f.name: pa.array([None if f.nullable else filler(f.type)], f.type) for f in schema}, schema=schema)


def filler(kind: pa.DataType) -> Any:
    """A value of a non-nullable column's type, for a row of an empty table."""
    if pa.types.is_timestamp(kind):
        return datetime(2026, 1, 1, tzinfo=UTC)
    if pa.types.is_list(kind):
        return []
    if pa.types.is_boolean(kind):
        return False
    if pa.types.is_string(kind) or pa.types.is_binary(kind):
        return "x" if pa.types.is_string(kind) else b"x"
    return 0


def protocol(lake: Lake, name: str) -> tuple[int, int, Any, Any]:
    p = lake.table(name).protocol()
    return p.min_reader_version, p.min_writer_version, p.reader_features, p.writer_features


@pytest.mark.parametrize("name", sorted(TABLES))
def test_each_table_is_read_and_appended_by_both_engines(spark: Any, lake: Lake, name: str) -> None:
    pinned = (int(PROTOCOL["delta.minReaderVersion"]), int(PROTOCOL["delta.minWriterVersion"]), None, None)
    assert protocol(lake, name) == pinned
    before = lake.read_arrow(name).num_rows
    path = lake.store.spark_uri(name)

    # Spark reads what delta-rs wrote, and appends a row of its own.
    frame = lake.read(spark, name)
    assert frame.count() == before
    assert [f.name for f in frame.schema.fields] == TABLES[name].schema.names
    spark.createDataFrame(one_row(lake, name), schema=frame.schema).write.format("delta").mode("append").save(path)

    # delta-rs reads Spark's commit (its timestamps UTC-aware), and appends again.
    after_spark = lake.read_arrow(name)
    assert after_spark.num_rows == before + 1
    assert after_spark.schema == TABLES[name].schema
    write_deltalake(lake.path(name), one_row(lake, name), mode="append", storage_options=lake.store.delta_options())
    assert lake.read(spark, name).count() == before + 2

    # Neither engine moved the table off the pinned protocol; Spark's history shows both writers.
    assert protocol(lake, name) == pinned
    engines = {r.engineInfo or "" for r in spark.sql(f"DESCRIBE HISTORY delta.`{path}`").collect()}
    assert any("Apache-Spark" in e for e in engines) and any("delta-rs" in e for e in engines)
