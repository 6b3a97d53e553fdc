"""KIP-848 members at the protocol level: ConsumerGroupHeartbeat requests sent straight to the group coordinator.

A member here is what a consumer-protocol client is to the coordinator, without a fetch loop: it joins (epoch 0,
a subscription, an empty owned list), keeps its epoch, changes its subscription, and leaves (epoch -1). Hundreds
of them cost one connection, so the broker can be asked to assign many seeded random groups in seconds: the
tests use this to hold the planner's server-side assignors against the broker's own target assignments, and the
pull benchmark to fill a cluster with consumer groups. Real clients (librdkafka) run in `jobs.demo.cluster`.
"""

from __future__ import annotations

import base64
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from jobs.io import kip848_source
from planner import kip848_heartbeat as hb
from planner.errors import SourceError

REBALANCE_TIMEOUT_MS = 30_000


class MemberError(SourceError):
    """The coordinator refused a heartbeat."""


@dataclass
class ProtocolMember:
    """One member as the coordinator knows it: its id, the epoch it last received, its subscription."""

    member_id: str
    topics: tuple[str, ...] = ()
    regex: str | None = None
    instance_id: str | None = None
    rack: str | None = None
    epoch: int = 0
    owned: tuple[tuple[str, tuple[int, ...]], ...] = ()  # (topic id, partitions): its last answer's assignment


@dataclass
class ProtocolGroup:
    """A consumer group driven by heartbeats through a kafka-python admin client's connection to its coordinator."""

    admin: Any
    group_id: str
    server_assignor: str | None = None
    members: dict[str, ProtocolMember] = field(default_factory=dict)

    def _send(self, request: hb.HeartbeatRequest) -> hb.HeartbeatResponse:
        """Send to the group's coordinator; a retriable error (no coordinator yet, loading) is retried for 30 s."""
        from kafka.errors import KafkaError, for_code

        async def send() -> hb.HeartbeatResponse:
            node = (await self.admin._find_coordinator_ids([self.group_id]))[self.group_id]
            response: hb.HeartbeatResponse = await self.admin._manager.send(
                kip848_source.HeartbeatRequest(request), node_id=node
            )
            return response

        deadline = time.monotonic() + 30
        while True:
            try:
                response: hb.HeartbeatResponse = self.admin._manager.run(send)
            except KafkaError as exc:
                if not exc.retriable or time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
                continue
            if not (response.error_code and for_code(response.error_code).retriable) or time.monotonic() > deadline:
                break
            kip848_source.forget_coordinator(self.admin, self.group_id)
            time.sleep(0.2)
        if response.error_code:
            raise MemberError(
                f"{self.group_id}/{request.member_id}: {for_code(response.error_code).__name__}: "
                f"{response.error_message or ''}"
            )
        return response

    def join(
        self,
        topics: Sequence[str] = (),
        *,
        regex: str | None = None,
        instance_id: str | None = None,
        rack: str | None = None,
        member_id: str | None = None,
    ) -> ProtocolMember:
        """A new member joins with epoch 0; its id is generated here (KIP-1082: clients make their own) unless given."""
        member = ProtocolMember(member_id or new_member_id(), tuple(topics), regex, instance_id, rack)
        response = self._send(
            hb.HeartbeatRequest(
                self.group_id,
                member.member_id,
                hb.JOIN_EPOCH,
                instance_id=instance_id,
                rack_id=rack,
                rebalance_timeout_ms=REBALANCE_TIMEOUT_MS,
                subscribed_topic_names=None if regex is not None else tuple(topics),
                subscribed_topic_regex=regex,
                server_assignor=self.server_assignor,
            )
        )
        self._received(member, response)
        self.members[member.member_id] = member
        return member

    @staticmethod
    def _received(member: ProtocolMember, response: hb.HeartbeatResponse) -> None:
        member.epoch = response.member_epoch
        if response.assignment is not None:
            member.owned = tuple((t.topic_id, t.partitions) for t in response.assignment)

    def heartbeat(self, member_id: str, *, topics: Sequence[str] | None = None) -> None:
        """A heartbeat at the member's epoch; with `topics`, a new subscription. Nothing else changes."""
        member = self.members[member_id]
        if topics is not None:
            member.topics = tuple(topics)
        response = self._send(
            hb.HeartbeatRequest(
                self.group_id,
                member_id,
                member.epoch,
                subscribed_topic_names=None if topics is None else tuple(topics),
                owned=None,
            )
        )
        self._received(member, response)

    def reconcile(self, member_id: str, *, full: bool = False) -> None:
        """A heartbeat reporting what the member owns, as a consumer reconciles: it takes what its last answer
        assigned and drops what it was told to revoke (the acknowledgement). `full` also restates the rebalance
        timeout and the subscription, which the coordinator answers with the member's whole assignment."""
        member = self.members[member_id]
        response = self._send(
            hb.HeartbeatRequest(
                self.group_id,
                member_id,
                member.epoch,
                rebalance_timeout_ms=REBALANCE_TIMEOUT_MS if full else -1,
                subscribed_topic_names=member.topics if full and member.regex is None else None,
                owned=member.owned,
            )
        )
        self._received(member, response)

    def leave(self, member_id: str) -> None:
        """The member leaves the group for good (epoch -1)."""
        member = self.members.pop(member_id)
        self._send(
            hb.HeartbeatRequest(self.group_id, member_id, hb.LEAVE_EPOCH, instance_id=member.instance_id, owned=None)
        )

    def leave_all(self) -> None:
        for member_id in list(self.members):
            self.leave(member_id)

    def describe(self) -> kip848_source.ConsumerGroup:
        """The group as ConsumerGroupDescribe reports it now."""
        return kip848_source.describe_consumer_groups(self.admin, [self.group_id])[self.group_id]

    def settled_target(self, after_epoch: int = -1, timeout_s: float = 15.0) -> kip848_source.ConsumerGroup:
        """The group once its target assignment is computed for a group epoch past `after_epoch`.

        The coordinator bumps the group epoch on a membership, subscription or metadata change (the latter seen on
        the next heartbeat) and computes a target when a member heartbeats after the epoch moved (in Kafka 4.4
        possibly off the request thread): a member heartbeats until the described epochs agree.
        """
        deadline = time.monotonic() + timeout_s
        while True:
            group = self.describe()
            epoch, assigned = group.fields.get("group_epoch"), group.fields.get("assignment_epoch")
            if epoch == assigned and (epoch or 0) > after_epoch and len(group.members) == len(self.members):
                return group
            if time.monotonic() > deadline:
                raise MemberError(f"{self.group_id}: no target assignment within {timeout_s:.0f}s: {group.fields}")
            for member_id in list(self.members)[:1]:
                self.heartbeat(member_id)
            time.sleep(0.05)


def new_member_id(bits: int | None = None) -> str:
    """A member id as the Java consumer makes one (Uuid.randomUuid().toString(): 22 base64url characters), from
    `bits` (128 of them) when given, so a seeded scenario names its members the same way every time."""
    raw = (uuid.uuid4().int if bits is None else bits).to_bytes(16, "big")
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")
