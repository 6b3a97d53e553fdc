"""Key samples for the key-skew job, from the lake's `key_samples` or a user's Parquet or Delta dataset.

Whatever the source, the result has the columns of `jobs.key_skew_arrow.SAMPLE_SCHEMA`: topic, key (bytes; a
string key is its UTF-8 bytes, as Kafka's StringSerializer writes it), weight (records the row stands for,
default 1), bytes (default 0) and partition (where the record was read, null when unknown).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import BinaryType, StringType

from jobs.lake import Lake

# Standard column -> the source columns tried in order when the caller maps nothing.
DEFAULT_COLUMNS: Mapping[str, tuple[str, ...]] = {
    "topic": ("topic",), "key": ("key",), "weight": ("weight", "messages", "count"),
    "bytes": ("bytes", "value_size"), "partition": ("partition",),
}
REQUIRED = ("topic", "key")


class SampleInputError(ValueError):
    """The samples cannot be read as topic/key records; the message names the columns involved."""


def read_samples(spark: SparkSession, lake: Lake, source: str | None = None, *,
                 columns: Mapping[str, str] | None = None, sample_id: str | None = None) -> DataFrame:
    """Samples from `source` (Parquet file or directory, or Delta table), else the lake's latest sample set."""
    if source is None:
        raw = _lake_samples(spark, lake, sample_id)
    elif (Path(source) / "_delta_log").is_dir():
        raw = _delta(spark, source)
    else:
        raw = spark.read.parquet(source)
    return standardize(raw, columns or {})


def standardize(raw: DataFrame, columns: Mapping[str, str]) -> DataFrame:
    """The five standard columns from `raw`, taking mapped names first, then the defaults."""
    unknown = set(columns) - set(DEFAULT_COLUMNS)
    if unknown:
        raise SampleInputError(f"cannot map {sorted(unknown)}: the sample columns are {list(DEFAULT_COLUMNS)}")
    available = set(raw.columns)
    chosen: dict[str, str | None] = {}
    for name, candidates in DEFAULT_COLUMNS.items():
        if name in columns and columns[name] not in available:
            raise SampleInputError(f"column {columns[name]!r} (mapped to {name}) is not in the input; "
                                   f"it has {sorted(available)}")
        wanted = (columns[name],) if name in columns else candidates
        chosen[name] = next((c for c in wanted if c in available), None)
    missing = [n for n in REQUIRED if chosen[n] is None]
    if missing:
        raise SampleInputError(f"the input has no {' or '.join(missing)} column (it has {sorted(available)}); "
                               "map one with --column NAME=SOURCE")
    key_type = raw.schema[chosen["key"]].dataType
    if not isinstance(key_type, BinaryType | StringType):
        raise SampleInputError(f"key column {chosen['key']!r} is {key_type.simpleString()}; "
                               "it must be binary or string (the serialized key)")

    def pick(name: str, default: object, cast: str) -> F.Column:
        source = chosen[name]
        column = F.lit(default) if source is None else F.coalesce(F.col(source).cast(cast), F.lit(default))
        return column.cast(cast).alias(name)

    return raw.select(
        F.coalesce(F.col(chosen["topic"]).cast("string"), F.lit("")).alias("topic"),
        F.col(chosen["key"]).cast("binary").alias("key"),
        pick("weight", 1, "long"), pick("bytes", 0, "long"),
        (F.lit(None) if chosen["partition"] is None else F.col(chosen["partition"])).cast("int").alias("partition"),
    )


def _lake_samples(spark: SparkSession, lake: Lake, sample_id: str | None) -> DataFrame:
    """`key_samples` rows of `sample_id`, or of the sample set with the newest record when none is given."""
    samples = lake.read(spark, "key_samples")
    if sample_id is None:
        latest = (samples.groupBy("sample_id").agg(F.max("timestamp").alias("newest"))
                  .orderBy(F.desc_nulls_last("newest"), F.desc("sample_id")).first())
        if latest is None:
            return samples
        sample_id = latest["sample_id"]
    return samples.where(F.col("sample_id") == sample_id)


def _delta(spark: SparkSession, path: str) -> DataFrame:
    """A Delta table's current snapshot read from its file list (no Delta connector needed).

    Tables with column mapping store physical column names in the files; they are renamed to the logical ones.
    """
    from deltalake import DeltaTable

    table = DeltaTable(path)
    files = table.file_uris()
    if not files:
        raise SampleInputError(f"the Delta table at {path} has no data files")
    frame = spark.read.option("basePath", str(Path(path).resolve())).parquet(*files)
    for field in table.schema().fields:
        physical = (field.metadata or {}).get("delta.columnMapping.physicalName")
        if physical and physical != field.name and physical in frame.columns:
            frame = frame.withColumnRenamed(str(physical), field.name)
    return frame
