"""Key skew: how unevenly a topic's keys load its partitions today and at what-if partition counts.

Extract key samples (jobs.tables.skew_input) and each topic's partition count; transform in Spark with the
vectorized hashing of `planner.hashing` inside mapInArrow (jobs.kernels.key_skew), then small DataFrame steps for
shares, Gini, hot keys, the recommended count and the partitioner fingerprint; load `key_skew`,
`key_skew_summary`, `key_skew_hot_keys` and `key_skew_fingerprint` by MERGE on the run id, so a rerun replaces
its own rows. `partition_weights` hands today's per-partition loads to the plan job.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime

import pyarrow as pa
from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import from_arrow_schema

from jobs.context import RunContext, StepResult
from jobs.io.lake import Lake
from jobs.kernels.key_skew import METRICS_SCHEMA, PARTIAL_SCHEMA, TopicCounts, map_kernel, reduce_kernel
from jobs.kernels.samples import SampleSource
from jobs.tables.skew_input import resolve
from planner.errors import InputError
from planner.partitioners import PARTITIONERS, get_partitioner
from schemas.key_skew import KEY_SKEW, KEY_SKEW_FINGERPRINT, KEY_SKEW_HOT_KEYS, KEY_SKEW_SUMMARY

ARROW_BATCH_ROWS = 100_000  # the shuffled key sums cross JVM <-> Python in fewer, larger batches
JAVA_PARTITIONER = "murmur2"


@dataclass(frozen=True)
class SkewOptions:
    """What to measure; every field has a default so the nightly run needs none."""

    partitions: Mapping[str, int] | None = None  # topic -> current count; None: the run's topic_partitions
    partitioner: str = JAVA_PARTITIONER  # default for every topic
    partitioners: Mapping[str, str] = field(default_factory=dict)  # per-topic overrides
    what_if: tuple[int, ...] = ()
    top_keys: int = 10
    input: str | None = None  # Parquet or Delta path; None: the lake's key_samples
    columns: Mapping[str, str] = field(default_factory=dict)  # standard column -> input column
    sample_id: str | None = None  # with input None: this sample set instead of the latest one
    java_threshold: float = 0.99  # murmur2 must explain this share of observed records to be Java-compatible


def parse_what_if(text: str) -> tuple[int, ...]:
    """'24,36,48' or a range 'A-B' / 'A-B:STEP' (inclusive), mixed freely: the sorted distinct counts."""
    counts: set[int] = set()
    for item in filter(None, (s.strip() for s in text.split(","))):
        span, _, step = item.partition(":")
        low, sep, high = span.partition("-")
        try:
            if sep:
                counts.update(range(int(low), int(high) + 1, int(step or 1)))
            else:
                counts.add(int(span))
        except ValueError:
            raise InputError(f"--what-if: expected N, A-B or A-B:STEP, got {item!r}") from None
    return tuple(sorted(counts))


@dataclass(frozen=True)
class SkewResult:
    """The four result frames of one run (loaded into the lake under the same names)."""

    key_skew: DataFrame
    summary: DataFrame
    hot_keys: DataFrame
    fingerprint: DataFrame


def counts_to_measure(counts: Mapping[str, int], options: SkewOptions) -> dict[str, TopicCounts]:
    """Each topic's partitioner and candidate counts (current first, then the what-ifs that differ)."""
    for name in {options.partitioner, *options.partitioners.values()}:
        get_partitioner(name)  # InputError naming the known partitioners
    bad = sorted(n for n in options.what_if if n <= 0)
    if bad:
        raise InputError(f"what-if partition counts must be positive, got {bad}")
    measured = {}
    for topic, current in counts.items():
        if current <= 0:
            raise InputError(f"topic {topic!r}: partition count must be positive, got {current}")
        whatif = [n for n in dict.fromkeys(options.what_if) if n != current]
        measured[topic] = TopicCounts(options.partitioners.get(topic, options.partitioner), (current, *whatif))
    return measured


def measure(
    spark: SparkSession,
    source: SampleSource,
    measured: Mapping[str, TopicCounts],
    *,
    top_keys: int,
    shuffle_partitions: int,
) -> DataFrame:
    """Samples -> long-form metrics (`METRICS_SCHEMA`): one shuffle on (topic, key) between two Arrow stages.

    The map-side tasks each read their share of the sample row groups with pyarrow (see jobs.tables.skew_input).
    """
    measured = dict(measured)
    units = pa.table(
        {"uri": [u for u, _ in source.units], "row_group": [g for _, g in source.units]},
        schema=pa.schema([("uri", pa.string()), ("row_group", pa.int32())]),
    )
    tasks = max(1, min(len(source.units), shuffle_partitions))
    # The kernels come from `jobs.kernels`, so executors import the shipped kernels, never this module's lake.
    return (
        spark.createDataFrame(units)
        .repartition(tasks)
        .mapInArrow(map_kernel(source, measured), from_arrow_schema(PARTIAL_SCHEMA))
        .repartition(shuffle_partitions, "topic", "key")
        .mapInArrow(reduce_kernel(measured, top_keys), from_arrow_schema(METRICS_SCHEMA))
    )


def loads(metrics: DataFrame, measured: Mapping[str, TopicCounts]) -> DataFrame:
    """`key_skew` rows (without run columns): per-partition totals, load and share of the topic."""
    per_count = Window.partitionBy("topic", "partitioner", "partition_count")
    return (
        metrics.where(F.col("kind") == "load")
        .groupBy("topic", "partitioner", "partition_count", "partition")
        .agg(
            *[
                F.sum(c).alias(c)
                for c in (
                    "messages",
                    "bytes",
                    "distinct_keys",
                    "remapped_keys",
                    "remapped_messages",
                    "null_key_messages",
                    "null_key_bytes",
                )
            ]
        )
        .withColumn("load", F.col("messages") + F.col("null_key_messages"))
        .withColumn("share", F.try_divide(F.col("load"), F.sum("load").over(per_count)))
        .withColumn("current", F.col("partition_count") == _current_count(measured))
    )


def hot_keys(metrics: DataFrame, key_skew: DataFrame, top_keys: int) -> DataFrame:
    """`key_skew_hot_keys` rows: the topic's top keys by messages (ties: smaller key) at every count."""
    totals = key_skew.groupBy("topic", "partitioner", "partition_count").agg(F.sum("load").alias("total"))
    rank = Window.partitionBy("topic", "partitioner", "partition_count").orderBy(F.desc("messages"), "key")
    return (
        metrics.where(F.col("kind") == "hot")
        .withColumn("rank", F.row_number().over(rank))
        .where(F.col("rank") <= top_keys)
        .join(totals, ["topic", "partitioner", "partition_count"])
        .withColumn("share", F.try_divide(F.col("messages"), F.col("total")))
        .select(
            "topic",
            "partitioner",
            "partition_count",
            F.col("rank").cast("int"),
            "key",
            "messages",
            "bytes",
            "partition",
            "share",
        )
    )


def fingerprint(metrics: DataFrame, measured: Mapping[str, TopicCounts]) -> DataFrame:
    """`key_skew_fingerprint` rows: the share of observed keyed records each partitioner explains today."""
    return (
        metrics.where(F.col("kind") == "fingerprint")
        .groupBy("topic", "partitioner")
        .agg(F.sum("messages").alias("observed_messages"), F.sum("explained").alias("explained_messages"))
        .withColumn("share", F.try_divide(F.col("explained_messages"), F.col("observed_messages")))
        .withColumn("partition_count", _current_count(measured))
    )


def summary(
    key_skew: DataFrame,
    hot: DataFrame,
    prints: DataFrame,
    metrics: DataFrame,
    options: SkewOptions,
) -> DataFrame:
    """`key_skew_summary` rows: load statistics per candidate count, the recommendation and the fingerprint."""
    candidate = ["topic", "partitioner", "partition_count"]
    # Gini over loads sorted ascending: sum((2i - n - 1) * x_i) / (n * sum x), i = 1..n.
    ascending = Window.partitionBy(*candidate).orderBy("load", "partition")
    stats = (
        key_skew.withColumn("i", F.row_number().over(ascending))
        .groupBy(*candidate, "current")
        .agg(
            F.sum("messages").alias("messages"),
            F.sum("null_key_messages").alias("nulls"),
            F.sum("bytes").alias("bytes"),
            F.sum("distinct_keys").alias("distinct_keys"),
            F.max("load").alias("max_load"),
            F.avg("load").alias("mean_load"),
            F.stddev_pop("load").alias("std"),
            F.sum("load").alias("total"),
            F.sum((2 * F.col("i") - F.col("partition_count") - 1) * F.col("load")).alias("gini_sum"),
            F.sum("remapped_keys").alias("keys_remapped"),
            F.sum("remapped_messages").alias("moved"),
        )
    )
    best = Window.partitionBy("topic", "partitioner").orderBy(
        F.asc_nulls_last("max_mean"), "keys_remapped", "partition_count"
    )
    top = hot.where(F.col("rank") == 1).select(
        *candidate,
        F.col("key").alias("hot_key"),
        F.col("partition").alias("hot_key_partition"),
        F.col("share").alias("hot_key_share"),
    )
    measured = (
        stats.withColumn("null_key_messages", F.col("nulls"))
        .withColumn("null_key_placement", F.when(F.col("nulls") > 0, F.lit("spread")))
        .withColumn("max_mean", F.try_divide(F.col("max_load"), F.col("mean_load")))
        .withColumn("cv", F.try_divide(F.col("std"), F.col("mean_load")))
        .withColumn("gini", F.try_divide(F.col("gini_sum"), F.col("partition_count") * F.col("total")))
        .withColumn("keys_remapped_share", F.try_divide(F.col("keys_remapped"), F.col("distinct_keys")))
        .withColumn("traffic_remapped_share", F.try_divide(F.col("moved"), F.col("messages")))
        .withColumn("recommended", F.row_number().over(best) == 1)
        .join(top, candidate, "left")
        .join(_fingerprint_verdict(prints, options.java_threshold), "topic", "left")
    )
    unknown = (
        metrics.where(F.col("kind") == "unknown")
        .groupBy("topic")
        .agg(F.sum("messages").alias("messages"), F.sum("bytes").alias("bytes"))
        .withColumn("partitioner", _topic_partitioner(options))
        .withColumn("partition_count", F.lit(0))
        .withColumn("current", F.lit(True))
        .withColumn(
            "error",
            F.format_string(
                "topic %s has no partition count in the metadata; give it with --partitions TOPIC=N", F.col("topic")
            ),
        )
    )
    columns = [f.name for f in KEY_SKEW_SUMMARY.schema if f.name not in ("run_id", "computed_at")]
    return measured.unionByName(unknown, allowMissingColumns=True).select(*columns)


def _fingerprint_verdict(prints: DataFrame, threshold: float) -> DataFrame:
    """Per topic: the partitioner explaining most records (ties: PARTITIONERS order), and Java compatibility."""
    order = F.create_map(*[x for i, name in enumerate(PARTITIONERS) for x in (F.lit(name), F.lit(i))])
    best = Window.partitionBy("topic").orderBy(F.desc("share"), order[F.col("partitioner")])
    java = prints.where(F.col("partitioner") == JAVA_PARTITIONER).select(
        "topic", (F.col("share") >= threshold).alias("java_compatible")
    )
    return (
        prints.withColumn("n", F.row_number().over(best))
        .where(F.col("n") == 1)
        .select("topic", F.col("partitioner").alias("fingerprint"), F.col("share").alias("fingerprint_share"))
        .join(java, "topic", "left")
    )


def _current_count(measured: Mapping[str, TopicCounts]) -> Column:
    """The topic's current partition count, as a Spark map lookup (null for a topic without one)."""
    if not measured:
        return F.lit(None).cast("int")
    return F.create_map(*[x for t, p in measured.items() for x in (F.lit(t), F.lit(p.current))])[F.col("topic")]


def _topic_partitioner(options: SkewOptions) -> Column:
    """The partitioner configured for the row's topic."""
    if not options.partitioners:
        return F.lit(options.partitioner)
    chosen = F.create_map(*[x for t, p in options.partitioners.items() for x in (F.lit(t), F.lit(p))])
    return F.coalesce(chosen[F.col("topic")], F.lit(options.partitioner))


def compute(
    spark: SparkSession, source: SampleSource, measured: Mapping[str, TopicCounts], options: SkewOptions
) -> SkewResult:
    """The transform: samples -> the four result frames (the metrics are materialized once; they are small)."""
    # One reduce task per sample row group (at least the session's shuffle partitions): each holds its keys' totals.
    partitions = max(int(spark.conf.get("spark.sql.shuffle.partitions") or 8), len(source.units))
    metrics = measure(
        spark, source, measured, top_keys=options.top_keys, shuffle_partitions=partitions
    ).localCheckpoint()
    per_partition = loads(metrics, measured)
    hot = hot_keys(metrics, per_partition, options.top_keys)
    prints = fingerprint(metrics, measured)
    return SkewResult(per_partition, summary(per_partition, hot, prints, metrics, options), hot, prints)


def partition_counts(lake: Lake, snapshot_id: str) -> dict[str, int]:
    """Each topic's partition count in snapshot `snapshot_id` (the `topic_partitions` table), once it is complete
    (its `snapshots` rows, committed last, are there); a few rows, read by delta-rs."""
    if not lake.read_arrow("snapshots", [("snapshot_id", "=", snapshot_id)], ["snapshot_id"]).num_rows:
        return {}
    rows = lake.read_arrow("topic_partitions", [("snapshot_id", "=", snapshot_id)], ["topic", "partition_count"])
    counts: dict[str, int] = {}
    for r in rows.to_pylist():
        counts[r["topic"]] = max(counts.get(r["topic"], 0), int(r["partition_count"]))
    return counts


def run(ctx: RunContext, options: SkewOptions | None = None, *, computed_at: datetime | None = None) -> StepResult:
    """Measure key skew for run `ctx.run_id` and MERGE the four tables; a row per topic and candidate count: the
    summary, but for its run stamp and hot key (bytes, kept in the lake)."""
    options = options or SkewOptions()
    lake, run_id = ctx.lake, ctx.run_id
    source = resolve(lake, options.input, columns=options.columns, sample_id=options.sample_id)
    if not source.units:
        return StepResult()  # nothing sampled: nothing to measure or write, and no JVM started for it
    spark = ctx.spark
    counts = dict(options.partitions) if options.partitions is not None else partition_counts(lake, run_id)
    previous = spark.conf.get("spark.sql.execution.arrow.maxRecordsPerBatch")
    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", str(ARROW_BATCH_ROWS))
    try:
        result = compute(spark, source, counts_to_measure(counts, options), options)
        stamp = {"run_id": F.lit(run_id), "computed_at": F.lit(computed_at or datetime.now(UTC))}
        written = {}
        for spec, frame in (
            (KEY_SKEW, result.key_skew),
            (KEY_SKEW_HOT_KEYS, result.hot_keys),
            (KEY_SKEW_FINGERPRINT, result.fingerprint),
            (KEY_SKEW_SUMMARY, result.summary),
        ):
            table = frame.withColumns(stamp).select(*spec.schema.names).toArrow()
            lake.merge(spec.name, table)
            written[spec.name] = table
    finally:
        if previous is None:
            spark.conf.unset("spark.sql.execution.arrow.maxRecordsPerBatch")
        else:
            spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", previous)
    summary = written[KEY_SKEW_SUMMARY.name].sort_by([("topic", "ascending"), ("partition_count", "ascending")])
    return StepResult(tuple(summary.drop_columns(["run_id", "computed_at", "hot_key"]).to_pylist()))


def partition_weights(lake: Lake, run_id: str) -> dict[str, list[float]]:
    """Today's load of every partition per topic from run `run_id`, as the plan job's `weights` argument."""
    rows = lake.read_arrow(KEY_SKEW.name, [("run_id", "=", run_id), ("current", "=", True)])
    weights: dict[str, list[float]] = {}
    for row in rows.sort_by([("topic", "ascending"), ("partition", "ascending")]).to_pylist():
        weights.setdefault(row["topic"], []).append(float(row["load"]))
    return weights
