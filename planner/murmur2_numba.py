"""Kafka's murmur2 keyed partitioning compiled by numba: one loop over a pyarrow array's offsets and data buffers.

`murmur2` is `org.apache.kafka.common.utils.Utils.murmur2` line for line; Java's wrapping int is kept as
its 32 bits (`& 0xFFFFFFFF` after each multiply), so `>>>` is a plain shift. LLVM fuses each block's four
byte loads into one 32-bit load and inlines `murmur2` into the batch loops. Compiled on first call and
cached beside this file where it is writable (`compiled`); planner.hashing imports this module only where
numba is installed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from numba import njit

_INT_BITS = 0xFFFFFFFF  # Java's int arithmetic wraps at 32 bits: keep the low 32 of each product
_NO_KEYED_PARTITION = -1  # planner.hashing.NO_KEYED_PARTITION (a leaf module: it cannot import hashing)


def compiled(**options: Any) -> Callable[[Callable[..., Any]], Any]:
    """njit with its machine code cached on disk, or compiled once per process where no cache directory is
    writable (a read-only install run by a user without a writable home): numba refuses to cache there."""

    def wrap(function: Callable[..., Any]) -> Any:
        try:
            return njit(cache=True, **options)(function)
        except RuntimeError:  # numba: "cannot cache function ...: no locator available"
            return njit(cache=False, **options)(function)

    return wrap


@compiled(nogil=True, inline="always")
def murmur2(data: np.ndarray) -> int:
    """Utils.murmur2(data) as its 32 bits, unsigned: Kafka's hash of one serialized key."""
    length = len(data)
    seed = 0x9747B28C
    # 'm' and 'r' are mixing constants generated offline.
    # They're not really 'magic', they just happen to work well.
    m = 0x5BD1E995
    r = 24

    # Initialize the hash to a random value
    h = (seed ^ length) & _INT_BITS
    length4 = length // 4

    for i in range(length4):
        i4 = i * 4
        k = (
            (data[i4 + 0] & 0xFF)
            + ((data[i4 + 1] & 0xFF) << 8)
            + ((data[i4 + 2] & 0xFF) << 16)
            + ((data[i4 + 3] & 0xFF) << 24)
        )
        k = (k * m) & _INT_BITS
        k ^= k >> r
        k = (k * m) & _INT_BITS
        h = (h * m) & _INT_BITS
        h ^= k

    # Handle the last few bytes of the input array: Java's switch (length % 4) falls through 3 -> 2 -> 1
    rem = length % 4
    if rem == 3:
        h ^= (data[(length & ~3) + 2] & 0xFF) << 16
    if rem >= 2:
        h ^= (data[(length & ~3) + 1] & 0xFF) << 8
    if rem >= 1:
        h ^= data[length & ~3] & 0xFF
        h = (h * m) & _INT_BITS

    h ^= h >> 13
    h = (h * m) & _INT_BITS
    h ^= h >> 15

    return h


@compiled(nogil=True, inline="always")
def to_positive(number: int) -> int:
    """Utils.toPositive: clears the sign bit, so Integer.MIN_VALUE maps to 0."""
    return number & 0x7FFFFFFF


@compiled(nogil=True)
def murmur2_many(offsets: np.ndarray, data: np.ndarray, nulls: np.ndarray, out: np.ndarray) -> None:
    """out[i] = murmur2 of key i, data[offsets[i]:offsets[i + 1]]; a null key (nulls[i]) hashes as the empty key."""
    for i in range(len(out)):
        # Arrow lets a null slot span bytes: Kafka never hashes them
        end = offsets[i] if nulls[i] else offsets[i + 1]
        out[i] = murmur2(data[offsets[i] : end])


@compiled(nogil=True)
def partitions_for_keys(
    offsets: np.ndarray, data: np.ndarray, nulls: np.ndarray, num_partitions: int, out: np.ndarray
) -> None:
    """out[i] = toPositive(murmur2(key i)) % numPartitions (BuiltInPartitioner.partitionForKey); -1 for a null key."""
    for i in range(len(out)):
        if nulls[i]:
            out[i] = _NO_KEYED_PARTITION
        else:
            out[i] = to_positive(murmur2(data[offsets[i] : offsets[i + 1]])) % num_partitions


def hashes(offsets: np.ndarray, data: np.ndarray, nulls: np.ndarray | None) -> np.ndarray:
    """murmur2 of every key data[offsets[i]:offsets[i + 1]] as uint32, a null key as the empty key."""
    out = np.empty(len(offsets) - 1, dtype=np.uint32)
    murmur2_many(offsets, data, _null_mask(nulls, len(out)), out)
    return out


def partitions(offsets: np.ndarray, data: np.ndarray, nulls: np.ndarray | None, num_partitions: int) -> np.ndarray:
    """The keyed partition of every key as int32, -1 for a null key (num_partitions is checked by the caller)."""
    out = np.empty(len(offsets) - 1, dtype=np.int32)
    partitions_for_keys(offsets, data, _null_mask(nulls, len(out)), num_partitions, out)
    return out


def _null_mask(nulls: np.ndarray | None, n: int) -> np.ndarray:
    """`nulls`, or all False: the loops read one mask type, so numba compiles each of them once per key layout."""
    return np.zeros(n, dtype=bool) if nulls is None else nulls
