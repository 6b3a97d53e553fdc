"""The one rule set every consumer group passes before it is stored or planned, in either form it comes in.

A group arrives as a snapshot document (`members` a list, with `group_id`, offsets; schemas/snapshot.schema.json)
or in the compact assignor form of `rebalance assign` (`members` an object keyed by member id, `loads`). Both go
through `document_errors`: the limits first (before anything is allocated), then the JSON Schema (the compact
schema is built from the snapshot schema's own definitions, so a field means the same in both), then the rules
a schema cannot say. Every reason names the field as a JSON path, e.g. `members[1].member_id: duplicate member
id 'bad-m1' (also members[0])`.

Rules of both forms: integers within Kafka's wire types (partition counts int32 >= 1, partitions int32,
offsets int64, generations int32) and never a float such as 3.0; ids free of control characters and lone
surrogates; unique member and static instance ids; no partition listed twice in one member's `owned` or
`assignment`; strict RFC 3339 timestamps; finite, non-negative loads and weights.

Rules of snapshot documents only, which picture one consistent moment of a group: subscribed and claimed topics
exist, claimed partitions are in range, no partition is assigned to two members (nor owned by two in the same
generation), one offsets entry per partition, committed <= end. The compact form is an assignor's input, and
Kafka's assignors take stale input as it comes: subscriptions to topics without metadata are skipped
(AbstractPartitionAssignor.assign), owned partitions of vanished topics are filtered out and double claims
resolved by generation (AbstractStickyAssignor.allSubscriptionsEqual, partitionsWithMultiplePreviousOwners).
"""

from __future__ import annotations

import copy
import math
import operator
import os
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, timezone
from functools import cache, cached_property, partial
from itertools import chain
from operator import itemgetter, methodcaller
from typing import Any

import numpy as np

from planner.errors import InputError, LimitError
from schemas.conforms import compile_schema
from schemas.reader import json_path
from schemas.snapshot import snapshot_schema

INT32_MAX = 2**31 - 1  # Kafka: partition ids, partition counts and generation ids are int32 on the wire
INT64_MAX = 2**63 - 1  # Kafka: offsets are int64
MAX_ERRORS = 20  # reasons kept per document; a quarantine row stays readable when a list is wrong throughout

_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")  # Unicode category Cc
_SURROGATE = re.compile("[\ud800-\udfff]")
_RFC3339 = re.compile(
    r"([0-9]{4})-([0-9]{2})-([0-9]{2})[Tt ]([0-9]{2}):([0-9]{2}):([0-9]{2})(?:\.([0-9]+))?"  # RFC 3339 date-time
    r"(?:[Zz]|([+-])([0-9]{2}):([0-9]{2}))"  # time-offset: Z or +HH:MM, never absent
)


@dataclass(frozen=True)
class Limits:
    """Ceilings on one group, checked before anything is allocated for it.

    Kafka itself allows up to 2^31 - 1 partitions per topic and members per group (int32; `group.max.size`
    defaults to Integer.MAX_VALUE, KAFKA-7641), but the largest real clusters hold about 200,000 partitions in
    all, and KRaft clusters are tested with a few million. Defaults: 1,000,000 partitions per topic and
    2,000,000 per group (twice the largest assignor benchmark, bench/assignors.py, where every assignor plans
    1,000,000 partitions in under 0.5 s and 300 MB), 100,000 members (ten times its largest member count).
    """

    max_partitions_per_topic: int = 1_000_000
    max_partitions_per_group: int = 2_000_000
    max_members: int = 100_000

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Limits:
        """Defaults, overridden by REBALANCE_MAX_PARTITIONS_PER_TOPIC, _PER_GROUP and REBALANCE_MAX_MEMBERS."""
        environ = os.environ if environ is None else environ
        values = {}
        for field, variable in LIMIT_VARIABLES.items():
            text = environ.get(variable, "").strip()
            if not text:
                continue
            if not (text.isascii() and text.isdigit() and len(text) <= 18 and int(text) >= 1):
                raise InputError(f"{variable}: must be a positive integer, got {_quoted(text)}")
            values[field] = int(text)
        return cls(**values)


LIMIT_VARIABLES = {
    "max_partitions_per_topic": "REBALANCE_MAX_PARTITIONS_PER_TOPIC",
    "max_partitions_per_group": "REBALANCE_MAX_PARTITIONS_PER_GROUP",
    "max_members": "REBALANCE_MAX_MEMBERS",
}


def check_group(doc: Any, limits: Limits | None = None) -> None:
    """Raise LimitError or InputError (every reason, `; `-joined) unless `doc` may be planned or stored."""
    limits = limits or Limits.from_env()
    if over := limit_errors(doc, limits):
        raise LimitError("; ".join(over))
    if errors := document_errors(doc, limits):
        raise InputError("; ".join(errors))


def document_errors(doc: Any, limits: Limits | None = None) -> list[str]:
    """Every reason `doc` (either form) may not be planned or stored, in document order; empty when it may."""
    if over := limit_errors(doc, limits or Limits.from_env()):
        return over
    snapshot = not isinstance(doc, Mapping) or is_snapshot(doc)
    errors = schema_errors(doc, snapshot) or list(_rule_errors(doc, snapshot))
    return errors if len(errors) <= MAX_ERRORS else [*errors[:MAX_ERRORS], f"(and {len(errors) - MAX_ERRORS} more)"]


def is_snapshot(doc: Mapping[str, Any]) -> bool:
    """A snapshot document (has `group_id`, or `members` as a list) rather than the compact assignor form."""
    return "group_id" in doc or isinstance(doc.get("members"), list)


def limit_errors(doc: Any, limits: Limits) -> list[str]:
    """Partitions per topic and per group, members per group over `limits`; reads counts, allocates nothing."""
    if not isinstance(doc, Mapping):
        return []
    errors = []
    topics = doc.get("topics")
    if isinstance(topics, Mapping):
        total = 0
        for topic, count in topics.items():
            if isinstance(count, int) and not isinstance(count, bool) and count > 0:
                total += count
                if count > limits.max_partitions_per_topic:
                    errors.append(
                        f"{json_path(('topics', topic))}: {count} partitions is over the limit of "
                        f"{limits.max_partitions_per_topic} per topic ({LIMIT_VARIABLES['max_partitions_per_topic']})"
                    )
        if total > limits.max_partitions_per_group:
            errors.append(
                f"topics: {total} partitions in the group is over the limit of {limits.max_partitions_per_group} "
                f"per group ({LIMIT_VARIABLES['max_partitions_per_group']})"
            )
    members = doc.get("members")
    if isinstance(members, list | Mapping) and len(members) > limits.max_members:
        errors.append(
            f"members: {len(members)} members is over the limit of {limits.max_members} "
            f"({LIMIT_VARIABLES['max_members']})"
        )
    return errors


def parse_timestamp(text: Any, where: str = "captured_at") -> datetime:
    """A strict RFC 3339 date-time (offset required; `T`, `t` or a space between date and time) as UTC."""
    match = _RFC3339.fullmatch(text) if isinstance(text, str) else None
    if match is None:
        raise InputError(
            f"{where}: {_quoted(text)} is not an RFC 3339 timestamp (YYYY-MM-DDTHH:MM:SS[.fraction], then Z or +HH:MM)"
        )
    year, month, day, hour, minute, second = (int(g) for g in match.groups()[:6])
    micro = int(((match[7] or "") + "000000")[:6])
    sign, off_hours, off_minutes = match[8], int(match[9] or 0), int(match[10] or 0)
    try:
        if off_hours > 23 or off_minutes > 59:
            raise ValueError(f"offset {sign}{match[9]}:{match[10]} is out of range")
        offset = timedelta(hours=off_hours, minutes=off_minutes) * (-1 if sign == "-" else 1)
        # datetime refuses second 60: RFC 3339's leap second cannot be stored in a timestamp column either.
        return datetime(year, month, day, hour, minute, second, micro, tzinfo=timezone(offset)).astimezone(UTC)
    except (ValueError, OverflowError) as e:
        raise InputError(f"{where}: {_quoted(text)} is not a valid RFC 3339 timestamp: {e}") from None


# --- the JSON Schema -------------------------------------------------------------------------------------------


def _integer(_checker: Any, instance: Any) -> bool:
    """JSON Schema counts 3.0 as an integer; Kafka's integer fields take no float, so neither does the contract."""
    return isinstance(instance, int) and not isinstance(instance, bool)


@cache
def _strict_validator() -> Any:
    """Draft 2020-12 with "integer" excluding floats. Built on first use: jsonschema takes about 0.1 s to import, and
    only a document the compiled check (`schemas.conforms`) refuses needs it, for the messages."""
    from jsonschema import Draft202012Validator, validators

    return validators.extend(
        Draft202012Validator, type_checker=Draft202012Validator.TYPE_CHECKER.redefine("integer", _integer)
    )


def __getattr__(name: str) -> Any:
    """`StrictValidator`, the validator class, loads jsonschema when first asked for."""
    if name == "StrictValidator":
        return _strict_validator()
    raise AttributeError(f"module 'schemas.rules' has no attribute {name!r}")


@cache
def _validator(snapshot: bool) -> Any:
    return _strict_validator()(snapshot_schema() if snapshot else compact_schema())


@cache
def compact_schema() -> dict[str, Any]:
    """The compact assignor form, built from the snapshot schema's definitions so both forms share field rules."""
    snapshot = snapshot_schema()
    member = copy.deepcopy(snapshot["$defs"]["member"])
    member["required"] = ["topics"]
    del member["properties"]["member_id"]  # the member id is the key of `members`
    member["properties"]["weight"] = {"type": ["number", "null"], "exclusiveMinimum": 0}
    return {
        "$schema": snapshot["$schema"],
        "$id": "urn:rebalance-planner:compact-group",
        "title": "Consumer group in the compact assignor form",
        "type": "object",
        "required": ["topics"],
        "properties": {
            "topics": snapshot["properties"]["topics"],
            "members": {"type": "object", "additionalProperties": {"$ref": "#/$defs/member"}},
            "loads": {
                "type": "object",
                "additionalProperties": {"type": "array", "items": {"type": "number", "minimum": 0}},
            },
        },
        "$defs": {**snapshot["$defs"], "member": member},
    }


@cache
def _conforms(snapshot: bool) -> Callable[[Any], bool] | None:
    return compile_schema(snapshot_schema() if snapshot else compact_schema())


def schema_errors(doc: Any, snapshot: bool = True) -> list[str]:
    """JSON Schema violations of the snapshot (or compact) form, in document order."""
    if (conforms := _conforms(snapshot)) is not None and conforms(doc):
        return []  # valid: skip jsonschema, which takes ~80 us per [topic, partition] pair to say so
    errors = sorted(_validator(snapshot).iter_errors(doc), key=lambda e: [str(p) for p in e.absolute_path])
    return [_shorten(f"{json_path(list(e.absolute_path))}: {e.message}", 1000) for e in errors]


# --- rules a schema cannot say ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Member:
    """One member in either form: its path (`members[0]` or `members.c-1`), the path of its id, its fields."""

    path: tuple[str | int, ...]
    id_path: tuple[str | int, ...]
    member_id: str
    spec: Mapping[str, Any]
    generation: int | None

    @cached_property
    def where(self) -> str:
        return json_path(self.path)

    @cached_property
    def id_where(self) -> str:
        return json_path(self.id_path)


def _members(doc: Mapping[str, Any], snapshot: bool) -> list[_Member]:
    if snapshot:
        group_generation = doc.get("generation")
        return [
            _Member(
                ("members", i),
                ("members", i, "member_id"),
                m["member_id"],
                m,
                group_generation if m.get("generation") is None else m["generation"],
            )
            for i, m in enumerate(doc["members"])
        ]
    return [
        _Member(("members", k), ("members", k), k, m, m.get("generation"))
        for k, m in (doc.get("members") or {}).items()
    ]


MEMBERLESS_STATES = ("Empty", "Dead")  # Kafka's group states that hold no member, classic and consumer alike


def _rule_errors(doc: Mapping[str, Any], snapshot: bool) -> Iterator[str]:
    topics: Mapping[str, int] = doc["topics"]
    members = _members(doc, snapshot)
    offsets = (doc.get("offsets") or []) if snapshot else []
    claims_valid = _claims_plainly_valid(topics, members, snapshot)
    offsets_valid = _offsets_plainly_valid(topics, offsets)
    # A snapshot's pairs and offsets that pass then name only topics of `topics`, whose names are checked there.
    yield from _id_errors(doc, members, snapshot, partitions_named=not (snapshot and claims_valid and offsets_valid))
    for topic, count in topics.items():
        where = json_path(("topics", topic))
        if count <= 0:
            yield f"{where}: partition count must be positive, got {count}"
        elif count > INT32_MAX:
            yield f"{where}: partition count {count} is above Kafka's int32 maximum {INT32_MAX}"
    if snapshot:
        yield from _int32(doc.get("generation"), "generation")
        for epoch in ("group_epoch", "assignment_epoch"):  # KIP-848 epochs are int32 on the wire
            yield from _int32(doc.get(epoch), epoch)
        if doc.get("state") in MEMBERLESS_STATES and members:
            yield (
                f"state: a group in state {doc['state']} has no members in Kafka (GroupState / ConsumerGroupState), "
                f"but {len(members)} are listed"
            )
        if doc.get("captured_at") is not None:
            try:
                parse_timestamp(doc["captured_at"])
            except InputError as e:
                yield str(e)
    yield from _member_errors(topics, members, snapshot, claims_valid)
    if snapshot and not offsets_valid:
        yield from _offset_errors(topics, offsets)
    elif not snapshot:
        yield from _load_errors(topics, doc.get("loads") or {})


def _id_errors(doc: Mapping[str, Any], members: list[_Member], snapshot: bool, partitions_named: bool) -> Iterator[str]:
    """Names that become ids or stored text: no control characters, no lone surrogates, no empty topic name.

    `partitions_named` False: the topic names of [topic, partition] pairs and offsets entries need no look, each
    being a key of `topics`.
    """
    yield from _topic_name_errors(doc, members)
    # Topic names repeat in every pair: check each distinct text once; find the places only when one is bad.
    named = _named(doc, members, snapshot, partitions_named)
    if any(_bad_text(text) for text in set(chain.from_iterable(texts for _, _, texts, _ in named))):
        for prefix, keys, texts, suffix in _named(doc, members, snapshot):
            for key, text in zip(keys, texts, strict=True):
                if bad := _bad_text(text):
                    yield f"{json_path((*prefix, key, *suffix))}: {bad} in {_quoted(text)}"


# Kafka's rule for a topic name (org.apache.kafka.common.internals.Topic.validate): 1 to 249 of [a-zA-Z0-9._-],
# and neither "." nor "..". A name that breaks it cannot belong to a topic a broker holds.
TOPIC_NAME = re.compile(r"[a-zA-Z0-9._-]{1,249}")


def _topic_name_error(name: Any) -> str | None:
    if not isinstance(name, str) or name in (".", ".."):
        return f"{_quoted(name)} is not a topic name (Kafka: Topic.validate)"
    if not name:
        return "empty topic name (Kafka: Topic.validate)"
    if len(name) > 249:
        return f"topic name of {len(name)} characters, above Kafka's 249 (Topic.validate)"
    if not TOPIC_NAME.fullmatch(name):
        bad = next(c for c in name if not TOPIC_NAME.fullmatch(c))
        return f"{_quoted(_shorten(name, 60))} holds {bad!r}, outside Kafka's [a-zA-Z0-9._-] (Topic.validate)"
    return None


def _topic_name_errors(doc: Mapping[str, Any], members: list[_Member]) -> Iterator[str]:
    """The group's topics and each member's subscribed topics, by Kafka's topic name rule (pairs and offsets name
    topics of `topics`, checked against it elsewhere)."""
    for name in doc["topics"]:
        if bad := _topic_name_error(name):
            yield f"{json_path(('topics', name)) if name else 'topics'}: {bad}"
    for m in members:
        for i, name in enumerate(m.spec.get("topics") or []):
            if name not in doc["topics"] and (bad := _topic_name_error(name)):
                yield f"{json_path((*m.path, 'topics', i))}: {bad}"


def _named(doc: Mapping[str, Any], members: list[_Member], snapshot: bool, partitions: bool = True) -> Iterator[_Texts]:
    """Every id and every text a row stores, a list at a time: (prefix, keys, texts, suffix), where the path of
    `texts[k]` is prefix + keys[k] + suffix (lists of a million pairs are taken with C-level passes). `partitions`
    False leaves out the topic names of [topic, partition] pairs and offsets entries."""
    yield (), _GROUP_TEXTS, [doc.get(field) for field in _GROUP_TEXTS], ()
    yield ("topics",), list(doc["topics"]), list(doc["topics"]), ()
    for m in members:
        yield m.id_path[:-1], m.id_path[-1:], [m.member_id], ()
        yield m.path, _MEMBER_TEXTS, [m.spec.get(field) for field in _MEMBER_TEXTS], ()
        for field in ("strategies", "topics"):
            texts = m.spec.get(field) or []
            yield (*m.path, field), range(len(texts)), texts, ()
        for field in _CLAIMS if partitions else ():
            pairs = m.spec.get(field) or []
            yield (*m.path, field), range(len(pairs)), list(map(itemgetter(0), pairs)), (0,)
    if snapshot and partitions:
        offsets = doc.get("offsets") or []
        yield ("offsets",), range(len(offsets)), list(map(itemgetter("topic"), offsets)), ("topic",)
    elif not snapshot:
        yield ("loads",), list(doc.get("loads") or {}), list(doc.get("loads") or {}), ()


_Texts = tuple[tuple[str | int, ...], Sequence[str | int], Sequence[Any], tuple[str | int, ...]]
_GROUP_TEXTS = ("group_id", "protocol_type", "protocol", "server_assignor", "state_reason")
_MEMBER_TEXTS = ("client_id", "host", "group_instance_id", "rack")
_CLAIMS = ("owned", "assignment", "target_assignment")


def _bad_text(text: Any) -> str | None:
    if not isinstance(text, str) or not (bad := _CONTROL.search(text) or _SURROGATE.search(text)):
        return None
    kind = "lone UTF-16 surrogate" if _SURROGATE.match(bad[0]) else "control character"
    return f"{kind} U+{ord(bad[0]):04X}"


def _member_errors(
    topics: Mapping[str, int], members: list[_Member], snapshot: bool, claims_valid: bool
) -> Iterator[str]:
    """Member ids, static ids, generations, subscriptions; and the partitions each lists, pair by pair unless
    `claims_valid` (`_claims_plainly_valid`) says there is nothing to find."""
    seen_members: dict[str, str] = {}
    seen_instances: dict[str, str] = {}
    claims: dict[str, dict[tuple[str, int], _Member]] = {field: {} for field in _CLAIMS}
    for m in members:
        if snapshot and (first := seen_members.setdefault(m.member_id, m.where)) != m.where:
            yield f"{m.id_where}: duplicate member id {_quoted(m.member_id)} (also {first})"
        instance = m.spec.get("group_instance_id")
        if instance is not None and (first := seen_instances.setdefault(instance, m.where)) != m.where:
            yield f"{m.where}.group_instance_id: duplicate static member {_quoted(instance)} (also {first})"
        yield from _int32(m.spec.get("generation"), f"{m.where}.generation")
        yield from _int32(m.spec.get("member_epoch"), f"{m.where}.member_epoch")
        if (weight := m.spec.get("weight")) is not None and not math.isfinite(weight):
            yield f"{m.where}.weight: must be finite, got {weight}"
        if snapshot:
            yield from (
                f"{m.where}.topics: subscribes to {_quoted(t)}, which is missing from topics"
                for t in m.spec["topics"]
                if t not in topics
            )
        if not claims_valid:
            yield from _claim_errors(topics, m, claims, snapshot)


def _claim_errors(
    topics: Mapping[str, int], m: _Member, claims: dict[str, dict[tuple[str, int], _Member]], snapshot: bool
) -> Iterator[str]:
    """What is wrong with the partitions member `m` lists, pair by pair; `claims` holds earlier members' claims."""
    for field, owners in claims.items():
        listed: dict[tuple[str, int], int] = {}
        for j, (topic, partition) in enumerate(m.spec.get(field) or []):
            if partition > INT32_MAX:
                problem = f"[1]: partition {partition} is above Kafka's int32 maximum {INT32_MAX}"
            elif (first_index := listed.setdefault((topic, partition), j)) != j:
                problem = f": {_tp(topic, partition)} is listed twice (also {field}[{first_index}])"
            elif not snapshot:
                continue
            elif (out_of_range := _out_of_range(topics, topic, partition)) is not None:
                problem = f": {out_of_range}"
            elif (other := owners.setdefault((topic, partition), m)) is not m and (
                # A leader (or KIP-848 coordinator, for the target) never assigns a partition twice; two owners
                # are legal only in different generations, where Kafka keeps the newer claim
                # (AbstractStickyAssignor, KAFKA-12984).
                field != "owned" or other.generation == m.generation
            ):
                claimants = f"{_quoted(other.member_id)} and {_quoted(m.member_id)}"
                problem = f": {_tp(topic, partition)} is claimed by both {claimants}"
            else:
                continue
            yield f"{m.where}.{field}[{j}]{problem}"


def _claims_plainly_valid(topics: Mapping[str, int], members: list[_Member], snapshot: bool) -> bool:
    """True when `_claim_errors` finds nothing in any member: each field's pairs, over all members, are within
    int32, never listed twice (by one member or two) and, in a snapshot, partitions of known topics. Checked a field
    at a time over all members, vectorized; False (also for owners in different generations, which Kafka allows)
    sends the group through the pair-by-pair check, which names the places."""
    for field in _CLAIMS:
        pairs = list(chain.from_iterable(m.spec.get(field) or () for m in members))
        if not pairs:
            continue
        if snapshot and not _distinct_partitions(topics, map(itemgetter(0), pairs), map(itemgetter(1), pairs)):
            return False
        if not snapshot and (max(map(itemgetter(1), pairs)) > INT32_MAX or len(set(map(tuple, pairs))) != len(pairs)):
            return False
    return True


def _offset_errors(topics: Mapping[str, int], offsets: list[Mapping[str, Any]]) -> Iterator[str]:
    seen: dict[tuple[str, int], int] = {}
    for i, offset in enumerate(offsets):
        topic, partition = offset["topic"], offset["partition"]
        committed, end = offset.get("committed"), offset.get("end")
        where = f"offsets[{i}]"
        if partition > INT32_MAX:
            yield f"{where}.partition: {partition} is above Kafka's int32 maximum {INT32_MAX}"
            continue
        bad_offsets = [
            f"{where}.{field}: {value} is above Kafka's int64 maximum {INT64_MAX}"
            for field, value in (("committed", committed), ("end", end))
            if value is not None and value > INT64_MAX
        ]
        if bad_offsets:
            yield from bad_offsets
        elif (first := seen.setdefault((topic, partition), i)) != i:
            yield f"{where}: duplicate entry for {_tp(topic, partition)} (also offsets[{first}])"
        elif (problem := _out_of_range(topics, topic, partition)) is not None:
            yield f"{where}: {problem}"
        elif committed is not None and end is not None and committed > end:
            yield f"{where}: committed offset {committed} is above end offset {end} for {_tp(topic, partition)}"


def _offsets_plainly_valid(topics: Mapping[str, int], offsets: list[Mapping[str, Any]]) -> bool:
    """True when `_offset_errors` would find nothing (C-level passes over the columns, vectorized checks)."""
    committed = list(map(methodcaller("get", "committed"), offsets))
    ends = list(map(methodcaller("get", "end"), offsets))
    return (
        _distinct_partitions(topics, map(itemgetter("topic"), offsets), map(itemgetter("partition"), offsets))
        and max(filter(_known, chain(committed, ends)), default=0) <= INT64_MAX
        and not any(map(_above, committed, ends))
    )


def _distinct_partitions(topics: Mapping[str, int], names: Iterator[str], partitions: Iterator[int]) -> bool:
    """Each (names[i], partitions[i]) a partition of `topics` (a known topic, 0 <= partition < its count, within
    int32), none twice. Vectorized, allocating per pair only (never per partition a count claims)."""
    index = {topic: i for i, topic in enumerate(topics)}
    try:
        counts = np.fromiter(topics.values(), np.int64, len(topics))
        rank = np.fromiter(map(index.__getitem__, names), np.int64)
        partition = np.fromiter(partitions, np.int64)
    except (KeyError, OverflowError):  # a topic missing from `topics`, a number beyond int64
        return False
    if not len(partition):
        return True
    if partition.min() < 0 or partition.max() > INT32_MAX or (partition >= counts[rank]).any():
        return False
    keys = np.sort(rank << 31 | partition)
    return not (keys[1:] == keys[:-1]).any()


def _above(committed: int | None, end: int | None) -> bool:
    return committed is not None and end is not None and committed > end


_known = partial(operator.is_not, None)


def _load_errors(topics: Mapping[str, int], loads: Mapping[str, list[float]]) -> Iterator[str]:
    """The compact form's per-partition loads: a known topic, at most one load per partition, finite values."""
    for topic, values in loads.items():
        where = json_path(("loads", topic))
        if topic not in topics:
            yield f"{where}: topic {_quoted(topic)} is missing from topics"
        elif len(values) > topics[topic]:
            yield f"{where}: {len(values)} loads for {topics[topic]} partitions"
        yield from (f"{where}[{p}]: load must be finite, got {v}" for p, v in enumerate(values) if not math.isfinite(v))


def _int32(value: Any, where: str) -> Iterator[str]:
    if value is not None and value > INT32_MAX:
        yield f"{where}: {value} is above Kafka's int32 maximum {INT32_MAX}"


def _out_of_range(topics: Mapping[str, int], topic: str, partition: int) -> str | None:
    if topic not in topics:
        return f"topic {_quoted(topic)} is missing from topics"
    if not 0 <= partition < topics[topic]:
        return f"{_tp(topic, partition)} is out of range ({_name(topic)} has {topics[topic]} partitions)"
    return None


def _tp(topic: str, partition: int) -> str:
    return f"{_name(topic)}-{partition}"


def _name(text: str) -> str:
    """`text` as it is when printable, else quoted with escapes, so a message is always printable UTF-8."""
    return _shorten(text, 200) if text.isprintable() and text else _quoted(text)


def _quoted(value: Any) -> str:
    return _shorten(repr(value), 200)


def _shorten(text: str, limit: int) -> str:
    return text if len(text) <= limit else f"{text[: limit - 3]}..."
