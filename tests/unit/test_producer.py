"""Null-key producer simulation: round-robin (< 2.4), StickyPartitionCache (2.4-3.2), uniform sticky (3.3+)."""

import numpy as np
import pytest

from planner.producer import compare_strategies, simulate_null_keys


def test_round_robin_spreads_consecutive_records() -> None:
    """Seed 000: before 2.4 each null-key record goes to the next partition; with no linger wait every
    record fills its partition's batch slowly, so batch counts match the record count per batch.size."""
    sim = simulate_null_keys([100] * 12, 3, strategy="round_robin", batch_size=1000)
    assert sim.records.tolist() == [4, 4, 4]
    assert sim.batches.tolist() == [1, 1, 1]


def test_round_robin_with_linger_sends_small_batches() -> None:
    sim = simulate_null_keys([100] * 600, 6, strategy="round_robin", batch_size=16384, records_per_linger=60)
    assert sim.records.tolist() == [100] * 6
    assert sim.batches.tolist() == [10] * 6  # 10 records per batch: each linger interval, each partition
    assert sim.records_per_batch == 10


def test_sticky_cache_switches_on_new_batch_to_a_different_partition() -> None:
    sim = simulate_null_keys([100] * 40, 4, strategy="sticky_cache", batch_size=1000, seed=3)
    assert sim.records.sum() == 40
    assert sim.batches.sum() == 4  # 10 records per full batch, one partition at a time
    assert (sim.records % 10 == 0).all()


def test_uniform_sticky_switches_after_batch_size_bytes() -> None:
    sim = simulate_null_keys([250] * 80, 5, strategy="uniform_sticky", batch_size=1000, seed=1)
    assert sim.records.sum() == 80 and sim.bytes.sum() == 20000
    assert (sim.records % 4 == 0).all()  # every switch happens after exactly batch.size bytes
    assert sim.batches.sum() == 20


def test_sticky_sends_fewer_fuller_batches_than_round_robin() -> None:
    sizes = np.random.default_rng(5).integers(50, 400, 20_000)
    result = compare_strategies(sizes, 12, batch_size=4096, records_per_linger=100)
    rr, cache, uniform = result["round_robin"], result["sticky_cache"], result["uniform_sticky"]
    for sim in result.values():
        assert sim.records.sum() == 20_000 and sim.bytes.sum() == sizes.sum()
    assert rr.batches.sum() == 2400  # 100 records per linger interval over 12 partitions: ~8 per batch
    assert cache.batches.sum() < rr.batches.sum() / 1.9
    assert uniform.batches.sum() < rr.batches.sum() / 1.9
    assert uniform.records_per_batch > 1.9 * rr.records_per_batch


def test_deterministic_for_a_seed_and_json() -> None:
    a = simulate_null_keys([120] * 500, 7, strategy="uniform_sticky", seed=9)
    b = simulate_null_keys([120] * 500, 7, strategy="uniform_sticky", seed=9)
    assert a.to_json() == b.to_json()
    assert set(a.to_json()) == {"strategy", "records", "bytes", "batches", "records_per_batch"}


def test_single_partition_and_bad_arguments() -> None:
    assert simulate_null_keys([10] * 5, 1, strategy="sticky_cache").records.tolist() == [5]
    with pytest.raises(ValueError, match="unknown strategy"):
        simulate_null_keys([1], 2, strategy="hash")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="positive"):
        simulate_null_keys([1], 0)
