"""A candidate against today's assignment, member by member: the partitions each gains and loses.

>>> today = {("t", 0): "a", ("t", 1): "a"}
>>> [(d.member, d.gained, d.lost) for d in member_diffs(today, {("t", 0): "a", ("t", 1): "b"}, ["a", "b"])]
[('a', (), (('t', 1),)), ('b', (('t', 1),), ())]
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

TopicPartition = tuple[str, int]


@dataclass(frozen=True)
class MemberDiff:
    """One member under one candidate: partitions held today and after, and the ones gained and lost (sorted)."""

    member: str
    before: int
    after: int
    gained: tuple[TopicPartition, ...]
    lost: tuple[TopicPartition, ...]


def member_diffs(
    today: Mapping[TopicPartition, str], candidate: Mapping[TopicPartition, str], members: Iterable[str] = ()
) -> list[MemberDiff]:
    """A row per member named in `members`, `today` or `candidate`, sorted by member id."""
    names = set(members) | set(today.values()) | set(candidate.values())
    gained: dict[str, list[TopicPartition]] = {m: [] for m in names}
    lost: dict[str, list[TopicPartition]] = {m: [] for m in names}
    before = dict.fromkeys(names, 0)
    after = dict.fromkeys(names, 0)
    for tp, owner in today.items():
        before[owner] += 1
        if candidate.get(tp) != owner:
            lost[owner].append(tp)
    for tp, owner in candidate.items():
        after[owner] += 1
        if today.get(tp) != owner:
            gained[owner].append(tp)
    return [MemberDiff(m, before[m], after[m], tuple(sorted(gained[m])), tuple(sorted(lost[m]))) for m in sorted(names)]


__all__ = ["MemberDiff", "member_diffs"]
