"""planner.assignment output: write_json writes the document of to_json() on random groups and every stream
kind; the compact form keeps everything (expand_compact gives the full form back) and drops only repetition."""

from __future__ import annotations

import io
import json
import sys

import pytest
from assign_groups import groups
from hypothesis import given, settings
from hypothesis import strategies as st

from planner import assign
from planner.assignment import compact_json, expand_compact, write_json

STRATEGIES = ("range", "roundrobin", "sticky", "cooperative-sticky")
# Some non-ASCII and quoted names: the output is UTF-8 JSON whatever the stream.
TOPIC_NAMES = ["a", "b", "t-é", "日本", "z"]
MEMBER_NAMES = ["m0", "m1", "M2", "ü3", "m 4", 'q"5']

# X owns three of four partitions; the quota is 2, so X gives up b-1 to the new member Z. Cooperative-sticky
# withholds b-1 this round (X still owns it), so its target differs from its assignment.
MOVING = {
    "topics": {"a": 2, "b": 2},
    "members": {
        "X": {"topics": ["a", "b"], "owned": [["a", 0], ["b", 0], ["b", 1]], "generation": 1},
        "Y": {"topics": ["a", "b"], "owned": [["a", 1]], "generation": 1},
        "Z": {"topics": ["a", "b"]},
    },
}
GROUPS = groups(TOPIC_NAMES, MEMBER_NAMES, members=(1, None))


def _written(result, stream_kind: str, *, compact: bool, **kw) -> dict:
    """Write through one kind of stream and parse what landed."""
    if stream_kind == "str":
        out = io.StringIO()
        write_json(result, out, compact=compact, **kw)
        text = out.getvalue()
    elif stream_kind == "bytes":
        out = io.BytesIO()
        write_json(result, out, compact=compact, **kw)
        text = out.getvalue().decode("utf-8")
    else:  # a text layer over bytes, as sys.stdout is; "ascii" is a terminal without UTF-8
        raw = io.BytesIO()
        out = io.TextIOWrapper(raw, encoding=stream_kind, write_through=False)
        out.write("before ")
        write_json(result, out, compact=compact, **kw)
        out.flush()
        text = raw.getvalue().decode(stream_kind)
        assert text.startswith("before ")
        text = text.removeprefix("before ")
    assert text.endswith("\n") and text.count("\n") == 1
    return json.loads(text)


@settings(max_examples=40, deadline=None)
@given(GROUPS, st.sampled_from(STRATEGIES), st.sampled_from(["str", "bytes", "utf-8", "ascii"]))
def test_full_form_is_to_json(group: dict, strategy: str, stream_kind: str) -> None:
    result = assign(strategy, group)
    assert _written(result, stream_kind, compact=False) == result.to_json()


@settings(max_examples=40, deadline=None)
@given(GROUPS, st.sampled_from(STRATEGIES))
def test_compact_form_round_trips(group: dict, strategy: str) -> None:
    result = assign(strategy, group)
    compact = _written(result, "bytes", compact=True)
    assert compact == json.loads(json.dumps(compact_json(result)))
    assert expand_compact(compact) == result.to_json()
    assert list(compact["assignment"]) == list(result.assignment)  # every member, in group order
    assert all(result.revoked[m] for m in compact["revoked"])  # only members that revoke something


def test_compact_form_by_example() -> None:
    eager = compact_json(assign("sticky", MOVING))
    assert eager == {
        "assignment": {"X": {"a": [0], "b": [0]}, "Y": {"a": [1]}, "Z": {"b": [1]}},
        "revoked": {"X": {"b": [1]}},
        "elapsed_ms": eager["elapsed_ms"],
    }
    cooperative = compact_json(assign("cooperative-sticky", MOVING))
    assert cooperative["assignment"] == {"X": {"a": [0], "b": [0]}, "Y": {"a": [1]}, "Z": {}}
    assert cooperative["target"] == {"X": {"a": [0], "b": [0]}, "Y": {"a": [1]}, "Z": {"b": [1]}}
    assert cooperative["revoked"] == {"X": {"b": [1]}}


def test_group_id_leads_the_object() -> None:
    result = assign("range", MOVING)
    for compact in (False, True):
        out = io.StringIO()
        write_json(result, out, compact=compact, group_id="orders")
        assert next(iter(json.loads(out.getvalue()))) == "group_id"
        assert json.loads(out.getvalue())["group_id"] == "orders"


def test_names_that_utf8_cannot_encode() -> None:
    lone = json.loads('"m\\ud800"')  # a lone surrogate: valid JSON input, not encodable as UTF-8
    result = assign("range", {"topics": {"a": 2}, "members": {lone: {"topics": ["a"]}}})
    for kind in ("str", "bytes", "utf-8"):
        assert _written(result, kind, compact=False) == result.to_json()
        assert expand_compact(_written(result, kind, compact=True)) == result.to_json()


def test_without_msgspec_the_standard_library_writes(monkeypatch: pytest.MonkeyPatch) -> None:
    result = assign("cooperative-sticky", MOVING)
    monkeypatch.setitem(sys.modules, "msgspec", None)  # as on a Spark worker without the extras
    assert _written(result, "utf-8", compact=False) == result.to_json()
    assert expand_compact(_written(result, "bytes", compact=True)) == result.to_json()


def test_names_are_built_once_and_lists_are_fresh() -> None:
    result = assign("sticky", MOVING)
    assert result.assignment is result.assignment
    assert result.target == result.assignment and result.target is not result.assignment
    assert result.revoked == {"X": [("b", 1)], "Y": [], "Z": []}
