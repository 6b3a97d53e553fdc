"""Throughput of Kafka-exact murmur2 partitioning: batch partitions_for_keys beside Kafka's own Java loop.

Usage: python bench/hashing.py [--keys 4000000] [--partitions 12] [--repeat 5]
The same random keys (8 to 64 bytes) go to both sides. Ours: partitions_for_keys on a pyarrow array by each batch
implementation this interpreter has (numba's compiled loop, the active one where numba is installed, and the NumPy
fallback), keys/s by wall and CPU time, best of --repeat, on one core; the first call (numba's JIT compile, or the
load of its cache, and numba's start-up) is timed apart and kept out of the runs. Java: a transcription of Kafka's
Utils.murmur2 and toPositive(murmur2(key)) % n (BuiltInPartitioner.partitionForKey), compiled here with javac,
reading the keys as byte[] from a file and timing its loop after a warm-up by System.nanoTime and by the thread's
CPU time (the fair figure on a shared machine, as for ours); it prints keys/s and a checksum of its partitions (and
hashes) that each of ours must equal, so the run also proves bit-exactness. Without javac only our figures are
printed. Then the peak memory of one call, the pure-Python loop, and the other partitioners on 1M keys.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import tempfile
import time
import tracemalloc
from pathlib import Path

import numpy as np
import pyarrow as pa

from planner import hashing
from planner.hashing import murmur2_many, partition_for_key, partitions_for_keys
from planner.partitioners import PARTITIONERS

JAVA = r"""
import java.io.IOException;
import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.FileChannel;
import java.nio.file.Paths;

public class Murmur2Bench {
    // Kafka: org.apache.kafka.common.utils.Utils.murmur2, as in the client.
    static int murmur2(final byte[] data) {
        int length = data.length;
        int seed = 0x9747b28c;
        final int m = 0x5bd1e995;
        final int r = 24;
        int h = seed ^ length;
        int length4 = length / 4;
        for (int i = 0; i < length4; i++) {
            final int i4 = i * 4;
            int k = (data[i4 + 0] & 0xff) + ((data[i4 + 1] & 0xff) << 8) + ((data[i4 + 2] & 0xff) << 16)
                + ((data[i4 + 3] & 0xff) << 24);
            k *= m;
            k ^= k >>> r;
            k *= m;
            h *= m;
            h ^= k;
        }
        switch (length % 4) {
            case 3:
                h ^= (data[(length & ~3) + 2] & 0xff) << 16;
            case 2:
                h ^= (data[(length & ~3) + 1] & 0xff) << 8;
            case 1:
                h ^= data[length & ~3] & 0xff;
                h *= m;
        }
        h ^= h >>> 13;
        h *= m;
        h ^= h >>> 15;
        return h;
    }

    // Kafka: Utils.toPositive
    static int toPositive(int number) {
        return number & 0x7fffffff;
    }

    // args: keys file (int64 n, int64 offsets[n + 1], bytes), partitions, timed runs
    public static void main(String[] args) throws IOException {
        int numPartitions = Integer.parseInt(args[1]);
        int repeat = Integer.parseInt(args[2]);
        ByteBuffer buf;
        try (FileChannel ch = FileChannel.open(Paths.get(args[0]))) {
            buf = ch.map(FileChannel.MapMode.READ_ONLY, 0, ch.size()).order(ByteOrder.LITTLE_ENDIAN);
        }
        int n = (int) buf.getLong();
        long[] offsets = new long[n + 1];
        for (int i = 0; i <= n; i++) offsets[i] = buf.getLong();
        int base = buf.position();
        byte[][] keys = new byte[n][];
        for (int i = 0; i < n; i++) {
            keys[i] = new byte[(int) (offsets[i + 1] - offsets[i])];
            buf.get(base + (int) offsets[i], keys[i]);
        }
        int[] parts = new int[n];
        int[] hashes = new int[n];
        for (int w = 0; w < 3; w++) {  // warm-up: the loop is JIT-compiled before it is timed
            for (int i = 0; i < n; i++) hashes[i] = murmur2(keys[i]);
        }
        ThreadMXBean threads = ManagementFactory.getThreadMXBean();
        double best = Double.MAX_VALUE;
        double bestCpu = Double.MAX_VALUE;
        for (int run = 0; run < repeat; run++) {
            long cpu = threads.getCurrentThreadCpuTime();
            long start = System.nanoTime();
            for (int i = 0; i < n; i++) parts[i] = toPositive(murmur2(keys[i])) % numPartitions;
            best = Math.min(best, (System.nanoTime() - start) / 1e9);
            bestCpu = Math.min(bestCpu, (threads.getCurrentThreadCpuTime() - cpu) / 1e9);
        }
        long partSum = 0;
        long hashSum = 0;
        for (int i = 0; i < n; i++) {
            partSum += (long) (i + 1) * parts[i];
            hashSum += (long) (i + 1) * murmur2(keys[i]);
        }
        System.out.println(n / best + " " + n / bestCpu + " " + partSum + " " + hashSum);
    }
}
"""


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


def checksums(keys: pa.Array, partitions: int, implementation: str) -> tuple[int, int]:
    """sum((i + 1) * partition_i) and sum((i + 1) * murmur2_i) by one implementation, with Java's wrapping longs."""
    active, hashing.BATCH_IMPLEMENTATION = hashing.BATCH_IMPLEMENTATION, implementation
    weight = np.arange(1, len(keys) + 1, dtype=np.int64)
    with np.errstate(over="ignore"):
        parts = int((weight * partitions_for_keys(keys, partitions).astype(np.int64)).sum())
        hashes = int((weight * murmur2_many(keys).astype(np.int64)).sum())
    hashing.BATCH_IMPLEMENTATION = active
    return parts, hashes


def first_call(keys: pa.Array, partitions: int) -> str:
    """The first call's cost in this process, which the timed runs leave out: for numba, compile or cache load."""
    w = time.perf_counter()
    partitions_for_keys(keys.slice(0, 1000), partitions)  # same key layout as the timed runs: same compiled loop
    seconds = time.perf_counter() - w
    if hashing.BATCH_IMPLEMENTATION != "numba":
        return f"first call {seconds:.2f} s (nothing to compile)"
    from planner import murmur2_numba

    compiled = bool(murmur2_numba.partitions_for_keys.stats.cache_misses)
    how = "JIT compile (no cache yet)" if compiled else "numba start-up and loading the compiled loop from __pycache__"
    return f"first call {seconds:.2f} s: {how}; not in the timed runs"


def rates(keys: pa.Array, partitions: int, repeat: int) -> dict[str, tuple[float, float]]:
    """(best wall seconds, best CPU seconds) of partitions_for_keys by each batch implementation."""
    active = hashing.BATCH_IMPLEMENTATION
    out = {}
    for name in hashing.BATCHES:
        hashing.BATCH_IMPLEMENTATION = name
        out[name] = best_of(lambda: partitions_for_keys(keys, partitions), repeat)
    hashing.BATCH_IMPLEMENTATION = active
    return out


def java_side(keys: pa.Array, partitions: int, repeat: int) -> tuple[float, float, int, int] | None:
    """(keys/s wall, keys/s CPU, partition checksum, hash checksum) of Kafka's loop in Java; None without javac."""
    javac, java = shutil.which("javac"), shutil.which("java")
    if not (javac and java):
        return None
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "Murmur2Bench.java"
        src.write_text(JAVA)
        subprocess.run([javac, "-d", tmp, str(src)], check=True)
        n = len(keys)
        bufs = keys.buffers()
        offsets = np.frombuffer(bufs[1], dtype=np.int64, count=n + 1)
        data = np.frombuffer(bufs[2], dtype=np.uint8, count=int(offsets[-1]))
        path = Path(tmp) / "keys.bin"
        with path.open("wb") as f:
            f.write(np.int64(n).tobytes())
            f.write((offsets - offsets[0]).tobytes())
            f.write(data[offsets[0] :].tobytes())
        heap = f"-Xmx{max(1, (64 * n) >> 30) + 1}g"
        cmd = [java, heap, "-cp", tmp, "Murmur2Bench", str(path), str(partitions), str(repeat)]
        out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.split()
    return float(out[0]), float(out[1]), int(out[2]), int(out[3])


def main() -> None:
    """Run the benchmark and print the figures."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--keys", type=int, default=4_000_000)
    ap.add_argument("--partitions", type=int, default=12)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    n = args.keys
    print(f"cpus={os.cpu_count()} load average before={os.getloadavg()}")
    keys = random_keys(n)
    print(f"{n:,} keys of 8-64 bytes, {keys.nbytes / 1e6:.0f} MB in Arrow buffers, {args.partitions} partitions")

    print(f"batch implementation: {hashing.BATCH_IMPLEMENTATION} (this interpreter has: {', '.join(hashing.BATCHES)})")
    print(first_call(keys, args.partitions))
    before = rates(keys, args.partitions, args.repeat)
    java = java_side(keys, args.partitions, args.repeat)
    after = rates(keys, args.partitions, args.repeat)  # again after Java: both sides see the same machine load
    best = {name: (min(before[name][0], after[name][0]), min(before[name][1], after[name][1])) for name in before}
    for name, (w, c) in best.items():
        label = f"ours  partitions_for_keys ({name}):"
        print(f"{label:34s} {n / w / 1e6:5.1f} M keys/s wall, {n / c / 1e6:5.1f} M keys/s CPU ({c:.3f} s CPU)")
    wall = best[hashing.BATCH_IMPLEMENTATION][0]
    if java is None:
        print("java  (no javac on PATH: Kafka's Java loop not measured)")
    else:
        rate, rate_cpu, part_sum, hash_sum = java
        label = "java  Utils.murmur2 loop (JIT):"
        java_cpu = n / rate_cpu
        print(f"{label:34s} {rate / 1e6:5.1f} M keys/s wall, {rate_cpu / 1e6:5.1f} M keys/s CPU ({java_cpu:.3f} s CPU)")
        print(f"      checksums (partitions, hashes) {part_sum}, {hash_sum}")
        for name, (w, c) in best.items():
            ours = checksums(keys, args.partitions, name)
            same = "equal" if ours == (part_sum, hash_sum) else f"DIFFERENT {ours}"
            print(
                f"{name} / java: {n / w / rate:.2f}x by wall time, {n / c / rate_cpu:.2f}x by CPU time "
                f"(one core each); checksums {same}"
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
    print(f"pure-Python per-key loop: {py_rate / 1e3:.0f} k keys/s -> batch is {n / wall / py_rate:.0f}x")

    small = keys.slice(0, 1_000_000)
    for name, p in ((name, p) for name, p in PARTITIONERS.items() if p.keyed):
        wall_p, _ = best_of(lambda p=p: p.partition_many(small, args.partitions), repeat=2)
        print(f"  {name:18s} {1e6 / wall_p / 1e6:6.1f} M keys/s")
    print(f"load average after={os.getloadavg()}")


if __name__ == "__main__":
    main()
