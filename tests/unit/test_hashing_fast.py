"""The vectorized word walker (planner.hashing.hash_words) against the scalar hashes on the layouts it treats
apart: unaligned and tight buffers, keys of every block count and alignment, long keys, nulls, several chunks."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from planner.hashing import MURMUR2, hash_words, key_buffers, murmur2, murmur2_many, partitions_for_keys
from planner.partitioners import PARTITIONERS

# MURMUR2 runs through each batch implementation (hash_words hands it over), the other hashes through the walker.
pytestmark = pytest.mark.usefixtures("batch_implementation")

WORD_HASHES = {p.word_hash: p.hash for p in PARTITIONERS.values() if p.word_hash is not None}


def _scalar(keys: list[bytes | None], hash_fn=lambda k: murmur2(k) & 0xFFFFFFFF) -> np.ndarray:
    return np.array([hash_fn(b"" if k is None else k) for k in keys], dtype=np.uint32)


def _binary(keys: list[bytes], data_shift: int = 0, slack: int = 0) -> pa.Array:
    """A binary array whose data buffer starts `data_shift` bytes past an aligned address, `slack` bytes long
    past the last key (Arrow usually pads to 64 bytes; 0 makes the last key end at the buffer's end)."""
    offsets = np.zeros(len(keys) + 1, dtype=np.int32)
    np.cumsum([len(k) for k in keys], out=offsets[1:])
    raw = pa.py_buffer(b"\x00" * data_shift + b"".join(keys) + b"\xee" * slack)
    data = raw.slice(data_shift, len(raw) - data_shift)
    return pa.Array.from_buffers(pa.binary(), len(keys), [None, pa.py_buffer(offsets.tobytes()), data])


def _keys(count: int, seed: int, low: int = 0, high: int = 70) -> list[bytes]:
    rng = np.random.default_rng(seed)
    return [rng.bytes(int(n)) for n in rng.integers(low, high, count)]


@pytest.mark.parametrize("shift", range(8))
@pytest.mark.parametrize("slack", [0, 1, 7, 64])
def test_every_buffer_alignment_and_tight_ends(shift: int, slack: int) -> None:
    keys = _keys(300, seed=shift * 10 + slack)
    arr = _binary(keys, data_shift=shift, slack=slack)
    assert (murmur2_many(arr).view(np.uint32) == _scalar(keys)).all()


def test_every_length_and_start_alignment() -> None:
    # Each length 0..40 starting at each byte of an 8-byte word: every block count, tail length and shift.
    keys = [bytes((i * 7 + j) % 256 for j in range(length)) for length in range(41) for i in range(8)]
    for order in (keys, keys[::-1], sorted(keys, key=len, reverse=True)):
        assert (murmur2_many(_binary(order)).view(np.uint32) == _scalar(order)).all()


def test_keys_past_255_blocks_and_alone() -> None:
    long_keys = [bytes(range(256)) * 5 + b"x" * r for r in range(4)]  # 320-321 blocks
    assert (murmur2_many(long_keys + [b"ab"]).view(np.uint32) == _scalar(long_keys + [b"ab"])).all()
    assert murmur2_many([b"abc"]).tolist() == [murmur2(b"abc")]
    assert murmur2_many([b""] * 5).tolist() == [murmur2(b"")] * 5
    assert len(murmur2_many([])) == 0


@pytest.mark.slow
def test_several_chunks_with_nulls_and_every_word_hash() -> None:
    keys: list[bytes | None] = list(_keys(80_000, seed=3))
    keys[::97] = [None] * len(keys[::97])
    arr = pa.array(keys, pa.large_binary())
    offsets, data, nulls = key_buffers(arr)
    for fn, scalar in WORD_HASHES.items():
        assert (hash_words(offsets, data, nulls, fn) == _scalar(keys, scalar)).all()
    parts = partitions_for_keys(arr, 7)
    expected = [-1 if k is None else (murmur2(k) & 0x7FFFFFFF) % 7 for k in keys]
    assert parts.tolist() == expected


@settings(max_examples=50, deadline=None)
@given(
    st.lists(st.binary(max_size=40), min_size=1, max_size=60),
    st.integers(0, 7),
    st.sampled_from([0, 1, 3, 64]),
    st.sampled_from(list(WORD_HASHES)),
)
def test_random_keys_layouts_and_hashes(keys: list[bytes], shift: int, slack: int, fn) -> None:
    offsets, data, nulls = key_buffers(_binary(keys, data_shift=shift, slack=slack))
    assert (hash_words(offsets, data, nulls, fn) == _scalar(keys, WORD_HASHES[fn])).all()


def test_same_answer_whatever_the_chunk_boundaries() -> None:
    keys = _keys(40_000, seed=11, low=0, high=200)
    whole = hash_words(*key_buffers(keys), MURMUR2)
    for start in (1, 3, 32_767, 32_768, 32_769):
        part = hash_words(*key_buffers(pa.array(keys, pa.binary()).slice(start)), MURMUR2)
        assert (part == whole[start:]).all()


@pytest.mark.parametrize("lengths", [(36,), (36, 37, 38, 39), (0, 1, 2, 3)])
def test_keys_of_one_block_count(lengths: tuple[int, ...]) -> None:
    # Fixed-size keys skip the sort: the chunk is already in block-count order.
    rng = np.random.default_rng(len(lengths))
    keys = [rng.bytes(int(n)) for n in rng.choice(lengths, 40_000)]
    for shift in (0, 5):
        arr = _binary(keys, data_shift=shift)
        assert (murmur2_many(arr).view(np.uint32) == _scalar(keys)).all()
