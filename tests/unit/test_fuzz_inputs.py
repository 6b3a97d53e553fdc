"""Nothing crashes on bad input: every hostile input is an InputError (or LimitError) naming where it is.

The path of a file through `rebalance assign` and ingest is `read_json_documents`, then `check_group` per group;
the consumer-protocol decoders take the bytes members send in JoinGroup / SyncGroup. Known hostile inputs come
first, then hypothesis: arbitrary bytes, arbitrary JSON, group-shaped JSON with wild values, and mutations of
valid documents and protocol messages.
"""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from planner import assign
from planner.errors import InputError, LimitError
from planner.protocol import (
    Assignment,
    ProtocolError,
    StickyUserData,
    Subscription,
    decode_assignment,
    decode_cooperative_user_data,
    decode_sticky_user_data,
    decode_subscription,
    encode_assignment,
    encode_sticky_user_data,
    encode_subscription,
)
from schemas.reader import read_json_documents
from schemas.rules import Limits, check_group, document_errors, parse_timestamp

SNAPSHOT = {
    "group_id": "payments",
    "captured_at": "2026-11-21T02:00:00Z",
    "generation": 4,
    "topics": {"orders": 4},
    "members": [
        {"member_id": "a", "topics": ["orders"], "owned": [["orders", 0]], "assignment": [["orders", 0]]},
        {"member_id": "b", "topics": ["orders"], "assignment": [["orders", 1]]},
    ],
    "offsets": [{"topic": "orders", "partition": 0, "committed": 10, "end": 12}],
}
COMPACT = {"topics": {"orders": 4}, "members": {"a": {"topics": ["orders"], "owned": [["orders", 0]]}}}
STRATEGIES = ("range", "roundrobin", "sticky", "cooperative-sticky")


def check_input(data: bytes, source: str = "in.json") -> list[Any]:
    """What `assign` does with a file: read every group, check each; the first refusal raises."""
    groups = []
    for document in read_json_documents(data, source):
        group = document.value()
        check_group(group, Limits())
        groups.append(group)
    return groups


def text(doc: Any) -> bytes:
    return json.dumps(doc).encode()


def edited(doc: dict, path: tuple, value: Any) -> dict:
    """A copy of `doc` with `value` at `path` (appended when the index is one past a list's end)."""
    doc = json.loads(json.dumps(doc))
    target = doc
    for part in path[:-1]:
        target = target[part]
    if isinstance(target, list) and path[-1] == len(target):
        target.append(value)
    else:
        target[path[-1]] = value
    return doc


# --- the inputs that crashed or slipped through before -------------------------------------------------------


HOSTILE = [
    ("binary garbage", bytes(range(256)) * 4, InputError, "in.json: not UTF-8 text: byte 0x80 at byte offset 128"),
    (
        "PNG header",
        b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR",
        InputError,
        "in.json: not UTF-8 text: byte 0x89 at byte offset 0",
    ),
    ("5,000-deep arrays", b"[" * 5000 + b"]" * 5000, InputError, "in.json: JSON nested deeper than 64 levels"),
    ("5,000-deep objects", b'{"a":' * 5000 + b"0" + b"}" * 5000, InputError, "JSON nested deeper than 64 levels"),
    (
        "deep inside a group",
        b'{"topics": {"t": 1}, "members": {"m": {"topics": ' + b"[" * 5000 + b"]" * 5000 + b"}}}",
        InputError,
        "in.json: JSON nested deeper than 64 levels (reaches 5003 at byte offset 5048)",
    ),
    ("empty file", b"", InputError, "no groups in in.json"),
    ("blank lines", b"\n\n  \n", InputError, "no groups in in.json"),
    ("empty array", b"[]", InputError, "no groups in in.json"),
    (
        "offset 2^63",
        text(edited(SNAPSHOT, ("offsets", 0, "end"), 2**63)),
        InputError,
        "offsets[0].end: 9223372036854775808 is above Kafka's int64 maximum 9223372036854775807",
    ),
    (
        "owned partition 2^63 (assign)",
        text(edited(COMPACT, ("members", "a", "owned", 0, 1), 2**63)),
        InputError,
        "members.a.owned[0][1]: partition 9223372036854775808 is above Kafka's int32 maximum",
    ),
    (
        "2^31 partitions",
        text(edited(COMPACT, ("topics", "orders"), 2**31)),
        LimitError,
        "topics.orders: 2147483648 partitions is over the limit of 1000000 per topic",
    ),
    (
        "2^31 - 1 partitions in a snapshot",
        text(edited(SNAPSHOT, ("topics", "orders"), 2**31 - 1)),
        LimitError,
        "topics.orders: 2147483647 partitions is over the limit of 1000000 per topic",
    ),
    (
        "partition count 3.0",
        text(edited(SNAPSHOT, ("topics", "orders"), 3.0)),
        InputError,
        "topics.orders: 3.0 is not of type 'integer'",
    ),
    (
        "partition count 3.0 (assign)",
        text(edited(COMPACT, ("topics", "orders"), 3.0)),
        InputError,
        "topics.orders: 3.0 is not of type 'integer'",
    ),
    (
        "partition count 0 (assign)",
        text(edited(COMPACT, ("topics", "orders"), 0)),
        InputError,
        "topics.orders: partition count must be positive, got 0",
    ),
    (
        "month 13",
        text(edited(SNAPSHOT, ("captured_at",), "2026-13-45T99:99:99Z")),
        InputError,
        "captured_at: '2026-13-45T99:99:99Z' is not a valid RFC 3339 timestamp: month must be in 1..12",
    ),
    (
        "no time zone",
        text(edited(SNAPSHOT, ("captured_at",), "2026-11-21T02:00:00")),
        InputError,
        "captured_at: '2026-11-21T02:00:00' is not an RFC 3339 timestamp",
    ),
    (
        "generation 2^70",
        text(edited(SNAPSHOT, ("generation",), 2**70)),
        InputError,
        "generation: 1180591620717411303424 is above Kafka's int32 maximum 2147483647",
    ),
    (
        "member generation 2^70 (assign)",
        text(edited(COMPACT, ("members", "a", "generation"), 2**70)),
        InputError,
        "members.a.generation: 1180591620717411303424 is above Kafka's int32 maximum",
    ),
    (
        "lone surrogate",
        text(edited(SNAPSHOT, ("members", 0, "member_id"), "\ud800")),
        InputError,
        "in.json: members[0].member_id: lone UTF-16 surrogate in string '\\ud800'",
    ),
    (
        "NaN offset",
        text(edited(SNAPSHOT, ("offsets", 0, "end"), math.nan)),
        InputError,
        "in.json: offsets[0].end: NaN is not a JSON number",
    ),
    (
        "Infinity partition count",
        text(edited(COMPACT, ("topics", "orders"), -math.inf)),
        InputError,
        "in.json: topics.orders: -Infinity is not a JSON number",
    ),
    (
        "duplicate key",
        b'{"topics": {"orders": 4, "orders": 2}, "members": {}}',
        InputError,
        "in.json: topics: duplicate key 'orders'",
    ),
    (
        "control character in a member id",
        text(edited(SNAPSHOT, ("members", 1, "member_id"), "b\x1b[31m")),
        InputError,
        "members[1].member_id: control character U+001B in 'b\\x1b[31m'",
    ),
    (
        "control character in a topic (assign)",
        text({"topics": {"or\x00ders": 1}, "members": {}}),
        InputError,
        "topics['or\\x00ders']: control character U+0000 in 'or\\x00ders'",
    ),
    (
        "duplicate offsets entries",
        text(edited(SNAPSHOT, ("offsets", 1), SNAPSHOT["offsets"][0])),
        InputError,
        "offsets[1]: duplicate entry for orders-0 (also offsets[0])",
    ),
    (
        "duplicate owned entries (assign)",
        text(edited(COMPACT, ("members", "a", "owned", 1), ["orders", 0])),
        InputError,
        "members.a.owned[1]: orders-0 is listed twice (also owned[0])",
    ),
    (
        "a number of 5,000 digits",
        b'{"topics": {"t": ' + b"9" * 5000 + b"}}",
        InputError,
        "in.json: topics.t: integer of 5000 digits is outside every Kafka integer type",
    ),
    ("a string, not a group", b'"payments"', InputError, "in.json: expected a JSON object (one group)"),
    (
        "an array of numbers",
        b"[1, 2]",
        InputError,
        "in.json[0]: expected a JSON object (one group), got a number",
    ),
]


@pytest.mark.parametrize(("name", "data", "error", "message"), HOSTILE, ids=[h[0] for h in HOSTILE])
def test_hostile_input_is_refused_with_the_place_named(name, data, error, message):
    with pytest.raises(error) as caught:
        check_input(data)
    assert message in str(caught.value)


def test_one_bad_json_line_leaves_the_others_readable():
    lines = [text(SNAPSHOT), text(edited(SNAPSHOT, ("generation",), 2**70)), b'{"group_id": "\xff"}', text(SNAPSHOT)]
    documents = read_json_documents(b"\n".join(lines), "g.jsonl")
    assert [d.error is None for d in documents] == [True, True, False, True]
    assert [document_errors(d.doc) for d in documents if d.error is None] == [
        [],
        ["generation: 1180591620717411303424 is above Kafka's int32 maximum 2147483647"],
        [],
    ]
    assert documents[2].raw == lines[2]


# --- hypothesis: only InputError comes out ---------------------------------------------------------------------

# Every character, including lone surrogates (category Cs) and control characters (Cc).
any_text = st.text(st.characters(codec=None, exclude_categories=()), max_size=8)
scalars = (
    st.none()
    | st.booleans()
    | st.integers(-3, 6)
    | st.integers(min_value=-(2**80), max_value=2**80)
    | st.floats(allow_nan=True, allow_infinity=True)
    | any_text
)
json_values = st.recursive(
    scalars, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(any_text, inner, max_size=4), max_leaves=30
)


def only_input_errors(data: bytes) -> None:
    """Read and check `data`; anything but an InputError fails the test, and every message must be storable."""
    try:
        documents = read_json_documents(data, "fuzz")
    except InputError as e:
        assert str(e).encode("utf-8")
        return
    for document in documents:
        assert document.raw in data
        if document.error is not None:
            assert document.error.startswith(document.where) and document.error.encode("utf-8")
            continue
        checked(document.doc)


def checked(doc: Any) -> bool:
    """document_errors and check_group agree, give printable UTF-8 reasons, and raise nothing but InputError."""
    errors = document_errors(doc, Limits())
    assert all(isinstance(e, str) and e.encode("utf-8") and e.isprintable() for e in errors), errors
    try:
        check_group(doc, Limits())
    except InputError as e:
        assert errors and str(e) == "; ".join(errors)
        return False
    assert errors == []
    return True


@given(st.binary(max_size=600))
@settings(max_examples=400, deadline=None)
def test_arbitrary_bytes(data):
    only_input_errors(data)


json_tokens = st.sampled_from(
    [b"{", b"}", b"[", b"]", b'"', b"\\", b":", b",", b" ", b"\n", b"0", b"-1", b"3.0", b"1e999", b"NaN", b"-Infinity"]
    + [b"true", b"null", b'"topics"', b'"members"', b'"group_id"', b'"t"', b'"\\ud800"', b'"\\u0000"', b"\xff", b"\xc3"]
)


@pytest.mark.slow
@given(st.lists(json_tokens, max_size=80).map(b"".join))
@settings(max_examples=600, deadline=None)
def test_arbitrary_json_token_soup(data):
    only_input_errors(data)


@pytest.mark.slow
@given(json_values)
@settings(max_examples=400, deadline=None)
def test_arbitrary_json_read_from_text_and_checked_directly(value):
    only_input_errors(json.dumps(value).encode())
    only_input_errors(json.dumps([value, value], ensure_ascii=False).encode("utf-8", "surrogatepass"))
    checked(value)


@pytest.mark.slow
@given(json_values, st.lists(st.tuples(st.integers(0, 10_000), st.binary(max_size=3)), min_size=1, max_size=4))
@settings(max_examples=400, deadline=None)
def test_valid_documents_with_bytes_spliced_in(value, edits):
    data = bytearray(json.dumps([SNAPSHOT, COMPACT, value], indent=1).encode())
    for position, replacement in edits:
        at = position % len(data)
        data[at : at + len(replacement)] = replacement
    only_input_errors(bytes(data))


# --- hypothesis: a group the rules accept is planned without an error -----------------------------------------

names = st.sampled_from(["orders", "refunds", "gone", "t\x00", "", "\ud800", "ü"])
small = st.integers(-2, 5) | scalars
pairs = st.lists(st.one_of(st.tuples(names, small).map(list), json_values), max_size=5)
compact_members = st.dictionaries(
    st.sampled_from(["a", "b", "c", "d\x07"]),
    st.fixed_dictionaries(
        {"topics": st.lists(names, max_size=3) | json_values},
        optional={
            "owned": pairs,
            "generation": small,
            "group_instance_id": st.sampled_from(["s1", "s2", "", None]) | scalars,
            "rack": st.sampled_from(["az1", None]) | scalars,
            "weight": small,
        },
    ),
    max_size=4,
)
compact_groups = st.fixed_dictionaries(
    {"topics": st.dictionaries(names, small, max_size=3)},
    optional={"members": compact_members, "loads": st.dictionaries(names, st.lists(small, max_size=6), max_size=2)},
)
snapshot_members = st.lists(
    st.fixed_dictionaries(
        {"member_id": st.sampled_from(["a", "b", "c"]) | scalars, "topics": st.lists(names, max_size=3)},
        optional={"owned": pairs, "assignment": pairs, "generation": small, "group_instance_id": scalars},
    ),
    max_size=4,
)
snapshot_groups = st.fixed_dictionaries(
    {"group_id": st.just("g") | scalars, "topics": st.dictionaries(names, small, max_size=3)},
    optional={
        "members": snapshot_members,
        "generation": small,
        "captured_at": st.sampled_from(["2026-11-21T02:00:00Z", "2026-02-30T00:00:00Z", "2026-11-21"]) | scalars,
        "offsets": st.lists(
            st.fixed_dictionaries({"topic": names, "partition": small}, optional={"committed": small, "end": small}),
            max_size=3,
        ),
    },
)


# Groups that are mostly valid, so the rules accept many of them and the assignors get to run; now and then an
# integer is a float, a bool or too large for Kafka's type, which the assignors would choke on.
odd_integers = st.sampled_from([2.0, True, 2**31, 2**63, -(2**63) - 1])
topic_names = st.sampled_from(["orders", "refunds", "gone"])
partition_lists = st.lists(
    st.tuples(topic_names, st.integers(0, 4) | odd_integers).map(list),
    unique_by=lambda p: (p[0], str(p[1])),
    max_size=4,
)
generations = st.none() | st.integers(-1, 5) | odd_integers
plausible_compact = st.fixed_dictionaries(
    {
        "topics": st.dictionaries(st.sampled_from(["orders", "refunds"]), st.integers(1, 5) | odd_integers, min_size=1),
        "members": st.dictionaries(
            st.sampled_from(["a", "b", "c", "d"]),
            st.fixed_dictionaries(
                {"topics": st.lists(topic_names, unique=True, max_size=3)},
                optional={
                    "owned": partition_lists,
                    "generation": generations,
                    "group_instance_id": st.sampled_from(["s1", "s2", None]),
                    "weight": st.none() | st.floats(0.5, 3),
                },
            ),
        ),
    },
    optional={"loads": st.dictionaries(st.sampled_from(["orders", "refunds"]), st.lists(st.floats(0, 9), max_size=4))},
)
plausible_snapshot = st.fixed_dictionaries(
    {
        "group_id": st.just("g"),
        "topics": st.fixed_dictionaries({"orders": st.integers(1, 5), "refunds": st.integers(1, 5)}),
        "members": st.lists(
            st.fixed_dictionaries(
                {
                    "member_id": st.sampled_from(["a", "b", "c", "d"]),
                    "topics": st.lists(st.sampled_from(["orders", "refunds"]), unique=True),
                },
                optional={"owned": partition_lists, "generation": generations},
            ),
            unique_by=lambda m: m["member_id"],
            max_size=4,
        ),
    },
    optional={"generation": generations, "captured_at": st.sampled_from(["2026-11-21T02:00:00Z", "2026-11-21"])},
)


@pytest.mark.slow
@given(compact_groups | snapshot_groups | plausible_compact | plausible_snapshot)
@example({"topics": {"t": 2}, "members": {"a": {"topics": ["t"], "generation": 2**63}}})  # OverflowError in NumPy
@example({"topics": {"t": 2.0}, "members": {"a": {"topics": ["t"]}}})  # range(2.0) in parse_group
@settings(max_examples=600, deadline=None)
def test_a_group_the_rules_accept_is_planned_by_every_assignor(group):
    if not checked(group):
        return
    members = group.get("members", {})
    ids = {m["member_id"] for m in members} if isinstance(members, list) else set(members)
    for strategy in STRATEGIES:
        assert set(assign(strategy, group).assignment) <= ids
    if group.get("captured_at") is not None:
        parse_timestamp(group["captured_at"])


# --- the consumer-protocol decoders: only ProtocolError --------------------------------------------------------

DECODERS = [decode_subscription, decode_assignment, decode_sticky_user_data, decode_cooperative_user_data]
VALID_MESSAGES = (
    [encode_subscription(Subscription(("orders",), None, version=0))]
    + [
        encode_subscription(Subscription(("orders", "refunds"), b"\x00\x01", (("orders", (0, 2)),), 41, "az1", v))
        for v in range(1, 4)
    ]
    + [
        encode_assignment(Assignment((("orders", (0, 1, 2)),), b"ud", 3)),
        encode_sticky_user_data(StickyUserData((("orders", (3,)),), 7)),
        encode_sticky_user_data(StickyUserData((("orders", (3,)),), 7, version_prefixed=True)),
    ]
)


def only_protocol_errors(data: bytes) -> None:
    for decode in DECODERS:
        try:
            decode(data)
        except ProtocolError as e:
            assert isinstance(e, InputError) and "byte offset" in str(e)


def test_protocol_error_is_an_input_error():
    assert issubclass(ProtocolError, InputError)
    with pytest.raises(InputError, match="at byte offset 0"):
        decode_subscription(b"")


@pytest.mark.slow
@given(st.binary(max_size=200))
@settings(max_examples=1000, deadline=None)
def test_protocol_decoders_on_arbitrary_bytes(data):
    only_protocol_errors(data)


@pytest.mark.slow
@given(
    st.sampled_from(VALID_MESSAGES),
    st.lists(st.tuples(st.integers(0, 200), st.binary(min_size=1, max_size=4)), min_size=1, max_size=3),
    st.integers(0, 200),
)
@settings(max_examples=1000, deadline=None)
def test_protocol_decoders_on_mutated_and_truncated_messages(message, edits, cut):
    data = bytearray(message)
    for position, replacement in edits:
        at = position % len(data)
        data[at : at + len(replacement)] = replacement
    only_protocol_errors(bytes(data))
    only_protocol_errors(bytes(data[: cut % (len(data) + 1)]))
