"""`assign`: run one assignor on a group; report what members get now, the target, and what they revoke."""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from planner.assignors import load, owners_from, protocol_of
from planner.group import GroupSpec, from_snapshot, is_snapshot, parse_group, previous_owners

Assignment = dict[str, list[tuple[str, int]]]


@dataclass(frozen=True)
class AssignmentResult:
    """An assignor's answer by member name; every member present, lists sorted by (topic, partition).

    `assignment` is what each member gets in this rebalance, `target` what it holds after the cooperative
    follow-up round (equal to `assignment` for eager strategies), `revoked` the partitions a member owned and
    gives to another member, `elapsed_ms` the time of the assignment itself (not parsing or naming).
    """

    assignment: Assignment
    target: Assignment
    revoked: Assignment
    elapsed_ms: float

    def to_json(self) -> dict[str, Any]:
        """The JSON shape printed by `rebalance assign`."""
        def plain(a: Assignment) -> dict[str, list[list[Any]]]:
            return {m: [[t, p] for t, p in parts] for m, parts in a.items()}

        return {"assignment": plain(self.assignment), "target": plain(self.target),
                "revoked": plain(self.revoked), "elapsed_ms": self.elapsed_ms}


@dataclass(frozen=True)
class OwnerArrays:
    """The same answer as dense arrays (owner per partition id, -1 = none), for benchmarks and checks."""

    group: GroupSpec
    previous: np.ndarray
    assignment: np.ndarray
    target: np.ndarray
    revoked: np.ndarray  # the previous owner of each partition that changes owner in this rebalance, else -1
    elapsed_ms: float


def assign_arrays(strategy: str, group: GroupSpec) -> OwnerArrays:
    """Run `strategy` on a parsed group; cooperative ones also run the follow-up round for the target."""
    assignor = load(strategy)
    start = time.perf_counter()
    owner = owners_from(group, assignor.assign(group))
    elapsed_ms = (time.perf_counter() - start) * 1000.0
    previous, _ = previous_owners(group)
    moving = (previous >= 0) & (owner != previous)
    revoked = np.where(moving, previous, -1).astype(np.int32)
    if protocol_of(assignor) != "cooperative":
        return OwnerArrays(group, previous, owner, owner, revoked, elapsed_ms)
    # Cooperative protocol (KIP-429): a partition changing owner is revoked now, assigned next round.
    now = np.where(moving, -1, owner).astype(np.int32)
    target = owners_from(group, assignor.assign(next_round(group, now)))
    return OwnerArrays(group, previous, now, target, revoked, elapsed_ms)


def next_round(group: GroupSpec, owner: np.ndarray) -> GroupSpec:
    """The group as it rejoins after a rebalance: members own what `owner` gave them, one generation on."""
    parts = np.flatnonzero(owner >= 0)
    members = owner[parts]
    order = np.lexsort((parts, members))
    generation = (int(group.generations.max()) if len(group.members) else -1) + 1
    return GroupSpec(
        topics=group.topics, topic_start=group.topic_start, members=group.members,
        subscriptions=group.subscriptions, group_instance_ids=group.group_instance_ids, racks=group.racks,
        generations=np.full(len(group.members), generation, dtype=np.int64),
        claim_member=members[order].astype(np.int32), claim_partition=parts[order].astype(np.int64),
        partition_weights=group.partition_weights, member_weights=group.member_weights,
    )


def by_member(group: GroupSpec, owner: np.ndarray) -> Assignment:
    """Owner array -> {member: [(topic, partition), ...]} sorted by partition id; every member present."""
    parts = np.flatnonzero(owner >= 0)
    members = owner[parts]
    order = np.argsort(members, kind="stable")  # stable: partition ids stay ascending within a member
    parts, members = parts[order], members[order]
    topic = group.topic_of(parts)
    names = np.asarray(group.topics, dtype=object)[topic].tolist()
    pairs = list(zip(names, (parts - group.topic_start[topic]).tolist(), strict=True))
    bounds = np.searchsorted(members, np.arange(len(group.members) + 1))
    return {m: pairs[bounds[i]:bounds[i + 1]] for i, m in enumerate(group.members)}


def assign(strategy: str, group: Mapping[str, Any]) -> AssignmentResult:
    """Assign a group (compact form, or a snapshot-file document) with a Kafka strategy or a plug-in."""
    spec = parse_group(from_snapshot(group) if is_snapshot(group) else group)
    arrays = assign_arrays(strategy, spec)
    return AssignmentResult(
        assignment=by_member(spec, arrays.assignment),
        target=by_member(spec, arrays.target),
        revoked=by_member(spec, arrays.revoked),
        elapsed_ms=arrays.elapsed_ms,
    )
