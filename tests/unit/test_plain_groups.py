"""The plain-file path of `rebalance assign` (schemas.plain_groups) against the general path it stands in for.

The property every test checks: when the general path (reader, rules, parse_group) refuses a file, the plain path
declines it (returns None, so the general path names the error); when the general path accepts it, the plain path
declines it or gives equal GroupSpecs. On random groups of both forms in every JSON layout, on the same files with
bytes spliced in, and on a list of damaged pair lists; and through the command itself, whose output and errors are
the same with the plain path as without it.
"""

from __future__ import annotations

import dataclasses
import io
import json
import re
import subprocess
import sys
from contextlib import redirect_stderr, redirect_stdout
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jobs.cli import main
from planner.errors import InputError
from planner.group import GroupSpec, from_snapshot, is_snapshot, parse_group
from schemas import plain_groups
from schemas.plain_groups import read_plain_groups
from schemas.reader import read_json_documents
from schemas.rules import Limits, check_group

LIMITS = Limits()
TOPIC_NAMES = ["t0", "t1", "orders", "orders.v2", "a_b-c", "T9", "x" * 20]
GONE = ["gone", "old.topic"]  # legal topic names that are not topics of the group
MEMBER_IDS = ["m0", "m1", "m-2", "M3", "c0000", "consumer-1-9f0e", "m 6"]


def general(data: bytes, source: str = "g.json") -> list[tuple[GroupSpec, Any]] | str:
    """What the general path of `rebalance assign` makes of `data`: every group's GroupSpec and group id, or the
    message of the error it stops at."""
    try:
        groups = []
        for document in read_json_documents(data, source):
            group = document.value()
            check_group(group, LIMITS)
            groups.append(group)
        return [(parse_group(from_snapshot(g) if is_snapshot(g) else g), g.get("group_id")) for g in groups]
    except ValueError as e:  # InputError, and parse_group's ValueError
        return str(e)


def same_spec(a: GroupSpec, b: GroupSpec) -> bool:
    for field in dataclasses.fields(GroupSpec):
        x, y = getattr(a, field.name), getattr(b, field.name)
        if isinstance(y, np.ndarray) or isinstance(x, np.ndarray):
            if not (isinstance(x, np.ndarray) and isinstance(y, np.ndarray) and x.dtype == y.dtype):
                return False
            if not np.array_equal(x, y):
                return False
        elif field.name == "subscriptions":
            if len(x) != len(y) or any(
                u.dtype != v.dtype or not np.array_equal(u, v) for u, v in zip(x, y, strict=True)
            ):
                return False
        elif field.name == "partition_racks":
            if (x is None) != (y is None) or (
                x is not None
                and (x.names != y.names or not np.array_equal(x.offsets, y.offsets) or not np.array_equal(x.ids, y.ids))
            ):
                return False
        elif x != y:
            return False
    return True


def agrees(data: bytes) -> bool:
    """The property: the plain path declines what the general path refuses, and agrees with what it accepts.
    True when the plain path read the file (False: it declined)."""
    expected = general(data)
    got = read_plain_groups(data, "g.json", LIMITS)
    if isinstance(expected, str):
        assert got is None, f"the general path refuses it ({expected}); the plain path read it"
        return False
    if got is None:
        return False
    assert len(got) == len(expected)
    for (spec, group_id), (want, want_id) in zip(got, expected, strict=True):
        assert group_id == want_id
        assert same_spec(spec, want), (spec, want)
    return True


# --- random groups in random layouts ---------------------------------------------------------------------------


@st.composite
def pairs(draw: st.DrawFn, topics: dict[str, int], compact: bool, unique: bool = True) -> list[list[Any]]:
    known = [[t, p] for t, n in topics.items() for p in range(n)]
    pool = known + (
        [[t, p] for t in GONE for p in range(2)] + [[t, n + 1] for t, n in topics.items()] if compact else []
    )
    chosen = draw(st.lists(st.sampled_from(pool), max_size=12, unique_by=lambda tp: tuple(tp) if unique else id(tp)))
    return [list(tp) for tp in chosen]


@st.composite
def compact_groups(draw: st.DrawFn) -> dict[str, Any]:
    topics = draw(st.dictionaries(st.sampled_from(TOPIC_NAMES), st.integers(1, 8), min_size=1, max_size=5))
    members = {}
    for m in draw(st.lists(st.sampled_from(MEMBER_IDS), max_size=5, unique=True)):
        spec: dict[str, Any] = {"topics": draw(st.lists(st.sampled_from([*topics, *GONE]), max_size=7))}
        if draw(st.booleans()):
            spec["owned"] = draw(pairs(topics, compact=True))
        if draw(st.booleans()):
            spec["generation"] = draw(st.integers(-1, 4))
        if draw(st.booleans()):
            spec["rack"] = draw(st.sampled_from(["az1", "az2", None]))
        if draw(st.booleans()):
            spec["weight"] = draw(st.sampled_from([1, 2.5, None]))
        members[m] = spec
    # Owned lists over all members hold no pair twice, as the rules' plain case.
    seen: set[tuple[str, int]] = set()
    for spec in members.values():
        if "owned" in spec:
            spec["owned"] = [tp for tp in spec["owned"] if tuple(tp) not in seen and not seen.add(tuple(tp))]
    doc: dict[str, Any] = {"topics": topics, "members": members}
    if draw(st.booleans()) and topics:
        doc["loads"] = {next(iter(topics)): [1.0, 2.5]}
    return doc


@st.composite
def snapshot_groups(draw: st.DrawFn) -> dict[str, Any]:
    topics = draw(st.dictionaries(st.sampled_from(TOPIC_NAMES), st.integers(1, 8), min_size=1, max_size=5))
    consumer = draw(st.booleans())
    taken: dict[str, set[tuple[str, int]]] = {"owned": set(), "assignment": set(), "target_assignment": set()}
    members = []
    for i, m in enumerate(draw(st.lists(st.sampled_from(MEMBER_IDS), max_size=5, unique=True))):
        member: dict[str, Any] = {"member_id": m, "topics": draw(st.lists(st.sampled_from(list(topics)), max_size=5))}
        for field in ("owned", "assignment", *(("target_assignment",) if consumer else ())):
            if draw(st.booleans()):
                chosen = [tp for tp in draw(pairs(topics, compact=False)) if tuple(tp) not in taken[field]]
                taken[field].update(tuple(tp) for tp in chosen)
                member[field] = chosen
        if draw(st.booleans()):
            member["group_instance_id"] = f"static-{i}"
        if draw(st.booleans()):
            member["client_id"] = draw(st.sampled_from(["c-1", "", None]))
        members.append(member)
    doc: dict[str, Any] = {
        "group_id": draw(st.sampled_from(["payments", "g-1"])),
        "generation": draw(st.sampled_from([None, -1, 3])),
        "topics": topics,
        "members": members,
    }
    if consumer:
        doc["group_type"] = "consumer"
    if draw(st.booleans()):
        doc["state"] = "Stable"
        doc["offsets"] = [{"topic": next(iter(topics)), "partition": 0, "committed": 5, "end": 9}]
    return doc


LAYOUTS = [
    {},
    {"separators": (",", ":")},
    {"indent": 1, "sort_keys": True},  # as `rebalance snapshot` writes files
    {"indent": "\t"},
    {"indent": 3, "separators": (" ,", " : ")},
]


@st.composite
def files(draw: st.DrawFn, groups: st.SearchStrategy[dict[str, Any]]) -> bytes:
    layout = draw(st.sampled_from(LAYOUTS))
    docs = draw(st.lists(groups, min_size=1, max_size=3))
    value: Any = docs if len(docs) > 1 or draw(st.booleans()) else docs[0]
    text = json.dumps(value, ensure_ascii=draw(st.booleans()), **layout)
    return (draw(st.sampled_from(["", " ", "\n"])) + text + draw(st.sampled_from(["", "\n", " \r\n"]))).encode()


@settings(max_examples=150, deadline=None)
@given(files(compact_groups()))
def test_compact_files_read_as_the_general_path_reads_them(data: bytes) -> None:
    agrees(data)


@settings(max_examples=150, deadline=None)
@given(files(snapshot_groups()))
def test_snapshot_files_read_as_the_general_path_reads_them(data: bytes) -> None:
    agrees(data)


@settings(max_examples=150, deadline=None)
@given(
    files(st.one_of(compact_groups(), snapshot_groups())),
    st.sampled_from([1, 2, 3]),
    st.lists(
        st.tuples(st.floats(0, 1), st.sampled_from(["insert", "delete"]), st.sampled_from(list(' ]",1'))), max_size=2
    ),
)
def test_pair_lists_read_the_same_a_few_at_a_time(data: bytes, batch: int, edits: list) -> None:
    # The members' pair lists are joined and stripped of whitespace a batch at a time: with batches of one to three
    # lists, every member's list and the whitespace checks fall across batches.
    text = data.decode()
    for where, how, what in edits:
        at = int(where * len(text))
        text = text[:at] + what + text[at:] if how == "insert" else text[:at] + text[at + 1 :]
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(plain_groups, "_LISTS_A_BATCH", batch)
        agrees(text.encode())


def test_most_random_files_take_the_plain_path() -> None:
    # The properties above would pass if the plain path declined everything: it must read the plain ones.
    read = 0
    for seed in range(60):
        rng = np.random.default_rng(seed)
        topics = {f"t{i}": int(rng.integers(1, 30)) for i in range(int(rng.integers(1, 6)))}
        members = [f"c{i:03d}" for i in range(int(rng.integers(1, 20)))]
        owner = {(t, p): members[int(rng.integers(len(members)))] for t, n in topics.items() for p in range(n)}
        owned = {m: [[t, p] for (t, p), o in owner.items() if o == m and rng.random() < 0.8] for m in members}
        if seed % 2:
            doc = {"topics": topics, "members": {m: {"topics": list(topics), "owned": owned[m]} for m in members}}
        else:
            listed = [{"member_id": m, "topics": list(topics), "owned": owned[m]} for m in members]
            doc = {"group_id": f"g{seed}", "generation": 2, "topics": topics, "members": listed}
        layout = LAYOUTS[seed % len(LAYOUTS)]
        read += agrees(json.dumps(doc, **layout).encode())
    assert read == 60


# --- damaged files ---------------------------------------------------------------------------------------------

SPLICE = st.sampled_from(list('[]{},:" \t\n-.e0129aZ_') + ["NaN", "true", "null", '"t0"', "\\", "\x7f", "é", "\x00"])


@settings(max_examples=400, deadline=None)
@given(
    files(st.one_of(compact_groups(), snapshot_groups())),
    st.lists(st.tuples(st.floats(0, 1), st.sampled_from(["insert", "delete", "replace"]), SPLICE), max_size=3),
)
def test_files_with_bytes_spliced_in(data: bytes, edits: list[tuple[float, str, str]]) -> None:
    text = data.decode()
    for where, how, what in edits:
        at = int(where * len(text))
        if how == "insert":
            text = text[:at] + what + text[at:]
        elif how == "delete":
            text = text[:at] + text[at + 1 :]
        else:
            text = text[:at] + what + text[at + 1 :]
    agrees(text.encode("utf-8", "surrogatepass"))


GOOD_COMPACT = {
    "topics": {"t0": 4, "t1": 2},
    "members": {
        "m0": {"topics": ["t0", "t1"], "owned": [["t0", 0], ["t0", 1], ["t1", 0]], "generation": 1},
        "m1": {"topics": ["t0", "t1"], "owned": [["t0", 2], ["t0", 3]], "generation": 1},
        "m2": {"topics": ["t0"]},
    },
}
GOOD_SNAPSHOT = {
    "group_id": "g",
    "generation": 3,
    "topics": {"t0": 4, "t1": 2},
    "members": [
        {"member_id": "m0", "topics": ["t0", "t1"], "owned": [["t0", 0], ["t1", 0]], "assignment": [["t0", 0]]},
        {"member_id": "m1", "topics": ["t0"], "owned": [], "assignment": [["t0", 1], ["t0", 3]]},
    ],
}
# Each replaces the text of m0's first owned pair (compact) or of the snapshot's first owned pair.
DAMAGED_PAIRS = [
    '["t0", 1 2]',  # whitespace inside a number
    '["t0", 01]',  # a leading zero
    '["t0", -1]',
    '["t0", 1.0]',
    '["t0", 1e0]',
    '["t 0", 1]',  # whitespace inside a name
    '[" t0", 1]',
    '["t0 ", 1]',
    '["", 1]',
    '["t0", 2147483648]',  # above int32
    '["t0", 99999999999]',
    '["t0", 123456789012345678901234567890123456]',
    '["t0"]',
    '["t0", 1, 2]',
    '[["t0", 1]]',
    '{"t0": 1}',
    '["t0", true]',
    '["t0", null]',
    '["t0", NaN]',
    '["t0", Infinity]',
    '[1, "t0"]',
    '["t0\x7f",1]',  # without whitespace (which takes another check): a name JSON allows, the rules refuse
    '["t\x010",1]',  # a control character JSON refuses in a string
    '["t,0",1]',
    '["t0\x00",1]',  # a NUL: JSON refuses it; zero-padded, it would read as the topic t0
    '["t0",1]|["t0",3]',  # the byte that joins members' lists, inside one
    '["t|0",1]',
    '["t0",1]x["t0",3]',  # no whitespace anywhere in the compact layout: no run count to catch a stray byte
    '["t0",1]:["t0",3]',
    '["t0",1]]["t0",3]',
    # (Pairs of partitions no member claims, t0-0 and t1-1, so that only their shape is wrong.)
    '["t0",07,["t1",1]',  # unbalanced: a pair left open, a digit where its `]` should be, then the next pair
    '["t0",0],x"t1",1]',  # a pair without its opening bracket
    'x["t0",0]',  # a byte before a member's first pair
    '["t:0",1]',
    '["t{0",1]',
    '["t0",1 ]',
    '["t0",01]',
    '["t0",-0]',
    '["t0",1/]',  # the bytes next to the digits, "/" and ":", at a number's second and eighth byte
    '["t0",1:]',
    '["t0",1234567/]',
    '["t0",1234567:]',
    '["t0",99999999]',  # eight digits (one word) and nine (digit by digit): out of range
    '["t0",123456789]',
    '["t0",1e2]',
    '["t0"1]',
    '[ "t0",1]',
    '["t0", 1],',  # a trailing comma
    '["t0", 1] ["t0", 2]',  # a missing comma
    '["t0",, 1]',
    '["t0" 1]',
    '["t0", "1"]',
    '["t0\\u0030", 1]',  # an escape
    '["t\u00e9", 1]',  # not ASCII
    '["t0\x7f", 1]',
    '["t0]", 1]',  # a bracket inside a name
    '["t0,", 1]',
    '["t0\\"", 1]',
    '["t0", 1]] , [["t0", 2]',  # brackets that close the list early
    '["t0", 0]',  # the pair m0 lists next: listed twice
    '["t0", 2]',  # m1's pair: owned by two members (compact: a repeat the rules check pair by pair)
    '["gone", 0]',  # a topic not in the group
    '["t1", 9]',  # out of range
    '["t1", 2]',
]


def _damage(doc: dict[str, Any], pair_text: str, layout: dict[str, Any]) -> bytes:
    """`doc` in `layout`, with the text of m0's first owned pair replaced by `pair_text`."""
    edited = json.loads(json.dumps(doc))
    owned = edited["members"]["m0"]["owned"] if "group_id" not in doc else edited["members"][0]["owned"]
    owned[0] = ["PAIR", 0]
    text = json.dumps(edited, **layout)
    start = text.index('"PAIR"')
    open_at = text.rindex("[", 0, start)
    close_at = text.index("]", start)
    return (text[:open_at] + pair_text + text[close_at + 1 :]).encode("utf-8", "surrogatepass")


@pytest.mark.parametrize("layout", LAYOUTS[:3], ids=["default", "compact", "indent"])
@pytest.mark.parametrize("form", ["compact", "snapshot"])
@pytest.mark.parametrize("pair_text", DAMAGED_PAIRS)
def test_a_damaged_pair_is_left_to_the_general_path(pair_text: str, form: str, layout: dict[str, Any]) -> None:
    doc = GOOD_COMPACT if form == "compact" else GOOD_SNAPSHOT
    data = _damage(doc, pair_text, layout)
    agrees(data)


RICH_COMPACT = GOOD_COMPACT | {
    "topic_ids": {"t0": "AAAAAAAAAAAAAAAAAAAAAQ", "t1": "AAAAAAAAAAAAAAAAAAAAAg"},
    "partition_racks": {"t0": [["r1", "r2"], ["r2"], [], ["r3", "r1"]], "t1": [["r1"]]},
    "loads": {"t0": [1.5, 2.0, 0.5]},
    "members": {
        m: spec | {"rack": ["r1", "r2", None][i], "weight": [1, 2.5, None][i], "group_instance_id": f"s{i}"}
        for i, (m, spec) in enumerate(GOOD_COMPACT["members"].items())
    },
}


@pytest.mark.parametrize("layout", LAYOUTS, ids=[str(i) for i in range(len(LAYOUTS))])
@pytest.mark.parametrize(
    "doc",
    [GOOD_COMPACT, RICH_COMPACT, GOOD_SNAPSHOT, [GOOD_SNAPSHOT, GOOD_SNAPSHOT | {"group_id": "h"}]],
    ids=["compact", "rich-compact", "snapshot", "snapshots"],
)
def test_good_files_take_the_plain_path(doc: Any, layout: dict[str, Any]) -> None:
    assert agrees(json.dumps(doc, **layout).encode())


@pytest.mark.parametrize(
    "edit",
    [
        lambda d: d["members"]["m0"].update(topics=["t0", "bad name!"]),  # an unknown name Kafka refuses
        lambda d: d["members"]["m0"].update(topics=["t0", ""]),
        lambda d: d["members"]["m0"].update(topics=["t0", 7]),
        lambda d: d["members"]["m0"].update(topics="t0"),
        lambda d: d["members"]["m0"].update(owned=None),
        lambda d: d["members"]["m0"].update(owned=[]),
        lambda d: d["members"]["m0"].update(generation=2**31),
        lambda d: d["members"]["m0"].pop("topics"),
        lambda d: d["members"].update(m3=[]),
        lambda d: d.pop("members"),
        lambda d: d.update(topics={"t0": 0}),
        lambda d: d.update(topics={"t0": 2_000_001}),
        lambda d: d.update(topic_ids={"t0": "x"}),
        lambda d: d["members"]["m1"].update(owned=[["t0", 2], ["t0", 2]]),
    ],
)
def test_damaged_compact_members(edit: Any) -> None:
    doc = json.loads(json.dumps(GOOD_COMPACT))
    edit(doc)
    for layout in LAYOUTS[:3]:
        agrees(json.dumps(doc, **layout).encode())


@pytest.mark.parametrize(
    "edit",
    [
        lambda d: d["members"][0].update(topics=["t0", "gone"]),  # a snapshot subscribes to topics it lists
        lambda d: d["members"][1].update(member_id="m0"),
        lambda d: d["members"][1].update(owned=[["t0", 0]]),  # owned by two members in one generation
        lambda d: d["members"][1].update(assignment=[["t0", 0]]),  # assigned to two members
        lambda d: d["members"][1].update(owned=[["t0", 0]], generation=1),  # two generations: Kafka's choice
        lambda d: d.update(group_type="consumer"),
        lambda d: d.update(group_type="consumer") or d["members"][1].update(target_assignment=[["t1", 1]]),
        lambda d: d.update(state="Empty"),
        lambda d: d.pop("group_id"),
        lambda d: d.update(members={}),
        lambda d: d.update(offsets=[{"topic": "t0", "partition": 0, "committed": 9, "end": 5}]),
        lambda d: d.update(captured_at="yesterday"),
    ],
)
def test_damaged_snapshots(edit: Any) -> None:
    doc = json.loads(json.dumps(GOOD_SNAPSHOT))
    edit(doc)
    for layout in LAYOUTS[:3]:
        agrees(json.dumps(doc, **layout).encode())


@pytest.mark.parametrize("layout", LAYOUTS[:3], ids=["default", "compact", "indent"])
def test_values_longer_than_the_walk_s_first_window(layout: dict[str, Any]) -> None:
    # The walk decodes a window around each value it skips and widens it while the value runs to its edge.
    width = plain_groups._SKIP_WINDOW
    topics = {f"topic-{i:05d}": 3 for i in range(width // 8)}
    doc = json.loads(json.dumps(GOOD_SNAPSHOT)) | {"topics": topics | GOOD_SNAPSHOT["topics"]}
    doc["members"][0]["client_id"] = "c" * (width + 3)
    doc["offsets"] = [{"topic": t, "partition": p, "committed": 1, "end": 2} for t in topics for p in range(3)]
    assert agrees(json.dumps(doc, **layout).encode())
    doc["members"][0]["client_id"] = "c" * (width - 20) + "\x7f"  # refused by the rules, past the first window
    agrees(json.dumps(doc, **layout).encode())
    doc["members"][0]["client_id"] = 10 ** (width // 2)  # a number the window cuts: not JSON the reader takes
    agrees(json.dumps(doc, **layout).encode())


def test_names_are_matched_to_topics_exactly() -> None:
    # Thousands of topics of every length up to 30 (several words; hash slots shared), pairs naming them, names
    # one byte longer or shorter, and names of no topic: against a dictionary.
    rng = np.random.default_rng(7)
    alphabet = np.frombuffer(b"abcdefghijklmnopqrstuvwxyz0123456789._-", dtype=np.uint8)
    topics = sorted({bytes(rng.choice(alphabet, int(rng.integers(1, 31)))).decode() for _ in range(3000)})
    pool = topics + [t + "x" for t in topics[:50]] + [t[:-1] for t in topics[:50] if len(t) > 1] + ["nope"]
    names = [pool[i] for i in rng.integers(0, len(pool), 20_000)]
    text = b"".join(b'"' + n.encode() + b'",' for n in names)
    raw = np.frombuffer(text, dtype=np.uint8)
    lengths = np.asarray([len(n) for n in names])
    starts = np.concatenate([[1], np.cumsum(lengths + 3)[:-1] + 1])
    index = {t: i for i, t in enumerate(topics)}
    expected = [index.get(n, -1) for n in names]
    assert plain_groups._name_ids(raw, starts, lengths, topics).tolist() == expected


@pytest.mark.parametrize(
    "doc",
    [
        {"topics": {}, "members": {}},
        {"topics": {}, "members": {"m": {"topics": ["gone"], "owned": [["gone", 0], ["old", 3]]}}},
        {"topics": {"t0": 2}, "members": {"m": {"topics": ["t0"], "owned": [["gone", 0], ["t0", 5]]}}},
        {"group_id": "g", "topics": {}, "members": []},
    ],
)
def test_groups_without_a_claim_on_their_partitions(doc: dict[str, Any]) -> None:
    assert agrees(json.dumps(doc).encode())


def test_json_lines_and_hostile_wholes_are_left_to_the_general_path() -> None:
    line = json.dumps(GOOD_SNAPSHOT)
    for data in (
        f"{line}\n{line}\n".encode(),
        b"",
        b"  ",
        b"[]",
        b"[1]",
        b'"x"',
        b"[" * 100 + b"]" * 100,
        b'{"topics": {"t0": 1}, "members": {"m": {"topics": ["t0"], "owned": ' + b"[" * 70 + b"]" * 70 + b"}}}",
        b'{"topics": {"t0": 1}}  {"topics": {}}',
        b"\xef\xbb\xbf" + line.encode(),
        line.encode() + b"\x00",
    ):
        agrees(data)


# --- the command, with and without the plain path -------------------------------------------------------------


def _run(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = main(argv)
    text = re.sub(r'"elapsed_ms":\s*[0-9.e+-]+', '"elapsed_ms":0', out.getvalue())
    return code, text, err.getvalue()


CLI_CASES = [
    json.dumps(GOOD_COMPACT),
    json.dumps(GOOD_SNAPSHOT, indent=1),
    json.dumps([GOOD_SNAPSHOT, GOOD_SNAPSHOT | {"group_id": "h"}]),
    _damage(GOOD_COMPACT, '["t0", 01]', {}).decode(),
    _damage(GOOD_SNAPSHOT, '["t1", 9]', {"indent": 1}).decode(),
    _damage(GOOD_SNAPSHOT, '["t0", 2147483648]', {}).decode(),
    json.dumps({"topics": {"t0": 0}, "members": {}}),
    json.dumps([GOOD_SNAPSHOT, {"group_id": "h", "topics": {"t0": -1}, "members": []}]),
]


@pytest.mark.parametrize("strategy", ["sticky", "cooperative-sticky", "range"])
@pytest.mark.parametrize("compact", [False, True])
@pytest.mark.parametrize("case", range(len(CLI_CASES)))
def test_the_command_prints_the_same_with_and_without_the_plain_path(case, compact, strategy, tmp_path, monkeypatch):
    path = tmp_path / "group.json"
    path.write_text(CLI_CASES[case])
    argv = ["assign", "--strategy", strategy, *(["--compact"] if compact else []), str(path)]
    with_plain = _run(argv)
    monkeypatch.setattr(plain_groups, "read_plain_groups", lambda *_: None)
    assert _run(argv) == with_plain


def test_a_bad_limit_variable_is_named_as_before(tmp_path, monkeypatch) -> None:
    path = tmp_path / "group.json"
    path.write_text(json.dumps(GOOD_COMPACT))
    monkeypatch.setenv("REBALANCE_MAX_MEMBERS", "many")
    code, out, err = _run(["assign", str(path)])
    assert (code, out) == (2, "")
    assert err == "rebalance assign: error: REBALANCE_MAX_MEMBERS: must be a positive integer, got 'many'\n"


def test_limits_are_the_general_path_s_to_name(tmp_path, monkeypatch) -> None:
    path = tmp_path / "group.json"
    path.write_text(json.dumps(GOOD_COMPACT))
    monkeypatch.setenv("REBALANCE_MAX_MEMBERS", "2")
    assert read_plain_groups(path.read_bytes(), str(path), Limits.from_env()) is None
    code, _, err = _run(["assign", str(path)])
    assert code == 2 and "members: 3 members is over the limit of 2" in err


def test_assign_loads_neither_pyarrow_nor_jsonschema(tmp_path) -> None:
    # Start-up: `rebalance assign` of a valid file needs neither (0.15-0.25 s and 0.1 s to import).
    path = tmp_path / "group.json"
    path.write_text(json.dumps(GOOD_SNAPSHOT))
    code = (
        "import sys\nfrom jobs.cli import main\n"
        f"assert main(['assign', {str(path)!r}]) == 0\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('pyarrow', 'jsonschema')))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.splitlines()[-1] == "[]"


def test_an_error_in_the_walk_is_never_an_exception() -> None:
    # Whatever the walk meets, it declines: nothing but None or GroupSpecs comes out.
    for data in (b"{", b'{"members": {"m": {"topics": [', b'{"members": [{"owned": [["t0", 1]', b'{"a": 1,}'):
        assert read_plain_groups(data, "x", LIMITS) is None
        with pytest.raises(InputError):
            read_json_documents(data, "x")
