"""Kafka-exact murmur2 and keyed partitioning, scalar and vectorized over millions of keys.

Mirrors `org.apache.kafka.common.utils.Utils.murmur2` / `Utils.toPositive` and the keyed branch of
`BuiltInPartitioner.partitionForKey` (formerly `DefaultPartitioner.partition`):
``toPositive(murmur2(keyBytes)) % numPartitions``. The vectorized form reads a pyarrow binary/string
array's offsets and data buffers in place and runs the same arithmetic over dense uint32 arrays, with no
per-key Python.

>>> murmur2(b"21"), partition_for_key(b"21", 12)
(-973932308, 0)
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, NamedTuple

import numpy as np

__all__ = [
    "KAFKA_SEED",
    "MURMUR2",
    "NO_KEYED_PARTITION",
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

_CHUNK = 1 << 15  # keys hashed per pass: keeps the per-block arrays (~0.5 MB) in L2 cache
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
    packed = [b"" if k is None else k for k in items] if nulls.any() else items
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
    finish(h, tail, rem) folds the rem (0-3) trailing bytes, given as the low bytes of `tail`, and finalizes.
    """

    init: Callable[[np.ndarray], np.ndarray]
    block: Callable[[np.ndarray, np.ndarray, np.ndarray], None]
    finish: Callable[[np.ndarray, np.ndarray, np.ndarray], None]


def hash_words(offsets: np.ndarray, data: np.ndarray, nulls: np.ndarray | None, fn: WordHash) -> np.ndarray:
    """`fn` over every key data[offsets[i]:offsets[i+1]] as uint32, vectorized; a null key hashes as empty."""
    n = len(offsets) - 1
    out = np.empty(n, dtype=np.uint32)
    for s in range(0, n, _CHUNK):
        e = min(n, s + _CHUNK)
        o = offsets[s:e].astype(np.int64)
        ln = np.diff(offsets[s : e + 1]).astype(np.int64, copy=False)
        if nulls is not None:
            ln[nulls[s:e]] = 0  # Arrow lets a null slot span bytes; Kafka never hashes a null key
        out[s:e] = _hash_chunk(o, ln, data, fn)
    return out


def _block_source(o: np.ndarray, ln: np.ndarray, data: np.ndarray) -> tuple[np.ndarray, int, int]:
    """(words, lo, m): the 4-byte little-endian word at byte position p is words[_word_index(p, lo, m)].

    Why: NumPy gathers from an aligned contiguous uint32 array ~4x faster than from an unaligned view, so
    the chunk's byte range [lo, hi) is copied 4 times, shifted by 0..3 bytes (m words each), and a read at p
    uses the copy that aligns p. A sparse chunk (keys scattered over a large buffer) falls back to the
    unaligned view (m == 0).
    """
    lo = int(o.min())
    hi = int((o + ln).max())
    if hi - lo > 8 * int(ln.sum()) + 4096:
        padded = np.concatenate([data, np.zeros(4, dtype=np.uint8)])
        return np.ndarray(shape=(len(padded) - 3,), dtype="<u4", buffer=padded, strides=(1,)), 0, 0
    m = (hi - lo) // 4 + 1
    # Row a holds data[lo + a:]; bytes past hi stay uninitialised: only tail reads reach them, masked off.
    shifted = np.empty((4, 4 * m), dtype=np.uint8)
    for a in range(4):
        shifted[a, : max(hi - lo - a, 0)] = data[lo + a : hi]
    return shifted.view("<u4").reshape(-1), lo, m


def _word_index(pos: np.ndarray, lo: int, m: int) -> np.ndarray:
    """Index into _block_source's words of the 4-byte word starting at byte positions `pos`."""
    if m == 0:
        return pos.copy()
    r = pos - lo
    return (r & 3) * m + (r >> 2)


def _hash_chunk(off: np.ndarray, ln: np.ndarray, data: np.ndarray, fn: WordHash) -> np.ndarray:
    """`fn` over one chunk of keys, returned in the chunk's order.

    Keys are sorted by block count, so at block j the keys still hashing are a dense suffix: every pass
    runs over contiguous arrays, without masks.
    """
    nblocks = ln >> 2
    top = int(nblocks.max())
    # Why: a stable sort on small unsigned ints is a radix sort in NumPy (linear, no comparisons).
    order = np.argsort(nblocks.astype(np.uint8 if top < 256 else np.uint32), kind="stable")
    o = off[order]
    ln_sorted = ln[order]
    # starts[j]: first key (in sorted order) with more than j blocks
    starts = np.searchsorted(nblocks[order], np.arange(top + 1), side="right")
    words, lo, m = _block_source(o, ln_sorted, data)
    h = fn.init(ln_sorted)
    k_buf = np.empty(len(h), dtype=np.uint32)
    tmp_buf = np.empty(len(h), dtype=np.uint32)
    idx = _word_index(o, lo, m)
    step = 1 if m else 4  # consecutive blocks are adjacent words in a shifted copy, 4 bytes apart otherwise
    for j in range(top):
        st = int(starts[j])
        k = k_buf[st:]
        # Why mode="wrap": indices are always in range, and NumPy's wrap loop gathers faster than "raise".
        np.take(words, idx[st:], out=k, mode="wrap")
        idx[st:] += step
        fn.block(h[st:], k, tmp_buf[st:])
    # idx now points at each key's 0-3 tail bytes: the low bytes of that word; bytes past the key's end
    # (other keys, or never-written padding) are masked off.
    rem = ln_sorted & 3
    np.take(words, idx, out=k_buf, mode="wrap")
    np.bitwise_and(k_buf, _TAIL_MASK.take(rem), out=k_buf)
    fn.finish(h, k_buf, rem)
    result = np.empty_like(h)
    result[order] = h
    return result


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
    """Utils.murmur2's `switch (length % 4)` and final avalanche."""
    np.bitwise_xor(h, tail, out=h)  # case 3: h ^= b2 << 16; case 2: h ^= b1 << 8; case 1: h ^= b0
    np.multiply(h, _TAIL_MULT.take(rem), out=h)  # case 1 (reached from 3 and 2 by fall-through): h *= m
    np.bitwise_xor(h, h >> np.uint32(13), out=h)  # h ^= h >>> 13
    np.multiply(h, _M32, out=h)  # h *= m
    np.bitwise_xor(h, h >> np.uint32(15), out=h)  # h ^= h >>> 15


MURMUR2 = WordHash(_murmur2_init, _murmur2_block, _murmur2_finish)
"""Utils.murmur2 as a WordHash, for hash_words."""


def murmur2_many(keys: Any) -> np.ndarray:
    """Utils.murmur2 of every key of a pyarrow binary/string array or a list of bytes, as an int32 array.

    A null key hashes as the empty key here; partitions_for_keys marks nulls NO_KEYED_PARTITION instead.
    """
    offsets, data, nulls = key_buffers(keys)
    return hash_words(offsets, data, nulls, MURMUR2).view(np.int32)


def partitions_for_keys(keys: Any, num_partitions: int) -> np.ndarray:
    """toPositive(murmur2(key)) % num_partitions for every key, as an int32 array; null keys give -1."""
    if num_partitions <= 0:
        raise ValueError(f"num_partitions must be positive, got {num_partitions}")
    offsets, data, nulls = key_buffers(keys)
    h = hash_words(offsets, data, nulls, MURMUR2)
    np.bitwise_and(h, np.uint32(0x7FFFFFFF), out=h)  # Utils.toPositive
    np.remainder(h, np.uint32(num_partitions), out=h)
    parts = h.view(np.int32)
    if nulls is not None:
        parts[nulls] = NO_KEYED_PARTITION
    return parts
