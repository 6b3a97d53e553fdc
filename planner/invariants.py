"""Assignment invariants: each check returns violation messages (empty = fine); tests call them now, the gate later.

Every check takes a group (compact form or GroupSpec) and an assignment ({member: [(topic, partition)]} or an
owner array indexed by partition id). The rules are Kafka's: every subscribed partition assigned exactly once,
only to a subscribed member; AbstractStickyAssignor's balance rule; and the cooperative rule of KIP-429 (a
partition never moves straight from one member to another within a rebalance).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from planner.group import GroupSpec, claimed_by_others, parse_group, previous_owners, subscribed_topics

Assignment = Mapping[str, Sequence[Sequence[Any]]] | np.ndarray
_MAX_REPORTED = 10  # violations listed one by one before the rest are summarized


def _spec(group: GroupSpec | Mapping[str, Any]) -> GroupSpec:
    return group if isinstance(group, GroupSpec) else parse_group(group)


def _claims(group: GroupSpec, assignment: Assignment) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """(partition ids, member ids) of every assigned pair, plus messages for names the group does not know."""
    if isinstance(assignment, np.ndarray):
        parts = np.flatnonzero(assignment >= 0)
        return parts, assignment[parts].astype(np.int64), []
    member_id = {m: i for i, m in enumerate(group.members)}
    topic_id = {t: i for i, t in enumerate(group.topics)}
    part_ids: list[int] = []
    member_ids: list[int] = []
    problems: list[str] = []
    for m, pairs in assignment.items():
        for t, p in pairs:
            if m not in member_id:
                problems.append(f"{t}-{p} assigned to {m!r}, not a member of the group")
            elif t not in topic_id or not 0 <= p < group.partition_counts[topic_id[t]]:
                problems.append(f"{t}-{p} assigned to {m!r} does not exist")
            else:
                part_ids.append(int(group.topic_start[topic_id[t]]) + p)
                member_ids.append(member_id[m])
    return np.asarray(part_ids, dtype=np.int64), np.asarray(member_ids, dtype=np.int64), problems


def _name(group: GroupSpec, part: int) -> str:
    t = int(group.topic_of(np.asarray([part]))[0])
    return f"{group.topics[t]}-{part - int(group.topic_start[t])}"


def _report(messages: list[str]) -> list[str]:
    if len(messages) <= _MAX_REPORTED:
        return messages
    return [*messages[:_MAX_REPORTED], f"... and {len(messages) - _MAX_REPORTED} more"]


def assigned_exactly_once(group: GroupSpec | Mapping[str, Any], assignment: Assignment) -> list[str]:
    """Every partition of a subscribed topic has exactly one owner; no other partition has any."""
    spec = _spec(group)
    parts, _, problems = _claims(spec, assignment)
    times = np.bincount(parts, minlength=spec.num_partitions)
    wanted = np.repeat(subscribed_topics(spec), spec.partition_counts)
    problems += [f"{_name(spec, p)} assigned {times[p]} times" for p in np.flatnonzero(times > 1).tolist()]
    problems += [f"{_name(spec, p)} is not assigned" for p in np.flatnonzero(wanted & (times == 0)).tolist()]
    return _report(problems)


def at_most_once(group: GroupSpec | Mapping[str, Any], assignment: Assignment) -> list[str]:
    """No partition has two owners (a cooperative first round leaves revoked partitions unassigned)."""
    spec = _spec(group)
    parts, _, problems = _claims(spec, assignment)
    times = np.bincount(parts, minlength=spec.num_partitions)
    problems += [f"{_name(spec, p)} assigned {times[p]} times" for p in np.flatnonzero(times > 1).tolist()]
    return _report(problems)


def only_subscribed(group: GroupSpec | Mapping[str, Any], assignment: Assignment) -> list[str]:
    """Each partition goes only to a member subscribed to its topic."""
    spec = _spec(group)
    parts, members, problems = _claims(spec, assignment)
    sub = spec.subscribed_matrix()
    bad = ~sub[members, spec.topic_of(parts)] if len(parts) else np.zeros(0, dtype=bool)
    problems += [
        f"{_name(spec, p)} assigned to {spec.members[m]!r}, which does not subscribe to its topic"
        for p, m in zip(parts[bad].tolist(), members[bad].tolist(), strict=True)
    ]
    return _report(problems)


def balanced(group: GroupSpec | Mapping[str, Any], assignment: Assignment) -> list[str]:
    """AbstractStickyAssignor's balance rule: counts differ by at most one, or the poorer one can take none.

    A member with at least two fewer partitions than another must not subscribe to the topic of any of that
    member's partitions (AbstractStickyAssignor javadoc, isBalanced).
    """
    spec = _spec(group)
    parts, members, problems = _claims(spec, assignment)
    counts = np.bincount(members, minlength=len(spec.members))
    if len(counts) == 0 or counts.max() - counts.min() <= 1:
        return _report(problems)
    topics = spec.topic_of(parts)
    # Per topic: the most loaded owner of one of its partitions and the least loaded member subscribing.
    max_owner = np.full(len(spec.topics), -1, dtype=np.int64)
    np.maximum.at(max_owner, topics, counts[members])
    min_subscriber = np.full(len(spec.topics), np.iinfo(np.int64).max, dtype=np.int64)
    sub_member, sub_topic = spec.subscription_pairs()
    np.minimum.at(min_subscriber, sub_topic, counts[sub_member])
    for t in np.flatnonzero(max_owner - min_subscriber >= 2).tolist():
        owner = int(members[topics == t][np.argmax(counts[members[topics == t]])])
        taker = min((m for m, ts in enumerate(spec.subscriptions) if t in ts), key=lambda m: (counts[m], m))
        problems.append(
            f"unbalanced: {spec.members[taker]!r} has {counts[taker]} partitions and could "
            f"take {spec.topics[t]} partitions from {spec.members[owner]!r}, which has "
            f"{counts[owner]}"
        )
    return _report(problems)


def cooperative(group: GroupSpec | Mapping[str, Any], assignment: Assignment) -> list[str]:
    """KIP-429: no member gets a partition that another member still lists as owned; it is revoked first."""
    spec = _spec(group)
    parts, members, problems = _claims(spec, assignment)
    owner = np.full(spec.num_partitions, -1, dtype=np.int32)
    owner[parts] = members
    bad = np.flatnonzero(claimed_by_others(spec, owner))
    for p in bad[: _MAX_REPORTED + 1].tolist():
        others = spec.claim_member[(spec.claim_partition == p) & (spec.claim_member != owner[p])]
        problems.append(
            f"{_name(spec, p)} goes to {spec.members[owner[p]]!r} while {spec.members[others[0]]!r} still owns it"
        )
    problems += [f"{_name(spec, p)} not revoked first" for p in bad[_MAX_REPORTED + 1 :].tolist()]
    return _report(problems)


def moved(group: GroupSpec | Mapping[str, Any], assignment: Assignment) -> int:
    """Partitions whose valid previous owner no longer holds them (the stickiness cost)."""
    spec = _spec(group)
    parts, members, _ = _claims(spec, assignment)
    previous, _ = previous_owners(spec)
    owner = np.full(spec.num_partitions, -1, dtype=np.int64)
    owner[parts] = members
    return int(np.count_nonzero((previous >= 0) & (owner != previous)))


def check_plan(
    group: GroupSpec | Mapping[str, Any],
    assignment: Assignment,
    *,
    balance: bool = False,
    target: Assignment | None = None,
) -> list[str]:
    """All checks of a candidate: eager when `target` is None, else a cooperative round and its follow-up."""
    if target is None:
        problems = assigned_exactly_once(group, assignment) + only_subscribed(group, assignment)
        return problems + (balanced(group, assignment) if balance else [])
    problems = at_most_once(group, assignment) + only_subscribed(group, assignment)
    problems += cooperative(group, assignment)
    target_problems = assigned_exactly_once(group, target) + only_subscribed(group, target)
    problems += [f"target: {p}" for p in target_problems]
    return problems + ([f"target: {p}" for p in balanced(group, target)] if balance else [])
