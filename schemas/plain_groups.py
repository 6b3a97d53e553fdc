"""Plain group files read, checked and parsed in bulk: the fast path of `rebalance assign` on large groups.

A group of a million partitions carries a million `[topic, partition]` pairs in its members' `owned` (or
`assignment`) lists and as many topic names in their subscriptions. Read the general way, each pair becomes Python
objects that the reader, the JSON Schema, the rules and `parse_group` then walk one by one (about 8 s of CPU for
Kafka's largest sticky test). Here those lists are never made into objects:

1. A structural walk finds, in each member, the byte span of `topics`, `owned`, `assignment` and
   `target_assignment` (the group's keys, its members and their keys are walked; every other value is skipped with
   the standard JSON decoder).
2. The *skeleton* (the input with each of those spans replaced by `[]`) goes through the unchanged reader
   (`schemas.reader`) and rule set (`schemas.rules.check_group`): every field but the lists is judged exactly as
   the general path judges it.
3. The lists are judged in bulk, against exactly what the schema and rules require of them: the pair lists of all
   members as one byte string, whitespace removed, every byte checked in its place with NumPy (punctuation by
   position, partition numbers digit by digit, names matched to the group's topics by their bytes); subscription
   lists once per distinct list.
4. The GroupSpec is `parse_group`'s of the skeleton, with the subscriptions and claims the lists give.

Declining is always safe: `read_plain_groups` returns None unless the input is plain (ASCII, no backslash escapes,
lists in the shape the reader would accept without a remark, no rule the lists could break broken) and the general
path then reads it as before. So an input is refused, and named, only by the general path; what this one accepts,
the general path accepts too, with an equal GroupSpec (tests/unit/test_plain_groups.py checks both on random,
reformatted and damaged inputs).
"""

from __future__ import annotations

import dataclasses
import io
import json
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from planner.errors import InputError
from planner.gc_pause import gc_paused
from planner.group import GroupSpec, frozen, java_key, parse_group
from planner.group import from_snapshot as compact_of_snapshot
from planner.group import is_snapshot as members_listed
from schemas.reader import _read_whole, json_lines_of
from schemas.rules import INT32_MAX, Limits, _bad_text, _topic_name_error, check_group, is_snapshot

LISTS = ("topics", "owned", "assignment", "target_assignment")  # the member fields read in bulk
CLAIMS = ("owned", "assignment", "target_assignment")
MAX_DIGITS = 10  # INT32_MAX has 10 digits; a longer partition number is left to the general path

_WS = re.compile(rb"[ \t\n\r]*")  # JSON's insignificant whitespace
_SKIP_WINDOW = 4096  # bytes decoded at first around a value the walk skips
# In an object: a key (a JSON string without escapes, as the input has no backslash, and without the control
# characters JSON refuses in strings) and its colon, or the closing brace; after a value, a comma first.
_KEY = rb'"([^"\x00-\x1f]*)"[ \t\n\r]*:[ \t\n\r]*'
_FIRST_KEY = re.compile(rb"[ \t\n\r]*(?:" + _KEY + rb"|(\}))")
_NEXT_KEY = re.compile(rb"[ \t\n\r]*(?:,[ \t\n\r]*" + _KEY + rb"|(\}))")
_FIRST_ITEM = re.compile(rb"[ \t\n\r]*(\])?")  # in an array: the closing bracket, or where the first item starts
_NEXT_ITEM = re.compile(rb"[ \t\n\r]*(?:,[ \t\n\r]*|(\]))")
_IS_WS = np.zeros(256, dtype=bool)
_IS_WS[[ord(c) for c in " \t\n\r"]] = True
_WS_STEPS = 16  # whitespace bytes stepped over with NumPy after a `]`; longer runs are walked one by one
_LISTS_A_BATCH = 64  # members' pair lists taken at a time (1-2 MB of a snapshot file for 500 pairs a member)
_WS_BYTES = b" \t\n\r"
# Kafka's topic-name characters (Topic.validate): a pair naming a topic outside the group with anything else is left
# to the general path (the group's own topic names are checked by the rules).
_NAME_BYTES = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-"
_RUN_CLASS = bytes(0 if c in _NAME_BYTES + b'"' else 1 for c in range(256))  # a name's or a number's bytes -> 0


class _NotPlain(Exception):
    """Raised inside this module when the input is not plain; `read_plain_groups` then returns None."""


@dataclasses.dataclass
class _Lists:
    """One group's member lists as found: members in document order (key, or index in a `members` array), and per
    field the (start, end) byte span of each member's list, None where the member has no such list."""

    refs: list[str | int] = dataclasses.field(default_factory=list)
    spans: dict[str, list[tuple[int, int] | None]] = dataclasses.field(
        default_factory=lambda: {field: [] for field in LISTS}
    )

    def add(self, ref: str | int) -> int:
        self.refs.append(ref)
        for spans in self.spans.values():
            spans.append(None)
        return len(self.refs) - 1


def read_plain_groups(data: bytes, source: str, limits: Limits) -> list[tuple[GroupSpec, Any]] | None:
    """(GroupSpec, group_id) of each group of `data`, a plain file of one group or an array of them, when the reader
    and every rule accept it; None when the general path must read it (and say what is wrong, if anything is)."""
    if not data.isascii() or b"\\" in data:
        return None  # non-ASCII text and escapes: the reader's checks of UTF-8 and of surrogates are needed
    if json_lines_of(io.BytesIO(data), source) is not None:
        return None  # JSON lines: read a line at a time by the general path
    with gc_paused():
        try:
            return _read(data, source, limits)
        except _NotPlain:
            return None


def _read(data: bytes, source: str, limits: Limits) -> list[tuple[GroupSpec, Any]]:
    walk = _Walk(data)
    groups = walk.document()
    try:
        documents = _read_whole(walk.skeleton(), source)
    except InputError:
        raise _NotPlain from None
    if len(documents) != len(groups) or any(d.error is not None for d in documents):
        raise _NotPlain
    docs = [d.doc for d in documents]
    for doc in docs:
        try:
            check_group(doc, limits)
        except InputError:
            raise _NotPlain from None
    out = []
    for doc, lists in zip(docs, groups, strict=True):
        if lists is None:
            raise _NotPlain
        out.append((_group_spec(doc, lists, data), doc.get("group_id")))
    return out


# --- 1. the structural walk ------------------------------------------------------------------------------------


class _Walk:
    """Walks the group objects of one input (an object, or an array of them) down to their members' fields, noting
    the spans of the lists read in bulk; anything else is skipped with the standard decoder. On the bytes: only the
    values skipped are decoded to text (a window around each), never the lists."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.skipper = json.JSONDecoder()
        self.blanks: list[tuple[int, int]] = []  # spans replaced by [] in the skeleton, in input order
        self.ends: tuple[np.ndarray, np.ndarray] | None = None  # (`]`, the `]` after it) of every `]` ws* `]`

    def document(self) -> list[_Lists | None]:
        """The lists of each group, None for an array element that is not an object."""
        pos = _WS.match(self.data).end()  # type: ignore[union-attr]  # (the pattern matches the empty string)
        if self.data.startswith(b"{", pos):
            lists = _Lists()
            self.object(pos, lambda key, at: self.group_field(lists, key, at))
            return [lists]
        if not self.data.startswith(b"[", pos):
            raise _NotPlain
        groups: list[_Lists | None] = []

        def element(_index: int, at: int) -> int:
            if not self.data.startswith(b"{", at):
                groups.append(None)
                return self.skip(at)
            lists = _Lists()
            groups.append(lists)
            return self.object(at, lambda key, p: self.group_field(lists, key, p))

        self.array(pos, element)
        return groups

    def skeleton(self) -> bytes:
        pieces, last = [], 0
        for start, end in self.blanks:
            pieces += [self.data[last:start], b"[]"]
            last = end
        pieces.append(self.data[last:])
        return b"".join(pieces)

    def group_field(self, lists: _Lists, key: str, at: int) -> int:
        if key == "members" and self.data.startswith(b"{", at):
            return self.object(at, lambda member, p: self.member(lists, member, p))
        if key == "members" and self.data.startswith(b"[", at):
            return self.array(at, lambda index, p: self.member(lists, index, p))
        return self.skip(at)

    def member(self, lists: _Lists, ref: str | int, at: int) -> int:
        if not self.data.startswith(b"{", at):
            return self.skip(at)
        slot = lists.add(ref)
        spans, blanks, data = lists.spans, self.blanks, self.data

        def field(key: str, p: int) -> int:
            if key not in LISTS or not data.startswith(b"[", p):
                return self.skip(p)
            end, empty = self.list_end(key, p)
            spans[key][slot] = None if empty else (p, end)  # an empty list of pairs: nothing to read
            blanks.append((p, end))
            return end

        return self.object(at, field)

    def list_end(self, key: str, at: int) -> tuple[int, bool]:
        """Where the list at `at` ends if it is plain (names hold no bracket; the bulk checks confirm it), and
        whether it is an empty list of pairs."""
        if key == "topics":
            end = self.data.find(b"]", at)
            return (end + 1, False) if end >= 0 else self.refuse()
        inside = _WS.match(self.data, at + 1).end()  # type: ignore[union-attr]
        if self.data.startswith(b"]", inside):
            return inside + 1, True
        if self.ends is None:  # the first `]` followed, past whitespace, by another: the end of a list of pairs
            self.ends = self.double_closes()
        first, second = self.ends
        found = int(np.searchsorted(first, at))
        return (int(second[found]) + 1, False) if found < len(first) else self.refuse()

    @staticmethod
    def refuse() -> Any:
        raise _NotPlain

    def double_closes(self) -> tuple[np.ndarray, np.ndarray]:
        """Every `]` whose next character but whitespace is `]`, and that second `]`, for the whole input at once (a
        regular-expression search per list tries a match at each of its pairs). Only a `]` followed by `]` or by
        whitespace can be one: in any layout, about one a list."""
        raw = np.frombuffer(self.data, dtype=np.uint8)
        first = np.flatnonzero(raw[:-1] == ord("]"))
        after = raw[first + 1]
        first = first[(after == ord("]")) | _IS_WS[after]]
        second = first + 1
        pending = np.flatnonzero(_IS_WS[raw[second]])
        for _ in range(_WS_STEPS):  # step over the whitespace after each `]`, a byte at a time
            if not len(pending):
                break
            second[pending] += 1
            at = second[pending]
            pending = pending[(at < len(raw)) & _IS_WS[raw[np.minimum(at, len(raw) - 1)]]]
        for i in pending.tolist():  # longer runs of whitespace, if any
            second[i] = self.ws(int(second[i]))
        found = second < len(raw)
        found[found] = raw[second[found]] == ord("]")
        return first[found], second[found]

    def object(self, pos: int, value: Callable[[str, int], int]) -> int:
        """Walk the object at `pos`: `value(key, position of its value)` returns where the value ends."""
        match = _FIRST_KEY.match(self.data, pos + 1)
        while match is not None and match[2] is None:
            match = _NEXT_KEY.match(self.data, value(match[1].decode("ascii"), match.end()))
        if match is None:
            raise _NotPlain
        return match.end()

    def array(self, pos: int, item: Callable[[int, int], int]) -> int:
        match = _FIRST_ITEM.match(self.data, pos + 1)
        index = 0
        while match is not None and match[1] is None:
            match = _NEXT_ITEM.match(self.data, item(index, match.end()))
            index += 1
        if match is None:
            raise _NotPlain
        return match.end()

    def skip(self, pos: int) -> int:
        """The end of the JSON value at `pos`, decoding as little of the input as it takes: a window from `pos`,
        widened while the value runs to its edge (a number cut short would end there too)."""
        size = _SKIP_WINDOW
        while True:
            window = self.data[pos : pos + size].decode("ascii")
            whole = pos + size >= len(self.data)
            try:
                end = self.skipper.raw_decode(window)[1]
            except RecursionError:
                raise _NotPlain from None
            except ValueError:
                if whole:
                    raise _NotPlain from None
            else:
                if end < len(window) or whole:
                    return pos + end
            size *= 16

    def ws(self, pos: int) -> int:
        return _WS.match(self.data, pos).end()  # type: ignore[union-attr]


# --- 3. the lists, in bulk -------------------------------------------------------------------------------------


def _subscription(raw: bytes, topic_id: Mapping[str, int], snapshot: bool) -> tuple[np.ndarray, tuple[str, ...]]:
    """One distinct `topics` list: the sorted ids of its known topics and its unknown names, as parse_group gives
    them, when the schema and rules accept it (strings of at least one character; in a snapshot only topics of
    the group; in the compact form unknown names that pass Kafka's topic-name rule, free of control characters: a
    known name is a key of `topics`, which the rules check in the skeleton)."""
    try:
        names = json.loads(raw)
    except ValueError:
        raise _NotPlain from None
    if not isinstance(names, list) or not all(isinstance(n, str) and n for n in names):
        raise _NotPlain
    unknown = {n for n in names if n not in topic_id}
    if unknown and (snapshot or any(_topic_name_error(n) or _bad_text(n) for n in unknown)):
        raise _NotPlain
    ids = frozen(np.asarray(sorted({topic_id[n] for n in names if n in topic_id}), dtype=np.int32))
    return ids, tuple(sorted(unknown, key=java_key))


@dataclasses.dataclass(frozen=True)
class _Pairs:
    """Every pair of one field over all members, in document order: `counts[slot]` pairs per member slot."""

    counts: np.ndarray  # int64[slots]
    topic: np.ndarray  # int64: topic id, -1 for a name that is not a topic of the group
    partition: np.ndarray  # int64
    name: Callable[[int], bytes]  # the name of pair i (for the few pairs naming no topic of the group)


def _pairs(data: bytes, spans: Sequence[tuple[int, int] | None], topics: Sequence[str]) -> _Pairs:
    """Read every `[topic, partition]` list of one field at once, when each is one the reader and the schema accept
    without a remark: pairs of a topic name of Kafka's characters and a partition of at most 10 digits, JSON's
    whitespace anywhere outside names and numbers. NumPy passes over the bytes; no object per pair."""
    counts = np.zeros(len(spans), dtype=np.int64)
    view = memoryview(data)
    listed = [(slot, span) for slot, span in enumerate(spans) if span is not None]
    if not listed:
        return _Pairs(counts, np.empty(0, np.int64), np.empty(0, np.int64), lambda i: b"")
    # All members' pairs as one list, `["a",0],["b",1]|["c",2],...`: the lists without their brackets, joined by
    # `|` (which no plain list holds) to tell, once the whitespace is gone, where each member's pairs end. Made a
    # batch of lists at a time (the whitespace of a snapshot file's layout is most of its bytes: a few MB of
    # temporaries reused instead of tens of MB mapped afresh).
    pieces: list[bytes] = []
    for first in range(0, len(listed), _LISTS_A_BATCH):
        spaced = b"|".join([view[start + 1 : end - 1] for _, (start, end) in listed[first : first + _LISTS_A_BATCH]])
        pieces.append(spaced.translate(None, _WS_BYTES))
        # JSON's whitespace may stand between tokens only. A name (with its quotes) and a number are each one run
        # of name characters, two runs a pair as two quotes; whitespace inside either splits it in two.
        if len(pieces[-1]) != len(spaced) and _runs(spaced) != pieces[-1].count(b'"'):
            raise _NotPlain
    plain = b"|".join(pieces)
    raw = np.frombuffer(plain, dtype=np.uint8)
    quotes = np.flatnonzero(raw == ord('"'))
    n = len(quotes) // 2
    if n == 0 or len(quotes) % 2:
        raise _NotPlain
    bars = _bars(plain, len(listed) - 1)
    per_list = np.diff(np.searchsorted(quotes, [0, *bars, len(plain)]))
    if (per_list % 2).any():
        raise _NotPlain  # a list with an odd number of quotes: a name holding the `|` joining it to the next
    counts[[slot for slot, _ in listed]] = per_list // 2
    # Every byte in its place: `[` before each opening quote (the first at byte 1), `,` after each closing one,
    # `],[` (or `]|[` between members) before the next pair's opening quote, `]` last; in between, a name (of a
    # topic of the group, or checked below) and a number (checked in `_numbers`).
    opening, closing = quotes[0::2], quotes[1::2]
    joint = raw[opening[1:] - 2]
    if (
        opening[0] != 1
        or plain[-1:] != b"]"
        or bool((raw[opening - 1] != ord("[")).any())
        or bool((raw[closing + 1] != ord(",")).any())
        or bool(((joint != ord(",")) & (joint != ord("|"))).any())
        or bool((raw[opening[1:] - 3] != ord("]")).any())
    ):
        raise _NotPlain
    ends = np.append(opening[1:] - 3, len(plain) - 1)  # each pair's `]`
    partition = _numbers(raw, closing + 2, ends - closing - 2)
    lengths = closing - opening - 1
    if not lengths.all():
        raise _NotPlain  # an empty name
    topic = _name_ids(raw, opening + 1, lengths, topics)

    def name(i: int) -> bytes:
        return plain[opening[i] + 1 : closing[i]]

    # A name equal to a topic of the group has its characters (the rules check topic names); any other, here.
    unknown = np.flatnonzero(topic < 0).tolist()
    if unknown and b"".join(name(i) for i in unknown).translate(None, _NAME_BYTES):
        raise _NotPlain
    return _Pairs(counts, topic, partition, name)


def _bars(plain: bytes, count: int) -> list[int]:
    """The positions of the `count` bytes `|` in `plain`; it must hold no other."""
    found, at = [], -1
    for _ in range(count):
        at = plain.find(b"|", at + 1)
        if at < 0:
            raise _NotPlain
        found.append(at)
    if plain.find(b"|", at + 1) >= 0:
        raise _NotPlain
    return found


def _runs(spaced: bytes) -> int:
    """How many runs of name characters and quotes `spaced` holds (it ends with `]`, so every run ends in it)."""
    kind = np.frombuffer(spaced.translate(_RUN_CLASS), dtype=np.uint8)
    return int(np.count_nonzero(kind[1:] > kind[:-1]))


def _numbers(raw: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """The numbers at raw[starts[i] : starts[i] + lengths[i]] (starts ascending): each 1 to 10 digits, no leading
    zero, within int32. Up to 8 digits, each number is one word: its digits checked and summed eight at a time."""
    shortest, longest = int(lengths.min()), int(lengths.max())
    if shortest < 1 or longest > MAX_DIGITS:
        raise _NotPlain
    value = _eight_digits(raw, starts, lengths) if longest <= 8 else _digit_by_digit(raw, starts, lengths)
    if longest > 1 and bool(((raw[starts] == ord("0")) & (lengths > 1)).any()):
        raise _NotPlain  # 01 is not JSON
    if int(value.max()) > INT32_MAX:
        raise _NotPlain  # a partition above int32 is the rules' to name
    return value


def _eight_digits(raw: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Numbers of 1 to 8 digits from their little-endian words (the first digit in the low byte): every byte a
    digit (a SWAR range check), then right-aligned as eight digits and summed in three multiplications, the
    parse_eight_digits_unrolled of simdjson (Lemire, "Parsing Gigabytes of JSON per Second", 2019)."""
    low = _LOW_BYTES[lengths]
    word = (_words(raw, starts, "<u8") & low) | (_ZEROS & ~low)  # the bytes past a number read as "0"
    if bool((((word + _PAST_NINE) | (word - _ZEROS)) & _HIGH_BITS).any()):
        raise _NotPlain  # a byte below "0" borrows, one above "9" carries: either sets its high bit
    v: np.ndarray = (word - _ZEROS) << (np.uint64(8) * (np.uint64(8) - lengths.astype(np.uint64)))
    v = v * np.uint64(10) + (v >> np.uint64(8))  # each even byte: two digits
    v = (v & _PAIRS) * np.uint64(100 + (1000000 << 32)) + ((v >> np.uint64(16)) & _PAIRS) * np.uint64(1 + (10000 << 32))
    return (v >> np.uint64(32)).astype(np.int64)


def _digit_by_digit(raw: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Numbers of up to 10 digits, a digit of every number at a time."""
    shortest, longest = int(lengths.min()), int(lengths.max())
    value = np.zeros(len(starts), dtype=np.int64)
    for k in range(longest):
        if k < shortest:  # every number has this digit
            digit = raw[starts + k] - np.uint8(ord("0"))  # a byte below "0" wraps around to above 9
            value *= 10
            value += digit
        else:
            rows = np.flatnonzero(lengths > k)
            digit = raw[starts[rows] + k] - np.uint8(ord("0"))
            value[rows] = value[rows] * 10 + digit
        if int(digit.max(initial=0)) > 9:
            raise _NotPlain
    return value


def _words(raw: np.ndarray, starts: np.ndarray, dtype: str) -> np.ndarray:
    """The 8 bytes from each of the ascending `starts` as a uint64 of `dtype`'s byte order, bytes past the end of
    `raw` read as zeros: one gather through a view of `raw` as unaligned words, one a byte (no copy, no row a start)."""
    words = np.empty(len(starts), dtype=np.uint64)
    inside = max(len(raw) - 7, 0)  # a word from here on runs past the end
    head = int(np.searchsorted(starts, inside))
    if head:
        view = np.lib.stride_tricks.as_strided(raw[:8].view(dtype), shape=(inside,), strides=(1,), writeable=False)
        words[:head] = view[starts[:head]]
    if head < len(starts):
        tail = np.zeros(16, dtype=np.uint8)
        tail[: len(raw) - inside] = raw[inside:]
        view = np.lib.stride_tricks.as_strided(tail[:8].view(dtype), shape=(9,), strides=(1,), writeable=False)
        words[head:] = view[np.minimum(starts[head:] - inside, 8)]  # from the end on: zeros
    return words


def _name_ids(raw: np.ndarray, starts: np.ndarray, lengths: np.ndarray, topics: Sequence[str]) -> np.ndarray:
    """The topic id of each name raw[starts[i] : starts[i] + lengths[i]] (starts ascending), -1 for none. Names and
    topics are compared as their length and their bytes in big-endian words of eight, zero-padded: each word read
    for all names at once, its bytes past the name's end masked off."""
    longest = int(lengths.max())
    words = (longest + 7) // 8
    known = [t.encode("ascii") for t in topics]
    candidates = np.asarray([i for i, t in enumerate(known) if len(t) <= longest], dtype=np.int64)
    if not len(candidates):
        return np.full(len(starts), -1, dtype=np.int64)
    table = np.zeros((len(candidates), words * 8), dtype=np.uint8)
    for r, i in enumerate(candidates.tolist()):
        table[r, : len(known[i])] = np.frombuffer(known[i], dtype=np.uint8)
    table_words = table.view(">u8").astype(np.uint64)  # [candidates, words]
    table_lengths = np.asarray([len(known[i]) for i in candidates.tolist()], dtype=np.int64)
    packed = []
    for w in range(words):
        word = _words(raw, starts + 8 * w, ">u8")
        word &= _KEEP_BYTES[np.clip(lengths - 8 * w, 0, 8)]
        packed.append(word)
    # Look up by the first word mixed with the rest, then compare the length and every word of the row found.
    key, table_key = packed[0].copy(), table_words[:, 0].copy()
    for w in range(1, words):
        key ^= packed[w] * np.uint64(0x9E3779B97F4A7C15 + 2 * w)
        table_key ^= table_words[:, w] * np.uint64(0x9E3779B97F4A7C15 + 2 * w)
    row = _rows_of(table_key, key)
    at = np.maximum(row, 0)
    found = (row >= 0) & (table_lengths[at] == lengths)
    for w in range(words):
        found &= table_words[at, w] == packed[w]
    return np.where(found, candidates[at], -1)


def _rows_of(table_key: np.ndarray, key: np.ndarray) -> np.ndarray:
    """The row of `table_key` equal to each key, -1 for none. A direct-mapped table of 8 slots a row: a slot one row
    hashes to answers at once; keys in a slot several share are looked up by binary search."""
    if len(set(table_key.tolist())) != len(table_key):
        raise _NotPlain  # two topics' words mix to one key (never seen: 64-bit): not worth telling apart here
    bits = max(4, (8 * len(table_key) - 1).bit_length())
    shift = np.uint64(64 - bits)
    home = ((table_key * _MIX) >> shift).astype(np.intp)
    slots = np.full(1 << bits, -1, dtype=np.int64)
    shared = np.bincount(home, minlength=1 << bits)[home] > 1
    slots[home[~shared]] = np.flatnonzero(~shared)
    slots[home[shared]] = -2
    row = slots[((key * _MIX) >> shift).astype(np.intp)]
    if (ambiguous := np.flatnonzero(row == -2)).size:
        order = np.argsort(table_key, kind="stable")
        at = np.minimum(np.searchsorted(table_key[order], key[ambiguous]), len(order) - 1)
        row[ambiguous] = order[at]  # the row whose key is next; compared word by word by the caller
    return row


_MIX = np.uint64(0x9E3779B97F4A7C15)  # Fibonacci hashing: the high bits of key * 2^64 / golden ratio


# The big-endian word of a name's first n bytes keeps its n high bytes: _KEEP_BYTES[n] masks the others off.
_KEEP_BYTES = np.asarray([(2**64 - 1) ^ (2 ** (64 - 8 * n) - 1) for n in range(9)], dtype=np.uint64)
# The little-endian word of a number's first n bytes keeps its n low bytes: _LOW_BYTES[n] masks the others off.
_LOW_BYTES = np.asarray([2 ** (8 * n) - 1 for n in range(9)], dtype=np.uint64)
_ZEROS, _PAST_NINE, _HIGH_BITS = (np.uint64(int.from_bytes(bytes([b]) * 8, "little")) for b in (0x30, 0x46, 0x80))
_PAIRS = np.uint64(0x000000FF000000FF)  # the two-digit sums at bytes 0 and 4


def _plain_claims(
    pairs: _Pairs, counts_of_topic: np.ndarray, topic_start: np.ndarray, snapshot: bool
) -> tuple[np.ndarray, np.ndarray]:
    """(bool per pair: it names a partition of the group, the claims parse_group keeps; each pair's partition id,
    meaningless where it names none), once the field is known to break no rule: no pair twice over all members (the
    rules' vectorized check; the general path decides what a repeat means), in a snapshot every pair a partition of
    the group."""
    known = pairs.topic >= 0
    if not known.any():  # (also when the group has no topic)
        exists, ids = known, np.zeros(len(known), dtype=np.int64)
    else:
        topic = pairs.topic if known.all() else np.where(known, pairs.topic, 0)
        exists = known & (pairs.partition < counts_of_topic[topic])
        ids = topic_start[topic] + pairs.partition
    every = bool(exists.all())
    if snapshot and not every:
        raise _NotPlain
    claimed = ids if every else ids[exists]
    if len(claimed) and int(np.bincount(claimed).max()) > 1:
        raise _NotPlain
    others = [] if every else np.flatnonzero(~exists).tolist()
    if len({(pairs.name(i), int(pairs.partition[i])) for i in others}) != len(others):
        raise _NotPlain
    return exists, ids


# --- 4. the GroupSpec ------------------------------------------------------------------------------------------


def _group_spec(doc: Mapping[str, Any], lists: _Lists, data: bytes) -> GroupSpec:
    """parse_group's GroupSpec of the whole group: the skeleton's, with the subscriptions and claims of the lists."""
    try:
        spec = parse_group(compact_of_snapshot(doc) if members_listed(doc) else doc)
    except ValueError:
        raise _NotPlain from None
    snapshot = is_snapshot(doc)
    member_of = {m: i for i, m in enumerate(spec.members)}
    listed = doc.get("members") or {}
    names = [str(listed[ref]["member_id"] if snapshot else ref) for ref in lists.refs]  # ids: strings, by the schema
    slot_member = [member_of.get(name, -1) for name in names]
    if sorted(slot_member) != list(range(len(spec.members))):
        raise _NotPlain  # the walk and the reader saw different members: never for a file both accept

    topic_id = {t: i for i, t in enumerate(spec.topics)}
    subscriptions: list[np.ndarray] = [np.empty(0, np.int32)] * len(spec.members)
    unknown: list[tuple[str, ...]] = [()] * len(spec.members)
    seen: dict[bytes, tuple[np.ndarray, tuple[str, ...]]] = {}
    last = b""
    parsed: tuple[np.ndarray, tuple[str, ...]] = (np.empty(0, np.int32), ())
    for slot, span in enumerate(lists.spans["topics"]):
        if span is None:
            raise _NotPlain  # the schema requires the list; a member without it never gets here
        raw = data[span[0] : span[1]]
        if raw != last:  # members mostly list what the one before listed: compared before it is hashed
            if raw not in seen:
                seen[raw] = _subscription(raw, topic_id, snapshot)
            last, parsed = raw, seen[raw]
        subscriptions[slot_member[slot]], unknown[slot_member[slot]] = parsed

    counts_of_topic = np.diff(spec.topic_start)
    fields = {field: _pairs(data, lists.spans[field], spec.topics) for field in CLAIMS}
    kept = {field: _plain_claims(fields[field], counts_of_topic, spec.topic_start, snapshot) for field in CLAIMS}
    claim_member, claim_partition = _claims(doc, lists, fields, kept, slot_member, spec, snapshot)
    return dataclasses.replace(
        spec,
        subscriptions=tuple(subscriptions),
        unknown_topics=tuple(unknown),
        claim_member=frozen(claim_member),
        claim_partition=frozen(claim_partition),
    )


def _claims(
    doc: Mapping[str, Any],
    lists: _Lists,
    fields: Mapping[str, _Pairs],
    kept: Mapping[str, tuple[np.ndarray, np.ndarray]],
    slot_member: list[int],
    spec: GroupSpec,
    snapshot: bool,
) -> tuple[np.ndarray, np.ndarray]:
    """The ownership claims parse_group reads (a compact member's `owned`; a snapshot member's list as from_snapshot
    chooses it), as (member, partition id) sorted by member, then partition."""
    slots = len(lists.refs)
    source = np.full(slots, -1, dtype=np.int64)  # which of CLAIMS each member slot's claims come from
    if not snapshot:
        source[:] = CLAIMS.index("owned")
    else:
        consumer = doc.get("group_type") == "consumer"
        for slot, ref in enumerate(lists.refs):
            member = doc["members"][ref]
            if consumer and member.get("target_assignment") is not None:
                source[slot] = CLAIMS.index("target_assignment")
            elif fields["owned"].counts[slot]:
                source[slot] = CLAIMS.index("owned")
            elif fields["assignment"].counts[slot]:
                source[slot] = CLAIMS.index("assignment")
    member_of_slot = np.asarray(slot_member, dtype=np.int32)
    members, partitions = [np.empty(0, np.int32)], [np.empty(0, np.int64)]
    for f, field in enumerate(CLAIMS):
        chosen = source == f
        if not chosen.any():
            continue
        exists, ids = kept[field]
        take = exists if chosen.all() else exists & np.repeat(chosen, fields[field].counts)
        member = np.repeat(member_of_slot, fields[field].counts)
        if take.all():
            members.append(member)
            partitions.append(ids)
        else:
            members.append(member[take])
            partitions.append(ids[take])
    member, partition = np.concatenate(members), np.concatenate(partitions)
    key = member.astype(np.int64) * max(spec.num_partitions, 1) + partition
    if len(key) > 1 and not bool((key[1:] >= key[:-1]).all()):  # members listed out of Java order, or pairs
        order = np.argsort(key, kind="stable")
        member, partition = member[order], partition[order]
    return member, partition
