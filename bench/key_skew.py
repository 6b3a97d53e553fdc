"""Benchmark of the key-skew job: sampled keys over many topics, each with what-if partition counts.

Prints: the standalone batch hashing rate (planner.hashing over one Arrow array), the same hashing inside Spark
(a mapInArrow scan of the sample files), their ratio, and the job end to end (read samples, shuffle, hash at
every count, summarize, MERGE four lake tables). Run: `python bench/key_skew.py [--rows 10000000]`.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from jobs.config import Config
from jobs.context import RunContext
from jobs.io.lake import Lake
from jobs.io.spark import get_spark
from jobs.kernels.samples import read_units
from jobs.steps.skew import SkewOptions, run
from jobs.tables.skew_input import resolve
from planner.hashing import MURMUR2, hash_words, key_buffers
from planner.partitioners import get_partitioner

WHAT_IF = (16, 32, 64)
CURRENT = (10, 12, 20, 24, 30, 40, 48, 50)  # none equal to a what-if count: 3 what-ifs for every topic
FILES = 8


def generate(path: Path, rows: int, topics: int, seed: int = 1) -> dict[str, int]:
    """Zipf-skewed string keys (1% null) over `topics` topics, with the partition a Java producer chose."""
    rng = np.random.default_rng(seed)
    counts = {f"topic-{t:02d}": CURRENT[t % len(CURRENT)] for t in range(topics)}
    names = list(counts)
    path.mkdir(parents=True, exist_ok=True)
    java = get_partitioner("murmur2")
    for f in range(FILES):
        n = rows // FILES + (1 if f < rows % FILES else 0)
        topic_index = rng.integers(0, topics, n)
        ids = np.minimum(rng.zipf(1.3, n), 5_000_000)
        keys = pc.binary_join_element_wise(pa.array(["user"] * n), pc.cast(pa.array(ids), pa.string()), "-")
        keys = pc.if_else(pa.array(rng.random(n) < 0.01), pa.nulls(n, pa.string()), keys).cast(pa.binary())
        current = np.array([counts[t] for t in names])[topic_index]
        observed = np.empty(n, dtype=np.int32)
        for c in np.unique(current):
            rows_c = np.flatnonzero(current == c)
            observed[rows_c] = java.partition_many(keys.take(pa.array(rows_c)), int(c))
        nulls = observed < 0
        observed[nulls] = rng.integers(0, current[nulls])
        pq.write_table(
            pa.table(
                {
                    "topic": pa.array(np.array(names, dtype=object)[topic_index], pa.string()),
                    "key": keys,
                    "bytes": pa.array(rng.integers(50, 2000, n)),
                    "partition": pa.array(observed),
                }
            ),
            path / f"part-{f}.parquet",
        )
    return counts


def standalone_rates(path: Path) -> tuple[float, float, int]:
    """Keys per second of the batch function, standalone in this process.

    Returns (hashing one Arrow array of all sample keys, best of 3; reading the key column from the Parquet
    files and hashing it, as the job's map tasks do), and the key count.
    """
    start = time.perf_counter()
    keys = pq.read_table(path, columns=["key"])["key"].combine_chunks()
    offsets, data, nulls = key_buffers(keys)
    hash_words(offsets, data, nulls, MURMUR2)
    read_and_hash = time.perf_counter() - start
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        hash_words(offsets, data, nulls, MURMUR2)
        best = min(best, time.perf_counter() - start)
    return len(keys) / best, len(keys) / read_and_hash, len(keys)


def spark_rates(spark, lake: Lake, path: Path) -> tuple[float, float]:
    """Keys per second inside Spark, as the job reads them: tasks read their row groups with pyarrow and hash.

    Returns (the whole stage: read + hash, wall clock on all cores; the hashing alone, per task-second).
    """
    source = resolve(lake, str(path))

    def hash_units(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        units = ((u, g) for batch in batches for u, g in zip(*batch.to_pydict().values(), strict=True))
        n, busy = 0, 0.0
        for batch in read_units(source, units):
            start = time.perf_counter()
            offsets, data, nulls = key_buffers(batch.column("key"))
            n += len(hash_words(offsets, data, nulls, MURMUR2))
            busy += time.perf_counter() - start
        yield pa.RecordBatch.from_pydict({"n": pa.array([n], pa.int64()), "busy": pa.array([busy])})

    units = pa.table({"uri": [u for u, _ in source.units], "row_group": [g for _, g in source.units]})
    frame = (
        spark.createDataFrame(units)
        .repartition(4 * int(spark.conf.get("spark.sql.shuffle.partitions") or 8))
        .mapInArrow(hash_units, "n long, busy double")
        .groupBy()
        .sum("n", "busy")
    )
    frame.first()  # warm the Python workers
    start = time.perf_counter()
    hashed, busy = frame.first()
    elapsed = time.perf_counter() - start
    return hashed / elapsed, hashed / busy


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--topics", type=int, default=20)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--data", type=Path, default=Path(tempfile.gettempdir()) / "rebalance-bench-key-skew")
    args = parser.parse_args()
    samples = args.data / f"samples-{args.rows}-{args.topics}"
    start = time.perf_counter()
    counts = (
        generate(samples, args.rows, args.topics)
        if not samples.exists()
        else {f"topic-{t:02d}": CURRENT[t % len(CURRENT)] for t in range(args.topics)}
    )
    print(
        f"samples: {args.rows:,} keys, {args.topics} topics, what-if {WHAT_IF} "
        f"(generated or reused in {time.perf_counter() - start:.1f} s)"
    )

    rate, read_rate, n = standalone_rates(samples)
    print(f"standalone batch murmur2, keys in memory: {rate / 1e6:6.2f} M keys/s ({n:,} keys)")
    print(f"standalone read key column + murmur2:     {read_rate / 1e6:6.2f} M keys/s")
    start = time.perf_counter()
    spark = get_spark(args.master)
    print(f"spark session start ({args.master}): {time.perf_counter() - start:.1f} s")
    lake_root = args.data / "lake"
    shutil.rmtree(lake_root, ignore_errors=True)
    lake = Lake(lake_root)
    lake.create_all()
    stage, hashing = spark_rates(spark, lake, samples)
    print(
        f"murmur2 inside Spark, hashing in the tasks: {hashing / 1e6:6.2f} M keys/s per task "
        f"= {hashing / rate:.2f} x standalone (target >= 0.33)"
    )
    print(
        f"murmur2 inside Spark, whole stage (pyarrow read + hash, {args.master}): {stage / 1e6:6.2f} M keys/s "
        f"= {stage / rate:.2f} x standalone in memory, {stage / read_rate:.2f} x standalone read + hash"
    )
    options = SkewOptions(partitions=counts, what_if=WHAT_IF, input=str(samples))
    start = time.perf_counter()
    summary = run(RunContext.create(Config(lake=str(lake_root)), "bench", spark=spark), options)
    elapsed = time.perf_counter() - start
    print(
        f"key-skew job end to end: {elapsed:.1f} s for {args.rows:,} keys, {args.topics} topics x "
        f"{1 + len(WHAT_IF)} counts ({len(summary.rows)} summary rows; target < 60 s)"
    )
    print(f"cpu count {os.cpu_count()}, load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
