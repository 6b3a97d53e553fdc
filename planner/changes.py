"""Triggers: what changed in a group since its previous snapshot, i.e. why it rebalanced (or will).

A classic group rebalances when its membership or the metadata its members subscribe to changes
(AbstractCoordinator: a member joins or leaves; ConsumerCoordinator.rejoinNeededOrPending: the subscription or
a subscribed topic's partition count changed); a KIP-848 consumer group bumps its group epoch for the same
reasons (GroupMetadataManager: member subscriptions, or the subscribed topics' metadata). This compares two
snapshot documents for exactly those causes, plus the protocol the group runs.

>>> before = {"topics": {"t": 2}, "members": [{"member_id": "a", "topics": ["t"]}]}
>>> after = {"topics": {"t": 4}, "members": [{"member_id": "a", "topics": ["t"]}, {"member_id": "b", "topics": ["t"]}]}
>>> group_changes(before, after)["members_joined"], group_changes(before, after)["partition_counts"]
(['b'], {'t': [2, 4]})
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from planner.group_protocol import group_type


def group_changes(previous: Mapping[str, Any] | None, current: Mapping[str, Any]) -> dict[str, Any]:
    """The differences between two snapshot documents of one group; `first` when there is no previous one.

    Keys: members_joined, members_left (member ids, sorted), subscriptions ({member: {added, removed}} for members in
    both), partition_counts ({topic: [before, after]}, None for a topic one side lacks), protocol and group_type
    ([before, after] when they differ), and `changed`, true when any of them is non-empty.
    """
    if previous is None:
        return {"first": True, "changed": False}
    before = {m["member_id"]: set(m.get("topics") or []) for m in previous.get("members") or []}
    after = {m["member_id"]: set(m.get("topics") or []) for m in current.get("members") or []}
    subscriptions = {
        member: {"added": sorted(after[member] - topics), "removed": sorted(topics - after[member])}
        for member, topics in sorted(before.items())
        if member in after and after[member] != topics
    }
    counts_before, counts_after = previous.get("topics") or {}, current.get("topics") or {}
    counts = {
        t: [counts_before.get(t), counts_after.get(t)]
        for t in sorted(counts_before.keys() | counts_after.keys())
        if counts_before.get(t) != counts_after.get(t)
    }
    out: dict[str, Any] = {
        "first": False,
        "members_joined": sorted(after.keys() - before.keys()),
        "members_left": sorted(before.keys() - after.keys()),
        "subscriptions": subscriptions,
        "partition_counts": counts,
    }
    for field, read in (("protocol", lambda d: d.get("protocol")), ("group_type", group_type)):
        if read(previous) != read(current):
            out[field] = [read(previous), read(current)]
    out["changed"] = any(bool(v) for k, v in out.items() if k != "first")
    return out


__all__ = ["group_changes"]
