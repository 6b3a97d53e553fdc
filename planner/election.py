"""Assignor election: which partition.assignment.strategy a classic consumer group uses (article A3).

Mirrors Kafka's ClassicGroup (group-coordinator, formerly GroupMetadata.scala):
1. add(): a member may join only if one of its protocols is supported by every current member
   (supportsProtocols), else the JoinGroup fails with INCONSISTENT_GROUP_PROTOCOL;
2. candidateProtocols(): the protocols every member supports;
3. ClassicGroupMember.vote(): each member votes for the first candidate in its own preference order;
4. selectProtocol(): the protocol with the most votes wins. Ties go to the first protocol in the
   iteration order of the java.util.HashMap of votes (`stream().max()` keeps the earlier of equal
   elements), which is reproduced here: by bucket of the protocol name's String.hashCode, then by
   insertion order, members voting in the iteration order of the HashMap of member ids.

>>> select_protocol({"c1": ["cooperative-sticky", "range"], "c2": ["range"]}).protocol
'range'
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from planner.coordinator import java_string_hash
from planner.errors import InputError

__all__ = ["Election", "InconsistentGroupProtocolError", "java_hashmap_order", "select_protocol"]

INCONSISTENT_GROUP_PROTOCOL = 23  # org.apache.kafka.common.protocol.Errors


class InconsistentGroupProtocolError(InputError):
    """Kafka's INCONSISTENT_GROUP_PROTOCOL (error code 23): a joining member supports no group protocol."""

    code = INCONSISTENT_GROUP_PROTOCOL


@dataclass(frozen=True)
class Election:
    """The chosen protocol, the votes each candidate got, and the candidates (sorted)."""

    protocol: str
    votes: Mapping[str, int]
    candidates: tuple[str, ...]


def java_hashmap_order(keys: Sequence[str]) -> list[str]:
    """Iteration order of a java.util.HashMap<String, ?> after putting `keys` (distinct) in this order.

    HashMap.hash spreads String.hashCode as h ^ (h >>> 16); the table starts at 16 buckets and doubles
    whenever size exceeds 0.75 x capacity; a resize keeps each bucket's relative order. (Tree bins, used
    only for 8+ collisions in one bucket, are not modelled.)
    """
    capacity = 16
    while len(keys) > capacity * 3 // 4:
        capacity *= 2

    def bucket(key: str) -> int:
        h = java_string_hash(key) & 0xFFFFFFFF
        return (h ^ (h >> 16)) & (capacity - 1)

    return [k for _, _, k in sorted((bucket(k), i, k) for i, k in enumerate(keys))]


def _check_join(member_id: str, protocols: Sequence[str], supported: Mapping[str, int], members: int) -> None:
    """ClassicGroup.supportsProtocols for a member joining a group of `members` members."""
    if not protocols:
        raise InconsistentGroupProtocolError(
            f"INCONSISTENT_GROUP_PROTOCOL: member {member_id} offers no partition.assignment.strategy"
        )
    if members and not any(supported.get(p, 0) == members for p in protocols):
        common = sorted(p for p, n in supported.items() if n == members)
        raise InconsistentGroupProtocolError(
            f"INCONSISTENT_GROUP_PROTOCOL: member {member_id} supports {list(protocols)}, "
            f"none of which every current member supports ({common})"
        )


def select_protocol(members: Mapping[str, Sequence[str]]) -> Election:
    """Elect the group protocol from each member's ordered strategies, members given in join order."""
    if not members:
        raise ValueError("cannot select a protocol for an empty group")
    supported: dict[str, int] = {}
    for count, (member_id, protocols) in enumerate(members.items()):
        _check_join(member_id, protocols, supported, count)
        for p in dict.fromkeys(protocols):
            supported[p] = supported.get(p, 0) + 1
    candidates = {p for p, n in supported.items() if n == len(members)}
    votes: dict[str, int] = {}
    for member_id in java_hashmap_order(list(members)):
        vote = next(p for p in members[member_id] if p in candidates)  # ClassicGroupMember.vote
        votes[vote] = votes.get(vote, 0) + 1
    best = max(votes.values())
    winner = next(p for p in java_hashmap_order(list(votes)) if votes[p] == best)
    return Election(winner, votes, tuple(sorted(candidates)))
