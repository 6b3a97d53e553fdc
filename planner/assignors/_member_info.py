"""Kafka's member ordering for the range and round-robin assignors (AbstractPartitionAssignor.MemberInfo)."""

from __future__ import annotations

import numpy as np

from planner.group import GroupSpec, java_key


def member_info_rank(group: GroupSpec) -> np.ndarray:
    """Rank of each member id in Kafka's MemberInfo order: static members by group.instance.id, then the rest.

    MemberInfo.compareTo (KIP-345): two static members compare by group.instance.id, a static member sorts
    before a dynamic one, two dynamic members compare by member.id. Java leaves equal instance ids in HashMap
    order; we break that tie by member id so the order is deterministic.
    """
    keys = [
        (0, java_key(gid), java_key(m)) if gid is not None else (1, b"", java_key(m))
        for m, gid in zip(group.members, group.group_instance_ids, strict=True)
    ]
    order = sorted(range(len(keys)), key=keys.__getitem__)
    rank = np.empty(len(keys), dtype=np.int64)
    rank[order] = np.arange(len(keys))
    return rank


def subscribers_by_rank(group: GroupSpec) -> tuple[np.ndarray, np.ndarray]:
    """Per topic, its subscribers in MemberInfo order: (offsets int64[T+1], member ids int32), CSR layout."""
    rank = member_info_rank(group)
    member, topic = group.subscription_pairs()
    order = np.lexsort((rank[member], topic))
    offsets = np.zeros(len(group.topics) + 1, dtype=np.int64)
    np.cumsum(np.bincount(topic, minlength=len(group.topics)), out=offsets[1:])
    return offsets, member[order].astype(np.int32)
