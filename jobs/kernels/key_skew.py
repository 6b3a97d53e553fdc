"""The key-skew job's batch functions: Arrow record batches in, Arrow record batches out, run inside mapInArrow.

Two stages around one shuffle on (topic, key):
- `partial_keys` (map side) sums each key's messages and bytes within a chunk of samples, so hot keys cross the
  shuffle once per chunk, and scores the partitioner fingerprint on the raw records (it needs no key totals).
- `key_metrics` (reduce side) holds every record of its keys, so it sums them exactly, hashes each distinct key
  once with the topic's partitioner and folds the hash for every measured partition count, then emits
  per-partition counts, the local hot keys and the fingerprint totals, all small.

Hashing is `planner.hashing.hash_words` over whole Arrow arrays, never per row.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sized
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from jobs.kernels.samples import SampleSource, read_units
from planner.hashing import NO_KEYED_PARTITION, WordHash, hash_words, key_buffers
from planner.partitioners import PARTITIONERS, Partitioner, get_partitioner

# Map-side output: key rows (fingerprint null) carry a key's partial sums; fingerprint rows (key null) carry
# `messages` observed with a partition and `explained`, the part `fingerprint` puts in that same partition.
PARTIAL_SCHEMA = pa.schema(
    [
        ("topic", pa.string()),
        ("key", pa.binary()),
        ("messages", pa.float64()),
        ("bytes", pa.int64()),
        ("fingerprint", pa.string()),
        ("explained", pa.float64()),
    ]
)

# Reduce-side output, long form; `kind` says which columns are meaningful:
# load: per (topic, partitioner, partition_count, partition): messages, bytes, distinct_keys, remapped_*,
#       null_key_* (records the partitioner does not place by key, spread evenly as the sticky path does);
# hot: one possible hot key with its partition at partition_count; fingerprint: partitioner, messages
#       (observed), explained; unknown: a topic without a partition count, its messages and bytes.
METRICS_SCHEMA = pa.schema(
    [
        ("kind", pa.string()),
        ("topic", pa.string()),
        ("partitioner", pa.string()),
        ("partition_count", pa.int32()),
        ("partition", pa.int32()),
        ("key", pa.binary()),
        ("messages", pa.float64()),
        ("bytes", pa.int64()),
        ("distinct_keys", pa.int64()),
        ("remapped_keys", pa.int64()),
        ("remapped_messages", pa.float64()),
        ("null_key_messages", pa.float64()),
        ("null_key_bytes", pa.float64()),
        ("explained", pa.float64()),
    ]
)

CHUNK_ROWS = 1 << 20  # map side sums keys per ~1 M records: bounded memory, still few rows per hot key


@dataclass(frozen=True)
class TopicCounts:
    """How to measure one topic: its partitioner and the partition counts to try, the current one first."""

    partitioner: str
    counts: tuple[int, ...]

    @property
    def current(self) -> int:
        return self.counts[0]


def fingerprint_partitioners() -> tuple[tuple[Partitioner, WordHash], ...]:
    """Every partitioner that places keyed records by their bytes (`random` explains nothing), with its hash."""
    return tuple((p, p.word_hash) for p in PARTITIONERS.values() if p.keyed and p.word_hash is not None)


def placements(partitioner: Partitioner, keys: pa.Array, counts: Iterable[int]) -> np.ndarray:
    """Partition of every key at every count, shape (len(counts), len(keys)), int32; -1 where the key does not decide.

    Same rule as `Partitioner.partition_many`, but the key bytes are hashed once for all counts.
    """
    counts = list(counts)
    out = np.full((len(counts), len(keys)), NO_KEYED_PARTITION, dtype=np.int32)
    if not partitioner.keyed or partitioner.word_hash is None or len(keys) == 0:
        return out
    offsets, data, nulls = key_buffers(keys)
    h = hash_words(offsets, data, nulls, partitioner.word_hash)
    for i, n in enumerate(counts):
        out[i] = partitioner.fold_many(h, n)
    unkeyed = nulls if nulls is not None else np.zeros(len(keys), dtype=bool)
    if partitioner.empty_key_unkeyed:
        unkeyed = unkeyed | (np.diff(offsets) == 0)
    out[:, unkeyed] = NO_KEYED_PARTITION
    return out


def map_kernel(
    source: SampleSource, measured: Mapping[str, TopicCounts]
) -> Callable[[Iterable[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The map stage for mapInArrow: (uri, row_group) unit batches in, each unit's samples summed by `partial_keys`."""

    def kernel(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        wanted = ((u, g) for batch in batches for u, g in zip(*batch.to_pydict().values(), strict=True))
        return partial_keys(read_units(source, wanted), measured)

    return kernel


def reduce_kernel(
    measured: Mapping[str, TopicCounts], top_keys: int
) -> Callable[[Iterable[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The reduce stage for mapInArrow: `key_metrics` bound to the partition counts measured per topic."""

    def kernel(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        return key_metrics(batches, measured, top_keys)

    return kernel


def partial_keys(batches: Iterator[pa.RecordBatch], measured: Mapping[str, TopicCounts]) -> Iterator[pa.RecordBatch]:
    """Map side: per chunk, each (topic, key, observed partition)'s messages and bytes, plus fingerprint scores.

    A key read from several partitions gives several rows; the reduce side sums them again.
    """
    for chunk in _chunks(batches, CHUNK_ROWS):
        summed = (
            chunk.select(["topic", "key", "partition", "weight", "bytes"])
            .group_by(["topic", "key", "partition"], use_threads=False)
            .aggregate([("weight", "sum"), ("bytes", "sum")])
        )
        yield _batch(
            PARTIAL_SCHEMA,
            {
                "topic": summed["topic"],
                "key": summed["key"],
                "messages": summed["weight_sum"],
                "bytes": summed["bytes_sum"],
            },
        )
        scored = _fingerprint(summed, measured)
        if scored is not None:
            yield scored


def _chunks(batches: Iterator[pa.RecordBatch], rows: int) -> Iterator[pa.Table]:
    """Regroup record batches into tables of about `rows` rows."""
    pending: list[pa.RecordBatch] = []
    size = 0
    for batch in batches:
        pending.append(batch)
        size += batch.num_rows
        if size >= rows:
            yield pa.Table.from_batches(pending)
            pending, size = [], 0
    if pending:
        yield pa.Table.from_batches(pending)


def _fingerprint(summed: pa.Table, measured: Mapping[str, TopicCounts]) -> pa.RecordBatch | None:
    """For keyed records read from a known partition: how many each partitioner puts in that partition.

    `summed` has one row per (topic, key, partition) with `weight_sum` records. Empty keys are left out:
    partitioners disagree on whether they are keys at all.
    """
    keep = pc.and_(pc.is_valid(summed["partition"]), pc.greater(pc.binary_length(summed["key"]), 0))
    rows = summed.filter(pc.fill_null(keep, False))
    if rows.num_rows == 0:
        return None
    encoded = pc.dictionary_encode(rows["topic"]).combine_chunks()
    topics = encoded.dictionary.to_pylist()
    topic_index = encoded.indices.to_numpy(zero_copy_only=False)
    current = np.array([measured[t].current if t in measured else 0 for t in topics], dtype=np.int64)[topic_index]
    known = current > 0
    observed = rows["partition"].to_numpy()
    weight = rows["weight_sum"].to_numpy()
    keys = rows["key"].combine_chunks()
    offsets, data, nulls = key_buffers(keys)
    hashes: dict[WordHash, np.ndarray] = {}
    out: dict[str, list[object]] = {"topic": [], "fingerprint": [], "messages": [], "explained": []}
    seen = np.bincount(topic_index[known], weights=weight[known], minlength=len(topics))
    for p, word_hash in fingerprint_partitioners():
        if word_hash not in hashes:
            hashes[word_hash] = hash_words(offsets, data, nulls, word_hash)
        hit = np.zeros(len(weight), dtype=bool)
        for n in np.unique(current[known]):
            rows_n = current == n
            hit[rows_n] = p.fold_many(hashes[word_hash][rows_n], int(n)) == observed[rows_n]
        explained = np.bincount(topic_index[hit], weights=weight[hit], minlength=len(topics))
        for t in np.flatnonzero(seen):
            out["topic"].append(topics[t])
            out["fingerprint"].append(p.name)
            out["messages"].append(float(seen[t]))
            out["explained"].append(float(explained[t]))
    return _batch(PARTIAL_SCHEMA, out)


def key_metrics(
    batches: Iterable[pa.RecordBatch], measured: Mapping[str, TopicCounts], top_keys: int
) -> Iterator[pa.RecordBatch]:
    """Reduce side: exact key totals of this shuffle partition turned into per-partition loads and hot keys."""
    received = list(batches)
    if not received:
        return
    table = pa.Table.from_batches(received)
    scores = table.filter(pc.is_valid(table["fingerprint"]))
    if scores.num_rows:
        summed = scores.group_by(["topic", "fingerprint"], use_threads=False).aggregate(
            [("messages", "sum"), ("explained", "sum")]
        )
        yield _batch(
            METRICS_SCHEMA,
            {
                "kind": pa.repeat("fingerprint", summed.num_rows),
                "topic": summed["topic"],
                "partitioner": summed["fingerprint"],
                "messages": summed["messages_sum"],
                "explained": summed["explained_sum"],
            },
        )
    keys = (
        table.filter(pc.is_null(table["fingerprint"]))
        .group_by(["topic", "key"], use_threads=False)
        .aggregate([("messages", "sum"), ("bytes", "sum")])
        .sort_by("topic")
    )
    for topic, rows in _topic_slices(keys):
        topic_counts = measured.get(topic)
        if topic_counts is None:
            yield _batch(
                METRICS_SCHEMA,
                {
                    "kind": ["unknown"],
                    "topic": [topic],
                    "messages": [_total(rows["messages_sum"])],
                    "bytes": [_total(rows["bytes_sum"])],
                },
            )
            continue
        yield from _topic_metrics(topic, rows, topic_counts, top_keys)


def _topic_slices(table: pa.Table) -> Iterator[tuple[str, pa.Table]]:
    """(topic, rows) for each run of equal topics in a table sorted by topic."""
    encoded = pc.dictionary_encode(table["topic"]).combine_chunks()
    index = encoded.indices.to_numpy(zero_copy_only=False)
    bounds = np.concatenate([[0], np.flatnonzero(np.diff(index)) + 1, [len(index)]])
    for start, stop in zip(bounds[:-1], bounds[1:], strict=False):
        yield encoded.dictionary[int(index[start])].as_py(), table.slice(int(start), int(stop - start))


def _total(column: pa.ChunkedArray) -> float:
    return float(pc.sum(column).as_py() or 0)


def _topic_metrics(topic: str, rows: pa.Table, topic_counts: TopicCounts, top_keys: int) -> Iterator[pa.RecordBatch]:
    """Per-partition load, remapping versus today and local hot keys of one topic's keys at every count."""
    partitioner = get_partitioner(topic_counts.partitioner)
    keys = rows["key"].combine_chunks()
    messages = rows["messages_sum"].to_numpy().astype(np.float64)
    sizes = rows["bytes_sum"].to_numpy().astype(np.int64)
    parts = placements(partitioner, keys, topic_counts.counts)
    keyed = parts[0] != NO_KEYED_PARTITION
    null_messages = float(messages[~keyed].sum())
    null_bytes = float(sizes[~keyed].sum())
    today = parts[0][keyed]
    m, b = messages[keyed], sizes[keyed]
    for n, placed in zip(topic_counts.counts, parts, strict=True):
        where = placed[keyed]
        moved = where != today
        yield _batch(
            METRICS_SCHEMA,
            {
                "kind": pa.repeat("load", n),
                "topic": pa.repeat(topic, n),
                "partitioner": pa.repeat(topic_counts.partitioner, n),
                "partition_count": np.full(n, n, dtype=np.int32),
                "partition": np.arange(n, dtype=np.int32),
                "messages": _sum_by(where, m, n),
                "bytes": np.rint(_sum_by(where, b, n)).astype(np.int64),
                "distinct_keys": np.bincount(where, minlength=n).astype(np.int64),
                "remapped_keys": np.bincount(where[moved], minlength=n).astype(np.int64),
                "remapped_messages": _sum_by(where[moved], m[moved], n),
                "null_key_messages": np.full(n, null_messages / n),
                "null_key_bytes": np.full(n, null_bytes / n),
            },
        )
    if top_keys > 0 and keyed.any():
        yield _hot_keys(topic, topic_counts, keys.filter(pa.array(keyed)), m, b, parts[:, keyed], top_keys)


def _sum_by(index: np.ndarray, values: np.ndarray, n: int) -> np.ndarray:
    """values summed per index value 0..n-1 (float64: sampled records stand for fractional message counts)."""
    return np.bincount(index, weights=values, minlength=n)


def _hot_keys(
    topic: str,
    topic_counts: TopicCounts,
    keys: pa.Array,
    messages: np.ndarray,
    sizes: np.ndarray,
    parts: np.ndarray,
    top_keys: int,
) -> pa.RecordBatch:
    """This partition's top keys by messages (ties: smaller key first), with their partition at each count."""
    ranked = pa.table({"key": keys, "messages": messages})
    rows = pc.select_k_unstable(ranked, top_keys, [("messages", "descending"), ("key", "ascending")]).to_numpy()
    k, c = len(rows), len(topic_counts.counts)
    return _batch(
        METRICS_SCHEMA,
        {
            "kind": pa.repeat("hot", k * c),
            "topic": pa.repeat(topic, k * c),
            "partitioner": pa.repeat(topic_counts.partitioner, k * c),
            "partition_count": np.repeat(np.array(topic_counts.counts, dtype=np.int32), k),
            "partition": parts[:, rows].reshape(-1),
            "key": keys.take(pa.array(np.tile(rows, c))),
            "messages": np.tile(messages[rows], c),
            "bytes": np.tile(sizes[rows], c),
        },
    )


def _batch(schema: pa.Schema, columns: Mapping[str, Sized]) -> pa.RecordBatch:
    """A record batch of `schema` from the given columns; the others are null."""
    n = len(next(iter(columns.values())))
    arrays = []
    for field in schema:
        value = columns.get(field.name)
        if value is None:
            arrays.append(pa.nulls(n, field.type))
        elif isinstance(value, pa.ChunkedArray):
            arrays.append(value.combine_chunks().cast(field.type))
        elif isinstance(value, pa.Array):
            arrays.append(value.cast(field.type))
        else:
            arrays.append(pa.array(value, field.type))
    return pa.RecordBatch.from_arrays(arrays, schema=schema)
