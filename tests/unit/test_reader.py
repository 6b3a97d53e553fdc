"""Strict reading of group documents: one object, an array or JSON lines; each refusal names source, place and path."""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from planner.errors import InputError
from schemas.reader import (
    MAX_DEPTH,
    Document,
    _structure,
    json_path,
    nesting_depth,
    read_groups,
    read_json_documents,
)

GROUP = {"group_id": "payments", "topics": {"orders": 2}, "members": []}


def read(data: bytes, source: str = "in.json") -> list[Document]:
    return read_json_documents(data, source)


def refused(data: bytes, source: str = "in.json") -> str:
    with pytest.raises(InputError) as caught:
        read_json_documents(data, source)
    return str(caught.value)


# --- the three shapes ------------------------------------------------------------------------------------------


def test_one_object_is_one_document_with_the_input_as_its_raw_bytes():
    data = b'  {"group_id": "payments", "topics": {}, "members": []}\n'
    [doc] = read(data)
    assert (doc.doc["group_id"], doc.raw, doc.where, doc.line, doc.index) == ("payments", data, "in.json", None, None)


def test_array_elements_keep_their_own_bytes_exactly_as_received():
    data = b'[ {"group_id": "a",  "topics": {}},\n  {"group_id": "caf\xc3\xa9", "topics": {"t": 1}} ]'
    docs = read(data)
    assert [d.raw for d in docs] == [
        b'{"group_id": "a",  "topics": {}}',
        b'{"group_id": "caf\xc3\xa9", "topics": {"t": 1}}',
    ]
    assert [d.where for d in docs] == ["in.json[0]", "in.json[1]"]
    assert docs[1].doc["group_id"] == "café"


def test_json_lines_are_read_line_by_line_and_blank_lines_are_skipped():
    data = b'{"group_id": "a"}\n\n{"group_id": "b"}\r\n'
    docs = read(data, "g.jsonl")
    assert [(d.where, d.raw, d.doc["group_id"]) for d in docs] == [
        ("g.jsonl:1", b'{"group_id": "a"}', "a"),
        ("g.jsonl:3", b'{"group_id": "b"}\r', "b"),
    ]


def test_a_utf8_byte_order_mark_is_ignored_but_kept_in_the_raw_bytes():
    data = b'\xef\xbb\xbf{"group_id": "a"}'
    [doc] = read(data)
    assert doc.doc == {"group_id": "a"} and doc.raw == data


@given(st.lists(st.dictionaries(st.text(max_size=5), st.integers() | st.text(max_size=5), max_size=4), min_size=1))
@settings(max_examples=150, deadline=None)
def test_every_shape_round_trips_and_raw_bytes_parse_to_the_document(groups):
    shapes = {
        "array": json.dumps(groups, indent=1, ensure_ascii=False).encode(),
        "lines": "\n".join(json.dumps(g, ensure_ascii=False) for g in groups).encode(),
    }
    for data in shapes.values():
        docs = read(data)
        if len(groups) == 1 and data == shapes["lines"]:
            assert docs[0].raw == data
        assert [d.doc for d in docs] == groups
        assert [json.loads(d.raw) for d in docs] == groups


# --- inputs that cannot be split into documents raise ----------------------------------------------------------


@pytest.mark.parametrize("data", [b"", b" \n\t\r\n", b"[]", b" [ ]\n", b"\xef\xbb\xbf"])
def test_an_empty_input_has_no_groups(data):
    assert refused(data, "empty.json") == "no groups in empty.json"


def test_binary_garbage_names_the_first_bad_byte_and_its_offset():
    assert refused(bytes(range(256)), "blob.bin") == (
        "blob.bin: not UTF-8 text: byte 0x80 at byte offset 128 (invalid start byte)"
    )


def test_truncated_utf8_is_refused_with_its_offset():
    assert refused(b'{"group_id": "a\xc3"}').endswith("byte 0xc3 at byte offset 15 (invalid continuation byte)")
    assert refused(b'{"group_id": "a"}\xe2\x82').endswith("byte 0xe2 at byte offset 17 (unexpected end of data)")


def test_utf8_encoded_surrogates_are_not_utf8():
    assert "byte 0xed at byte offset 7" in refused(b'{"g": "\xed\xa0\x80"}')


@pytest.mark.parametrize("data", [b"[" * 5000 + b"]" * 5000, b'{"a":' * 5000 + b"1" + b"}" * 5000, b"[" * 200_000])
def test_deep_nesting_is_refused_by_the_scan_before_the_parser_recurses(data):
    # The message is the scan's: the recursive parser (RecursionError past ~1000 levels) never ran.
    depth, offset = nesting_depth(data)
    assert (
        refused(data)
        == f"in.json: JSON nested deeper than {MAX_DEPTH} levels (reaches {depth} at byte offset {offset})"
    )


def test_nesting_up_to_the_limit_is_read_and_one_more_level_is_not():
    def nested(levels: int) -> bytes:
        return b'{"a": ' + b"[" * (levels - 1) + b"]" * (levels - 1) + b"}"

    assert read(nested(MAX_DEPTH))[0].doc["a"]
    assert "nested deeper than" in refused(nested(MAX_DEPTH + 1))


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b'"payments"', "in.json: expected a JSON object (one group) or an array of them, got a string"),
        (b"42", "in.json: expected a JSON object (one group) or an array of them, got a number"),
        (
            b'{"group_id": "a",\n "topics": {"t": 1}',
            "in.json: invalid JSON at line 2 column 20: Expecting ',' delimiter",
        ),
        (b'{"a": 1} {"b": 2}', "in.json: invalid JSON at line 1 column 10: extra data after the value"),
        (b'[{"a": 1} {"b": 2}]', "in.json: invalid JSON at line 1 column 11: expected ',' or ']'"),
        (b'[{"a": 1}] x', "in.json: invalid JSON at line 1 column 12: extra data after the array"),
        (b'{"a": "tab\there"}', "in.json: invalid JSON at line 1 column 11: Invalid control character at"),
        (b"{'a': 1}", "in.json: invalid JSON at line 1 column 2: Expecting property name enclosed in double quotes"),
    ],
)
def test_unparseable_input_names_line_and_column(data, message):
    assert refused(data) == message


def test_a_pretty_printed_object_keeps_its_whole_input_error():
    data = b'{"group_id": "billing",\n "topics": {"invoices": 6},\n "members": [{"member_id": "bill-1"'
    assert refused(data, "billing-truncated.json").startswith("billing-truncated.json: invalid JSON at line 3")


# --- a bad document is refused alone ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "error"),
    [
        (b'{"topics": {"t": 1, "t": 2}}', "in.json: topics: duplicate key 't'"),
        (b'{"a": 1, "a": 1}', "in.json: (document): duplicate key 'a'"),
        (b'{"offsets": [{"end": NaN}]}', "in.json: offsets[0].end: NaN is not a JSON number (RFC 8259 section 6)"),
        (b'{"loads": {"t": [1, Infinity]}}', "in.json: loads.t[1]: Infinity is not a JSON number (RFC 8259 section 6)"),
        (b'{"loads": {"t": [-Infinity]}}', "in.json: loads.t[0]: -Infinity is not a JSON number (RFC 8259 section 6)"),
        (b'{"weight": 1e999}', "in.json: weight: number 1e999 is outside the range of a double"),
        (b'{"end": -' + b"9" * 5000 + b"}", "in.json: end: integer of 5000 digits is outside every Kafka integer type"),
        (b'{"member_id": "\\ud800"}', "in.json: member_id: lone UTF-16 surrogate in string '\\ud800'"),
        (b'{"topics": {"\\udfff": 1}}', "in.json: topics: lone UTF-16 surrogate in key '\\udfff'"),
        (b'{"m": ["ok", "\\ud83d"]}', "in.json: m[1]: lone UTF-16 surrogate in string '\\ud83d'"),
    ],
)
def test_values_json_allows_but_a_group_must_not_hold_name_their_path(data, error):
    [doc] = read(data)
    assert (doc.doc, doc.error, doc.raw) == (None, error, data)
    with pytest.raises(InputError, match="^" + re.escape(error) + "$"):
        doc.value()


def test_a_surrogate_pair_is_one_character_and_welcome():
    [doc] = read(b'{"member_id": "\\ud83d\\ude00", "host": "\\\\ud800"}')
    assert doc.doc == {"member_id": "\U0001f600", "host": "\\ud800"}


def test_one_bad_array_element_does_not_stop_the_others():
    docs = read(b'[{"group_id": "a"}, 7, {"group_id": "b", "group_id": "c"}, {"group_id": "d"}]')
    assert [(d.where, d.error) for d in docs] == [
        ("in.json[0]", None),
        ("in.json[1]", "in.json[1]: expected a JSON object (one group), got a number"),
        ("in.json[2]", "in.json[2]: (document): duplicate key 'group_id'"),
        ("in.json[3]", None),
    ]
    assert docs[2].raw == b'{"group_id": "b", "group_id": "c"}'


def test_one_bad_json_line_is_refused_alone_with_its_raw_bytes():
    lines = [
        b'{"group_id": "a"}',
        b'{"group_id": "\xff"}',
        b'{"group_id": "b", "x": ' + b"[" * 100 + b"]" * 100 + b"}",
        b'{"group_id": "c", "x": NaN}',
        b'{"group_id": "d"',
        b'{"group_id": "e"} trailing',
        b'{"group_id": "\\udc00"}',
        b'{"group_id": "f"}',
    ]
    docs = read(b"\n".join(lines), "g.jsonl")
    assert [d.raw for d in docs] == lines
    assert [d.doc["group_id"] for d in docs if d.error is None] == ["a", "f"]
    assert [d.error for d in docs if d.error is not None] == [
        "g.jsonl:2: not UTF-8 text: byte 0xff at byte offset 32 (invalid start byte)",
        f"g.jsonl:3: JSON nested deeper than {MAX_DEPTH} levels (reaches 101 at byte offset 158)",
        "g.jsonl:4: x: NaN is not a JSON number (RFC 8259 section 6)",
        "g.jsonl:5: invalid JSON at line 1 column 17: Expecting ',' delimiter",
        "g.jsonl:6: invalid JSON at line 1 column 19: extra data after the value",
        "g.jsonl:7: group_id: lone UTF-16 surrogate in string '\\udc00'",
    ]
    assert [d.line for d in docs] == [1, 2, 3, 4, 5, 6, 7, 8]


def test_read_groups_takes_all_groups_or_raises_the_first_refusal():
    assert read_groups(b'[{"a": 1}, {"b": 2}]', "x") == [{"a": 1}, {"b": 2}]
    with pytest.raises(InputError, match=r"^x:2: b: NaN is not a JSON number"):
        read_groups(b'{"a": 1}\n{"b": NaN}\n{"c": NaN}', "x")


# --- the depth scan --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (b"", (0, 0)),
        (b"{}", (1, 0)),
        (b'[[], [{"a": [1]}]]', (4, 12)),
        (b'{"a": "[[[[{{{{"}', (1, 0)),
        (b'{"a": "\\"[[[["}', (1, 0)),
        (b'{"a": "\\\\"}[[', (2, 12)),
        (b'{"a": "\\\\\\"[["}', (1, 0)),
        (b"]]]", (0, 0)),
    ],
)
def test_nesting_depth_counts_brackets_outside_strings_only(data, expected):
    assert nesting_depth(data) == expected


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(st.sampled_from('ab"\\[]{}é')),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(st.sampled_from('k"\\[{'), max_size=3), inner),
    max_leaves=20,
)


def _depth(value) -> int:
    if isinstance(value, list):
        return 1 + max(map(_depth, value), default=0)
    if isinstance(value, dict):
        return 1 + max(map(_depth, value.values()), default=0)
    return 0


@pytest.mark.slow
@given(json_values)
@settings(max_examples=300, deadline=None)
def test_nesting_depth_equals_the_depth_of_the_parsed_value(value):
    assert nesting_depth(json.dumps(value, ensure_ascii=False).encode())[0] == _depth(value)


@given(st.lists(st.sampled_from([b"\\", b'"', b"[", b"]", b"{", b"}", b"a", b":", b" "]), max_size=60).map(b"".join))
@settings(max_examples=500, deadline=None)
def test_the_quick_depth_pass_reads_the_same_depth_from_fewer_bytes(data):
    assert nesting_depth(_structure(data))[0] == nesting_depth(data)[0]


def test_json_path_quotes_keys_that_are_not_printable():
    assert json_path(["members", 2, "owned", 0]) == "members[2].owned[0]"
    assert json_path(["topics", "a\x07", ""]) == "topics['a\\x07']['']"
    assert json_path([]) == "(document)"


# --- the fast path of a JSON line ------------------------------------------------------------------------------

_KEYS = st.sampled_from(['"a"', '"b"', '"a"', '"x:y"', '"é"', '"k\\"q"', '"\\u00e9"', '""'])
_SCALARS = st.sampled_from(
    ["1", "-0", "1.5", "-0.0", "1E2", "2.5e-400", "1e400", "-1e999", "NaN", "Infinity", "-Infinity", "true", "null"]
    + ["123456789012345678901234567890", "9" * 40, '"s"', '"x:y"', '"é"', '" : "', '"a\\"b"', '"q\\\\"']
    + ['"\\ud800"', '"\\ud83d\\ude00"', '"\\u0041"']
)
_SPACE = st.sampled_from(["", " ", "\t", " \r "])


def _object_text(values: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    member = st.tuples(_KEYS, _SPACE, _SPACE, values).map(lambda m: f"{m[0]}{m[1]}:{m[2]}{m[3]}")
    return st.lists(member, max_size=4).map(lambda members: "{" + ",".join(members) + "}")


_VALUES = st.recursive(
    _SCALARS, lambda inner: _object_text(inner) | st.lists(inner, max_size=3).map(lambda v: f"[{', '.join(v)}]")
)


@given(st.lists(_object_text(_VALUES), min_size=2, max_size=3))
@settings(max_examples=150, deadline=None)
def test_a_json_line_read_by_msgspec_is_the_document_json_reads(lines):
    data = "\n".join(lines).encode()
    fast = read(data, "g.jsonl")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("schemas.reader.msgspec", None)
        slow = read(data, "g.jsonl")
    assert fast == slow
