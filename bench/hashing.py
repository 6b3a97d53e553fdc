"""Throughput of Kafka-exact murmur2 partitioning: vectorized partitions_for_keys beside Kafka's own Java loop.

Usage: python bench/hashing.py [--keys 4000000] [--partitions 12] [--repeat 5]
The same random keys (8 to 64 bytes) go to both sides. Ours: partitions_for_keys on a pyarrow array, keys/s
by wall and CPU time, best of --repeat, on one core. Java: a transcription of Kafka's Utils.murmur2 and
toPositive(murmur2(key)) % n (BuiltInPartitioner.partitionForKey), compiled here with javac, reading the keys
as byte[] from a file and timing its loop after a warm-up by System.nanoTime and by the thread's CPU time (the
fair figure on a shared machine, as for ours); it prints keys/s and a
checksum of its partitions (and hashes) that must equal ours, so the run also proves bit-exactness. Without
javac only our figure is printed. Then the peak memory of one call, the pure-Python loop, and the other
partitioners on 1M keys.
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


def checksums(keys: pa.Array, partitions: int) -> tuple[int, int]:
    """sum((i + 1) * partition_i) and sum((i + 1) * murmur2_i) with Java's wrapping 64-bit arithmetic."""
    weight = np.arange(1, len(keys) + 1, dtype=np.int64)
    with np.errstate(over="ignore"):
        parts = int((weight * partitions_for_keys(keys, partitions).astype(np.int64)).sum())
        hashes = int((weight * murmur2_many(keys).astype(np.int64)).sum())
    return parts, hashes


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

    run = lambda: partitions_for_keys(keys, args.partitions)  # noqa: E731
    wall, cpu = best_of(run, args.repeat)
    java = java_side(keys, args.partitions, args.repeat)
    wall2, cpu2 = best_of(run, args.repeat)  # again after Java: both sides see the same machine load
    wall, cpu = min(wall, wall2), min(cpu, cpu2)
    print(f"ours  partitions_for_keys (NumPy): {n / wall / 1e6:5.1f} M keys/s wall, {n / cpu / 1e6:5.1f} M keys/s CPU")
    if java is None:
        print("java  (no javac on PATH: Kafka's Java loop not measured)")
    else:
        rate, rate_cpu, part_sum, hash_sum = java
        ours = checksums(keys, args.partitions)
        same = "equal to ours" if ours == (part_sum, hash_sum) else f"DIFFERENT from ours {ours}"
        print(f"java  Utils.murmur2 loop (JIT):    {rate / 1e6:5.1f} M keys/s wall, {rate_cpu / 1e6:5.1f} M keys/s CPU")
        print(f"      checksums (partitions, hashes) {part_sum}, {hash_sum}: {same}")
        print(
            f"ours / java: {n / wall / rate:.2f}x by wall time, {n / cpu / rate_cpu:.2f}x by CPU time (one core each)"
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
