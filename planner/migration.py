"""Migration readiness: what would change if a classic group moved to `group.protocol=consumer` (KIP-848).

The group coordinator upgrades a classic group online when a member joins with the consumer protocol
(GroupMetadataManager.consumerGroup -> validateOnlineUpgrade -> convertToConsumerGroup): every member keeps its
last assignment as its target (ConsumerGroup.fromClassicGroup), then the server assignor computes a new target
from there. The rules, in the order the coordinator checks them, and what the planner adds:

Blockers (the coordinator refuses the online upgrade with GROUP_ID_NOT_FOUND; Kafka 4.4):
  * group.consumer.migration.policy does not allow upgrades (ConsumerGroupMigrationPolicy.isUpgradeEnabled).
  * the group does not use the consumer embedded protocol (ClassicGroup.usesConsumerGroupProtocol), e.g. Connect.
  * more members than group.consumer.max.size (validateOnlineUpgrade).
  * a member's subscription cannot be read (fromClassicGroup: "the embedded consumer protocol is malformed").
  * a member's assignment carries user data: a custom assignor's state that the consumer protocol would lose
    (ConsumerGroup.fromClassicGroup: "userData from a custom assignor would be lost", KAFKA-18134).
Warnings (the upgrade goes through; behaviour changes):
  * a custom client assignor: the consumer protocol runs only server assignors (KIP-848 "Assignors"), so its
    logic, and the subscription user data its members send, are dropped (fromClassicGroup does not read it).
  * members whose preferred assignors mix eager and cooperative protocols (a KIP-429 rolling upgrade unfinished).
  * rack awareness lost: members set client.rack, which the client assignors use (KIP-881) and Kafka 4.0's server
    assignors ignore (KAFKA-16694).
  * the group is rebalancing: its last assignment becomes a stale target (KAFKA-21582).

The client assignor maps to the server assignor that keeps its intent: range -> range (co-partitioning), sticky,
cooperative-sticky and roundrobin -> uniform (balance, then stickiness). The partitions that would move are the
server assignor's first target against today's assignment.

>>> group = {"group_id": "g", "protocol": "range", "topics": {"t": 2},
...          "members": [{"member_id": "a", "topics": ["t"], "assignment": [["t", 0], ["t", 1]]},
...                      {"member_id": "b", "topics": ["t"], "assignment": []}]}
>>> r = readiness(group)
>>> r.server_assignor, r.ready, r.moves
('range', True, (('t', 1, 'a', 'b'),))
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from planner.assignment import assign_arrays
from planner.assignors import load, protocol_of
from planner.errors import InputError
from planner.group import GroupSpec, from_snapshot, parse_group
from planner.group_protocol import SERVER_STRATEGIES, group_type

Policy = Literal["bidirectional", "upgrade", "downgrade", "disabled"]
UPGRADE_POLICIES = ("bidirectional", "upgrade")  # ConsumerGroupMigrationPolicy.isUpgradeEnabled
DOWNGRADE_POLICIES = ("bidirectional", "downgrade")  # ConsumerGroupMigrationPolicy.isDowngradeEnabled
DEFAULT_POLICY: Policy = "bidirectional"  # GroupCoordinatorConfig.CONSUMER_GROUP_MIGRATION_POLICY_DEFAULT (4.0)
DEFAULT_MAX_SIZE = 2**31 - 1  # group.consumer.max.size and group.max.size defaults: Integer.MAX_VALUE
CONSUMER_PROTOCOL_TYPE = "consumer"  # ConsumerProtocol.PROTOCOL_TYPE
REBALANCING = ("PreparingRebalance", "CompletingRebalance")
# The server assignor that keeps each Kafka client assignor's intent.
SERVER_ASSIGNOR_FOR: dict[str, str] = {
    "range": "range",
    "roundrobin": "uniform",
    "sticky": "uniform",
    "cooperative-sticky": "uniform",
}
RACK_AWARE = ("range", "sticky", "cooperative-sticky")  # KIP-881 rack-aware client assignors (Kafka 3.5+)

Move = tuple[str, int, str, str]  # topic, partition, from member, to member


@dataclass(frozen=True)
class Readiness:
    """One classic group's readiness for the consumer protocol."""

    group_id: str
    client_assignor: str | None
    server_assignor: str | None  # Kafka's name: uniform or range; None when nothing keeps the client's logic
    blockers: tuple[str, ...]
    warnings: tuple[str, ...]
    partitions: int  # partitions the group is assigned today
    moves: tuple[Move, ...]  # what the server assignor's first target moves, sorted by topic and partition

    @property
    def ready(self) -> bool:
        return not self.blockers


@dataclass(frozen=True)
class Upgrade:
    """A classic group as the coordinator converts it (ConsumerGroup.fromClassicGroup): every member's last
    assignment becomes its current target; and who holds each partition today."""

    group: GroupSpec  # the converted group: each member's claims are its assignment
    owner: np.ndarray  # int64[P]: today's owner of each partition id of `group`, an index into `names` (-1: nobody)
    names: Sequence[str]  # member ids by owner index
    outside: tuple[Move, ...]  # pairs assigned today that name no partition of `group`: (topic, partition, owner, "")

    def moves(self, server: str) -> tuple[Move, ...]:
        """The server assignor's target against today's owners: (topic, partition, owner today, owner in the
        target), "" standing for nobody, sorted by topic and partition. Compared as owner arrays over the group's
        partitions (a million partitions in a fraction of a second); the pairs outside them have nobody in the
        target."""
        after = assign_arrays(SERVER_STRATEGIES[server], self.group).assignment
        changed = np.flatnonzero(self.owner != after)
        topic = self.group.topic_of(changed)
        names = [*self.names, ""]  # id -1: nobody
        inside = zip(
            np.asarray(self.group.topics, dtype=object)[topic].tolist(),
            (changed - self.group.topic_start[topic]).tolist(),
            [names[i] for i in self.owner[changed].tolist()],
            [names[i] for i in after[changed].tolist()],
            strict=True,
        )
        return tuple(sorted([*inside, *self.outside], key=lambda move: (move[0], move[1])))


def readiness(
    doc: Mapping[str, Any], *, policy: Policy = DEFAULT_POLICY, max_size: int = DEFAULT_MAX_SIZE
) -> Readiness:
    """Readiness of one classic group's snapshot document (schemas/snapshot.schema.json)."""
    if group_type(doc) != "classic":
        raise InputError(f"group {doc.get('group_id')!r}: already a consumer group (KIP-848); nothing to migrate")
    members = list(doc.get("members") or [])
    today = {(t, p): m["member_id"] for m in members for t, p in m.get("assignment") or []}
    return assess(doc, len(today), lambda: _upgrade(doc, members, today), policy=policy, max_size=max_size)


def assess(
    doc: Mapping[str, Any],
    partitions: int,
    upgrade: Callable[[], Upgrade],
    *,
    policy: Policy = DEFAULT_POLICY,
    max_size: int = DEFAULT_MAX_SIZE,
) -> Readiness:
    """Readiness of one classic group from its document's group and member fields (its partition lists are not
    read), the count of `partitions` assigned today, and its `upgrade`, built only when a server assignor keeps
    the client assignor's intent and the group has members."""
    members = list(doc.get("members") or [])
    client = doc.get("protocol")
    server = SERVER_ASSIGNOR_FOR.get(client or "")
    blockers = _blockers(doc, members, client, server, policy, max_size)
    warnings = _warnings(doc, members, client, server)
    moves = upgrade().moves(server) if server and members else ()
    return Readiness(doc["group_id"], client, server, tuple(blockers), tuple(warnings), partitions, moves)


def downgrade_readiness(
    doc: Mapping[str, Any], *, policy: Policy = DEFAULT_POLICY, classic_max_size: int = DEFAULT_MAX_SIZE
) -> Readiness:
    """Readiness of one consumer group (KIP-848) to go back to the classic protocol as its members restart with
    `group.protocol=classic`: the coordinator converts it when the last consumer-protocol member leaves
    (GroupMetadataManager.validateOnlineDowngradeWithFencedMembers, Kafka 4.4), unless the policy forbids
    downgrades or the remaining members exceed group.max.size. The classic group keeps each member's assignment
    and rebalances with the members' client assignor (ClassicGroup.fromConsumerGroup)."""
    if group_type(doc) != "consumer":
        raise InputError(f"group {doc.get('group_id')!r}: a classic group; nothing to downgrade")
    members = list(doc.get("members") or [])
    blockers = []
    if policy not in DOWNGRADE_POLICIES:
        blockers.append(f"group.consumer.migration.policy={policy} does not allow online downgrades (offline only)")
    if len(members) > classic_max_size:
        blockers.append(f"{len(members)} members exceed group.max.size={classic_max_size}")
    assigned = sum(len(m.get("assignment") or []) for m in members)
    return Readiness(doc["group_id"], None, doc.get("server_assignor"), tuple(blockers), (), assigned, ())


def _blockers(
    doc: Mapping[str, Any],
    members: list[Mapping[str, Any]],
    client: str | None,
    server: str | None,
    policy: str,
    max_size: int,
) -> list[str]:
    out = []
    if policy not in UPGRADE_POLICIES:  # GroupMetadataManager.validateOnlineUpgrade
        out.append(f"group.consumer.migration.policy={policy} does not allow online upgrades (offline only)")
    protocol_type = doc.get("protocol_type") or CONSUMER_PROTOCOL_TYPE
    if protocol_type != CONSUMER_PROTOCOL_TYPE:  # ClassicGroup.usesConsumerGroupProtocol
        out.append(f"protocol type {protocol_type!r} is not the consumer embedded protocol")
    if len(members) > max_size:  # validateOnlineUpgrade: classicGroup.numMembers() > consumerGroupMaxSize
        out.append(f"{len(members)} members exceed group.consumer.max.size={max_size}")
    unreadable = [m["member_id"] for m in members if m.get("decode_error")]
    if unreadable:  # ConsumerGroup.fromClassicGroup throws on a malformed embedded protocol
        out.append(f"subscriptions that cannot be read (malformed embedded protocol): {', '.join(unreadable)}")
    with_data = [m["member_id"] for m in members if m.get("assignment_user_data")]
    if with_data:  # ConsumerGroup.fromClassicGroup: UnsupportedVersionException -> GROUP_ID_NOT_FOUND
        out.append(
            f"the assignments of {len(with_data)} members carry user data from the {client!r} assignor, which the "
            "consumer protocol would lose: Kafka refuses the online upgrade (switch to a built-in assignor first)"
        )
    return out


def _warnings(
    doc: Mapping[str, Any], members: list[Mapping[str, Any]], client: str | None, server: str | None
) -> list[str]:
    out = []
    if members and client and server is None:
        with_data = [m["member_id"] for m in members if m.get("subscription_user_data")]
        data = f"; the subscription user data of {len(with_data)} members is dropped" if with_data else ""
        out.append(
            f"custom client assignor {client!r}: the consumer protocol runs server assignors only, "
            f"so its logic is lost{data}"
        )
    firsts = {m["strategies"][0] for m in members if m.get("strategies")}  # each name loaded once, not per member
    preferred = {_rebalance_protocol(strategy) for strategy in firsts}
    if {"eager", "cooperative"} <= preferred:  # KIP-429: cooperative only once every member prefers it
        out.append("members prefer both eager and cooperative assignors: finish the KIP-429 rolling upgrade first")
    racked = [m["member_id"] for m in members if m.get("rack")]
    if racked and client in RACK_AWARE:
        out.append(
            f"rack awareness lost: {len(racked)} members set client.rack, which {client} uses (KIP-881) and the "
            f"{server} server assignor ignores (KAFKA-16694)"
        )
    if doc.get("state") in REBALANCING:
        out.append(f"the group is {doc['state']}: its last assignment becomes a stale target (KAFKA-21582)")
    return out


def _rebalance_protocol(strategy: str) -> str:
    """A client assignor's protocol; unknown names (custom, not loadable here) count as eager, Kafka's default."""
    try:
        return protocol_of(load(strategy))
    except InputError:
        return "eager"


def _upgrade(doc: Mapping[str, Any], members: list[Mapping[str, Any]], today: dict[tuple[str, int], str]) -> Upgrade:
    """The document's group converted, with today's owners (`today`: partition -> member id) as owner indices."""
    upgraded = {
        **doc,
        "group_type": "consumer",
        "members": [{**m, "target_assignment": m.get("assignment") or []} for m in members],
    }
    group = parse_group(from_snapshot(upgraded))
    topic_id = {t: i for i, t in enumerate(group.topics)}
    names = list(group.members)
    member_id = {m: i for i, m in enumerate(names)}
    counts = np.diff(group.topic_start).tolist()
    now = np.full(group.num_partitions, -1, dtype=np.int64)
    outside = []
    for (t, p), owner in today.items():
        i = topic_id.get(t)
        if i is None or not 0 <= p < counts[i]:
            outside.append((t, p, owner, ""))
            continue
        if owner not in member_id:
            member_id[owner] = len(names)
            names.append(owner)
        now[int(group.topic_start[i]) + p] = member_id[owner]
    return Upgrade(group, now, names, tuple(outside))


__all__ = [
    "DEFAULT_MAX_SIZE",
    "DEFAULT_POLICY",
    "SERVER_ASSIGNOR_FOR",
    "Policy",
    "Readiness",
    "Upgrade",
    "assess",
    "downgrade_readiness",
    "readiness",
]
