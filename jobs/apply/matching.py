"""Which live consumer is which planned member, across restarts (standard library only).

A plan names members by the ids a snapshot saw, but a consumer that restarts gets a new member id. The rules, in
order, each one-to-one:

1. Static members (KIP-345): a live member with a `group.instance.id` is the planned member with the same instance
   id, and only that one; the instance id is what survives a restart by design.
2. The same member id: the consumer never left the group since the snapshot.
3. The same client id: the broker names a dynamic member `client.id + "-" + UUID` (Kafka: GroupMetadata /
   ClassicGroup.generateMemberId), so a restarted consumer keeps its client id. It must be unique: a client id
   that two planned or two live members share (kafka-python's default `kafka-python-<version>` is shared by every
   consumer that sets none) matches nobody.

A live member left unmatched is unknown to the plan; a planned member left unmatched is missing from the group.
The leader of a group sees member ids only, so it derives the client id from the member id (`client_id_of`);
snapshots (DescribeGroups) carry the client id itself.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from jobs.apply.plan_file import PlanMember

# Kafka: GroupMetadata.generateMemberId / ClassicGroup.generateMemberId -> clientId + "-" + UUID.randomUUID()
_MEMBER_ID = re.compile(r"^(?P<client>.*)-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")


@dataclass(frozen=True)
class LiveMember:
    """A member as the group sees it now; `client_id` None when it cannot be known."""

    member_id: str
    group_instance_id: str | None = None
    client_id: str | None = None


@dataclass(frozen=True)
class Match:
    """live member id -> planned member id, and who is left over on either side."""

    planned: dict[str, str]
    unknown: tuple[LiveMember, ...]
    missing: tuple[PlanMember, ...]

    @property
    def complete(self) -> bool:
        return not self.unknown and not self.missing


def client_id_of(member_id: str) -> str | None:
    """The client id a broker-generated dynamic member id starts with, or None when it has no such form."""
    found = _MEMBER_ID.match(member_id)
    return found.group("client") if found else None


def match_members(plan_members: Mapping[str, PlanMember], live: Iterable[LiveMember]) -> Match:
    """Pair live members with planned ones by the rules of the module docstring, in order."""
    live = sorted(live, key=lambda m: m.member_id)
    planned: dict[str, str] = {}
    free = dict(plan_members)  # planned members not matched yet

    def take(member: LiveMember, plan_id: str) -> None:
        planned[member.member_id] = plan_id
        del free[plan_id]

    # Rule 1: static members match by group.instance.id only (KIP-345).
    by_instance = {m.group_instance_id: m.member_id for m in plan_members.values() if m.group_instance_id}
    for m in live:
        if m.group_instance_id and by_instance.get(m.group_instance_id) in free:
            take(m, by_instance[m.group_instance_id])
    dynamic = [m for m in live if not m.group_instance_id]
    # Rule 2: a dynamic member still in the group under the member id the snapshot saw.
    for m in dynamic:
        target = plan_members.get(m.member_id)
        if m.member_id in free and target is not None and not target.group_instance_id:
            take(m, m.member_id)
    # Rule 3: a restarted dynamic member, by a client id that no other member on either side shares.
    rest = [(m, m.client_id) for m in dynamic if m.member_id not in planned and m.client_id]
    live_clients = Counter(client for _, client in rest)
    plan_clients = Counter(p.client_id for p in free.values() if p.client_id and not p.group_instance_id)
    by_client = {p.client_id: p.member_id for p in free.values() if p.client_id and not p.group_instance_id}
    for m, client in rest:
        if live_clients[client] == 1 and plan_clients[client] == 1:
            take(m, by_client[client])
    unknown = tuple(m for m in live if m.member_id not in planned)
    return Match(planned, unknown, tuple(free[p] for p in sorted(free)))


def describe(member: LiveMember | PlanMember) -> str:
    """A member as a log line names it: its member id, then its instance id (static) or client id."""
    if member.group_instance_id:
        return f"{member.member_id!r} (group.instance.id {member.group_instance_id!r})"
    return f"{member.member_id!r} (client id {member.client_id!r})"
