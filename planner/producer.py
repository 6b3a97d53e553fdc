"""Where records without a key go: the Java producer's three null-key strategies, simulated batch by batch.

- "round_robin": DefaultPartitioner before Kafka 2.4: `toPositive(counter.getAndIncrement()) % n`
  over the available partitions, so consecutive records land on different partitions (article A0).
- "sticky_cache": Kafka 2.4 to 3.2 (KIP-480, DefaultPartitioner + StickyPartitionCache): stay on one
  partition until appending needs a new batch there; KafkaProducer.doSend then calls onNewBatch and
  StickyPartitionCache.nextPartition picks a random different partition (article A0). The very first
  record also needs a new batch, so it switches once at once, as the Java client does.
- "uniform_sticky": Kafka 3.3+ (KIP-794, BuiltInPartitioner without adaptive load stats): stay on a random
  partition until batch.size bytes were produced to it and its last batch is full (enableSwitch in
  RecordAccumulator.append), or 2 x batch.size regardless; the next one is random, possibly the same
  (article A2).

Batches: one open batch per partition (RecordAccumulator); a record that does not fit in batch.size
closes it and opens a new one. Linger is modelled as `records_per_linger`: after that many records a
linger.ms interval has passed and the sender drains every non-empty batch (None: batches leave only when
full, i.e. the producer is always ahead of linger.ms). Record sizes are bytes in the batch, overhead
included. Random choices come from a seeded generator (the Java client uses ThreadLocalRandom).

>>> sim = simulate_null_keys([100] * 1000, 4, strategy="round_robin", batch_size=1000, records_per_linger=40)
>>> sim.batches.tolist(), sim.records.tolist()
([25, 25, 25, 25], [250, 250, 250, 250])
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

__all__ = ["NullKeySimulation", "Strategy", "compare_strategies", "simulate_null_keys"]

Strategy = Literal["round_robin", "sticky_cache", "uniform_sticky"]
STRATEGIES: tuple[Strategy, ...] = ("round_robin", "sticky_cache", "uniform_sticky")
DEFAULT_BATCH_SIZE = 16384  # ProducerConfig batch.size default


@dataclass(frozen=True)
class NullKeySimulation:
    """Per-partition records, bytes and batches sent for one strategy."""

    strategy: Strategy
    records: np.ndarray
    bytes: np.ndarray
    batches: np.ndarray

    @property
    def records_per_batch(self) -> float:
        """Mean records per batch: sticky partitioning's point is to raise it."""
        return float(self.records.sum() / max(int(self.batches.sum()), 1))

    def to_json(self) -> dict[str, object]:
        """Plain JSON-ready summary."""
        return {
            "strategy": self.strategy,
            "records": self.records.tolist(),
            "bytes": self.bytes.tolist(),
            "batches": self.batches.tolist(),
            "records_per_batch": round(self.records_per_batch, 3),
        }


class _Accumulator:
    """RecordAccumulator reduced to what decides batch counts: one open batch per partition."""

    def __init__(self, n: int, batch_size: int) -> None:
        self.batch_size = batch_size
        self.open_bytes = np.zeros(n, dtype=np.int64)  # 0: no open batch
        self.records = np.zeros(n, dtype=np.int64)
        self.bytes = np.zeros(n, dtype=np.int64)
        self.batches = np.zeros(n, dtype=np.int64)

    def needs_new_batch(self, p: int, size: int) -> bool:
        """True when appending `size` bytes to partition p would create a batch (abortOnNewBatch)."""
        return bool(self.open_bytes[p] == 0 or self.open_bytes[p] + size > self.batch_size)

    def append(self, p: int, size: int) -> None:
        """Append one record, closing the open batch first if it cannot take it."""
        if self.needs_new_batch(p, size):
            self.batches[p] += 1  # a new batch is opened (the full one, if any, is already counted)
            self.open_bytes[p] = 0
        self.open_bytes[p] += size
        self.records[p] += 1
        self.bytes[p] += size

    def batch_full(self, p: int, next_size: int) -> bool:
        """RecordAccumulator.allBatchesFull: no open batch, or it cannot take the next record."""
        return bool(self.open_bytes[p] == 0 or self.open_bytes[p] + next_size > self.batch_size)

    def drain(self) -> None:
        """linger.ms expired: the sender takes every open batch."""
        self.open_bytes[:] = 0


def _other_partition(rng: np.random.Generator, n: int, prev: int) -> int:
    """StickyPartitionCache.nextPartition: a random partition different from prev (when n > 1)."""
    if n == 1:
        return 0
    while True:
        p = int(rng.integers(n))
        if p != prev:
            return p


def simulate_null_keys(
    record_sizes: Sequence[int] | np.ndarray,
    num_partitions: int,
    *,
    strategy: Strategy = "uniform_sticky",
    batch_size: int = DEFAULT_BATCH_SIZE,
    records_per_linger: int | None = None,
    seed: int = 0,
) -> NullKeySimulation:
    """Send records without keys through one strategy and count records, bytes and batches per partition."""
    if num_partitions <= 0 or batch_size <= 0:
        raise ValueError("num_partitions and batch_size must be positive")
    if strategy not in STRATEGIES:
        raise ValueError(f"unknown strategy {strategy!r}; known: {', '.join(STRATEGIES)}")
    sizes = np.asarray(record_sizes, dtype=np.int64)
    acc = _Accumulator(num_partitions, batch_size)
    rng = np.random.default_rng(seed)
    counter = 0
    sticky = -1
    produced = 0  # BuiltInPartitioner StickyPartitionInfo.producedBytes
    for i, size in enumerate(sizes.tolist()):
        if strategy == "round_robin":
            p = (counter & 0x7FFFFFFF) % num_partitions  # Utils.toPositive(nextValue) % availablePartitions
            counter += 1
        elif strategy == "sticky_cache":
            if sticky < 0:
                sticky = int(rng.integers(num_partitions))
            if acc.needs_new_batch(sticky, size):  # doSend: abortForNewBatch -> onNewBatch(prevPartition)
                sticky = _other_partition(rng, num_partitions, sticky)
            p = sticky
        else:
            if sticky < 0:
                sticky = int(rng.integers(num_partitions))
            p = sticky
        acc.append(p, size)
        if strategy == "uniform_sticky":
            produced += size
            next_size = int(sizes[i + 1]) if i + 1 < len(sizes) else 0
            # BuiltInPartitioner.updatePartitionInfo: switch after batch.size bytes if enableSwitch, or 2x
            if (produced >= batch_size and acc.batch_full(p, next_size)) or produced >= 2 * batch_size:
                sticky = int(rng.integers(num_partitions))
                produced = 0
        if records_per_linger and (i + 1) % records_per_linger == 0:
            acc.drain()
    return NullKeySimulation(strategy, acc.records, acc.bytes, acc.batches)


def compare_strategies(
    record_sizes: Sequence[int] | np.ndarray,
    num_partitions: int,
    *,
    batch_size: int = DEFAULT_BATCH_SIZE,
    records_per_linger: int | None = None,
    seed: int = 0,
) -> dict[Strategy, NullKeySimulation]:
    """All three strategies over the same records, to show why sticky sends fewer, fuller batches."""
    return {
        s: simulate_null_keys(
            record_sizes,
            num_partitions,
            strategy=s,
            batch_size=batch_size,
            records_per_linger=records_per_linger,
            seed=seed,
        )
        for s in STRATEGIES
    }
