"""Classic consumer-group members at the protocol level: JoinGroup, SyncGroup, Heartbeat and LeaveGroup requests.

What `protocol_members` is for KIP-848 groups, this is for classic ones: a member is what a classic consumer is to
its coordinator, without a fetch loop. It joins with protocol type "consumer" and a ConsumerProtocolSubscription
per assignor it offers (`planner.protocol`), the coordinator picks one protocol all members offer, the leader
computes the assignment with this project's own assignor of that name (`planner.assign`) and hands it out in
SyncGroup as ConsumerProtocolAssignments. Members join with a long session timeout and then stay quiet: the
coordinator keeps them for that long without a heartbeat, so hundreds of live groups cost no threads or timers
here. Requests go through kafka-python KafkaAdminClients' connections, at the highest versions the broker and
kafka-python share (JoinGroup v9, SyncGroup v5, Heartbeat v4, LeaveGroup v5 with Apache Kafka 4.4).

A group's members join together: the coordinator holds a JoinGroup until every known member has sent one
(GroupMetadataManager.maybeCompleteJoinPhase) and reads one request at a time per connection (SocketServer mutes a
channel until it answers), so member i of a group sends through connection i, from its own thread. The rebalance
mechanics are Kafka's own (AbstractCoordinator): a first JoinGroup without a member id is answered
MEMBER_ID_REQUIRED with the id to join with (KIP-394); a SyncGroup answered REBALANCE_IN_PROGRESS or
ILLEGAL_GENERATION joins again; a member that synced before the others keeps heartbeating until every member has
synced in the same generation (with `group.initial.rebalance.delay.ms` 0 the first generation may close before
the last JoinGroup arrives, and the late member's join starts the next one).

The leader's work is a pure function, `leader_assignments`:

>>> from planner import protocol
>>> subscription = protocol.encode_subscription(protocol.Subscription(("orders",)))
>>> out = leader_assignments("range", {"M0": subscription, "M1": subscription}, {"orders": 3})
>>> {m: protocol.decode_assignment(a).partitions for m, a in out.items()}
{'M0': (('orders', (0, 1)),), 'M1': (('orders', (2,)),)}
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from jobs.io import kip848_source
from planner import assign, protocol
from planner.assignors import load, protocol_of
from planner.errors import SourceError

PROTOCOL_TYPE = "consumer"  # ConsumerProtocol.PROTOCOL_TYPE
SESSION_TIMEOUT_MS = 300_000  # within the broker's group.max.session.timeout.ms (30 min by default)
REBALANCE_TIMEOUT_MS = 60_000  # how long the coordinator waits for every member to rejoin
HEARTBEAT_PAUSE_S = 0.005  # a synced member's pause between heartbeats while the others finish

# Error codes (org.apache.kafka.common.protocol.Errors) the rebalance loop answers itself.
ILLEGAL_GENERATION = 22
UNKNOWN_MEMBER_ID = 25
REBALANCE_IN_PROGRESS = 27
MEMBER_ID_REQUIRED = 79  # KIP-394: join again with the member id this answer carries
COORDINATOR_ERRORS = frozenset({14, 15, 16})  # COORDINATOR_LOAD_IN_PROGRESS, _NOT_AVAILABLE, NOT_COORDINATOR


class MemberError(SourceError):
    """The coordinator refused a member's request, or the group did not form in time."""


@dataclass(frozen=True)
class MemberSpec:
    """A member to join: the topics it subscribes to and the assignors it offers, preferred first."""

    topics: tuple[str, ...]
    assignors: tuple[str, ...] = ("range",)


@dataclass
class ClassicMember:
    """One member as the coordinator knows it: its id, subscription, generation and what it was assigned."""

    member_id: str
    spec: MemberSpec
    generation: int = -1
    strategy: str | None = None  # the assignor the coordinator chose for that generation
    assignment: protocol.TopicPartitions = ()


@dataclass
class ClassicGroup:
    """A classic consumer group driven through kafka-python admin clients' connections to its coordinator.

    `connections` holds one KafkaAdminClient per member the group may have at once (see the module docstring);
    `topic_partitions` is the leader's metadata (None: it asks the cluster, as a client's leader does).
    """

    connections: Sequence[Any]
    group_id: str
    topic_partitions: Mapping[str, int] | None = None
    session_timeout_ms: int = SESSION_TIMEOUT_MS
    rebalance_timeout_ms: int = REBALANCE_TIMEOUT_MS
    members: dict[str, ClassicMember] = field(default_factory=dict)
    generation: int = -1
    strategy: str | None = None
    leader: str | None = None

    def join(self, specs: Sequence[MemberSpec]) -> list[ClassicMember]:
        """New members join; the group rebalances with them and the members it had (those rejoin) until every
        member has synced in one generation. Returns the new members."""
        joining = [*self.members.values(), *(ClassicMember("", spec) for spec in specs)]
        if len(joining) > len(self.connections):
            raise ValueError(
                f"{self.group_id}: {len(joining)} members need as many connections, not {len(self.connections)}"
            )
        rebalance = _Rebalance(len(joining), time.monotonic() + self.rebalance_timeout_ms / 1000 + 30)
        with ThreadPoolExecutor(len(joining), thread_name_prefix=f"classic-{self.group_id}") as pool:
            futures = [
                pool.submit(self._member, member, admin, rebalance)
                for member, admin in zip(joining, self.connections, strict=False)
            ]
            for future in futures:
                future.exception()  # wait for every member: one that failed stops the others (_Rebalance.check)
        if rebalance.failure is not None:
            raise rebalance.failure
        self.members = {m.member_id: m for m in joining}
        return joining[len(joining) - len(specs) :]

    def leave_all(self, reason: str = "the member is done") -> None:
        """Every member leaves the group (one LeaveGroup naming them all, KIP-345's batch form)."""
        from kafka.protocol.consumer.group import LeaveGroupRequest

        if not self.members:
            return
        identity = LeaveGroupRequest.MemberIdentity
        response = self._send(
            self.connections[0],
            LeaveGroupRequest(
                group_id=self.group_id,
                members=[identity(member_id=m, group_instance_id=None, reason=reason) for m in self.members],
            ),
        )
        self.members.clear()
        codes = [response.error_code, *(m.error_code for m in response.members)]
        if errors := [code for code in codes if code not in (0, UNKNOWN_MEMBER_ID)]:  # unknown: already gone
            raise MemberError(f"{self.group_id}: LeaveGroup: {_error_name(errors[0])}")

    # -- one member's rebalance, in its own thread and connection ----------------------------------------------

    def _member(self, member: ClassicMember, admin: Any, rebalance: _Rebalance) -> None:
        """Join and sync until every member has synced in the same generation (AbstractCoordinator's loop)."""
        try:
            while True:
                if self._join_and_sync(member, admin, rebalance):
                    continue  # KIP-429: it revoked partitions, so it rejoins at once for the follow-up round
                rebalance.synced(member)
                while not rebalance.done(member.generation):
                    if self._heartbeat(member, admin) == REBALANCE_IN_PROGRESS:
                        break  # a member joined after this one synced: join the next generation
                    rebalance.check(self.group_id)
                    time.sleep(HEARTBEAT_PAUSE_S)
                else:
                    return
        except Exception as exc:
            rebalance.fail(exc)
            raise

    def _join_and_sync(self, member: ClassicMember, admin: Any, rebalance: _Rebalance) -> bool:
        """One JoinGroup + SyncGroup round, repeated until it syncs; True when it revoked partitions under a
        cooperative protocol (ConsumerCoordinator.onJoinComplete then asks for another rebalance)."""
        from kafka.protocol.consumer.group import JoinGroupRequest, SyncGroupRequest

        while True:
            rebalance.check(self.group_id)
            joined = self._send(
                admin,
                JoinGroupRequest(
                    group_id=self.group_id,
                    session_timeout_ms=self.session_timeout_ms,
                    rebalance_timeout_ms=self.rebalance_timeout_ms,
                    member_id=member.member_id,
                    group_instance_id=None,
                    protocol_type=PROTOCOL_TYPE,
                    protocols=[
                        JoinGroupRequest.JoinGroupRequestProtocol(name=name, metadata=subscription(member, name))
                        for name in member.spec.assignors
                    ],
                    reason=None,
                ),
                timeout_ms=self.rebalance_timeout_ms + 5_000,  # the coordinator holds it while others join
            )
            if joined.error_code == MEMBER_ID_REQUIRED:
                member.member_id = joined.member_id
                continue
            if joined.error_code == UNKNOWN_MEMBER_ID:  # the pending id expired: ask for a new one
                member.member_id = ""
                continue
            if joined.error_code:
                raise MemberError(f"{self.group_id}/{member.member_id}: JoinGroup: {_error_name(joined.error_code)}")
            assignments: dict[str, bytes] = {}
            if joined.leader == joined.member_id and not joined.skip_assignment:
                subscriptions = {m.member_id: _bytes(m.metadata) for m in joined.members}
                assignments = leader_assignments(
                    joined.protocol_name, subscriptions, self._partition_counts(admin, subscriptions)
                )
            synced = self._send(
                admin,
                SyncGroupRequest(
                    group_id=self.group_id,
                    generation_id=joined.generation_id,
                    member_id=member.member_id,
                    group_instance_id=None,
                    protocol_type=PROTOCOL_TYPE,
                    protocol_name=joined.protocol_name,
                    assignments=list(assignments.items()),
                ),
                timeout_ms=self.rebalance_timeout_ms + 5_000,  # a follower's waits for the leader's
            )
            if synced.error_code in (REBALANCE_IN_PROGRESS, ILLEGAL_GENERATION):
                continue
            if synced.error_code == UNKNOWN_MEMBER_ID:
                member.member_id = ""
                continue
            if synced.error_code:
                raise MemberError(f"{self.group_id}/{member.member_id}: SyncGroup: {_error_name(synced.error_code)}")
            owned = member.assignment
            member.generation, member.strategy = joined.generation_id, joined.protocol_name
            member.assignment = protocol.decode_assignment(_bytes(synced.assignment)).partitions
            self.generation, self.strategy, self.leader = joined.generation_id, joined.protocol_name, joined.leader
            return cooperative(member.strategy) and bool(_pairs(owned) - _pairs(member.assignment))

    def _heartbeat(self, member: ClassicMember, admin: Any) -> int:
        from kafka.protocol.consumer.group import HeartbeatRequest

        response = self._send(
            admin,
            HeartbeatRequest(
                group_id=self.group_id,
                generation_id=member.generation,
                member_id=member.member_id,
                group_instance_id=None,
            ),
        )
        if response.error_code not in (0, REBALANCE_IN_PROGRESS):
            raise MemberError(f"{self.group_id}/{member.member_id}: Heartbeat: {_error_name(response.error_code)}")
        return int(response.error_code)

    def _partition_counts(self, admin: Any, subscriptions: Mapping[str, bytes]) -> dict[str, int]:
        """Partitions of every subscribed topic the cluster has (a missing topic is skipped, as Kafka's are)."""
        topics = sorted({t for raw in subscriptions.values() for t in protocol.decode_subscription(raw).topics})
        if self.topic_partitions is not None:
            return {t: self.topic_partitions[t] for t in topics if t in self.topic_partitions}
        return {t["name"]: len(t["partitions"]) for t in admin.describe_topics(topics) if t["error_code"] == 0}

    def _send(self, admin: Any, request: Any, timeout_ms: int | None = None) -> Any:
        """Send to the group's coordinator; a coordinator not ready or moved is looked up again for 30 s."""
        from kafka.errors import KafkaError

        async def send() -> Any:
            node = (await admin._find_coordinator_ids([self.group_id]))[self.group_id]
            return await admin._manager.send(request, node_id=node, request_timeout_ms=timeout_ms)

        deadline = time.monotonic() + 30
        while True:
            try:
                response = admin._manager.run(send)
            except KafkaError as exc:
                if not exc.retriable or time.monotonic() > deadline:
                    raise
            else:
                if response.error_code not in COORDINATOR_ERRORS or time.monotonic() > deadline:
                    return response
                kip848_source.forget_coordinator(admin, self.group_id)
            time.sleep(0.2)


def subscription(member: ClassicMember, assignor: str) -> bytes:
    """JoinGroup protocol metadata for one offered assignor, as Kafka's ConsumerCoordinator.metadata builds it: a
    ConsumerProtocolSubscription v3 listing owned partitions only under a cooperative protocol (an eager member
    revoked everything before rejoining), with the assignor's own user data (StickyAssignor: the previous
    assignment and generation; CooperativeStickyAssignor: the generation)."""
    user_data = None
    if assignor == "sticky" and member.generation >= 0:
        user_data = protocol.encode_sticky_user_data(protocol.StickyUserData(member.assignment, member.generation))
    elif assignor == "cooperative-sticky":
        user_data = protocol.encode_cooperative_user_data(member.generation)
    return protocol.encode_subscription(
        protocol.Subscription(
            member.spec.topics,
            user_data=user_data,
            owned_partitions=member.assignment if cooperative(member.strategy) else (),
            generation_id=member.generation,
        )
    )


def cooperative(strategy: str | None) -> bool:
    """Whether the assignor of that name follows the cooperative rebalance protocol (KIP-429)."""
    return strategy is not None and protocol_of(load(strategy)) == "cooperative"


def leader_assignments(
    strategy: str, subscriptions: Mapping[str, bytes], topic_partitions: Mapping[str, int]
) -> dict[str, bytes]:
    """What the leader sends in SyncGroup: `strategy`'s assignment of the members' subscriptions (JoinGroup
    metadata by member id) over the topics' partition counts, as ConsumerProtocolAssignment bytes per member."""
    decoded = {m: protocol.decode_subscription(raw) for m, raw in subscriptions.items()}
    group = {
        "topics": dict(topic_partitions),
        "members": {
            m: {
                "topics": list(sub.topics),
                "owned": [[t, p] for t, ps in sub.owned_partitions for p in ps],
                "generation": sub.generation_id if sub.generation_id >= 0 else None,
            }
            for m, sub in decoded.items()
        },
    }
    result = assign(strategy, group)
    return {m: protocol.encode_assignment(protocol.Assignment(_by_topic(result.assignment[m]))) for m in decoded}


@dataclass
class _Rebalance:
    """What the members of one join have synced so far, shared by their threads."""

    size: int
    deadline: float
    generations: dict[int, int] = field(default_factory=dict)  # id(member) -> generation it synced in
    failure: Exception | None = None  # the first member's failure: the others stop too
    lock: threading.Lock = field(default_factory=threading.Lock)

    def fail(self, exc: Exception) -> None:
        with self.lock:
            self.failure = self.failure or exc

    def synced(self, member: ClassicMember) -> None:
        with self.lock:
            self.generations[id(member)] = member.generation

    def done(self, generation: int) -> bool:
        with self.lock:
            return len(self.generations) == self.size and set(self.generations.values()) == {generation}

    def check(self, group_id: str) -> None:
        if self.failure is not None:
            raise MemberError(f"{group_id}: another member failed: {self.failure}")
        if time.monotonic() > self.deadline:
            raise MemberError(f"{group_id}: members did not all sync in one generation in time")


def _by_topic(pairs: Sequence[tuple[str, int]]) -> protocol.TopicPartitions:
    """[(topic, partition)] sorted by topic -> ((topic, (partition, ...)), ...)."""
    out: dict[str, list[int]] = {}
    for topic, partition in pairs:
        out.setdefault(topic, []).append(partition)
    return tuple((t, tuple(ps)) for t, ps in out.items())


def _pairs(tps: protocol.TopicPartitions) -> set[tuple[str, int]]:
    return {(t, p) for t, ps in tps for p in ps}


def _bytes(data: Any) -> bytes:
    """kafka-python hands bytes fields over as bytes (or a bytes-like ApiData): plain bytes for the codec."""
    return data if isinstance(data, bytes) else bytes(data)


def _error_name(code: int) -> str:
    from kafka.errors import for_code

    return f"{for_code(code).__name__} ({code})"
