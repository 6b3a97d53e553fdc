"""ConsumerGroupHeartbeat (API key 68, KIP-848): the request a consumer-protocol member sends, and the answer.

Written from Kafka's message specs (clients/src/main/resources/common/message/ConsumerGroupHeartbeatRequest.json
and ...Response.json, 4.4: "validVersions": "0-1", "flexibleVersions": "0+", no tagged fields). Version 1 adds
SubscribedTopicRegex and has the member generate its own MemberId (KIP-1082). The compact encodings are
`planner.kip848_protocol`'s. A member joins with MemberEpoch 0, a RebalanceTimeoutMs, a subscription and an
empty TopicPartitions list (GroupCoordinatorService.throwIfConsumerGroupHeartbeatRequestIsInvalid), and leaves
with MemberEpoch -1 (-2: a static member that will come back).

>>> request = HeartbeatRequest("g", "m-1", 0, subscribed_topic_names=("orders",), rebalance_timeout_ms=1000)
>>> encode_request(request).hex(" ")
'02 67 04 6d 2d 31 00 00 00 00 00 00 00 00 03 e8 02 07 6f 72 64 65 72 73 00 00 01 00'
"""

from __future__ import annotations

import base64
import struct
from dataclasses import dataclass

from planner.kip848_protocol import (
    NO_TAGGED_FIELDS,
    AssignedTopic,
    _compact_array,
    _compact_string,
    _Reader,
    _uuid,
    _uvarint,
)

API_KEY = 68  # ApiKeys.CONSUMER_GROUP_HEARTBEAT
HIGHEST_VERSION = 1
JOIN_EPOCH = 0  # MemberEpoch: join (or rejoin) the group
LEAVE_EPOCH = -1  # MemberEpoch: leave the group
STATIC_LEAVE_EPOCH = -2  # MemberEpoch: a static member leaves and will rejoin with the same instance id


@dataclass(frozen=True)
class HeartbeatRequest:
    """ConsumerGroupHeartbeatRequest; None means "unchanged since the last heartbeat" (or, joining, not used)."""

    group_id: str
    member_id: str
    member_epoch: int
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: tuple[str, ...] | None = None
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    owned: tuple[tuple[str, tuple[int, ...]], ...] | None = ()  # (topic id, partitions) the member owns


@dataclass(frozen=True)
class HeartbeatResponse:
    """ConsumerGroupHeartbeatResponse: the member's epoch and, when it changed, its assignment (topic ids)."""

    error_code: int
    error_message: str | None
    member_id: str | None
    member_epoch: int
    heartbeat_interval_ms: int
    assignment: tuple[AssignedTopic, ...] | None
    throttle_time_ms: int = 0


def _check_version(version: int) -> None:
    if not 0 <= version <= HIGHEST_VERSION:
        raise ValueError(f"ConsumerGroupHeartbeat version {version} is not one of 0..{HIGHEST_VERSION}")


def encode_request(request: HeartbeatRequest, version: int = HIGHEST_VERSION) -> bytes:
    """The request body, field by field as ConsumerGroupHeartbeatRequest.json orders them."""
    _check_version(version)
    if version == 0 and request.subscribed_topic_regex is not None:
        raise ValueError("SubscribedTopicRegex needs ConsumerGroupHeartbeat version 1")
    names = request.subscribed_topic_names
    owned = request.owned
    return (
        _compact_string(request.group_id)
        + _compact_string(request.member_id)
        + struct.pack(">i", request.member_epoch)
        + _compact_string(request.instance_id)
        + _compact_string(request.rack_id)
        + struct.pack(">i", request.rebalance_timeout_ms)
        + (b"\x00" if names is None else _compact_array([_compact_string(t) for t in names]))
        + (_compact_string(request.subscribed_topic_regex) if version >= 1 else b"")
        + _compact_string(request.server_assignor)
        + (
            b"\x00"
            if owned is None
            else _compact_array(
                [
                    _uuid(topic_id) + _uvarint(len(ps) + 1) + struct.pack(f">{len(ps)}i", *ps) + NO_TAGGED_FIELDS
                    for topic_id, ps in owned
                ]
            )
        )
        + NO_TAGGED_FIELDS
    )


def decode_response(data: bytes, version: int = HIGHEST_VERSION) -> HeartbeatResponse:
    """Parse a response body of `version`; raises ProtocolError naming the byte offset."""
    _check_version(version)
    r = _Reader(data, f"ConsumerGroupHeartbeatResponse v{version}")
    throttle = r.fixed(">i", "ThrottleTimeMs")
    error_code = r.fixed(">h", "ErrorCode")
    error_message = r.nullable_string("ErrorMessage")
    member_id = r.nullable_string("MemberId")
    member_epoch = r.fixed(">i", "MemberEpoch")
    interval = r.fixed(">i", "HeartbeatIntervalMs")
    assignment: tuple[AssignedTopic, ...] | None = None
    if r.fixed(">b", "Assignment presence") >= 0:  # a nullable struct: -1 null, 1 present
        topics = []
        for _ in range(r.array("Assignment.TopicPartitions", 17)):
            topic_id = r.take(16, "TopicPartitions.TopicId")
            partitions = tuple(r.fixed(">i", "Partitions[]") for _ in range(r.array("Partitions", 4)))
            r.tagged_fields("TopicPartitions")
            topics.append(AssignedTopic(_uuid_text(topic_id), "", partitions))
        r.tagged_fields("Assignment")
        assignment = tuple(topics)
    r.tagged_fields("ConsumerGroupHeartbeatResponse")
    r.end()
    return HeartbeatResponse(error_code, error_message, member_id, member_epoch, interval, assignment, throttle)


def _uuid_text(raw: bytes) -> str:
    """Uuid.toString: base64url without padding."""
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")
