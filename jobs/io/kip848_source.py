"""KIP-848 consumer groups from a live broker: ConsumerGroupDescribe (API key 69) when the broker supports it.

ListGroups v5 tells each group's type (`classic` or `consumer`). A consumer group must not go to DescribeGroups,
which answers for classic groups only (Kafka 4.0's GroupMetadataManager.describeGroups reports any other group as
Dead). When the broker's ApiVersions lists API key 69, the group is described with `planner.kip848_protocol`
(kafka-python 3.0.12 has no class for it) sent through kafka-python's connection to the group's coordinator.
When it does not, the group is still recorded, with group_type consumer and state Unknown, and the reason in
`state_reason`, never as an empty or dead group.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from planner import kip848_heartbeat as heartbeat
from planner import kip848_protocol as cgd

log = logging.getLogger(__name__)

UNSUPPORTED = "unknown: broker lacks ConsumerGroupDescribe (API key 69)"


@dataclass(frozen=True)
class ConsumerGroup:
    """A consumer group as `kafka_source` handles a described group: id, state, protocol type, member documents."""

    group_id: str
    group_state: str
    members: tuple[dict[str, Any], ...] = ()
    protocol_type: str = "consumer"
    protocol_data: str = ""
    fields: dict[str, Any] = field(default_factory=dict)  # the snapshot contract's KIP-848 group fields


def consumer_group_ids(listed: Iterable[Mapping[str, Any]], group_ids: Iterable[str]) -> set[str]:
    """The ids among `group_ids` that ListGroups (v5+, GroupType) reports as consumer groups."""
    wanted = set(group_ids)
    return {g["group_id"] for g in listed if g.get("group_type") == "consumer" and g["group_id"] in wanted}


def describe_version(admin: Any) -> int | None:
    """The ConsumerGroupDescribe version to use with this broker (its ApiVersions answer), None if unsupported."""
    versions = getattr(admin._manager.broker_version_data, "api_versions", None) or {}
    if cgd.API_KEY not in versions:
        return None
    low, high = versions[cgd.API_KEY]
    return min(high, cgd.HIGHEST_VERSION) if low <= cgd.HIGHEST_VERSION else None


def describe_consumer_groups(admin: Any, group_ids: Sequence[str]) -> dict[str, ConsumerGroup]:
    """Every group of `group_ids` described with ConsumerGroupDescribe, or recorded as Unknown when unsupported."""
    if not group_ids:
        return {}
    version = describe_version(admin)
    if version is None:
        log.warning("%s: %d consumer groups recorded with state Unknown: %s", UNSUPPORTED, len(group_ids), group_ids)
        return {g: unsupported_group(g) for g in group_ids}
    return {g.group_id: described_group(g) for g in _describe(admin, group_ids, version)}


def unsupported_group(group_id: str) -> ConsumerGroup:
    """A consumer group the broker cannot describe: known to exist and to be a consumer group, nothing more."""
    return ConsumerGroup(group_id, "Unknown", fields={"group_type": "consumer", "state_reason": UNSUPPORTED})


def is_unknown(group: Any) -> bool:
    """The group could not be described (kept even when empty groups are not)."""
    return isinstance(group, ConsumerGroup) and group.fields.get("state_reason") is not None


def group_fields(group: Any) -> dict[str, Any]:
    """The snapshot contract's group-protocol fields of a described group (classic for DescribeGroups answers)."""
    return dict(group.fields) if isinstance(group, ConsumerGroup) else {"group_type": "classic"}


def described_group(group: cgd.DescribedGroup) -> ConsumerGroup:
    """A DescribedGroup in the snapshot contract: the coordinator's state, assignor, epochs and members."""
    members = tuple(
        {
            "member_id": m.member_id,
            "client_id": m.client_id,
            "host": m.client_host,
            "group_instance_id": m.instance_id,
            "rack": m.rack_id,
            "strategies": [],  # the member's group.remote.assignor is not part of the describe answer
            "topics": sorted(m.subscribed_topic_names),
            "topic_regex": m.subscribed_topic_regex or None,  # the broker sends "" for a member without one
            "owned": _pairs(m.assignment),  # KIP-848: what the member owns is its current assignment
            "assignment": _pairs(m.assignment),
            "target_assignment": _pairs(m.target_assignment),
            "member_epoch": m.member_epoch,
            "generation": None,
        }
        for m in group.members
    )
    fields = {
        "group_type": "consumer",
        "server_assignor": group.assignor_name or None,
        "group_epoch": group.group_epoch,
        "assignment_epoch": group.assignment_epoch,
    }
    return ConsumerGroup(group.group_id, group.group_state or "Unknown", members, fields=fields)


def resolve_patterns(groups: Mapping[str, ConsumerGroup], topic_names: Iterable[str]) -> None:
    """Add to each regex-subscribed member's `topics` the cluster's topics its regex matches, in place.

    The coordinator matches a SubscribedTopicRegex (RE2J syntax) against every topic name in the metadata image,
    whole-name (`Pattern.matcher(topic).matches()`); the describe answer carries the regex, not what it matched.
    Python's `re.fullmatch` agrees with RE2J on the common syntax; a regex Python cannot compile matches nothing.
    """
    names = sorted(set(topic_names))
    for group in groups.values():
        for member in group.members:
            if not member.get("topic_regex"):
                continue
            try:
                pattern = re.compile(member["topic_regex"])
            except re.error:
                log.warning("group %r: topic regex %r does not compile here", group.group_id, member["topic_regex"])
                continue
            member["topics"] = sorted(set(member["topics"]) | {t for t in names if pattern.fullmatch(t)})


def _pairs(topics: Iterable[cgd.AssignedTopic]) -> list[list[Any]]:
    return sorted([t.topic, p] for t in topics for p in t.partitions)


class FlexibleRequest:
    """A KIP-848 request in the shape kafka-python's connection sends (`KafkaProtocol.send_request`).

    The connection asks a request for its API key and version, a header (`with_header`), its framed bytes
    (`encode`), and, from the header, the class that parses the response (`get_response_class`); the bytes and
    the parsing are `planner`'s codecs (request header v2, response header v1, flexible bodies).
    """

    API_KEY: int
    NAME: str

    def __init__(self, version: int) -> None:
        self.API_VERSION = version
        self.header: _Header | None = None

    def body(self) -> bytes:
        raise NotImplementedError

    def decode_body(self, data: bytes) -> Any:
        raise NotImplementedError

    def expect_response(self) -> bool:
        return True

    def with_header(self, correlation_id: int = 0, client_id: str = "rebalance-planner") -> None:
        self.header = _Header(correlation_id, client_id, self.API_VERSION, self)

    def encode(self, version: int | None = None, header: bool = False, framed: bool = False) -> bytes:
        body = self.body()
        if header:
            assert self.header is not None, "with_header() first"
            body = (
                cgd.encode_request_header(
                    self.API_VERSION, self.header.correlation_id, self.header.client_id, self.API_KEY
                )
                + body
            )
        return len(body).to_bytes(4, "big") + body if framed else body


class DescribeRequest(FlexibleRequest):
    """ConsumerGroupDescribe (API key 69)."""

    API_KEY = cgd.API_KEY
    NAME = "ConsumerGroupDescribeRequest"

    def __init__(self, request: cgd.DescribeRequest, version: int) -> None:
        super().__init__(version)
        self.request = request

    def body(self) -> bytes:
        return cgd.encode_request(self.request, self.API_VERSION)

    def decode_body(self, data: bytes) -> cgd.DescribeResponse:
        return cgd.decode_response(data, self.API_VERSION)

    def __repr__(self) -> str:
        return f"ConsumerGroupDescribeRequest_v{self.API_VERSION}({list(self.request.group_ids)})"


class HeartbeatRequest(FlexibleRequest):
    """ConsumerGroupHeartbeat (API key 68): what a consumer-protocol member sends its coordinator."""

    API_KEY = heartbeat.API_KEY
    NAME = "ConsumerGroupHeartbeatRequest"

    def __init__(self, request: heartbeat.HeartbeatRequest, version: int = heartbeat.HIGHEST_VERSION) -> None:
        super().__init__(version)
        self.request = request

    def body(self) -> bytes:
        return heartbeat.encode_request(self.request, self.API_VERSION)

    def decode_body(self, data: bytes) -> heartbeat.HeartbeatResponse:
        return heartbeat.decode_response(data, self.API_VERSION)

    def __repr__(self) -> str:
        return f"ConsumerGroupHeartbeatRequest_v{self.API_VERSION}({self.request.group_id!r})"


@dataclass(frozen=True)
class _Header:
    correlation_id: int
    client_id: str
    request_api_version: int
    request: FlexibleRequest

    @property
    def request_api_key(self) -> int:
        return self.request.API_KEY

    def get_response_class(self) -> _ResponseParser:
        return _ResponseParser(self.request)


@dataclass(frozen=True)
class _CorrelationId:
    correlation_id: int


@dataclass(frozen=True)
class _ResponseParser:
    """Parses a response frame (kafka-python's read buffer) as response header v1, then the versioned body."""

    request: FlexibleRequest

    def parse_header(self, buffer: Any) -> _CorrelationId:
        start = buffer.tell()
        correlation_id, size = cgd.decode_response_header(buffer.read())
        buffer.seek(start + size)
        return _CorrelationId(correlation_id)

    def decode(self, buffer: Any) -> Any:
        return self.request.decode_body(buffer.read())


def forget_coordinator(admin: Any, group_id: str) -> None:
    """Drop kafka-python's cached coordinator of a group (ClusterMetadata._coordinators) so the retry looks it up."""
    from kafka.protocol.metadata.find_coordinator import CoordinatorType

    admin._manager.cluster._coordinators.pop((CoordinatorType.GROUP, group_id), None)


GROUP_ID_NOT_FOUND = 69  # Errors.GROUP_ID_NOT_FOUND: the group is gone (or was never a consumer group)
RETRY_BACKOFF_S = (0.1, 0.2, 0.5, 1.0, 1.0, 2.0, 2.0, 3.0)  # ~10 s, as long as a coordinator takes to load


def _describe(admin: Any, group_ids: Sequence[str], version: int) -> list[cgd.DescribedGroup]:
    """Send ConsumerGroupDescribe to each group's coordinator; a group-level error raises kafka-python's error.

    As Kafka's admin client does (DescribeConsumerGroupsHandler.handleError), a retriable group error
    (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE) looks the coordinator up again and
    retries, and GROUP_ID_NOT_FOUND records the group as Dead (it went away between ListGroups and the describe).
    """
    from kafka.errors import KafkaError, for_code

    async def describe(ids: list[str]) -> tuple[list[cgd.DescribedGroup], list[str]]:
        by_coordinator: dict[int, list[str]] = {}
        for group_id, node in (await admin._find_coordinator_ids(ids)).items():
            by_coordinator.setdefault(node, []).append(group_id)
        out, retry = [], []
        for node, batch in sorted(by_coordinator.items()):
            response = await admin._manager.send(
                DescribeRequest(cgd.DescribeRequest(tuple(batch)), version), node_id=node
            )
            for group in response.groups:
                error = for_code(group.error_code) if group.error_code else None
                if group.error_code == GROUP_ID_NOT_FOUND:
                    out.append(cgd.DescribedGroup(group.group_id, group_state="Dead"))
                elif error is not None and error.retriable:
                    retry.append(group.group_id)
                    forget_coordinator(admin, group.group_id)
                elif error is not None:
                    raise error(f"ConsumerGroupDescribe {group.group_id!r}: {group.error_message or 'error'}")
                else:
                    out.append(group)
        return out, retry

    described: list[cgd.DescribedGroup] = []
    pending = list(group_ids)
    for backoff in (0.0, *RETRY_BACKOFF_S):
        if not pending:
            break
        time.sleep(backoff)
        try:
            more, pending = admin._manager.run(describe, pending)
        except KafkaError as exc:  # FindCoordinator itself: no coordinator yet (a broker that just started)
            if not exc.retriable:
                raise
            continue
        described += more
    if pending:
        raise for_code(15)(
            f"ConsumerGroupDescribe {pending[0]!r}: no coordinator answered"
        )  # COORDINATOR_NOT_AVAILABLE
    return described
