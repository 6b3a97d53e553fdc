"""`assign`: run one assignor on a group; report what members get now, the target, and what they revoke."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from planner.assignors import load, owners_from, protocol_of
from planner.group import GroupSpec, from_snapshot, is_snapshot, parse_group

Assignment = dict[str, list[tuple[str, int]]]
MAX_FOLLOW_UP_ROUNDS = 8  # a cooperative group that still revokes after this many rebalances is reported as is


@dataclass(frozen=True)
class AssignmentResult:
    """An assignor's answer by member name; every member present, lists sorted by (topic, partition).

    `assignment` is what each member gets in this rebalance, `target` what it holds after the cooperative
    follow-up round (equal to `assignment` for eager strategies), `revoked` what a member lists as owned but
    does not get now (ConsumerCoordinator revokes owned minus assigned), `elapsed_ms` the time of the
    assignment itself (not parsing, the follow-up round or naming).
    """

    assignment: Assignment
    target: Assignment
    revoked: Assignment
    elapsed_ms: float

    def to_json(self) -> dict[str, Any]:
        """The JSON shape printed by `rebalance assign`."""

        def plain(a: Assignment) -> dict[str, list[list[Any]]]:
            return {m: [[t, p] for t, p in parts] for m, parts in a.items()}

        return {
            "assignment": plain(self.assignment),
            "target": plain(self.target),
            "revoked": plain(self.revoked),
            "elapsed_ms": self.elapsed_ms,
        }


@dataclass(frozen=True)
class OwnerArrays:
    """The same answer as dense arrays (owner per partition id, -1 = none), for benchmarks and checks."""

    group: GroupSpec
    assignment: np.ndarray
    target: np.ndarray
    revoked: np.ndarray  # bool per ownership claim of `group`: the claimant does not get that partition now
    elapsed_ms: float
    rounds: int  # rebalances until `target` (1 for eager strategies)


def assign_arrays(strategy: str, group: GroupSpec) -> OwnerArrays:
    """Run `strategy` on a parsed group; cooperative ones also run the follow-up round for the target."""
    assignor = load(strategy)
    start = time.perf_counter()
    owner = owners_from(group, assignor.assign(group))
    elapsed_ms = (time.perf_counter() - start) * 1000.0
    revoked = owner[group.claim_partition] != group.claim_member
    target, rounds = owner, 1
    if protocol_of(assignor) == "cooperative":
        # KIP-429: a member that revoked something rejoins at once, so the group rebalances again until an
        # assignment withholds nothing; the target is what members hold then.
        while rounds <= MAX_FOLLOW_UP_ROUNDS:
            follow_up = next_round(group, target)
            nxt = owners_from(group, assignor.assign(follow_up))
            rounds += 1
            if not np.any(nxt[follow_up.claim_partition] != follow_up.claim_member):
                target = nxt
                break
            target = nxt
    return OwnerArrays(group, owner, target, revoked, elapsed_ms, rounds)


def next_round(group: GroupSpec, owner: np.ndarray) -> GroupSpec:
    """The group as it rejoins after a rebalance: members own what `owner` gave them, one generation on."""
    parts = np.flatnonzero(owner >= 0)
    members = owner[parts]
    order = np.lexsort((parts, members))
    generation = (int(group.generations.max()) if len(group.members) else -1) + 1
    return dataclasses.replace(
        group,
        generations=np.full(len(group.members), generation, dtype=np.int64),
        claim_member=members[order].astype(np.int32),
        claim_partition=parts[order].astype(np.int64),
    )


def by_member(group: GroupSpec, parts: np.ndarray, members: np.ndarray) -> Assignment:
    """(partition id, member id) pairs -> {member: [(topic, partition), ...]} sorted; every member present."""
    order = np.lexsort((parts, members))
    parts, members = parts[order], members[order]
    topic = group.topic_of(parts)
    names = np.asarray(group.topics, dtype=object)[topic].tolist()
    pairs = list(zip(names, (parts - group.topic_start[topic]).tolist(), strict=True))
    bounds = np.searchsorted(members, np.arange(len(group.members) + 1))
    return {m: pairs[bounds[i] : bounds[i + 1]] for i, m in enumerate(group.members)}


def _owned_pairs(owner: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    parts = np.flatnonzero(owner >= 0)
    return parts, owner[parts]


def assign(strategy: str, group: Mapping[str, Any]) -> AssignmentResult:
    """Assign a group (compact form, or a snapshot-file document) with a Kafka strategy or a plug-in."""
    spec = parse_group(from_snapshot(group) if is_snapshot(group) else group)
    arrays = assign_arrays(strategy, spec)
    revoked = np.unique(
        np.stack([spec.claim_member[arrays.revoked].astype(np.int64), spec.claim_partition[arrays.revoked]]), axis=1
    )
    return AssignmentResult(
        assignment=by_member(spec, *_owned_pairs(arrays.assignment)),
        target=by_member(spec, *_owned_pairs(arrays.target)),
        revoked=by_member(spec, revoked[1], revoked[0]),
        elapsed_ms=arrays.elapsed_ms,
    )
