"""The producers' key partitioners, selectable by name, each scalar and vectorized with its null/empty-key rule.

Where a key lands depends on the producing client, not on Kafka:

| name | client | hash -> partition | null key | empty key |
|---|---|---|---|---|
| murmur2 | Java BuiltInPartitioner, librdkafka, kafka-python, franz-go | `toPositive(murmur2) % n` | sticky | hashed |
| murmur2_random | librdkafka | same | random (sticky) | hashed |
| consistent | librdkafka | `crc32 % n` (unsigned) | sticky | hashed: crc32 = 0 -> 0 |
| consistent_random | librdkafka (its default) | same | random (sticky) | random (sticky) |
| fnv1a | librdkafka | `abs(int32 fnv1a) % n` | sticky | hashed |
| fnv1a_random | librdkafka | same | random (sticky) | hashed |
| sarama | Sarama NewHashPartitioner (default) | `int32(fnv1a) % n`, negated if < 0 | random | hashed |
| sarama_reference | Sarama NewReferenceHashPartitioner | `(int32(fnv1a) & 0x7fffffff) % n` | random | hashed |
| random | librdkafka `random`, Sarama NewRandomPartitioner | none | random | random |

A key the partitioner does not place by its bytes (null key, or empty key for consistent_random) gets
NO_KEYED_PARTITION (-1): where it lands is decided by the null-key path (planner.producer), not the key.
librdkafka sends every NULL key, whatever the partitioner (except `random`), to its sticky partition
(rdkafka_msg.c rd_kafka_msg_partitioner: `!rkm->rkm_key || (keylen == 0 && consistent_random)`), so the
`_random` variants differ from the plain ones only in librdkafka before the sticky partitioner (v1.5).

>>> partition_keys("murmur2", [b"21", None], 12).tolist()
[0, -1]
>>> get_partitioner("sarama").partition(b"1468509572224", 50)  # FNV-1a hash is exactly MinInt32
48
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

import numpy as np

from planner.errors import InputError
from planner.hashing import MURMUR2, NO_KEYED_PARTITION, WordHash, hash_words, key_buffers, murmur2

__all__ = [
    "PARTITIONERS",
    "Partitioner",
    "crc32",
    "fnv1a32",
    "get_partitioner",
    "partition_key",
    "partition_keys",
]

_FNV_OFFSET = 0x811C9DC5  # rdfnv1a.c rd_fnv1a: const uint32_t offset = 0x811C9DC5
_FNV_PRIME = 0x01000193  # rdfnv1a.c rd_fnv1a: const uint32_t prime = 0x01000193
_U32 = 0xFFFFFFFF


def crc32(key: bytes) -> int:
    """librdkafka's rd_crc32 (reflected CRC-32, poly 0xEDB88320, as zlib): an unsigned 32-bit value."""
    return zlib.crc32(key)


def fnv1a32(key: bytes) -> int:
    """32-bit FNV-1a as Go's hash/fnv New32a (Sarama) and librdkafka's rd_fnv1a loop compute it, unsigned."""
    h = _FNV_OFFSET
    for b in key:
        h = ((h ^ b) * _FNV_PRIME) & _U32
    return h


def _to_int32(h: int) -> int:
    """Reinterpret an unsigned 32-bit value as a signed one (Go int32(), C int32_t)."""
    return h - (1 << 32) if h & 0x80000000 else h


# --- the rules that turn a 32-bit hash into a partition, scalar and vectorized -------------------------


def _positive_mod(h: int, n: int) -> int:
    """(h & 0x7fffffff) % n: Kafka Utils.toPositive, librdkafka murmur2, Sarama WithAbsFirst."""
    return (h & 0x7FFFFFFF) % n


def _positive_mod_many(h: np.ndarray, n: int) -> np.ndarray:
    """Vectorized _positive_mod over uint32 hashes."""
    return (h & np.uint32(0x7FFFFFFF)) % np.uint32(n)


def _unsigned_mod(h: int, n: int) -> int:
    """rd_crc32(key) % partition_cnt: uint32_t % int32_t converts the count to unsigned (C usual conversions)."""
    return h % n


def _unsigned_mod_many(h: np.ndarray, n: int) -> np.ndarray:
    """Vectorized _unsigned_mod over uint32 hashes."""
    return h % np.uint32(n)


def _abs_mod(h: int, n: int) -> int:
    """rd_fnv1a's `if (h < 0) h = -h` (INT_MIN stays 0x80000000) then unsigned % n.

    Equal to Sarama's `int32(h) % n`, negated if negative: Go's % truncates, so |h % n| == |h| % n.
    """
    s = _to_int32(h)
    return (-s if s < 0 else s) % n


def _abs_mod_many(h: np.ndarray, n: int) -> np.ndarray:
    """Vectorized _abs_mod: two's-complement negation of the negative int32 hashes, then unsigned % n."""
    negative = h >= np.uint32(0x80000000)
    return np.where(negative, np.uint32(0) - h, h) % np.uint32(n)


# --- CRC-32 and FNV-1a as WordHash, 4 bytes per vectorized pass ---------------------------------------


def _crc_tables() -> np.ndarray:
    """Slicing-by-4 tables for the reflected CRC-32 polynomial 0xEDB88320: T[0] is the byte table."""
    t0 = np.arange(256, dtype=np.uint32)
    for _ in range(8):
        t0 = np.where(t0 & 1, (t0 >> np.uint32(1)) ^ np.uint32(0xEDB88320), t0 >> np.uint32(1))
    tables = [t0]
    for _ in range(3):
        prev = tables[-1]
        tables.append((prev >> np.uint32(8)) ^ t0[prev & np.uint32(0xFF)])
    return np.stack(tables)


_CRC = _crc_tables()


def _crc_init(ln: np.ndarray) -> np.ndarray:
    """CRC-32 starts from all ones."""
    return np.full(len(ln), _U32, dtype=np.uint32)


def _crc_block(h: np.ndarray, k: np.ndarray, tmp: np.ndarray) -> None:
    """Four bytes of CRC-32 at once (slicing-by-4): crc ^= word, then one table lookup per byte."""
    np.bitwise_xor(h, k, out=k)
    np.take(_CRC[0], k >> np.uint32(24), out=h)
    for i, table in ((0, _CRC[3]), (8, _CRC[2]), (16, _CRC[1])):
        np.right_shift(k, np.uint32(i), out=tmp)
        np.bitwise_and(tmp, np.uint32(0xFF), out=tmp)
        np.bitwise_xor(h, table.take(tmp), out=h)


def _crc_finish(h: np.ndarray, tail: np.ndarray, rem: np.ndarray) -> None:
    """The 0-3 trailing bytes one at a time (crc = T[(crc ^ b) & 0xff] ^ (crc >> 8)), then the final xor."""
    for b in range(3):
        byte = (tail >> np.uint32(8 * b)) & np.uint32(0xFF)
        stepped = _CRC[0].take((h ^ byte) & np.uint32(0xFF)) ^ (h >> np.uint32(8))
        np.copyto(h, stepped, where=rem > b)
    np.bitwise_xor(h, np.uint32(_U32), out=h)


def _fnv_init(ln: np.ndarray) -> np.ndarray:
    """FNV-1a offset basis."""
    return np.full(len(ln), _FNV_OFFSET, dtype=np.uint32)


def _fnv_block(h: np.ndarray, k: np.ndarray, tmp: np.ndarray) -> None:
    """Four FNV-1a steps (h ^= byte; h *= prime) over the little-endian bytes of k."""
    for shift in (0, 8, 16, 24):
        np.right_shift(k, np.uint32(shift), out=tmp)
        np.bitwise_and(tmp, np.uint32(0xFF), out=tmp)
        np.bitwise_xor(h, tmp, out=h)
        np.multiply(h, np.uint32(_FNV_PRIME), out=h)


def _fnv_finish(h: np.ndarray, tail: np.ndarray, rem: np.ndarray) -> None:
    """FNV-1a steps over the 0-3 trailing bytes."""
    for b in range(3):
        byte = (tail >> np.uint32(8 * b)) & np.uint32(0xFF)
        np.copyto(h, (h ^ byte) * np.uint32(_FNV_PRIME), where=rem > b)


CRC32 = WordHash(_crc_init, _crc_block, _crc_finish)
FNV1A = WordHash(_fnv_init, _fnv_block, _fnv_finish)


@dataclass(frozen=True)
class Partitioner:
    """A producer's key partitioner: its hash, how a hash becomes a partition, and which keys it ignores."""

    name: str
    client: str
    source: str
    hash: Callable[[bytes], int]  # unsigned 32-bit
    word_hash: WordHash | None
    fold: Callable[[int, int], int]
    fold_many: Callable[[np.ndarray, int], np.ndarray]
    empty_key_unkeyed: bool = False  # an empty key takes the null-key path too
    keyed: bool = True  # False: the key is never looked at

    def partition(self, key: bytes | None, num_partitions: int) -> int:
        """The partition of one serialized key, or NO_KEYED_PARTITION when the key does not decide it."""
        _check_count(num_partitions)
        if not self.keyed or key is None or (self.empty_key_unkeyed and len(key) == 0):
            return NO_KEYED_PARTITION
        return self.fold(self.hash(key), num_partitions)

    def partition_many(self, keys: Any, num_partitions: int) -> np.ndarray:
        """Vectorized `partition` over a pyarrow binary/string array (or list), as int32."""
        _check_count(num_partitions)
        offsets, data, nulls = key_buffers(keys)
        n = len(offsets) - 1
        if not self.keyed or self.word_hash is None:
            return np.full(n, NO_KEYED_PARTITION, dtype=np.int32)
        parts = self.fold_many(hash_words(offsets, data, nulls, self.word_hash), num_partitions)
        parts = parts.astype(np.int32, copy=False)
        if nulls is not None:
            parts[nulls] = NO_KEYED_PARTITION
        if self.empty_key_unkeyed:
            parts[np.diff(offsets) == 0] = NO_KEYED_PARTITION
        return parts


def _check_count(num_partitions: int) -> None:
    """Every client rejects a topic without partitions before partitioning."""
    if num_partitions <= 0:
        raise InputError(f"num_partitions must be positive, got {num_partitions}")


def _murmur2_unsigned(key: bytes) -> int:
    """Utils.murmur2 as an unsigned 32-bit value."""
    return murmur2(key) & _U32


_RDKAFKA_MSG = "librdkafka src/rdkafka_msg.c"
PARTITIONERS: Mapping[str, Partitioner] = MappingProxyType(
    {
        p.name: p
        for p in (
            Partitioner(
                "murmur2",
                "Java producer default; librdkafka murmur2; kafka-python; franz-go",
                "Kafka BuiltInPartitioner.partitionForKey / Utils.murmur2; "
                f"{_RDKAFKA_MSG} rd_kafka_msg_partitioner_murmur2",
                _murmur2_unsigned,
                MURMUR2,
                _positive_mod,
                _positive_mod_many,
            ),
            Partitioner(
                "murmur2_random",
                "librdkafka",
                f"{_RDKAFKA_MSG} rd_kafka_msg_partitioner_murmur2_random",
                _murmur2_unsigned,
                MURMUR2,
                _positive_mod,
                _positive_mod_many,
            ),
            Partitioner(
                "consistent",
                "librdkafka",
                f"{_RDKAFKA_MSG} rd_kafka_msg_partitioner_consistent",
                crc32,
                CRC32,
                _unsigned_mod,
                _unsigned_mod_many,
            ),
            Partitioner(
                "consistent_random",
                "librdkafka default (also confluent-kafka-python, -go, -dotnet)",
                f"{_RDKAFKA_MSG} rd_kafka_msg_partitioner_consistent_random",
                crc32,
                CRC32,
                _unsigned_mod,
                _unsigned_mod_many,
                empty_key_unkeyed=True,
            ),
            Partitioner(
                "fnv1a",
                "librdkafka (Sarama-compatible)",
                f"{_RDKAFKA_MSG} rd_kafka_msg_partitioner_fnv1a; src/rdfnv1a.c rd_fnv1a",
                fnv1a32,
                FNV1A,
                _abs_mod,
                _abs_mod_many,
            ),
            Partitioner(
                "fnv1a_random",
                "librdkafka",
                f"{_RDKAFKA_MSG} rd_kafka_msg_partitioner_fnv1a_random",
                fnv1a32,
                FNV1A,
                _abs_mod,
                _abs_mod_many,
            ),
            Partitioner(
                "sarama",
                "Sarama default (NewHashPartitioner)",
                "Sarama partitioner.go hashPartitioner.Partition",
                fnv1a32,
                FNV1A,
                _abs_mod,
                _abs_mod_many,
            ),
            Partitioner(
                "sarama_reference",
                "Sarama NewReferenceHashPartitioner",
                "Sarama partitioner.go hashPartitioner.Partition (referenceAbs)",
                fnv1a32,
                FNV1A,
                _positive_mod,
                _positive_mod_many,
            ),
            Partitioner(
                "random",
                "librdkafka random; Sarama NewRandomPartitioner",
                f"{_RDKAFKA_MSG} rd_kafka_msg_partitioner_random",
                _murmur2_unsigned,
                None,
                _positive_mod,
                _positive_mod_many,
                keyed=False,
            ),
        )
    }
)


def get_partitioner(name: str) -> Partitioner:
    """The partitioner registered under `name` (see PARTITIONERS); ValueError lists the known names."""
    try:
        return PARTITIONERS[name]
    except KeyError:
        raise InputError(f"unknown partitioner {name!r}; known: {', '.join(sorted(PARTITIONERS))}") from None


def partition_key(name: str, key: bytes | None, num_partitions: int) -> int:
    """One key's partition under partitioner `name`; -1 when the key does not decide it."""
    return get_partitioner(name).partition(key, num_partitions)


def partition_keys(name: str, keys: Any, num_partitions: int) -> np.ndarray:
    """Every key's partition under partitioner `name`, vectorized over a pyarrow array or list; int32, -1 unkeyed."""
    return get_partitioner(name).partition_many(keys, num_partitions)
