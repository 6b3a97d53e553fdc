"""The consumer protocol codec: JoinGroup member metadata (Subscription) and SyncGroup member assignment.

Mirrors Kafka's ConsumerProtocol.java over the generated ConsumerProtocolSubscription /
ConsumerProtocolAssignment messages (clients/src/main/resources/common/message/*.json, versions 0-3, not
flexible): an int16 version header, then the fields of that version in order. Strings are int16-length
prefixed, nullable bytes/strings use length -1 for null, arrays are int32-count prefixed.
A version newer than 3 is read as version 3 by its known prefix (ConsumerProtocol.checkSubscriptionVersion:
"it parses it using the current format"); a negative version is rejected.

Also the assignors' own user data: StickyAssignor (v0 previous assignment, v1 plus generation;
StickyAssignor.serializeTopicPartitionAssignment) and CooperativeStickyAssignor (one int32 generation).

>>> sub = Subscription(topics=("orders",), owned_partitions=(("orders", (0, 1)),), generation_id=4, version=2)
>>> decode_subscription(encode_subscription(sub)) == sub
True
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from planner.wire import ProtocolError, WireReader

__all__ = [
    "Assignment",
    "ProtocolError",
    "StickyUserData",
    "Subscription",
    "decode_assignment",
    "decode_cooperative_user_data",
    "decode_sticky_user_data",
    "decode_subscription",
    "encode_assignment",
    "encode_cooperative_user_data",
    "encode_sticky_user_data",
    "encode_subscription",
]

HIGHEST_VERSION = 3  # ConsumerProtocolSubscription / ConsumerProtocolAssignment "validVersions": "0-3"
DEFAULT_GENERATION = -1  # ConsumerProtocolSubscription GenerationId "default": "-1"

TopicPartitions = tuple[tuple[str, tuple[int, ...]], ...]
"""((topic, (partition, ...)), ...) in wire order, as the TopicPartition arrays carry them."""


@dataclass(frozen=True)
class Subscription:
    """ConsumerProtocolSubscription: what a member sends in JoinGroup's protocol metadata."""

    topics: tuple[str, ...]
    user_data: bytes | None = None
    owned_partitions: TopicPartitions = ()  # v1+
    generation_id: int = DEFAULT_GENERATION  # v2+
    rack_id: str | None = None  # v3+
    version: int = HIGHEST_VERSION


@dataclass(frozen=True)
class Assignment:
    """ConsumerProtocolAssignment: what the leader hands each member in SyncGroup."""

    partitions: TopicPartitions
    user_data: bytes | None = None
    version: int = HIGHEST_VERSION


@dataclass(frozen=True)
class StickyUserData:
    """StickyAssignor user data: the member's previous assignment and (v1) its generation."""

    previous_assignment: TopicPartitions
    generation: int | None = None  # None: v0, which carries no generation
    version_prefixed: bool = False  # kafka-python's layout: an int16 version first, which Java cannot read


# --- writer ---------------------------------------------------------------------------------------------


def _int16(v: int) -> bytes:
    return struct.pack(">h", v)


def _int32(v: int) -> bytes:
    return struct.pack(">i", v)


def _string(s: str) -> bytes:
    raw = s.encode("utf-8")
    if len(raw) > 0x7FFF:
        raise ValueError(f"string of {len(raw)} bytes is longer than an int16 length allows")
    return _int16(len(raw)) + raw


def _nullable_string(s: str | None) -> bytes:
    return _int16(-1) if s is None else _string(s)


def _nullable_bytes(b: bytes | None) -> bytes:
    return _int32(-1) if b is None else _int32(len(b)) + bytes(b)


def _topic_partitions(tps: TopicPartitions) -> bytes:
    out = [_int32(len(tps))]
    for topic, partitions in tps:
        out.append(_string(topic))
        out.append(_int32(len(partitions)))
        out.extend(_int32(p) for p in partitions)
    return b"".join(out)


def _check_version(version: int, what: str) -> int:
    """ConsumerProtocol.check*Version: negative is unsupported, newer than known is treated as the newest."""
    if version < 0:
        raise ProtocolError(f"unsupported {what} version {version} at byte offset 0")
    return min(version, HIGHEST_VERSION)


def encode_subscription(sub: Subscription) -> bytes:
    """Version-prefixed ConsumerProtocolSubscription bytes (MessageUtil.toVersionPrefixedByteBuffer)."""
    v = _check_version(sub.version, "subscription")
    if v < 1 and sub.owned_partitions:
        raise ValueError("subscription version 0 cannot carry owned partitions")
    out = [_int16(sub.version), _int32(len(sub.topics))]
    out.extend(_string(t) for t in sub.topics)
    out.append(_nullable_bytes(sub.user_data))
    if v >= 1:
        out.append(_topic_partitions(sub.owned_partitions))
    if v >= 2:
        out.append(_int32(sub.generation_id))
    if v >= 3:
        out.append(_nullable_string(sub.rack_id))
    return b"".join(out)


def encode_assignment(assignment: Assignment) -> bytes:
    """Version-prefixed ConsumerProtocolAssignment bytes; the body is the same in versions 0-3."""
    _check_version(assignment.version, "assignment")
    return _int16(assignment.version) + _topic_partitions(assignment.partitions) + _nullable_bytes(assignment.user_data)


def encode_sticky_user_data(data: StickyUserData) -> bytes:
    """StickyAssignor user data: [topic [partition]] then, in v1, generation (Java: no version header)."""
    body = _topic_partitions(data.previous_assignment)
    if data.generation is not None:
        body += _int32(data.generation)
    return _int16(0 if data.generation is None else 1) + body if data.version_prefixed else body


def encode_cooperative_user_data(generation: int) -> bytes:
    """CooperativeStickyAssignor.subscriptionUserData: the generation as one int32."""
    return _int32(generation)


# --- reader ---------------------------------------------------------------------------------------------


class _Reader(WireReader):
    """The classic encoding's reader: int16-length strings, int32-length bytes, int32-count arrays."""

    def fail(self, expected: str, at: int | None = None) -> ProtocolError:
        """The cursor's error, with the message's size."""
        return ProtocolError(f"{super().fail(expected, at)} (message is {len(self.data)} bytes)")

    def int16(self, field: str) -> int:
        return self.fixed(">h", f"int16 {field}")

    def int32(self, field: str) -> int:
        return self.fixed(">i", f"int32 {field}")

    def string(self, field: str) -> str:
        start = self.pos
        return self._chars(self.int16(f"length of string {field}"), start, field)

    def nullable_string(self, field: str) -> str | None:
        start = self.pos
        n = self.int16(f"length of string {field}")
        return None if n == -1 else self._chars(n, start, field)

    def _chars(self, n: int, start: int, field: str) -> str:
        """The UTF-8 body of a string whose int16 length `n` was read at `start`."""
        if n < 0:
            raise self.fail(f"a non-negative length for string {field}, got {n}", at=start)
        raw = self.take(n, f"string {field}")
        try:
            return str(raw, "utf-8")
        except UnicodeDecodeError as e:
            raise self.fail(f"UTF-8 in string {field} ({e.reason})", at=start + 2 + e.start) from None

    def nullable_bytes(self, field: str) -> bytes | None:
        start = self.pos
        n = self.int32(f"length of bytes {field}")
        if n == -1:
            return None
        if n < 0:
            raise self.fail(f"length -1 or more for bytes {field}, got {n}", at=start)
        return self.take(n, f"bytes {field}")

    def count(self, field: str, min_item_size: int) -> int:
        start = self.pos
        n = self.int32(f"count of array {field}")
        if n < 0 or n * min_item_size > len(self.data) - self.pos:
            raise self.fail(
                f"a count of array {field} that fits the remaining {len(self.data) - self.pos} bytes, got {n}", at=start
            )
        return n

    def topic_partitions(self, field: str) -> TopicPartitions:
        out = []
        for i in range(self.count(field, 6)):
            topic = self.string(f"{field}[{i}].topic")
            n = self.count(f"{field}[{i}].partitions", 4)
            out.append((topic, tuple(self.int32(f"{field}[{i}].partitions[{j}]") for j in range(n))))
        return tuple(out)

    def version(self) -> int:
        v = self.int16("version")
        if v < 0:
            raise self.fail(f"a version of 0 or more, got {v}", at=0)
        return v


def decode_subscription(data: bytes) -> Subscription:
    """Parse JoinGroup protocol metadata; a newer version is read by its version-3 prefix, extra bytes ignored."""
    r = _Reader(data, "ConsumerProtocolSubscription")
    version = r.version()
    v = min(version, HIGHEST_VERSION)
    topics = tuple(r.string(f"topics[{i}]") for i in range(r.count("topics", 2)))
    user_data = r.nullable_bytes("user_data")
    owned = r.topic_partitions("owned_partitions") if v >= 1 else ()
    generation = r.int32("generation_id") if v >= 2 else DEFAULT_GENERATION
    rack = r.nullable_string("rack_id") if v >= 3 else None
    return Subscription(topics, user_data, owned, generation, rack, version)


def decode_assignment(data: bytes) -> Assignment:
    """Parse SyncGroup member assignment bytes (any version: the body is the same in 0-3)."""
    r = _Reader(data, "ConsumerProtocolAssignment")
    version = r.version()
    partitions = r.topic_partitions("assigned_partitions")
    return Assignment(partitions, r.nullable_bytes("user_data"), version)


def decode_sticky_user_data(data: bytes) -> StickyUserData:
    """StickyAssignor.deserializeTopicPartitionAssignment: try v1 (with generation), fall back to v0.

    Kafka ignores user data that parses as neither (the member then has no previous assignment). One such
    case is kafka-python 3.x, which writes an int16 version before the v1 body: it is decoded here with
    version_prefixed=True so a planner can see what the Java leader would discard.
    """
    try:
        return _sticky_body(_Reader(data, "StickyAssignor user data"))
    except ProtocolError as java_error:
        r = _Reader(data, "StickyAssignor user data")
        if len(data) >= 2 and r.int16("version") in (0, 1):
            try:
                body = _sticky_body(r)
            except ProtocolError:
                raise java_error from None
            return StickyUserData(body.previous_assignment, body.generation, version_prefixed=True)
        raise


def _sticky_body(r: _Reader) -> StickyUserData:
    """STICKY_ASSIGNOR_USER_DATA_V1, or V0 when no int32 generation follows the previous assignment."""
    previous = r.topic_partitions("previous_assignment")
    if len(r.data) - r.pos >= 4:
        return StickyUserData(previous, r.int32("generation"))
    return StickyUserData(previous, None)


def decode_cooperative_user_data(data: bytes) -> int:
    """CooperativeStickyAssignor.memberData: the generation in the user data's first four bytes."""
    return _Reader(data, "CooperativeStickyAssignor user data").int32("generation")
