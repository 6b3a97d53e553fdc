"""Kafka-exact murmur2: UtilsTest.testMurmur2 vectors, toPositive, and both batch implementations against the scalar."""

import subprocess
import sys

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.partitioner.default import murmur2 as kafka_python_murmur2

from planner.hashing import (
    NO_KEYED_PARTITION,
    murmur2,
    murmur2_many,
    partition_for_key,
    partitions_for_keys,
    to_positive,
)

# Every test runs against each batch implementation: numba's compiled loop and the NumPy word walker.
pytestmark = pytest.mark.usefixtures("batch_implementation")

# org.apache.kafka.common.utils.UtilsTest.testMurmur2
KAFKA_VECTORS = {
    b"21": -973932308,
    b"foobar": -790332482,
    b"a-little-bit-long-string": -985981536,
    b"a-little-bit-longer-string": -1486304829,
    b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
    b"abc": 479470107,
}

# A 4-byte key whose murmur2 is exactly Integer.MIN_VALUE, found by inverting the (bijective) mixing steps.
MIN_VALUE_KEY = b"\xa7\xd6Pl"


@pytest.mark.parametrize("key,expected", KAFKA_VECTORS.items())
def test_kafka_utils_test_vectors(key: bytes, expected: int) -> None:
    assert murmur2(key) == expected


def test_vectors_vectorized() -> None:
    got = murmur2_many(list(KAFKA_VECTORS))
    assert got.dtype == np.int32
    assert got.tolist() == list(KAFKA_VECTORS.values())


def test_empty_key_and_each_tail_length() -> None:
    keys = [b"", b"a", b"ab", b"abc", b"abcd", b"abcde"]
    expected = [kafka_python_murmur2(k) & 0xFFFFFFFF for k in keys]
    assert [murmur2(k) & 0xFFFFFFFF for k in keys] == expected
    assert (murmur2_many(keys).view(np.uint32) == np.array(expected, dtype=np.uint32)).all()
    assert murmur2(b"") == 275646681


def test_non_ascii_utf8_and_str_keys() -> None:
    key = "héllo wörld 日本 🎉"
    encoded = key.encode("utf-8")
    assert murmur2(encoded) & 0xFFFFFFFF == kafka_python_murmur2(encoded)
    assert murmur2_many([key])[0] == murmur2(encoded)
    assert murmur2_many(pa.array([key]))[0] == murmur2(encoded)


def test_long_key() -> None:
    key = bytes(range(256)) * 40 + b"xyz"
    assert murmur2(key) & 0xFFFFFFFF == kafka_python_murmur2(key)
    assert murmur2_many([key, b"k"])[0] == murmur2(key)


def test_to_positive_masks_sign_bit_not_abs() -> None:
    h = murmur2(b"foobar")  # -790332482
    assert to_positive(h) == h & 0x7FFFFFFF == 1357151166
    assert to_positive(h) != abs(h)
    assert partition_for_key(b"foobar", 12) == 6
    assert abs(h) % 12 == 2  # an abs()-based partitioner would send the key elsewhere


def test_integer_min_value_hash_maps_to_partition_zero() -> None:
    assert murmur2(MIN_VALUE_KEY) == -(2**31)
    assert to_positive(murmur2(MIN_VALUE_KEY)) == 0
    for n in (1, 3, 12, 50):
        assert partition_for_key(MIN_VALUE_KEY, n) == 0
    assert partitions_for_keys([MIN_VALUE_KEY], 12).tolist() == [0]


def test_partition_for_key_rejects_non_positive_counts() -> None:
    with pytest.raises(ValueError, match="num_partitions"):
        partition_for_key(b"k", 0)
    with pytest.raises(ValueError, match="num_partitions"):
        partitions_for_keys([b"k"], -1)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.binary(min_size=0, max_size=90), min_size=1, max_size=300), st.integers(1, 1000))
def test_vectorized_matches_scalar(keys: list[bytes], n: int) -> None:
    assert murmur2_many(keys).tolist() == [murmur2(k) for k in keys]
    assert partitions_for_keys(pa.array(keys, pa.binary()), n).tolist() == [partition_for_key(k, n) for k in keys]


def _random_keys(count: int, seed: int) -> list[bytes]:
    rng = np.random.default_rng(seed)
    return [rng.bytes(int(length)) for length in rng.integers(0, 70, count)]


def test_many_chunks_and_arrow_layouts() -> None:
    keys = _random_keys(70_000, seed=7)  # more than one internal chunk
    expected = np.array([partition_for_key(k, 24) for k in keys], dtype=np.int32)
    for arr in (
        pa.array(keys, pa.binary()),
        pa.array(keys, pa.large_binary()),
        pa.array(keys, pa.binary_view()),
        pa.chunked_array([keys[:1000], keys[1000:]], pa.binary()),
    ):
        assert (partitions_for_keys(arr, 24) == expected).all()
    sliced = pa.array(keys, pa.binary()).slice(123, 5000)
    assert (partitions_for_keys(sliced, 24) == expected[123:5123]).all()


def test_string_and_dictionary_arrays() -> None:
    words = ["order-1", "order-2", "user-ü", "order-1", ""]
    expected = [partition_for_key(w.encode(), 6) for w in words]
    assert partitions_for_keys(pa.array(words), 6).tolist() == expected
    assert partitions_for_keys(pa.array(words, pa.large_string()), 6).tolist() == expected
    assert partitions_for_keys(pa.array(words).dictionary_encode(), 6).tolist() == expected


def test_null_keys_are_not_hashed() -> None:
    keys = [b"a", None, b"abc", None]
    assert partitions_for_keys(keys, 5).tolist() == [
        partition_for_key(b"a", 5),
        NO_KEYED_PARTITION,
        partition_for_key(b"abc", 5),
        NO_KEYED_PARTITION,
    ]
    assert partitions_for_keys(pa.array(keys, pa.binary()), 5)[[1, 3]].tolist() == [-1, -1]
    assert murmur2_many(keys)[1] == murmur2(b"")


def test_null_slots_spanning_bytes_and_sparse_buffers() -> None:
    """Arrow lets a null slot own bytes; a chunk whose keys are far apart in the buffer takes the slow path."""
    data = b"abcdefg" + bytes(100_000) + b"tail-key"
    offsets = np.array([0, 7, 7 + 100_000, len(data)], dtype=np.int32)
    validity = pa.array([True, False, True]).buffers()[1]
    arr = pa.Array.from_buffers(pa.binary(), 3, [validity, pa.py_buffer(offsets), pa.py_buffer(data)])
    assert arr.to_pylist() == [b"abcdefg", None, b"tail-key"]
    assert partitions_for_keys(arr, 9).tolist() == [
        partition_for_key(b"abcdefg", 9),
        -1,
        partition_for_key(b"tail-key", 9),
    ]


def test_empty_inputs() -> None:
    assert murmur2_many([]).tolist() == []
    assert partitions_for_keys(pa.array([], pa.binary()), 3).tolist() == []
    assert partitions_for_keys([b"", b""], 3).tolist() == [partition_for_key(b"", 3)] * 2


@pytest.mark.parametrize("without_numba, expected", [(False, ["numba", "numpy"]), (True, ["numpy"])])
def test_batch_implementation_chosen_at_import(without_numba: bool, expected: list[str]) -> None:
    """numba is a dependency, so it is what runs here; a Spark executor's venv without it falls back to NumPy."""
    block = "import sys; sys.modules['numba'] = None; " if without_numba else ""
    code = f"{block}from planner import hashing; print(hashing.BATCH_IMPLEMENTATION, *hashing.BATCHES)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == [expected[0], *expected]


def test_cli_hash_prints_key_hash_partition(capsys: pytest.CaptureFixture[str]) -> None:
    from jobs.cli import main

    assert main(["hash", "--partitions", "12", "21", "foobar"]) == 0
    assert capsys.readouterr().out.splitlines() == ["21\t-973932308\t0", "foobar\t-790332482\t6"]
    assert main(["hash", "--partitions", "50", "--partitioner", "sarama", "--hex", "31343638353039353732323234"]) == 0
    assert capsys.readouterr().out == "31343638353039353732323234\t2147483648\t48\n"
    assert main(["hash", "--partitions", "3", "--partitioner", "java", "k"]) == 2
    assert "unknown partitioner 'java'" in capsys.readouterr().err
