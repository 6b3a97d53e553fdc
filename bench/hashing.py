"""Throughput of Kafka-exact murmur2 partitioning: vectorized partitions_for_keys vs a pure-Python loop.

Usage: python bench/hashing.py [--keys 10000000] [--partitions 12]
Prints keys/s (wall and CPU time, best of 3), peak memory of the call, the machine load, and the other
partitioners' vectorized throughput on 1M keys.
"""

from __future__ import annotations

import argparse
import os
import resource
import time
import tracemalloc

import numpy as np
import pyarrow as pa

from planner.hashing import partition_for_key, partitions_for_keys
from planner.partitioners import PARTITIONERS


def random_keys(n: int, seed: int = 0) -> pa.Array:
    """n random binary keys of 8 to 64 bytes, built straight into Arrow buffers."""
    rng = np.random.default_rng(seed)
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(rng.integers(8, 65, n), out=offsets[1:])
    data = rng.integers(0, 256, int(offsets[-1]), dtype=np.uint8)
    return pa.Array.from_buffers(pa.large_binary(), n, [None, pa.py_buffer(offsets), pa.py_buffer(data)])


def best_of(fn, repeat: int = 3) -> tuple[float, float]:
    """(best wall seconds, best CPU seconds) of fn()."""
    walls, cpus = [], []
    for _ in range(repeat):
        w, c = time.perf_counter(), time.process_time()
        fn()
        walls.append(time.perf_counter() - w)
        cpus.append(time.process_time() - c)
    return min(walls), min(cpus)


def main() -> None:
    """Run the benchmark and print the figures."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--keys", type=int, default=10_000_000)
    ap.add_argument("--partitions", type=int, default=12)
    args = ap.parse_args()
    n = args.keys
    print(f"cpus={os.cpu_count()} load average before={os.getloadavg()}")
    keys = random_keys(n)
    print(f"{n:,} keys of 8-64 bytes, {keys.nbytes / 1e6:.0f} MB in Arrow buffers")

    wall, cpu = best_of(lambda: partitions_for_keys(keys, args.partitions))
    print(
        f"partitions_for_keys: {n / wall / 1e6:.1f} M keys/s wall, {n / cpu / 1e6:.1f} M keys/s CPU ({wall:.3f} s wall)"
    )

    tracemalloc.start()
    partitions_for_keys(keys, args.partitions)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    print(
        f"peak memory allocated by one call: {peak / 1e6:.1f} MB (result alone {4 * n / 1e6:.0f} MB); "
        f"process max RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e3:.0f} MB"
    )

    sample = keys.slice(0, 200_000).to_pylist()
    w = time.perf_counter()
    loop = [partition_for_key(k, args.partitions) for k in sample]
    py_rate = len(sample) / (time.perf_counter() - w)
    assert loop == partitions_for_keys(sample, args.partitions).tolist()
    print(f"pure-Python per-key loop: {py_rate / 1e3:.0f} k keys/s -> vectorized is {n / wall / py_rate:.0f}x")

    small = keys.slice(0, 1_000_000)
    for name, p in ((name, p) for name, p in PARTITIONERS.items() if p.keyed):
        wall_p, _ = best_of(lambda p=p: p.partition_many(small, args.partitions), repeat=2)
        print(f"  {name:18s} {1e6 / wall_p / 1e6:6.1f} M keys/s")
    print(f"load average after={os.getloadavg()}")


if __name__ == "__main__":
    main()
