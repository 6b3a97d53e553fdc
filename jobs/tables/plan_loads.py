"""Load measurements of a run's groups, one row per (group, topic, partition, source), for the plan kernel.

Extract only: the kernel chooses among them (`jobs.kernels.loads`). The sources:
- `messages` / `bytes`: the key-skew job of the same run (`key_skew`, today's partition count) on the group's
  topics: messages (keyed plus the null-key messages placed there) and their bytes;
- `lag`: the group's end offset minus committed offset (`partition_offsets`);
- `throughput`: end-offset growth per second between the group's previous snapshot and this one
  (`topic_partitions.end_offset`, `snapshots.captured_at`); what-if scenarios are never a previous snapshot.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from jobs.io.lake import Lake
from schemas.tables import WHAT_IF_SOURCE

COLUMNS = ("group_id", "topic", "partition", "source", "value")


def measurements(spark: SparkSession, lake: Lake, run_id: str, snapshot: DataFrame) -> DataFrame:
    """Every load measurement of the groups in `snapshot` (the run's `snapshots` rows).

    Only the per-group frames (a row per group, or per group and topic) are broadcast: Spark sizes a Parquet scan
    by its compressed bytes, so it would otherwise broadcast a million partition rows into the driver's heap.
    """
    subscribed = F.broadcast(snapshot.select("group_id", F.explode("topics").alias("topic")).distinct())
    skew = lake.scan(spark, "key_skew", "run_id", [run_id]).where(F.col("current"))
    skew = skew.join(subscribed, "topic")
    offsets = lake.scan(spark, "partition_offsets", "snapshot_id", [run_id])
    return (
        _rows(skew, "messages", F.col("load"))
        .unionByName(_rows(skew, "bytes", F.col("bytes") + F.coalesce(F.col("null_key_bytes"), F.lit(0.0))))
        .unionByName(_rows(offsets, "lag", F.col("lag")))
        .unionByName(throughput(spark, lake, run_id, subscribed))
    )


def previous_snapshots(spark: SparkSession, lake: Lake, run_id: str) -> DataFrame:
    """(group_id, previous_snapshot, captured_at, previous_captured_at) for each group of snapshot `run_id` that
    has an earlier snapshot (by capture time, then id)."""
    taken = (
        lake.scan(spark, "snapshots")
        .where((F.col("source") != WHAT_IF_SOURCE) | (F.col("snapshot_id") == run_id))
        .groupBy("group_id", "snapshot_id")
        .agg(F.min("captured_at").alias("captured_at"))
    )
    order = Window.partitionBy("group_id").orderBy("captured_at", "snapshot_id")
    return (
        taken.withColumn("previous_snapshot", F.lag("snapshot_id").over(order))
        .withColumn("previous_captured_at", F.lag("captured_at").over(order))
        .where((F.col("snapshot_id") == run_id) & F.col("previous_snapshot").isNotNull())
        .select("group_id", "previous_snapshot", "captured_at", "previous_captured_at")
    )


def throughput(spark: SparkSession, lake: Lake, run_id: str, subscribed: DataFrame) -> DataFrame:
    """Messages per second per partition of each group's `subscribed` topics since the group's previous snapshot."""
    ends = lake.scan(spark, "topic_partitions").where(F.col("end_offset").isNotNull())
    now = ends.where(F.col("snapshot_id") == run_id).select("topic", "partition", F.col("end_offset").alias("end"))
    before = ends.select(
        F.col("snapshot_id").alias("previous_snapshot"), "topic", "partition", F.col("end_offset").alias("start")
    )
    seconds = F.unix_micros("captured_at") / 1e6 - F.unix_micros("previous_captured_at") / 1e6
    pairs = previous_snapshots(spark, lake, run_id).where(seconds > 0).join(subscribed, "group_id")
    grown = before.join(F.broadcast(pairs), ["previous_snapshot", "topic"]).join(
        now.hint("shuffle_merge"), ["topic", "partition"]
    )
    return _rows(grown, "throughput", (F.col("end") - F.col("start")) / seconds)


def _rows(frame: DataFrame, source: str, value: Column) -> DataFrame:
    return frame.select(
        "group_id", "topic", "partition", F.lit(source).alias("source"), value.cast("double").alias("value")
    )
