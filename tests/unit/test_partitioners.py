"""The producers' partitioners: golden vectors, real librdkafka through ctypes, null/empty keys, vectorized."""

import ctypes
import glob
import os
import zlib

import confluent_kafka
import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from planner.hashing import partition_for_key
from planner.partitioners import (
    PARTITIONERS,
    crc32,
    fnv1a32,
    get_partitioner,
    partition_key,
    partition_keys,
)

# librdkafka src/rdfnv1a.c unittest_fnv1a: Go hash/fnv results, after rd_fnv1a's abs().
RDKAFKA_FNV1A = {
    b"kafka": 0xD33C4E1,
    b"giberish123456789": 0x77A58295,
    b"1234": 0x23BDD03,
    b"234": 0x2DEA3CD2,
    b"34": 0x740FA83E,
    b"4": 0x310CA263,
    b"PreAmbleWillBeRemoved,ThePrePartThatIs": 0x65CBD69C,
    b"": 0x7EE3623B,
}


def _rd_abs(h: int) -> int:
    """rd_fnv1a's abs on the int32 hash."""
    s = h - (1 << 32) if h & 0x80000000 else h
    return (-s if s < 0 else s) & 0xFFFFFFFF


@pytest.mark.parametrize("key,expected", RDKAFKA_FNV1A.items())
def test_fnv1a_librdkafka_unittest_vectors(key: bytes, expected: int) -> None:
    assert _rd_abs(fnv1a32(key)) == expected


def test_crc32_matches_zlib_and_check_value() -> None:
    assert crc32(b"123456789") == 0xCBF43926  # the CRC-32 check value
    keys = [b"", b"a", b"abcd", b"abcde", b"order-42" * 9]
    assert [crc32(k) for k in keys] == [zlib.crc32(k) for k in keys]
    assert partition_keys("consistent", keys, 1 << 30).tolist() == [zlib.crc32(k) % (1 << 30) for k in keys]


def _librdkafka() -> ctypes.CDLL:
    """The librdkafka shipped inside the confluent-kafka wheel."""
    libs = os.path.join(os.path.dirname(confluent_kafka.__file__), os.pardir, "confluent_kafka.libs")
    return ctypes.CDLL(sorted(glob.glob(os.path.join(libs, "librdkafka*.so*")))[0])


@pytest.mark.parametrize("name", ["consistent", "murmur2", "fnv1a"])
def test_matches_real_librdkafka(name: str) -> None:
    """rd_kafka_msg_partitioner_<name> ignores its topic handle, so it can be called directly."""
    fn = getattr(_librdkafka(), f"rd_kafka_msg_partitioner_{name}")
    fn.restype = ctypes.c_int32
    fn.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_int32, ctypes.c_void_p, ctypes.c_void_p]
    rng = np.random.default_rng(11)
    keys = [rng.bytes(int(n)) for n in rng.integers(0, 80, 400)] + [b"1468509572224", "日本".encode()]
    for n in (1, 6, 50, 997):
        expected = [fn(None, k, len(k), n, None, None) for k in keys]
        assert [partition_key(name, k, n) for k in keys] == expected
        assert partition_keys(name, keys, n).tolist() == expected


def test_murmur2_partitioners_equal_java() -> None:
    keys = [b"21", b"foobar", b"", b"abc"]
    for name in ("murmur2", "murmur2_random"):
        assert partition_keys(name, keys, 12).tolist() == [partition_for_key(k, 12) for k in keys]


def test_sarama_min_int32_key() -> None:
    """Sarama's TestHashPartitionerMinInt32: FNV-1a("1468509572224") is exactly math.MinInt32."""
    assert fnv1a32(b"1468509572224") == 0x80000000
    assert partition_key("sarama", b"1468509572224", 50) == 48  # int32 % 50 = -48, negated
    assert partition_key("fnv1a", b"1468509572224", 50) == 48  # librdkafka is Sarama-compatible
    assert partition_key("sarama_reference", b"1468509572224", 50) == 0  # & 0x7fffffff


def test_sarama_differs_from_reference_on_negative_hashes() -> None:
    h = fnv1a32(b"kafka-key-7")
    assert h & 0x80000000
    s = h - (1 << 32)
    assert partition_key("sarama", b"kafka-key-7", 7) == (-s) % 7
    assert partition_key("sarama_reference", b"kafka-key-7", 7) == (h & 0x7FFFFFFF) % 7


def test_null_and_empty_keys() -> None:
    keys = pa.array([None, b"", b"k"], pa.binary())
    expected = {
        "murmur2": [-1, partition_for_key(b"", 5), partition_for_key(b"k", 5)],
        "murmur2_random": [-1, partition_for_key(b"", 5), partition_for_key(b"k", 5)],
        "consistent": [-1, 0, zlib.crc32(b"k") % 5],  # crc32 of no bytes is 0
        "consistent_random": [-1, -1, zlib.crc32(b"k") % 5],  # keylen == 0 goes to the sticky partition
        "fnv1a": [-1, 0x7EE3623B % 5, _rd_abs(fnv1a32(b"k")) % 5],
        "fnv1a_random": [-1, 0x7EE3623B % 5, _rd_abs(fnv1a32(b"k")) % 5],
        "sarama": [-1, 0x7EE3623B % 5, _rd_abs(fnv1a32(b"k")) % 5],
        "sarama_reference": [-1, (0x811C9DC5 & 0x7FFFFFFF) % 5, (fnv1a32(b"k") & 0x7FFFFFFF) % 5],
        "random": [-1, -1, -1],
    }
    assert set(expected) == set(PARTITIONERS)
    for name, want in expected.items():
        assert partition_keys(name, keys, 5).tolist() == want, name
        assert [partition_key(name, k, 5) for k in keys.to_pylist()] == want, name


@settings(max_examples=40, deadline=None)
@given(st.lists(st.one_of(st.none(), st.binary(max_size=70)), min_size=1, max_size=200), st.integers(1, 5000))
def test_vectorized_equals_scalar(keys: list[bytes | None], n: int) -> None:
    arr = pa.array(keys, pa.binary())
    for name, p in PARTITIONERS.items():
        assert p.partition_many(arr, n).tolist() == [p.partition(k, n) for k in keys], name


def test_large_batch_string_arrays() -> None:
    words = [f"user-{i}" for i in range(50_000)]
    arr = pa.chunked_array([words[:20_000], words[20_000:]], pa.large_string())
    for name in ("consistent", "fnv1a", "sarama"):
        got = partition_keys(name, arr, 24)
        assert got.dtype == np.int32
        assert got[::997].tolist() == [partition_key(name, w.encode(), 24) for w in words[::997]]


def test_unknown_name_and_bad_counts() -> None:
    with pytest.raises(ValueError, match="unknown partitioner 'java'.*murmur2"):
        get_partitioner("java")
    with pytest.raises(ValueError, match="num_partitions"):
        partition_keys("consistent", [b"k"], 0)
    with pytest.raises(ValueError, match="num_partitions"):
        partition_key("sarama", b"k", -3)
