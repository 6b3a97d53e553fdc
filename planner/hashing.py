"""Kafka-exact murmur2 and keyed partitioning, scalar and vectorized over millions of keys.

Mirrors `org.apache.kafka.common.utils.Utils.murmur2` / `Utils.toPositive` and the keyed branch of
`BuiltInPartitioner.partitionForKey` (formerly `DefaultPartitioner.partition`):
``toPositive(murmur2(keyBytes)) % numPartitions``. The batch forms read a pyarrow binary/string array's
offsets and data buffers in place, with no per-key Python, by one of two implementations chosen at import
(BATCH_IMPLEMENTATION): "numba", Utils.murmur2's loop compiled by numba (planner.murmur2_numba), where numba
is installed; else "numpy", the same arithmetic over dense uint32 arrays (the word walker below), which is
what Spark executors with only NumPy, pandas, pyarrow and pyspark run.

>>> murmur2(b"21"), partition_for_key(b"21", 12)
(-973932308, 0)
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Iterable
from typing import Any, NamedTuple, cast

import numpy as np

__all__ = [
    "BATCHES",
    "BATCH_IMPLEMENTATION",
    "KAFKA_SEED",
    "MURMUR2",
    "NO_KEYED_PARTITION",
    "Murmur2Batch",
    "WordHash",
    "hash_words",
    "murmur2",
    "murmur2_many",
    "partition_for_key",
    "partitions_for_keys",
    "to_positive",
    "key_buffers",
]

KAFKA_SEED = 0x9747B28C  # Utils.murmur2: int seed = 0x9747b28c
_M = 0x5BD1E995  # Utils.murmur2: final int m = 0x5bd1e995
_R = 24  # Utils.murmur2: final int r = 24
_MASK32 = 0xFFFFFFFF

NO_KEYED_PARTITION = -1
"""Marks a null key in vectorized results: Kafka does not hash it (the null-key path in planner.producer)."""

_CHUNK = 1 << 15  # keys hashed per pass: the chunk's bytes (~1 MB for 32-byte keys) stay in L2/L3 cache
_M32 = np.uint32(_M)
_SHIFT_R = np.uint32(_R)
# Indexed by length % 4: which bytes of the word at the key's tail belong to the key, and whether
# murmur2's `case 1: h *= m` runs (it does for 3, 2 and 1 by fall-through).
_TAIL_MASK = np.array([0, 0xFF, 0xFFFF, 0xFFFFFF], dtype=np.uint32)
_TAIL_MULT = np.array([1, _M, _M, _M], dtype=np.uint32)


def _to_int32(x: int) -> int:
    """Reinterpret an unsigned 32-bit value as a Java int."""
    return x - (1 << 32) if x & 0x80000000 else x


def murmur2(data: bytes) -> int:
    """Kafka's Utils.murmur2 over `data`: a signed 32-bit int, bit-for-bit as the Java client computes it."""
    length = len(data)
    h = (KAFKA_SEED ^ length) & _MASK32
    length4 = length // 4
    for i in range(length4):
        i4 = i * 4
        k = data[i4] | (data[i4 + 1] << 8) | (data[i4 + 2] << 16) | (data[i4 + 3] << 24)
        k = (k * _M) & _MASK32
        k ^= k >> _R
        k = (k * _M) & _MASK32
        h = (h * _M) & _MASK32
        h ^= k
    # switch (length % 4) with fall-through: case 3, case 2, case 1 then h *= m
    rem = length % 4
    base = length & ~3
    if rem == 3:
        h ^= data[base + 2] << 16
    if rem >= 2:
        h ^= data[base + 1] << 8
    if rem >= 1:
        h ^= data[base]
        h = (h * _M) & _MASK32
    h ^= h >> 13
    h = (h * _M) & _MASK32
    h ^= h >> 15
    return _to_int32(h)


def to_positive(number: int) -> int:
    """Kafka's Utils.toPositive: clears the sign bit (number & 0x7fffffff); it is not abs()."""
    return number & 0x7FFFFFFF


def partition_for_key(key: bytes, num_partitions: int) -> int:
    """The partition the Java producer picks for a non-null key (BuiltInPartitioner.partitionForKey)."""
    if num_partitions <= 0:
        raise ValueError(f"num_partitions must be positive, got {num_partitions}")
    return to_positive(murmur2(key)) % num_partitions


def key_buffers(keys: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """(offsets int32/int64[n+1], data uint8, null mask or None) of a pyarrow binary/string array or a list.

    Key i is data[offsets[i]:offsets[i+1]]. Pyarrow arrays are read in place, zero copy; list items may be
    bytes, str (UTF-8, as Kafka's StringSerializer) or None.
    """
    if hasattr(keys, "buffers") and hasattr(keys, "type"):
        return _arrow_buffers(keys)
    if hasattr(keys, "chunks"):
        import pyarrow as pa

        return _arrow_buffers(keys.chunk(0) if keys.num_chunks == 1 else pa.concat_arrays(keys.chunks))
    return _list_buffers(keys)


def _list_buffers(keys: Iterable[bytes | str | None]) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """Pack a sequence of keys into Arrow-style offsets and data (joined in C, hashed vectorized)."""
    items = [k.encode("utf-8") if isinstance(k, str) else k for k in keys]
    nulls = np.fromiter((k is None for k in items), dtype=bool, count=len(items))
    # Without nulls `items` is already all bytes: no second list (the cast records what `nulls` proved).
    packed = [b"" if k is None else k for k in items] if nulls.any() else cast("list[bytes]", items)
    offsets = np.zeros(len(packed) + 1, dtype=np.int64)
    np.cumsum(np.fromiter(map(len, packed), dtype=np.int64, count=len(packed)), out=offsets[1:])
    data = np.frombuffer(b"".join(packed), dtype=np.uint8)
    return offsets, data, (nulls if nulls.any() else None)


def _arrow_buffers(arr: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """Offsets, data and null mask of a pyarrow binary-like array, casting other layouts first."""
    import pyarrow as pa

    t = arr.type
    if pa.types.is_dictionary(t):
        arr = arr.cast(t.value_type)
        t = arr.type
    large = pa.types.is_large_binary(t) or pa.types.is_large_string(t)
    if not (large or pa.types.is_binary(t) or pa.types.is_string(t)):
        arr = arr.cast(pa.large_binary())  # binary_view, string_view, fixed_size_binary
        large = True
    n = len(arr)
    bufs = arr.buffers()
    offsets = np.frombuffer(bufs[1], dtype=np.int64 if large else np.int32, count=arr.offset + n + 1)
    data = np.frombuffer(bufs[2], dtype=np.uint8) if bufs[2] is not None else np.zeros(0, dtype=np.uint8)
    nulls = arr.is_null().to_numpy(zero_copy_only=False) if arr.null_count else None
    return offsets[arr.offset :], data, nulls


class WordHash(NamedTuple):
    """A 32-bit hash that consumes a key 4 little-endian bytes at a time, as the word walker drives it.

    init(lengths) -> h; block(h, k, tmp) folds one full word k into h in place (tmp is scratch);
    finish(h, tail, rem) folds the rem (0-3) trailing bytes, given as the low bytes of `tail`, and finalizes
    (it may overwrite `tail`).
    """

    init: Callable[[np.ndarray], np.ndarray]
    block: Callable[[np.ndarray, np.ndarray, np.ndarray], None]
    finish: Callable[[np.ndarray, np.ndarray, np.ndarray], None]


def hash_words(offsets: np.ndarray, data: np.ndarray, nulls: np.ndarray | None, fn: WordHash) -> np.ndarray:
    """`fn` over every key data[offsets[i]:offsets[i+1]] as uint32; a null key hashes as empty.

    MURMUR2 goes to the active batch implementation (BATCH_IMPLEMENTATION), every other hash to the word walker.
    """
    if fn is MURMUR2:
        return BATCHES[BATCH_IMPLEMENTATION].hashes(offsets, data, nulls)
    return _walk_words(offsets, data, nulls, fn)


def _walk_words(offsets: np.ndarray, data: np.ndarray, nulls: np.ndarray | None, fn: WordHash) -> np.ndarray:
    """`fn` over every key, vectorized over dense uint32 arrays: NumPy's form of the per-key loop."""
    n = len(offsets) - 1
    out = np.empty(n, dtype=np.uint32)
    if n == 0:
        return out
    words = _aligned_words(data)
    scratch = _Scratch(min(n, _CHUNK))
    for s in range(0, n, _CHUNK):
        e = min(n, s + _CHUNK)
        ln = np.diff(offsets[s : e + 1]).astype(np.int64, copy=False)
        if nulls is not None:
            ln[nulls[s:e]] = 0  # Arrow lets a null slot span bytes; Kafka never hashes a null key
        _hash_chunk(offsets[s:e].astype(np.int64, copy=False), ln, int(offsets[e]), data, words, fn, scratch, out[s:e])
    return out


def _aligned_words(data: np.ndarray) -> np.ndarray:
    """`data` as little-endian 8-byte words, zero copy when the buffer is 8-byte aligned (Arrow's are)."""
    if data.ctypes.data % 8:
        aligned = np.empty((len(data) + 7) // 8, dtype="<u8")
        aligned.view(np.uint8)[: len(data)] = data
        return aligned
    return data[: len(data) // 8 * 8].view("<u8")


class _Scratch:
    """Per-call work arrays, reused by every chunk: fresh multi-megabyte arrays cost page faults each time."""

    def __init__(self, n: int) -> None:
        self.lo, self.hi, self.tmp64 = (np.empty(n, dtype=np.uint64) for _ in range(3))
        self.k0, self.k1, self.tmp, self.tail = (np.empty(n, dtype=np.uint32) for _ in range(4))


def _hash_chunk(
    off: np.ndarray,
    ln: np.ndarray,
    end: int,
    data: np.ndarray,
    words: np.ndarray,
    fn: WordHash,
    w: _Scratch,
    out: np.ndarray,
) -> None:
    """`fn` over one chunk of keys (all within data[:end]), written to `out` in the chunk's order.

    Keys are sorted by block count, so at block j the keys still hashing are a dense suffix: every pass runs
    over contiguous arrays, without masks. Blocks are read two at a time: the 8 bytes at byte p are
    (words[p // 8] >> 8(p % 8)) | (words[p // 8 + 1] << (64 - 8(p % 8))), one 8-byte gather per block pair
    (the upper word is the next pair's lower one), split into two uint32 lanes, block 2i and block 2i + 1.
    """
    n = len(off)
    lo_byte = int(off[0]) & ~7
    if end + 16 > 8 * len(words):  # the last pair's upper word may lie past the buffer: read a padded copy
        padded = np.zeros((end - lo_byte) // 8 + 3, dtype="<u8")
        padded.view(np.uint8)[: end - lo_byte] = data[lo_byte:end]
        words, base = padded, lo_byte
    else:
        base = 0
    longest = int(ln.max())
    nblocks = (ln >> 2).astype(np.uint8 if longest < 1 << 10 else np.uint16 if longest < 1 << 18 else np.uint32)
    counts = np.bincount(nblocks)
    top = len(counts) - 1
    starts = [0, *np.cumsum(counts).tolist()]  # starts[j]: first key (in sorted order) with at least j blocks
    pos = off - base if base else off
    lo, hi = w.lo[:n], w.hi[:n]
    if counts[top] == n:  # keys of one block count (fixed-size keys): already in order, nothing to permute
        order: Any = slice(None)
        np.take(words, pos >> 3, out=lo, mode="wrap")
    else:
        # Why: a stable sort on small unsigned ints is a radix sort in NumPy (linear, no comparisons).
        order = np.argsort(nblocks, kind="stable")
        # Why in memory order first: the chunk's first read then streams from RAM instead of around it.
        np.take(words, pos >> 3, out=hi, mode="wrap")
        np.take(hi, order, out=lo, mode="wrap")
    pos = pos[order]
    index = pos >> 3
    shift = ((pos & 7) << 3).view(np.uint64)
    back = np.uint64(64) - shift  # a shift by 64 gives 0 in NumPy: an aligned key takes nothing from hi
    ln_sorted = ln[order]
    h = fn.init(ln_sorted)
    k0, k1, tmp, tail = w.k0[:n], w.k1[:n], w.tmp[:n], w.tail[:n]
    for i in range(top // 2 + 1):
        a, b, c = starts[2 * i], starts[2 * i + 1], starts[min(2 * i + 2, top + 1)]
        # Keys with >= 2i blocks: bytes [8i, 8i + 8) of each, blocks 2i and 2i + 1 or the 0-3 tail bytes.
        # Why mode="wrap": indices are always in range, and NumPy's wrap loop gathers faster than "raise".
        np.take(words[i + 1 :], index[a:], out=hi[a:], mode="wrap")
        np.right_shift(lo[a:], shift[a:], out=lo[a:])
        np.left_shift(hi[a:], back[a:], out=w.tmp64[a:n])
        np.bitwise_or(lo[a:], w.tmp64[a:n], out=lo[a:])
        np.copyto(k0[a:], lo[a:], casting="unsafe")  # low 32 bits: block 2i
        np.right_shift(lo[a:], np.uint64(32), out=lo[a:])
        np.copyto(k1[a:], lo[a:], casting="unsafe")  # high 32 bits: block 2i + 1
        tail[a:b] = k0[a:b]  # exactly 2i blocks: the tail starts at byte 8i
        tail[b:c] = k1[b:c]  # exactly 2i + 1 blocks: at byte 8i + 4
        if b < n:
            fn.block(h[b:], k0[b:], tmp[b:])
        if c < n:
            fn.block(h[c:], k1[c:], tmp[c:])
        lo, hi = hi, lo  # this pair's upper word is the next pair's lower one
    # The tail's bytes past the key's end (the next key, or padding) are masked off.
    rem = ln_sorted & 3
    np.bitwise_and(tail, _TAIL_MASK.take(rem), out=tail)
    fn.finish(h, tail, rem)
    out[order] = h


def _murmur2_init(ln: np.ndarray) -> np.ndarray:
    """int h = seed ^ length."""
    h = ln.astype(np.uint32)
    np.bitwise_xor(h, np.uint32(KAFKA_SEED), out=h)
    return h


def _murmur2_block(h: np.ndarray, k: np.ndarray, tmp: np.ndarray) -> None:
    """One iteration of Utils.murmur2's loop; k holds (data[i4] & 0xff) + ... + ((data[i4 + 3] & 0xff) << 24)."""
    np.multiply(k, _M32, out=k)  # k *= m
    np.right_shift(k, _SHIFT_R, out=tmp)
    np.bitwise_xor(k, tmp, out=k)  # k ^= k >>> r
    np.multiply(k, _M32, out=k)  # k *= m
    np.multiply(h, _M32, out=h)  # h *= m
    np.bitwise_xor(h, k, out=h)  # h ^= k


def _murmur2_finish(h: np.ndarray, tail: np.ndarray, rem: np.ndarray) -> None:
    """Utils.murmur2's `switch (length % 4)` and final avalanche (`tail` serves as scratch once folded in)."""
    np.bitwise_xor(h, tail, out=h)  # case 3: h ^= b2 << 16; case 2: h ^= b1 << 8; case 1: h ^= b0
    np.multiply(h, _TAIL_MULT.take(rem), out=h)  # case 1 (reached from 3 and 2 by fall-through): h *= m
    np.right_shift(h, np.uint32(13), out=tail)
    np.bitwise_xor(h, tail, out=h)  # h ^= h >>> 13
    np.multiply(h, _M32, out=h)  # h *= m
    np.right_shift(h, np.uint32(15), out=tail)
    np.bitwise_xor(h, tail, out=h)  # h ^= h >>> 15


MURMUR2 = WordHash(_murmur2_init, _murmur2_block, _murmur2_finish)
"""Utils.murmur2 as a WordHash, for hash_words."""


class Murmur2Batch(NamedTuple):
    """One implementation of Utils.murmur2 over (offsets, data, null mask or None) of many keys."""

    hashes: Callable[[np.ndarray, np.ndarray, np.ndarray | None], np.ndarray]  # uint32; a null key as the empty one
    partitions: Callable[[np.ndarray, np.ndarray, np.ndarray | None, int], np.ndarray]  # int32; null -> -1


def _numpy_hashes(offsets: np.ndarray, data: np.ndarray, nulls: np.ndarray | None) -> np.ndarray:
    """Utils.murmur2 of every key by the word walker."""
    return _walk_words(offsets, data, nulls, MURMUR2)


def _numpy_partitions(
    offsets: np.ndarray, data: np.ndarray, nulls: np.ndarray | None, num_partitions: int
) -> np.ndarray:
    """toPositive(murmur2(key)) % num_partitions of every key by the word walker; null keys give -1."""
    h = _walk_words(offsets, data, nulls, MURMUR2)
    np.bitwise_and(h, np.uint32(0x7FFFFFFF), out=h)  # Utils.toPositive
    np.remainder(h, np.uint32(num_partitions), out=h)
    parts = h.view(np.int32)
    if nulls is not None:
        parts[nulls] = NO_KEYED_PARTITION
    return parts


def _numba_hashes(offsets: np.ndarray, data: np.ndarray, nulls: np.ndarray | None) -> np.ndarray:
    """Utils.murmur2 of every key by numba's compiled loop, imported on first use (numba costs 0.25 s to import,
    which every command that only parses arguments or hashes one key would pay)."""
    from planner import murmur2_numba

    return murmur2_numba.hashes(offsets, data, nulls)


def _numba_partitions(
    offsets: np.ndarray, data: np.ndarray, nulls: np.ndarray | None, num_partitions: int
) -> np.ndarray:
    """toPositive(murmur2(key)) % num_partitions of every key by numba's compiled loop, imported on first use."""
    from planner import murmur2_numba

    return murmur2_numba.partitions(offsets, data, nulls, num_partitions)


def _batches() -> dict[str, Murmur2Batch]:
    """The batch murmur2 implementations this interpreter has, preferred first: numba's where it is installed."""
    numpy = Murmur2Batch(_numpy_hashes, _numpy_partitions)
    try:
        numba = importlib.util.find_spec("numba")
    except ImportError:  # an import hook refusing it
        numba = None
    if numba is None:  # Spark executors' venvs hold NumPy, pandas, pyarrow and pyspark only
        return {"numpy": numpy}
    return {"numba": Murmur2Batch(_numba_hashes, _numba_partitions), "numpy": numpy}


BATCHES = _batches()
"""Every batch murmur2 this interpreter can run, by name; both are Kafka-exact and tested against each other."""

BATCH_IMPLEMENTATION = next(iter(BATCHES))
"""The batch murmur2 in use, chosen once at import: "numba" where numba is installed, else "numpy"."""


def murmur2_many(keys: Any) -> np.ndarray:
    """Utils.murmur2 of every key of a pyarrow binary/string array or a list of bytes, as an int32 array.

    A null key hashes as the empty key here; partitions_for_keys marks nulls NO_KEYED_PARTITION instead.
    """
    offsets, data, nulls = key_buffers(keys)
    return BATCHES[BATCH_IMPLEMENTATION].hashes(offsets, data, nulls).view(np.int32)


def partitions_for_keys(keys: Any, num_partitions: int) -> np.ndarray:
    """toPositive(murmur2(key)) % num_partitions for every key, as an int32 array; null keys give -1."""
    if num_partitions <= 0:
        raise ValueError(f"num_partitions must be positive, got {num_partitions}")
    offsets, data, nulls = key_buffers(keys)
    return BATCHES[BATCH_IMPLEMENTATION].partitions(offsets, data, nulls, num_partitions)
