"""ConsumerGroupDescribe (API key 69, KIP-848): the request, the response, and their headers, on the wire.

kafka-python 3.0.12 has no class for this API, so the codec is written here from Kafka's message specs
(clients/src/main/resources/common/message/ConsumerGroupDescribeRequest.json and ...Response.json). Every
version is flexible ("flexibleVersions": "0+", KIP-482): strings are compact (unsigned varint length + 1,
0 = null), arrays compact (unsigned varint count + 1, 0 = null), and every struct ends with its tagged fields
(a varint count, then tag, size and bytes of each; unknown tags are skipped, as Kafka's generated readers keep
them aside). Version 1 adds Member.MemberType (int8, -1 unknown, 0 classic, 1 consumer; KIP-1099).
Requests travel with request header v2 (ClientId stays a non-compact int16-length string: RequestHeader.json
"flexibleVersions": "none" for it) and responses with response header v1 (correlation id, tagged fields).

>>> request = DescribeRequest(("payments",))
>>> encode_request(request, 0).hex(" ")
'02 09 70 61 79 6d 65 6e 74 73 00 00'
>>> decode_request(encode_request(request, 0), 0) == request
True
"""

from __future__ import annotations

import base64
import struct
from dataclasses import dataclass

from planner.wire import WireReader

__all__ = [
    "API_KEY",
    "AUTHORIZED_OPERATIONS_OMITTED",
    "HIGHEST_VERSION",
    "AssignedTopic",
    "DescribeRequest",
    "DescribeResponse",
    "DescribedGroup",
    "Member",
    "decode_request",
    "decode_response",
    "decode_response_header",
    "encode_request",
    "encode_request_header",
    "encode_response",
]

API_KEY = 69  # ApiKeys.CONSUMER_GROUP_DESCRIBE
HIGHEST_VERSION = 1  # "validVersions": "0-1"
AUTHORIZED_OPERATIONS_OMITTED = -(2**31)  # DescribedGroup.AuthorizedOperations "default": "-2147483648"
MEMBER_TYPE_UNKNOWN = -1  # Member.MemberType "default": "-1" (v1+)


@dataclass(frozen=True)
class DescribeRequest:
    """ConsumerGroupDescribeRequest: the groups to describe."""

    group_ids: tuple[str, ...]
    include_authorized_operations: bool = False


@dataclass(frozen=True)
class AssignedTopic:
    """TopicPartitions (a common struct): a topic's id (Uuid.toString: base64url, 22 characters), name, partitions."""

    topic_id: str
    topic: str
    partitions: tuple[int, ...]


@dataclass(frozen=True)
class Member:
    """DescribedGroup.Member: one member's identity, epoch, subscription, and current and target assignments."""

    member_id: str
    member_epoch: int
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...] = ()
    instance_id: str | None = None
    rack_id: str | None = None
    subscribed_topic_regex: str | None = None
    assignment: tuple[AssignedTopic, ...] = ()
    target_assignment: tuple[AssignedTopic, ...] = ()
    member_type: int = MEMBER_TYPE_UNKNOWN  # v1+


@dataclass(frozen=True)
class DescribedGroup:
    """DescribedGroup: a group's state, epochs, server assignor and members, or the error describing it."""

    group_id: str
    error_code: int = 0
    error_message: str | None = None
    group_state: str = ""
    group_epoch: int = 0
    assignment_epoch: int = 0
    assignor_name: str = ""
    members: tuple[Member, ...] = ()
    authorized_operations: int = AUTHORIZED_OPERATIONS_OMITTED


@dataclass(frozen=True)
class DescribeResponse:
    """ConsumerGroupDescribeResponse: one DescribedGroup per requested group id."""

    groups: tuple[DescribedGroup, ...]
    throttle_time_ms: int = 0


# --- writer ------------------------------------------------------------------------------------------------------


def _uvarint(value: int) -> bytes:
    """ByteUtils.writeUnsignedVarint: 7 bits per byte, low first, high bit set on all but the last."""
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _compact_string(text: str | None) -> bytes:
    if text is None:
        return b"\x00"
    raw = text.encode("utf-8")
    if len(raw) > 0x7FFF:  # Kafka's generated writers refuse strings longer than Short.MAX_VALUE bytes
        raise ValueError(f"string of {len(raw)} bytes is longer than 32767")
    return _uvarint(len(raw) + 1) + raw


def _compact_array(items: list[bytes]) -> bytes:
    return _uvarint(len(items) + 1) + b"".join(items)


NO_TAGGED_FIELDS = b"\x00"


def _uuid(topic_id: str) -> bytes:
    """Uuid.fromString: base64url, padding optional, exactly 16 bytes."""
    raw = base64.urlsafe_b64decode(topic_id + "=" * (-len(topic_id) % 4))
    if len(raw) != 16:
        raise ValueError(f"topic id {topic_id!r} is {len(raw)} bytes, not the 16 of a Uuid")
    return raw


def _check_version(version: int) -> None:
    if not 0 <= version <= HIGHEST_VERSION:
        raise ValueError(f"ConsumerGroupDescribe version {version} is not one of 0..{HIGHEST_VERSION}")


def encode_request(request: DescribeRequest, version: int = HIGHEST_VERSION) -> bytes:
    """The request body: GroupIds ([]string), IncludeAuthorizedOperations (bool), tagged fields."""
    _check_version(version)
    return (
        _compact_array([_compact_string(g) for g in request.group_ids])
        + (b"\x01" if request.include_authorized_operations else b"\x00")
        + NO_TAGGED_FIELDS
    )


def encode_request_header(version: int, correlation_id: int, client_id: str | None, api_key: int = API_KEY) -> bytes:
    """Request header v2: RequestApiKey, RequestApiVersion, CorrelationId, ClientId (int16 length), tagged fields.

    The same header serves every flexible KIP-848 request (`api_key`: 69 ConsumerGroupDescribe by default)."""
    if api_key == API_KEY:
        _check_version(version)
    raw = None if client_id is None else client_id.encode("utf-8")
    client = struct.pack(">h", -1) if raw is None else struct.pack(">h", len(raw)) + raw
    return struct.pack(">hhi", api_key, version, correlation_id) + client + NO_TAGGED_FIELDS


def _topics(topics: tuple[AssignedTopic, ...]) -> bytes:
    """Assignment: TopicPartitions ([]TopicPartitions: TopicId uuid, TopicName string, Partitions []int32)."""
    entries = [
        _uuid(t.topic_id)
        + _compact_string(t.topic)
        + _uvarint(len(t.partitions) + 1)
        + struct.pack(f">{len(t.partitions)}i", *t.partitions)
        + NO_TAGGED_FIELDS
        for t in topics
    ]
    return _compact_array(entries) + NO_TAGGED_FIELDS


def _member(m: Member, version: int) -> bytes:
    return (
        _compact_string(m.member_id)
        + _compact_string(m.instance_id)
        + _compact_string(m.rack_id)
        + struct.pack(">i", m.member_epoch)
        + _compact_string(m.client_id)
        + _compact_string(m.client_host)
        + _compact_array([_compact_string(t) for t in m.subscribed_topic_names])
        + _compact_string(m.subscribed_topic_regex)
        + _topics(m.assignment)
        + _topics(m.target_assignment)
        + (struct.pack(">b", m.member_type) if version >= 1 else b"")
        + NO_TAGGED_FIELDS
    )


def encode_response(response: DescribeResponse, version: int = HIGHEST_VERSION) -> bytes:
    """The response body, field by field as ConsumerGroupDescribeResponse.json orders them."""
    _check_version(version)
    groups = [
        struct.pack(">h", g.error_code)
        + _compact_string(g.error_message)
        + _compact_string(g.group_id)
        + _compact_string(g.group_state)
        + struct.pack(">ii", g.group_epoch, g.assignment_epoch)
        + _compact_string(g.assignor_name)
        + _compact_array([_member(m, version) for m in g.members])
        + struct.pack(">i", g.authorized_operations)
        + NO_TAGGED_FIELDS
        for g in response.groups
    ]
    return struct.pack(">i", response.throttle_time_ms) + _compact_array(groups) + NO_TAGGED_FIELDS


# --- reader ------------------------------------------------------------------------------------------------------


class _Reader(WireReader):
    """The flexible encoding's reader: unsigned varints, compact strings and arrays, tagged fields."""

    def uvarint(self, expected: str) -> int:
        """ByteUtils.readUnsignedVarint: at most 5 bytes for an unsigned 32-bit value."""
        start, value = self.pos, 0
        for shift in range(0, 35, 7):
            byte = self.fixed(">B", expected)
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                if value > 0xFFFFFFFF:
                    break
                return value
        raise self.fail(f"{expected} (a varint of at most 5 bytes)", start)

    def length(self, expected: str, item_size: int) -> int | None:
        """A compact length (varint - 1; None for null) that the remaining bytes can hold, before allocating."""
        start = self.pos
        n = self.uvarint(expected) - 1
        if n > (len(self.data) - self.pos) // item_size:
            raise self.fail(
                f"{expected}: a length of {n} that the {len(self.data) - self.pos} bytes left can hold", start
            )
        return None if n < 0 else n

    def string(self, expected: str) -> str:
        start = self.pos
        value = self.nullable_string(expected)
        if value is None:
            raise self.fail(f"{expected} (non-nullable string, got null)", start)
        return value

    def nullable_string(self, expected: str) -> str | None:
        start = self.pos
        n = self.length(expected, 1)
        if n is None:
            return None
        try:
            return self.take(n, expected).decode("utf-8")
        except UnicodeDecodeError:
            raise self.fail(f"{expected} as UTF-8", start) from None

    def array(self, expected: str, item_size: int) -> int:
        """The count of a non-nullable compact array (every array of this message is non-nullable)."""
        start = self.pos
        n = self.length(expected, item_size)
        if n is None:
            raise self.fail(f"{expected} (non-nullable array, got null)", start)
        return n

    def tagged_fields(self, expected: str) -> None:
        """Skip a struct's tagged fields: none is known for this message in any version."""
        for _ in range(self.uvarint(f"{expected} tagged field count")):
            self.uvarint(f"{expected} tag")
            self.take(self.uvarint(f"{expected} tagged field size"), f"{expected} tagged field data")

    def end(self) -> None:
        if self.pos != len(self.data):
            raise self.fail(f"the end of the message ({len(self.data) - self.pos} bytes left over)")


def decode_request(data: bytes, version: int = HIGHEST_VERSION) -> DescribeRequest:
    """Parse a request body of `version`; raises ProtocolError naming the byte offset."""
    _check_version(version)
    r = _Reader(data, f"ConsumerGroupDescribeRequest v{version}")
    ids = tuple(r.string("GroupIds[]") for _ in range(r.array("GroupIds", 1)))
    include = r.fixed(">B", "IncludeAuthorizedOperations") != 0
    r.tagged_fields("request")
    r.end()
    return DescribeRequest(ids, include)


def decode_response_header(data: bytes) -> tuple[int, int]:
    """Response header v1: (correlation id, the offset where the body starts)."""
    r = _Reader(data, "ResponseHeader v1")
    correlation_id = r.fixed(">i", "CorrelationId")
    r.tagged_fields("header")
    return correlation_id, r.pos


def _read_topics(r: _Reader, expected: str) -> tuple[AssignedTopic, ...]:
    topics = []
    for _ in range(r.array(f"{expected}.TopicPartitions", 16 + 1 + 1 + 1)):
        topic_id = base64.urlsafe_b64encode(r.take(16, f"{expected}.TopicId")).rstrip(b"=").decode("ascii")
        name = r.string(f"{expected}.TopicName")
        count = r.array(f"{expected}.Partitions", 4)
        # One unpack per topic, not one per partition: a large group lists hundreds of thousands of them.
        partitions = struct.unpack(f">{count}i", r.take(4 * count, f"{expected}.Partitions[]"))
        r.tagged_fields(f"{expected}.TopicPartitions")
        topics.append(AssignedTopic(topic_id, name, partitions))
    r.tagged_fields(expected)
    return tuple(topics)


def _read_member(r: _Reader, version: int) -> Member:
    member_id = r.string("Member.MemberId")
    instance_id = r.nullable_string("Member.InstanceId")
    rack_id = r.nullable_string("Member.RackId")
    epoch = r.fixed(">i", "Member.MemberEpoch")
    client_id = r.string("Member.ClientId")
    client_host = r.string("Member.ClientHost")
    topics = tuple(r.string("Member.SubscribedTopicNames[]") for _ in range(r.array("Member.SubscribedTopicNames", 1)))
    regex = r.nullable_string("Member.SubscribedTopicRegex")
    assignment = _read_topics(r, "Member.Assignment")
    target = _read_topics(r, "Member.TargetAssignment")
    member_type = r.fixed(">b", "Member.MemberType") if version >= 1 else MEMBER_TYPE_UNKNOWN
    r.tagged_fields("Member")
    return Member(
        member_id, epoch, client_id, client_host, topics, instance_id, rack_id, regex, assignment, target, member_type
    )


def decode_response(data: bytes, version: int = HIGHEST_VERSION) -> DescribeResponse:
    """Parse a response body of `version`; raises ProtocolError naming the field and byte offset."""
    _check_version(version)
    r = _Reader(data, f"ConsumerGroupDescribeResponse v{version}")
    throttle = r.fixed(">i", "ThrottleTimeMs")
    groups = []
    for _ in range(r.array("Groups", 2 + 1 + 1 + 1 + 4 + 4 + 1 + 1 + 4 + 1)):
        error_code = r.fixed(">h", "DescribedGroup.ErrorCode")
        error_message = r.nullable_string("DescribedGroup.ErrorMessage")
        group_id = r.string("DescribedGroup.GroupId")
        state = r.string("DescribedGroup.GroupState")
        group_epoch = r.fixed(">i", "DescribedGroup.GroupEpoch")
        assignment_epoch = r.fixed(">i", "DescribedGroup.AssignmentEpoch")
        assignor = r.string("DescribedGroup.AssignorName")
        members = tuple(_read_member(r, version) for _ in range(r.array("DescribedGroup.Members", 12)))
        operations = r.fixed(">i", "DescribedGroup.AuthorizedOperations")
        r.tagged_fields("DescribedGroup")
        groups.append(
            DescribedGroup(
                group_id, error_code, error_message, state, group_epoch, assignment_epoch, assignor, members, operations
            )
        )
    r.tagged_fields("response")
    r.end()
    return DescribeResponse(tuple(groups), throttle)
