"""`assign`: run one assignor on a group; report what members get now, the target, and what they revoke.

The answer stays in owner arrays (`AssignmentResult`) and is named lazily: `write_json` encodes it in one go,
straight from the arrays, in the full form of `AssignmentResult.to_json()` or in the compact form
(`compact_json`). With msgspec the JSON text is built in bulk from the arrays (a padded row of bytes per partition,
byte for byte what msgspec makes of the documents): a million partitions named and encoded in under 0.1 s of CPU
(0.3 s with a tuple per partition encoded by msgspec; about 6 s with `json.dump` of `to_json()`).
"""

from __future__ import annotations

import dataclasses
import io
import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import IO, Any

import numpy as np

from planner.assignors import load, owners_from, protocol_of
from planner.gc_pause import gc_paused
from planner.group import GroupSpec, from_snapshot, is_snapshot, parse_group

Assignment = dict[str, list[tuple[str, int]]]
MAX_FOLLOW_UP_ROUNDS = 8  # a cooperative group that still revokes after this many rebalances is reported as is


@dataclass(frozen=True, eq=False)
class AssignmentResult:
    """An assignor's answer as owner arrays over the group's dense ids, named by member on first access.

    `assignment` is what each member gets in this rebalance, `target` what it holds after the cooperative
    follow-up round (equal to `assignment` for eager assignors), `revoked` what a member lists as owned but
    does not get now (ConsumerCoordinator revokes owned minus assigned): each {member: [(topic, partition)]},
    every member present, lists sorted by (topic, partition). `elapsed_ms` is the time of the assignment
    itself (not parsing, the follow-up round or naming).
    """

    group: GroupSpec
    owner: np.ndarray  # member id per partition id in this rebalance, -1 = none
    target_owner: np.ndarray  # the same after the cooperative follow-up rounds (`owner` for eager assignors)
    revoked_claims: np.ndarray  # int64[2, R]: (member id, partition id) of each revocation, sorted, unique
    elapsed_ms: float

    @cached_property
    def assignment(self) -> Assignment:
        """What each member gets in this rebalance."""
        return by_member(self.group, *_owned_pairs(self.owner))

    @cached_property
    def target(self) -> Assignment:
        """What each member holds once the cooperative follow-up rounds are done."""
        return by_member(self.group, *_owned_pairs(self.target_owner))

    @cached_property
    def revoked(self) -> Assignment:
        """What each member revokes now: owned in its subscription metadata, not assigned."""
        return by_member(self.group, self.revoked_claims[1], self.revoked_claims[0])

    def to_json(self) -> dict[str, Any]:
        """The JSON shape printed by `rebalance assign` (write_json writes the same document faster)."""

        def plain(a: Assignment) -> dict[str, list[list[Any]]]:
            return {m: [[t, p] for t, p in parts] for m, parts in a.items()}

        return {
            "assignment": plain(self.assignment),
            "target": plain(self.target),
            "revoked": plain(self.revoked),
            "elapsed_ms": self.elapsed_ms,
        }


@dataclass(frozen=True)
class OwnerArrays:
    """The same answer as dense arrays (owner per partition id, -1 = none), for benchmarks and checks."""

    group: GroupSpec
    assignment: np.ndarray
    target: np.ndarray
    revoked: np.ndarray  # bool per ownership claim of `group`: the claimant does not get that partition now
    elapsed_ms: float
    rounds: int  # rebalances until `target` (1 for eager assignors)


def assign_arrays(strategy: str, group: GroupSpec) -> OwnerArrays:
    """Run the assignor `strategy` names on a parsed group; a cooperative one also runs the follow-up round."""
    assignor = load(strategy)
    start = time.perf_counter()
    owner = owners_from(group, assignor.assign(group))
    elapsed_ms = (time.perf_counter() - start) * 1000.0
    revoked = owner[group.claim_partition] != group.claim_member
    target, rounds = owner, 1
    if protocol_of(assignor) == "cooperative":
        # KIP-429: a member that revoked something rejoins at once, so the group rebalances again until an
        # assignment withholds nothing; the target is what members hold then.
        while rounds <= MAX_FOLLOW_UP_ROUNDS:
            follow_up = next_round(group, target)
            nxt = owners_from(group, assignor.assign(follow_up))
            rounds += 1
            if not np.any(nxt[follow_up.claim_partition] != follow_up.claim_member):
                target = nxt
                break
            target = nxt
    return OwnerArrays(group, owner, target, revoked, elapsed_ms, rounds)


def next_round(group: GroupSpec, owner: np.ndarray) -> GroupSpec:
    """The group as it rejoins after a rebalance: members own what `owner` gave them, one generation on."""
    parts = np.flatnonzero(owner >= 0)
    members = owner[parts]
    order = np.lexsort((parts, members))
    generation = (int(group.generations.max()) if len(group.members) else -1) + 1
    return dataclasses.replace(
        group,
        generations=np.full(len(group.members), generation, dtype=np.int64),
        claim_member=members[order].astype(np.int32),
        claim_partition=parts[order].astype(np.int64),
    )


def by_member(group: GroupSpec, parts: np.ndarray, members: np.ndarray) -> Assignment:
    """(partition id, member id) pairs -> {member: [(topic, partition), ...]} sorted; every member present."""
    members, parts = _sorted_pairs(members, parts)
    topic = group.topic_of(parts)
    names = np.asarray(group.topics, dtype=object)[topic].tolist()
    numbers = (parts - group.topic_start[topic]).tolist()
    bounds = np.searchsorted(members, np.arange(len(group.members) + 1)).tolist()
    with gc_paused():
        pairs = list(zip(names, numbers, strict=True))
        return {m: pairs[bounds[i] : bounds[i + 1]] for i, m in enumerate(group.members)}


def _sorted_pairs(members: np.ndarray, parts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The (member id, partition id) pairs sorted by member, then partition (= topic, partition)."""
    if len(parts) < 2 or bool((parts[1:] >= parts[:-1]).all()):
        # Partitions in order already (an owner array's): a stable sort by member, a radix sort when ids fit 16 bits.
        small = len(members) and int(members.max()) < 2**16
        order = np.argsort(members.astype(np.uint16) if small else members, kind="stable")
    else:
        order = np.lexsort((parts, members))
    return np.asarray(members, dtype=np.int64)[order], np.asarray(parts, dtype=np.int64)[order]


def _owned_pairs(owner: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    parts = np.flatnonzero(owner >= 0)
    return parts, owner[parts]


def assign(strategy: str, group: Mapping[str, Any]) -> AssignmentResult:
    """Assign a group (compact form, or a snapshot-file document) with the assignor `strategy` names."""
    spec = parse_group(from_snapshot(group) if is_snapshot(group) else group)
    return result_of(assign_arrays(strategy, spec))


def result_of(arrays: OwnerArrays) -> AssignmentResult:
    """The result of assign_arrays, with each member's revocations (owned claims not assigned) listed once."""
    group = arrays.group
    revoked = _unique_pairs(group.claim_member[arrays.revoked], group.claim_partition[arrays.revoked], group)
    return AssignmentResult(group, arrays.assignment, arrays.target, revoked, arrays.elapsed_ms)


def _unique_pairs(members: np.ndarray, parts: np.ndarray, group: GroupSpec) -> np.ndarray:
    """int64[2, R]: the distinct (member, partition id) pairs, sorted (what np.unique(..., axis=1) gives, without
    the numpy.ma import np.unique makes on first use: 20 ms of a command's start-up)."""
    width = max(group.num_partitions, 1)
    key = np.sort(members.astype(np.int64) * width + parts)
    if len(key) > 1:
        key = key[np.concatenate([[True], key[1:] != key[:-1]])]
    return np.stack([key // width, key % width])


# --- Output: one JSON document per result, encoded in one go ------------------------------------------------


def compact_json(result: AssignmentResult) -> dict[str, Any]:
    """The compact JSON form of a result: partitions listed per member, then per topic.

    ``{"assignment": {"M0": {"t0": [0, 1], "t1": [2]}, "M1": {}}, "revoked": {"M0": {"t2": [4]}},
    "elapsed_ms": 1.2}``: members in group order (Java String order) and every one present in "assignment";
    topics in Java String order within a member; partitions ascending. "target" appears only when it differs
    from "assignment" (a cooperative assignor that withholds partitions this round); "revoked" lists only the
    members that revoke something. A topic name is written once per member instead of once per partition,
    and an eager assignor's target is not repeated. `expand_compact` turns it back into the full form.
    """
    group = result.group
    doc: dict[str, Any] = {"assignment": _by_topic(group, *_owned_pairs(result.owner), every_member=True)}
    if not _same_owners(result):
        doc["target"] = _by_topic(group, *_owned_pairs(result.target_owner), every_member=True)
    doc["revoked"] = _by_topic(group, result.revoked_claims[1], result.revoked_claims[0], every_member=False)
    doc["elapsed_ms"] = result.elapsed_ms
    return doc


def expand_compact(doc: Mapping[str, Any]) -> dict[str, Any]:
    """The full form (`AssignmentResult.to_json()`) of a compact document, for readers of `compact_json`."""

    def plain(section: Mapping[str, Mapping[str, list[int]]]) -> dict[str, list[list[Any]]]:
        return {m: [[t, p] for t, ps in topics.items() for p in ps] for m, topics in section.items()}

    assignment = plain(doc["assignment"])
    revoked = plain(doc["revoked"])
    return {
        "assignment": assignment,
        "target": plain(doc["target"]) if "target" in doc else plain(doc["assignment"]),
        "revoked": {m: revoked.get(m, []) for m in assignment},
        "elapsed_ms": doc["elapsed_ms"],
    }


def write_json(result: AssignmentResult, stream: IO[Any], *, compact: bool, group_id: str | None = None) -> None:
    """Write `result` to `stream` as one line of JSON: the full form of `to_json()`, or `compact_json`'s.

    `group_id`, when given, leads the object (a file of several groups prints one line per group). The
    document is encoded in one call (msgspec when installed) and written in one write; a text stream over a
    UTF-8 byte buffer (sys.stdout) gets the bytes directly, other text streams a str, binary streams bytes.
    """
    head: dict[str, Any] = {} if group_id is None else {"group_id": group_id}
    encoding = (getattr(stream, "encoding", None) or "").lower().replace("-", "").replace("_", "")
    text = isinstance(stream, io.TextIOBase)
    ascii_only = text and encoding not in ("", "utf8")
    # Why the collector stays off until the document is freed: a million new tuples or lists would otherwise
    # cost one full walk after encoding, for objects that die the moment it ends.
    with gc_paused():
        data = None if ascii_only else (_encode_compact if compact else _encode_full)(result, group_id)
        if data is None:
            doc = {**head, **(compact_json(result) if compact else _full_json(result))}
            data = _encode(doc, ascii_only=ascii_only)
            del doc
    if text and encoding == "utf8" and hasattr(stream, "buffer"):
        stream.flush()  # keep what was printed before ahead of the bytes written under the text layer
        stream.buffer.write(data)
    elif text:
        stream.write(data.decode("utf-8"))
    else:
        stream.write(data)


def _full_json(result: AssignmentResult) -> dict[str, Any]:
    """to_json()'s document, named afresh: (topic, partition) tuples encode as the same JSON arrays."""
    group = result.group
    assignment = by_member(group, *_owned_pairs(result.owner))
    return {
        "assignment": assignment,
        "target": assignment if _same_owners(result) else by_member(group, *_owned_pairs(result.target_owner)),
        "revoked": by_member(group, result.revoked_claims[1], result.revoked_claims[0]),
        "elapsed_ms": result.elapsed_ms,
    }


def _encode_full(result: AssignmentResult, group_id: str | None) -> bytes | None:
    """What `_encode` makes of the full form with msgspec, built from the owner arrays without a Python object per
    partition (0.3 s -> under 0.1 s for a million); None without msgspec, or for a name msgspec cannot encode (a
    lone surrogate), which the general path then writes."""
    names = _encoded_names(result.group, group_id)
    if names is None:
        return None
    encode, members, topic_names, head = names
    group = result.group
    keys = [m + b":[" for m in members]
    heads = [b"[" + t + b"," for t in topic_names]
    topics = _topic_table(group)
    assignment = _lists_by_member(group, *_owned_pairs(result.owner), keys, heads, topics)
    target = (
        assignment
        if _same_owners(result)
        else _lists_by_member(group, *_owned_pairs(result.target_owner), keys, heads, topics)
    )
    revoked = _lists_by_member(group, result.revoked_claims[1], result.revoked_claims[0], keys, heads, topics)
    return b"".join(
        [head, b'"assignment":{', assignment, b'},"target":{', target, b'},"revoked":{', revoked, b'},"elapsed_ms":']
        + [encode(result.elapsed_ms), b"}\n"]
    )


def _encode_compact(result: AssignmentResult, group_id: str | None) -> bytes | None:
    """What `_encode` makes of `compact_json` with msgspec, built from the owner arrays as `_encode_full` builds the
    full form; None without msgspec, or for a name msgspec cannot encode."""
    names = _encoded_names(result.group, group_id)
    if names is None:
        return None
    encode, members, topic_names, head = names
    group = result.group
    keys = [m + b":{" for m in members]
    heads = [t + b":[" for t in topic_names]
    topics = _topic_table(group)
    pieces = [head, b'"assignment":{', _runs_by_member(group, *_owned_pairs(result.owner), keys, heads, topics, True)]
    if not _same_owners(result):
        target = _runs_by_member(group, *_owned_pairs(result.target_owner), keys, heads, topics, True)
        pieces += [b'},"target":{', target]
    revoked = _runs_by_member(group, result.revoked_claims[1], result.revoked_claims[0], keys, heads, topics, False)
    return b"".join([*pieces, b'},"revoked":{', revoked, b'},"elapsed_ms":', encode(result.elapsed_ms), b"}\n"])


def _encoded_names(
    group: GroupSpec, group_id: str | None
) -> tuple[Callable[[Any], bytes], list[bytes], list[bytes], bytes] | None:
    """msgspec's encoder, the group's member and topic names as JSON strings and the document's opening (with the
    group id first when given); None without msgspec, or for a name it cannot encode (a lone surrogate)."""
    try:
        import msgspec
    except ImportError:
        return None
    encode: Callable[[Any], bytes] = msgspec.json.encode
    try:
        members = [encode(m) for m in group.members]
        topics = [encode(t) for t in group.topics]
        head = b"{" if group_id is None else b'{"group_id":' + encode(group_id) + b","
    except UnicodeEncodeError:
        return None
    return encode, members, topics, head


def _runs_by_member(
    group: GroupSpec,
    parts: np.ndarray,
    members: np.ndarray,
    keys: list[bytes],
    heads: list[bytes],
    topic_of: np.ndarray,
    every: bool,
) -> bytes:
    """`"member":{"topic":[p,...],...}` per member in group order (`every`: members without partitions too, as
    `{}`), comma-separated: _by_topic's dict as msgspec encodes it. A pair's row: its topic's `"topic":[` when it
    starts a run, its digits, then `,` inside a run, `],` after one, `]` after a member's last."""
    members, parts = _sorted_pairs(members, parts)
    topic = topic_of[parts]
    numbers = parts - group.topic_start[topic]
    n = len(parts)
    starts_run = np.ones(n, dtype=bool)
    starts_run[1:] = (members[1:] != members[:-1]) | (topic[1:] != topic[:-1])
    ends_member = np.ones(n, dtype=bool)
    ends_member[:-1] = members[1:] != members[:-1]
    ends_run = np.append(starts_run[1:], True)
    head_index = np.where(starts_run, topic, len(heads))  # the last row of the head table: no head
    tail_index = ends_run.astype(np.int64) + ends_member  # 0: `,`, 1: `],`, 2: `]`
    tables = [_padded([*heads, b""]), _number_table(int(numbers.max()) + 1 if n else 1, b""), _padded(_TAILS)]
    pairs, lengths = _rows(tables, [head_index, numbers, tail_index])
    at = np.concatenate([[0], np.cumsum(lengths)])[np.searchsorted(members, np.arange(len(keys) + 1))].tolist()
    view = memoryview(pairs)
    pieces: list[bytes | memoryview] = []
    for i, key in enumerate(keys):
        if at[i] < at[i + 1] or every:
            pieces += [key, view[at[i] : at[i + 1]], b"},"]
    if pieces:
        pieces[-1] = b"}"
    return b"".join(pieces)


_TAILS = [b",", b"],", b"]"]
PAIR_BLOCK = 1 << 22  # bytes of padded pair rows built at a time (the rows are as wide as the longest pair)


def _lists_by_member(
    group: GroupSpec,
    parts: np.ndarray,
    members: np.ndarray,
    keys: list[bytes],
    heads: list[bytes],
    topic_of: np.ndarray,
) -> bytes:
    """`"member":[["topic",p],...]` for every member in group order, comma-separated: by_member's dict as msgspec
    encodes it. Each pair is a row of its topic's encoded head (`["topic",`) and its number's digits (`p],`), both
    zero-padded to fixed widths; the rows are cut out of the padding in one pass (JSON text holds no NUL byte)."""
    members, parts = _sorted_pairs(members, parts)
    topic = topic_of[parts]
    numbers = parts - group.topic_start[topic]
    tables = [_padded(heads), _number_table(int(numbers.max()) + 1 if len(numbers) else 1, b"],")]
    pairs, lengths = _rows(tables, [topic, numbers])
    # Byte offset of each member's first pair; a member's list is its pairs but the last comma.
    at = np.concatenate([[0], np.cumsum(lengths)])[np.searchsorted(members, np.arange(len(group.members) + 1))].tolist()
    view = memoryview(pairs)
    pieces: list[bytes | memoryview] = []
    for i, key in enumerate(keys):
        pieces += [key, view[at[i] : max(at[i], at[i + 1] - 1)], b"],"]
    if pieces:
        pieces[-1] = b"]"
    return b"".join(pieces)


def _topic_table(group: GroupSpec) -> np.ndarray:
    """The topic id of every partition id (a gather per pair instead of a binary search)."""
    return np.repeat(np.arange(len(group.topics), dtype=np.int64), group.partition_counts)


def _rows(tables: list[tuple[np.ndarray, np.ndarray]], indexes: list[np.ndarray]) -> tuple[bytes, np.ndarray]:
    """Row i: the row indexes[j][i] of each zero-padded table j, side by side, padding cut out (JSON text holds no
    NUL byte); and each row's length. Built PAIR_BLOCK bytes at a time."""
    widths = [table.shape[1] for table, _ in tables]
    lengths = sum(length[index] for (_, length), index in zip(tables, indexes, strict=True))
    count = len(indexes[0])
    step = max(1, PAIR_BLOCK // sum(widths))
    blocks = []
    for start in range(0, count, step):
        rows = np.empty((min(step, count - start), sum(widths)), dtype=np.uint8)
        column = 0
        for (table, _), index, width in zip(tables, indexes, widths, strict=True):
            rows[:, column : column + width] = np.take(table, index[start : start + step], axis=0)  # (15x table[i])
            column += width
        blocks.append(rows.tobytes().translate(None, b"\0"))
    return b"".join(blocks), np.asarray(lengths, dtype=np.int64)


def _padded(texts: list[bytes]) -> tuple[np.ndarray, np.ndarray]:
    """The texts as rows of a zero-padded uint8 table, and their lengths."""
    lengths = np.asarray([len(t) for t in texts], dtype=np.int64)
    table = np.zeros((len(texts), max(int(lengths.max()) if len(texts) else 1, 1)), dtype=np.uint8)
    for row, t in enumerate(texts):
        table[row, : len(t)] = np.frombuffer(t, dtype=np.uint8)
    return table, lengths


def _number_table(count: int, suffix: bytes) -> tuple[np.ndarray, np.ndarray]:
    """Rows of the numbers 0 .. count - 1 in decimal followed by `suffix`, zero-padded, and their lengths."""
    values = np.arange(count, dtype=np.int64)
    digits = np.searchsorted(10 ** np.arange(1, 19, dtype=np.int64), values, side="right") + 1
    width = int(digits.max())
    table = np.zeros((count, width + len(suffix)), dtype=np.uint8)
    for k in range(width):
        rows = np.flatnonzero(digits > k)
        table[rows, k] = ord("0") + (values[rows] // 10 ** (digits[rows] - 1 - k)) % 10
    for k, byte in enumerate(suffix):
        table[values, digits + k] = byte
    return table, digits + len(suffix)


def _encode(doc: Any, *, ascii_only: bool) -> bytes:
    """`doc` as one line of UTF-8 JSON and a newline, in one call.

    Why msgspec: it encodes the million (topic, partition) tuples of a large group in a sixth of the time of
    `json.dumps` (and 40x faster than `json.dump`, which writes token by token). Without msgspec, for an
    ASCII-only stream, or for names holding lone surrogates (valid in JSON input, not encodable as UTF-8),
    the standard library writes the same document with non-ASCII characters escaped.
    """
    if not ascii_only:
        try:
            import msgspec
        except ImportError:
            pass
        else:
            try:
                return msgspec.json.encode(doc) + b"\n"
            except UnicodeEncodeError:
                pass
    return json.dumps(doc, separators=(",", ":")).encode("ascii") + b"\n"


def _same_owners(result: AssignmentResult) -> bool:
    return result.target_owner is result.owner or np.array_equal(result.target_owner, result.owner)


def _by_topic(
    group: GroupSpec, parts: np.ndarray, members: np.ndarray, *, every_member: bool
) -> dict[str, dict[str, list[int]]]:
    """(partition id, member id) pairs -> {member: {topic: [partition, ...]}}, sorted as compact_json says."""
    members, parts = _sorted_pairs(members, parts)
    topic = group.topic_of(parts)
    numbers = (parts - group.topic_start[topic]).tolist()
    # A run is one (member, topic): it starts where either changes.
    new_run = np.ones(len(parts), dtype=bool)
    new_run[1:] = (members[1:] != members[:-1]) | (topic[1:] != topic[:-1])
    starts = np.flatnonzero(new_run)
    ends = np.append(starts[1:], len(parts))[: len(starts)].tolist()
    run_topic = np.asarray(group.topics, dtype=object)[topic[starts]].tolist()
    bounds = np.searchsorted(members[starts], np.arange(len(group.members) + 1)).tolist()
    with gc_paused():
        runs = [numbers[a:b] for a, b in zip(starts.tolist(), ends, strict=True)]
        return {
            m: dict(zip(run_topic[bounds[i] : bounds[i + 1]], runs[bounds[i] : bounds[i + 1]], strict=True))
            for i, m in enumerate(group.members)
            if every_member or bounds[i] < bounds[i + 1]
        }
