"""PlannedAssignor: a kafka-python partition assignor that serves an approved plan, else a Kafka assignor.

    planned = PlannedAssignor("payments.plan.json", fallback=CooperativeStickyAssignor)
    KafkaConsumer("orders", group_id="payments", client_id="payments-1",
                  partition_assignment_strategy=[planned, planned.fallback])

Every member lists it first, so the broker elects `rebalance-planned` (Kafka: ClassicGroup.selectProtocol, each
member votes for its first protocol all members support); the Java PlannedAssignor (jvm/planned-assignor) has the
same protocol name, so Python and Java members can share one group. When this consumer is the group leader,
`assign` serves the plan (`rebalance export`; a plan file is read again at an assignment whenever it changed, so an
operator can drop a newly approved plan in place) when:

1. the plan loads and checks (`jobs.apply.plan_file`),
2. every planned topic has the partition count the plan was made for,
3. the live members are exactly the planned ones, matched by `jobs.apply.matching` (static members by
   group.instance.id, then member id, then a unique client id, so a restarted group is recognised),
4. each member subscribes to exactly its planned topics.

These rules are `jobs.apply.decision.decide`, shared with the Java appliers through schemas/fixtures/apply.
Otherwise it logs ONE warning naming every reason (the unknown or missing member, the differing subscription, the
changed partition count) and returns the fallback's assignment. `metadata` and `on_assignment` are the fallback's,
so the fallback always has the state it needs (owned partitions, sticky user data) and listing `planned.fallback`
as the second protocol shares that state.

Rebalance protocol: the assignor supports exactly its fallback's protocols, since a consumer may not mix EAGER and
COOPERATIVE assignors (kafka-python: ConsumerCoordinator._validate_rebalance_protocol; Kafka likewise). Serving a
plan under COOPERATIVE (KIP-429) follows the two-phase rule of Kafka's CooperativeStickyAssignor.adjustAssignment:
a partition that another member still reports owning is withheld from its planned owner in this round; the owner
sees it revoked, rejoins, and the follow-up round gives it to its planned owner (ConsumerCoordinator.
validateCooperativeAssignment rejects anything else). Under EAGER members own nothing when they join, so nothing is
withheld. This keeps a cooperative group cooperative instead of forcing it through an eager stop-the-world switch.

Imports only kafka-python and the standard library: any consumer application can use it.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, cast

from kafka.coordinator.assignors.abstract import AbstractPartitionAssignor
from kafka.coordinator.assignors.range import RangePartitionAssignor
from kafka.protocol.consumer.metadata import ConsumerProtocolAssignment

from jobs.apply.decision import LiveSubscription, decide
from jobs.apply.matching import LiveMember, client_id_of
from jobs.apply.plan_file import Plan, TopicPartition, load_plan, parse_plan
from planner.errors import PlanError

log = logging.getLogger(__name__)


class PlannedAssignor(AbstractPartitionAssignor):  # type: ignore[misc]  # kafka-python ships no types
    """Serves `plan` (a plan document, or the path of an exported plan file) when the live group matches it."""

    name = "rebalance-planned"  # the Java PlannedAssignor's too: Python and Java members share one group

    def __init__(
        self,
        plan: Mapping[str, Any] | str | os.PathLike[str],
        fallback: type[AbstractPartitionAssignor] | AbstractPartitionAssignor = RangePartitionAssignor,
    ) -> None:
        self.fallback = fallback() if isinstance(fallback, type) else fallback
        self.version = self.fallback.version
        # A document is checked once, here; a file is read again whenever it changed since the last assignment.
        self._plan = parse_plan(dict(plan)) if isinstance(plan, Mapping) else None
        self._path = None if isinstance(plan, Mapping) else Path(plan)
        self._read: tuple[tuple[int, int, int], Plan] | None = None  # (inode, mtime ns, size) -> the plan read

    def supported_protocols(self) -> list[Any]:
        return list(self.fallback.supported_protocols())

    def metadata(self, topics: Any) -> Any:
        return self.fallback.metadata(topics)

    def on_assignment(self, assignment: Any, generation: int) -> None:
        self.fallback.on_assignment(assignment, generation)

    def assign(self, cluster: Any, members: Sequence[Any]) -> dict[str, Any]:
        """The plan's assignment when the group matches it, else the fallback's (with one warning saying why)."""
        try:
            plan = self._plan or self._plan_file()
        except PlanError as e:
            log.warning("planned assignor: no plan served (%s); assigning with %s", e, self.fallback.name)
            return cast("dict[str, Any]", self.fallback.assign(cluster, members))
        decision = decide(plan, lambda topic: _partition_count(cluster, topic), [subscription(m) for m in members])
        if not decision.serve:
            log.warning(
                "planned assignor: plan of group %r generation %d not served (%s); assigning with %s",
                plan.group_id,
                plan.generation_id,
                "; ".join(r.message for r in decision.reasons),
                self.fallback.name,
            )
            return cast("dict[str, Any]", self.fallback.assign(cluster, members))
        log.info(
            "planned assignor: serving plan of group %r generation %d (%s) to %d members%s",
            plan.group_id,
            plan.generation_id,
            plan.strategy,
            len(members),
            f"; {decision.withheld} partitions wait for their owners to revoke them (KIP-429)"
            if decision.withheld
            else "",
        )
        return {member_id: self._encode(tps) for member_id, tps in decision.assignment.items()}

    def _plan_file(self) -> Plan:
        """The plan file's plan, parsed again only when the file changed (a 100,000-partition plan takes seconds)."""
        assert self._path is not None
        try:
            stat = self._path.stat()
        except OSError as e:
            raise PlanError(f"plan file {self._path}: {e.strerror or e}", "plan_unreadable") from None
        version = (stat.st_ino, stat.st_mtime_ns, stat.st_size)
        if self._read is None or self._read[0] != version:
            self._read = (version, load_plan(self._path))
        return self._read[1]

    def _encode(self, tps: Sequence[TopicPartition]) -> ConsumerProtocolAssignment:
        by_topic: dict[str, list[int]] = {}
        for topic, partition in sorted(tps):
            by_topic.setdefault(topic, []).append(partition)
        return ConsumerProtocolAssignment(self.version, sorted(by_topic.items()), b"")


def subscription(member: Any) -> LiveSubscription:
    """A JoinGroup member as `decide` sees it: the leader knows a dynamic member's client id from its member id only."""
    owned = tuple(
        (tp.topic, partition)
        for tp in getattr(member.metadata, "owned_partitions", None) or ()  # v1+ (KIP-429); none under EAGER
        for partition in tp.partitions
    )
    live = LiveMember(member.member_id, member.group_instance_id, client_id_of(member.member_id))
    return LiveSubscription(live, tuple(member.metadata.topics), owned)


def _partition_count(cluster: Any, topic: str) -> int | None:
    partitions = cluster.partitions_for_topic(topic)
    return None if partitions is None else len(partitions)
