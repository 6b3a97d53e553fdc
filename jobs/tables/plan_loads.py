"""Load measurements of a run's groups, one row per (group, topic, partition, source), for the plan kernel.

Extract only: the kernel chooses among them (`jobs.kernels.loads`). The sources:
- `messages` / `bytes`: the key-skew job of the same run (`key_skew`, today's partition count) on the group's
  topics: messages (keyed plus the null-key messages placed there) and their bytes;
- `lag`: the group's end offset minus committed offset (`partition_offsets`);
- `throughput`: end-offset growth per second between the group's previous snapshot and this one
  (`topic_partitions.end_offset`, `snapshots.captured_at`); what-if scenarios are never a previous snapshot.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Sequence

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from jobs.io.delta_stats import files_holding
from jobs.io.lake import Lake
from jobs.io.spark import local_frame
from schemas.spec import TS
from schemas.tables import WHAT_IF_SOURCE

COLUMNS = ("group_id", "topic", "partition", "source", "value")
PREVIOUS = pa.schema(
    [
        ("group_id", pa.string()),
        ("previous_snapshot", pa.string()),
        ("captured_at", TS),
        ("previous_captured_at", TS),
    ]
)


def measurements(
    spark: SparkSession, lake: Lake, run_id: str, snapshot: DataFrame, previous: pa.Table, *, ended: bool
) -> DataFrame | None:
    """Every load measurement of the groups in `snapshot` (the run's `snapshots` rows), None when no source can
    have any: `previous` is `previous_snapshots`' table, `ended` whether the run's partitions have end offsets.

    A source joins the query only when it can have rows (a file that may hold the run's rows; for throughput, end
    offsets now and a previous snapshot): a what-if has none, and each source costs a cold JVM a second or more of
    query compilation for no row.
    Only the per-group frames (a row per group, or per group and topic) are broadcast: Spark sizes a Parquet scan
    by its compressed bytes, so it would otherwise broadcast a million partition rows into the driver's heap.
    """
    subscribed = F.broadcast(snapshot.select("group_id", F.explode("topics").alias("topic")).distinct())
    sources = []
    if _may_hold(lake, "key_skew", "run_id", run_id):
        skew = lake.scan(spark, "key_skew", "run_id", [run_id]).where(F.col("current")).join(subscribed, "topic")
        sources += [
            _rows(skew, "messages", F.col("load")),
            _rows(skew, "bytes", F.col("bytes") + F.coalesce(F.col("null_key_bytes"), F.lit(0.0))),
        ]
    if _may_hold(lake, "partition_offsets", "snapshot_id", run_id):
        sources.append(_rows(lake.scan(spark, "partition_offsets", "snapshot_id", [run_id]), "lag", F.col("lag")))
    if ended and previous.num_rows:
        sources.append(throughput(spark, lake, run_id, subscribed, previous))
    return functools.reduce(DataFrame.unionByName, sources) if sources else None


def _may_hold(lake: Lake, name: str, key: str, value: str) -> bool:
    """Whether a current file of table `name` may hold rows whose `key` is `value` (by the files' statistics)."""
    with lake.latest(name) as table:
        return bool(files_holding(table, key, [value]))


def previous_snapshots(lake: Lake, run_id: str, groups: Sequence[str]) -> pa.Table:
    """(group_id, previous_snapshot, captured_at, previous_captured_at) for each of `groups` in snapshot `run_id`
    that has an earlier snapshot (by capture time, then id); what-if scenarios are never a previous snapshot.

    A row per group, from each group's snapshot ids and times, read by delta-rs: a few rows per snapshot kept
    (`maintain` expires the old ones), where a Spark window over the table would cost a cold JVM seconds.
    """
    rows = lake.read_arrow(
        "snapshots", [("group_id", "in", list(groups))], ["snapshot_id", "group_id", "captured_at", "source"]
    )
    # SQL's OR, as the filter was in Spark: a null source is no scenario's, but not known to be observed either.
    scenario = pc.equal(rows.column("snapshot_id"), run_id)
    observed = pc.or_kleene(pc.not_equal(rows.column("source"), WHAT_IF_SOURCE), scenario)
    taken = rows.filter(observed).group_by(["group_id", "snapshot_id"]).aggregate([("captured_at", "min")])
    # Spark's ascending order: a null time first, then by time, then by id.
    order = sorted(
        taken.to_pylist(),
        key=lambda r: (r["group_id"], r["captured_at_min"] is not None, r["captured_at_min"] or 0, r["snapshot_id"]),
    )
    found = [
        {
            "group_id": now["group_id"],
            "previous_snapshot": before["snapshot_id"],
            "captured_at": now["captured_at_min"],
            "previous_captured_at": before["captured_at_min"],
        }
        for before, now in itertools.pairwise(order)
        if now["snapshot_id"] == run_id and before["group_id"] == now["group_id"]
    ]
    return pa.Table.from_pylist(found, schema=PREVIOUS)


def throughput(spark: SparkSession, lake: Lake, run_id: str, subscribed: DataFrame, previous: pa.Table) -> DataFrame:
    """Messages per second per partition of each group's `subscribed` topics since the group's previous snapshot."""
    ends = lake.scan(spark, "topic_partitions").where(F.col("end_offset").isNotNull())
    now = ends.where(F.col("snapshot_id") == run_id).select("topic", "partition", F.col("end_offset").alias("end"))
    before = ends.select(
        F.col("snapshot_id").alias("previous_snapshot"), "topic", "partition", F.col("end_offset").alias("start")
    )
    seconds = F.unix_micros("captured_at") / 1e6 - F.unix_micros("previous_captured_at") / 1e6
    pairs = local_frame(spark, [tuple(r.values()) for r in previous.to_pylist()], PREVIOUS)
    pairs = pairs.where(seconds > 0).join(subscribed, "group_id")
    grown = before.join(F.broadcast(pairs), ["previous_snapshot", "topic"]).join(
        now.hint("shuffle_merge"), ["topic", "partition"]
    )
    return _rows(grown, "throughput", (F.col("end") - F.col("start")) / seconds)


def _rows(frame: DataFrame, source: str, value: Column) -> DataFrame:
    return frame.select(
        "group_id", "topic", "partition", F.lit(source).alias("source"), value.cast("double").alias("value")
    )
