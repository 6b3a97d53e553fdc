"""`rebalance assign`'s output in bulk: the full form encoded from the owner arrays is byte for byte msgspec's encoding
of `_full_json`, and the bytes path under the CLI's SafeWriter writes what its text path writes."""

from __future__ import annotations

import io

import msgspec
import numpy as np
import pytest
from assign_groups import groups
from hypothesis import example, given, settings
from hypothesis import strategies as st

from jobs import terminal
from jobs.terminal import SafeWriter, is_safe_ascii, safe
from planner import assign
from planner import assignment as output
from planner.assignment import (
    _encode_compact,
    _encode_full,
    _full_json,
    _sorted_pairs,
    _unique_pairs,
    compact_json,
    write_json,
)

STRATEGIES = ("range", "roundrobin", "sticky", "cooperative-sticky", "uniform")
# Names a group may carry: plain, spaced, quoted, escaped, non-ASCII, terminal controls, bidi, a 4-byte character.
NAMES = ["a", "b-1", "m 4", 'q"5', "back\\slash", "t-é", "日本", "ctl\x1b[31m", "del\x7f", "\u202etxt", "c1\x85", "🙂"]
GROUPS = groups(NAMES, [*NAMES, "m0", "m1", "m2"], members=(0, 5), max_topics=4)


def _msgspec_full(result, group_id: str | None) -> bytes:  # noqa: ANN001
    head = {} if group_id is None else {"group_id": group_id}
    return msgspec.json.encode({**head, **_full_json(result)}) + b"\n"


@settings(max_examples=150, deadline=None)
@given(GROUPS, st.sampled_from(STRATEGIES), st.sampled_from([None, "g", "grp\u202e"]))
def test_the_bulk_encoding_is_msgspec_s(group: dict, strategy: str, group_id: str | None) -> None:
    result = assign(strategy, group)
    assert _encode_full(result, group_id) == _msgspec_full(result, group_id)


@settings(max_examples=150, deadline=None)
@given(GROUPS, st.sampled_from(STRATEGIES), st.sampled_from([None, "g"]))
def test_the_bulk_compact_encoding_is_msgspec_s(group: dict, strategy: str, group_id: str | None) -> None:
    result = assign(strategy, group)
    head = {} if group_id is None else {"group_id": group_id}
    assert _encode_compact(result, group_id) == msgspec.json.encode({**head, **compact_json(result)}) + b"\n"


def test_a_name_msgspec_cannot_encode_takes_the_general_path() -> None:
    result = assign("range", {"topics": {"t\ud800": 2}, "members": {"m": {"topics": ["t\ud800"]}}})
    assert _encode_full(result, None) is None and _encode_compact(result, None) is None
    out = io.StringIO()
    write_json(result, out, compact=False)
    assert out.getvalue().startswith('{"assignment":{"m":[["t\\ud800",0]')


def test_large_partition_numbers_and_long_names() -> None:
    # Rows wider than a block (PAIR_BLOCK) and numbers of every digit count.
    topic = "t" * 240
    group = {"topics": {topic: 120_000, "u": 3}, "members": {f"m{i}": {"topics": [topic, "u"]} for i in range(7)}}
    result = assign("range", group)
    assert _encode_full(result, None) == _msgspec_full(result, None)
    assert _encode_compact(result, None) == msgspec.json.encode(compact_json(result)) + b"\n"


def _through_safe_writer(result, *, bytes_layer: bool, monkeypatch) -> bytes:  # noqa: ANN001
    raw = io.BytesIO()
    stream = io.TextIOWrapper(raw, encoding="utf-8", write_through=False)
    writer = SafeWriter(stream)
    if not bytes_layer:  # the writer as it was: no bytes layer, so write_json hands it text
        monkeypatch.setattr(SafeWriter, "buffer", property(lambda self: (_ for _ in ()).throw(AttributeError())))
    print("before", file=writer)
    write_json(result, writer, compact=False)
    print("after\x1b", file=writer)
    writer.flush()
    monkeypatch.undo()
    return raw.getvalue()


@settings(max_examples=60, deadline=None)
@given(GROUPS, st.sampled_from(STRATEGIES))
def test_the_bytes_layer_writes_what_the_text_layer_writes(group: dict, strategy: str) -> None:
    result = assign(strategy, group)
    with pytest.MonkeyPatch.context() as mp:
        fast = _through_safe_writer(result, bytes_layer=True, monkeypatch=mp)
    with pytest.MonkeyPatch.context() as mp:
        slow = _through_safe_writer(result, bytes_layer=False, monkeypatch=mp)
    assert fast == slow
    assert b"\x1b" not in fast and "\u202e".encode() not in fast


def test_a_writer_over_a_stream_without_bytes_has_no_bytes_layer() -> None:
    assert not hasattr(SafeWriter(io.StringIO()), "buffer")
    assert hasattr(SafeWriter(io.TextIOWrapper(io.BytesIO(), encoding="utf-8")), "buffer")


@settings(max_examples=300, deadline=None)
@given(
    st.binary(max_size=64)
    | st.lists(st.integers(0, 127), max_size=64).map(bytes)  # ASCII only: the case the check has to look into
    | st.text(max_size=64).map(lambda t: t.encode("utf-8", "surrogatepass"))
)
@example(b"ok\n\tfine")
@example(b"a\x7fb")
@example(b"\x1b[31m")
@example(b"\x00")
@example(b"\r")
def test_safe_ascii_is_exactly_text_safe_leaves_alone(data: bytes) -> None:
    expected = data.isascii() and safe(data.decode("ascii")) == data.decode("ascii")
    assert is_safe_ascii(data) == expected
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(terminal, "CHUNK", 3)  # the check a chunk at a time: a bad byte at any chunk boundary
        assert is_safe_ascii(data) == expected


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 70_000), st.integers(0, 50)), max_size=40),
    st.booleans(),
)
def test_sorted_and_unique_pairs_are_numpy_s(pairs: list[tuple[int, int]], parts_in_order: bool) -> None:
    members = np.asarray([m for m, _ in pairs], dtype=np.int64)
    parts = np.asarray([p for _, p in pairs], dtype=np.int64)
    if parts_in_order:
        parts = np.sort(parts)
    order = np.lexsort((parts, members))
    got = _sorted_pairs(members, parts)
    assert np.array_equal(got[0], members[order]) and np.array_equal(got[1], parts[order])
    group = assign("range", {"topics": {"t": 51}, "members": {}}).group
    expected = np.unique(np.stack([members, parts]), axis=1) if len(pairs) else np.empty((2, 0), np.int64)
    assert np.array_equal(_unique_pairs(members, parts, group), expected)


def test_write_json_uses_the_bulk_encodings_unless_the_stream_takes_ascii_only(monkeypatch) -> None:
    calls = []
    for name in ("_encode_full", "_encode_compact"):
        real = getattr(output, name)
        monkeypatch.setattr(output, name, lambda *a, real=real, name=name: calls.append(name) or real(*a))
    result = assign("sticky", {"topics": {"t": 3}, "members": {"m": {"topics": ["t"]}}})
    for compact in (False, True):
        write_json(result, io.TextIOWrapper(io.BytesIO(), encoding="ascii"), compact=compact)
    assert calls == []
    for compact in (False, True):
        write_json(result, io.BytesIO(), compact=compact)
    assert calls == ["_encode_full", "_encode_compact"]
