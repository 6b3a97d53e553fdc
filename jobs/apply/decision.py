"""Serve the plan or fall back, and why: the rules every applier follows (standard library only).

`decide` takes a checked plan, the partition counts the cluster has now and the live members with their
subscriptions, and answers with the assignment to serve or the reasons to fall back. The kafka-python
`PlannedAssignor` calls it; the Java appliers (jvm/planned-assignor) follow the same rules, and the shared fixtures
under schemas/fixtures/apply hold every applier to them.

Each reason has a code (the fixtures' `reasons`) and a message (the log line's words):

    plan_unreadable, wrong_format, malformed_plan   the plan itself (`PlanError.code`, raised before `decide`)
    topic_missing             the cluster has no partition metadata for a planned topic
    partition_count_changed   a planned topic has another partition count now
    unknown_member            a live member matches no planned member (`jobs.apply.matching`)
    missing_member            a planned member matches no live member
    subscription_changed      a matched member subscribes to other topics than planned

Under the COOPERATIVE protocol (KIP-429) the assignment served withholds every partition another member still
reports owning: Kafka's CooperativeStickyAssignor.adjustAssignment does the same, and ConsumerCoordinator.
validateCooperativeAssignment refuses an assignment that gives a partition to a new owner in the round its old owner
revokes it. The owner revokes it, rejoins, and the follow-up round gives it to its planned owner. Under EAGER members
own nothing when they join, so nothing is withheld.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from jobs.apply.matching import LiveMember, describe, match_members
from jobs.apply.plan_file import Plan, TopicPartition

REASONS = (
    "plan_unreadable",
    "wrong_format",
    "malformed_plan",
    "topic_missing",
    "partition_count_changed",
    "unknown_member",
    "missing_member",
    "subscription_changed",
)


@dataclass(frozen=True)
class Reason:
    """Why a plan is not served: a code from REASONS and the words a log line says it with."""

    code: str
    message: str


@dataclass(frozen=True)
class LiveSubscription:
    """A live member with what it subscribes to and (COOPERATIVE, KIP-429) the partitions it reports owning."""

    member: LiveMember
    topics: tuple[str, ...]
    owned: tuple[TopicPartition, ...] = ()


@dataclass(frozen=True)
class Decision:
    """The partitions to give each live member now, or (when `reasons` is not empty) the reasons to fall back."""

    assignment: dict[str, list[TopicPartition]]
    reasons: tuple[Reason, ...] = ()
    withheld: int = 0

    @property
    def serve(self) -> bool:
        return not self.reasons


def decide(plan: Plan, partition_count: Callable[[str], int | None], members: Sequence[LiveSubscription]) -> Decision:
    """Serve `plan` to `members` when they are the planned group on the planned topics, else say why not.

    `partition_count(topic)` is the topic's partition count in the cluster now, None when the cluster has no metadata
    for it.
    """
    reasons: list[Reason] = []
    for topic, count in sorted(plan.topics.items()):
        now = partition_count(topic)
        if now is None:
            reasons.append(Reason("topic_missing", f"no partition metadata for topic {topic!r}"))
        elif now != count:
            reasons.append(
                Reason("partition_count_changed", f"partition count of {topic!r} changed: planned {count}, now {now}")
            )
    match = match_members(plan.members, [m.member for m in members])
    reasons += [Reason("unknown_member", f"member {describe(m)} is not in the plan") for m in match.unknown]
    reasons += [Reason("missing_member", f"planned member {describe(p)} is missing") for p in match.missing]
    for m in members:
        planned = plan.members.get(match.planned.get(m.member.member_id, ""))
        if planned is not None and sorted(set(m.topics)) != list(planned.topics):
            reasons.append(
                Reason(
                    "subscription_changed",
                    f"subscription of {m.member.member_id!r} differs: planned {list(planned.topics)}, "
                    f"now {sorted(set(m.topics))}",
                )
            )
    if reasons:
        return Decision({}, tuple(reasons))
    planned_now = {m.member.member_id: plan.members[match.planned[m.member.member_id]].assignment for m in members}
    assignment, withheld = withhold_owned(planned_now, owners(members))
    return Decision(assignment, (), withheld)


def owners(members: Sequence[LiveSubscription]) -> dict[TopicPartition, str]:
    """Who owns what, as members report it in their subscription (v1+, KIP-429); empty under EAGER."""
    return {tp: m.member.member_id for m in members for tp in m.owned}


def withhold_owned(
    assignment: Mapping[str, Sequence[TopicPartition]], owners: Mapping[TopicPartition, str]
) -> tuple[dict[str, list[TopicPartition]], int]:
    """The assignment without partitions another member still owns, and how many were withheld.

    Kafka: CooperativeStickyAssignor.adjustAssignment (KIP-429) - a partition changing owner is revoked first.
    """
    kept: dict[str, list[TopicPartition]] = {}
    withheld = 0
    for member_id, tps in assignment.items():
        kept[member_id] = [tp for tp in tps if owners.get(tp, member_id) == member_id]
        withheld += len(tps) - len(kept[member_id])
    return kept, withheld
