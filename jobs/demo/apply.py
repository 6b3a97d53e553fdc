"""Applying an approved plan to a live group: export it, restart the members with PlannedAssignor, converge, verify.

`planned_group()` runs kafka-python members whose first assignor is `PlannedAssignor` (the live tests use it too);
each member records its assignment after every poll and, through a rebalance listener, when it gained or lost each
partition. `apply_demo()` is the demo's last act: after the demo groups stopped (the broker still running), it
exports one group's approved plan, restarts that group's members under the identities the plan recorded (client id,
group.instance.id), waits until the group runs the plan, pulls a snapshot and verifies it.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, cast

from kafka.coordinator.assignors.abstract import AbstractPartitionAssignor

from jobs.apply.plan_file import Plan, TopicPartition, write_plan
from jobs.apply.planned_assignor import PlannedAssignor
from jobs.demo.cluster import DemoClusterError, topics_known

METADATA_WAIT_S = 10.0  # a member waits this long at most for its topics in its metadata before it joins

# (monotonic time, client id, "assigned" | "revoked" | "closed", partitions)
OwnershipEvent = tuple[float, str, str, frozenset[TopicPartition]]


def kafka_assignor(strategy: str) -> type[AbstractPartitionAssignor]:
    """kafka-python's assignor class for a Kafka strategy name (the fallback a restarted member keeps)."""
    from kafka.coordinator.assignors.cooperative_sticky import CooperativeStickyAssignor
    from kafka.coordinator.assignors.range import RangePartitionAssignor
    from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
    from kafka.coordinator.assignors.sticky.sticky_assignor import StickyPartitionAssignor

    assignors = {
        "range": RangePartitionAssignor,
        "roundrobin": RoundRobinPartitionAssignor,
        "sticky": StickyPartitionAssignor,
        "cooperative-sticky": CooperativeStickyAssignor,
    }
    if strategy not in assignors:
        raise DemoClusterError(f"no kafka-python assignor for strategy {strategy!r}; one of {sorted(assignors)}")
    return cast("type[Any]", assignors[strategy])


@dataclass
class MemberThread:
    """One consumer run by a thread of this process: its own stop switch, its last assignment and its error, both
    written by its thread."""

    client_id: str
    consumer: Any
    stop: threading.Event
    thread: threading.Thread | None = None
    assigned: frozenset[TopicPartition] = frozenset()
    error: str | None = None


class ThreadedGroup:
    """Stopping and reading a group whose members are consumer threads of this process (`members`)."""

    members: dict[str, MemberThread]

    def stop(self, *client_ids: str) -> None:
        """Stop members together (all signalled, then awaited): each thread closes its consumer, leaving the group."""
        members = [self.members.pop(client_id) for client_id in client_ids]
        for member in members:
            member.stop.set()
        for member in members:
            if member.thread is not None:
                member.thread.join(timeout=60)

    def stop_all(self) -> None:
        self.stop(*self.members)

    def assignments(self) -> dict[str, set[TopicPartition]]:
        """Each running member's assignment as its own client last reported it."""
        return {cid: set(m.assigned) for cid, m in self.members.items()}


@dataclass
class PlannedGroup(ThreadedGroup):
    """Members of one consumer group using PlannedAssignor(plan, fallback); start and stop them one by one."""

    bootstrap: str
    group_id: str
    plan: Mapping[str, Any] | str | os.PathLike[str]
    fallback: type[AbstractPartitionAssignor]
    members: dict[str, MemberThread] = field(default_factory=dict)
    events: list[OwnershipEvent] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def start(self, client_id: str, topics: Sequence[str], *, group_instance_id: str | None = None) -> MemberThread:
        """Start a member that lists PlannedAssignor first and its fallback (sharing state) second."""
        from kafka import KafkaConsumer

        assignor = PlannedAssignor(self.plan, fallback=self.fallback)
        consumer = KafkaConsumer(
            bootstrap_servers=[self.bootstrap],
            group_id=self.group_id,
            client_id=client_id,
            group_instance_id=group_instance_id,
            partition_assignment_strategy=[assignor, assignor.fallback],
            enable_auto_commit=False,
            auto_offset_reset="latest",
            max_poll_records=100,
            session_timeout_ms=30_000,
            heartbeat_interval_ms=1_000,
        )
        # Joins with its topics known (a round assigned without them left a group off its plan in a full test run,
        # 2026-11-28); a topic the cluster lacks is joined without, after METADATA_WAIT_S.
        topics_known(consumer, topics, METADATA_WAIT_S)
        consumer.subscribe(list(topics), listener=self._listener(client_id))
        member = MemberThread(client_id, consumer, threading.Event())
        member.thread = threading.Thread(target=self._loop, args=(member,), name=f"planned-{client_id}", daemon=True)
        self.members[client_id] = member
        member.thread.start()
        return member

    def _loop(self, member: MemberThread) -> None:
        # Clients are not thread-safe: only this thread touches the consumer, the others read `assigned`.
        try:
            while not member.stop.is_set():
                member.consumer.poll(timeout_ms=200)
                member.assigned = frozenset((tp.topic, tp.partition) for tp in member.consumer.assignment())
        except Exception as exc:  # noqa: BLE001 - reported by wait_converged instead of dying silently
            member.error = repr(exc)
        finally:
            # It stops consuming here, before close() leaves the group and others may be given its partitions.
            self._record(member.client_id, "closed", member.consumer.assignment())
            member.consumer.close(autocommit=False)

    def _listener(self, client_id: str) -> Any:
        from kafka import ConsumerRebalanceListener

        group = self

        class Record(ConsumerRebalanceListener):  # type: ignore[misc]  # kafka-python ships no types
            """Records when this member gained or lost partitions (the KIP-429 check reads the timeline)."""

            def on_partitions_revoked(self, revoked: Any) -> None:
                group._record(client_id, "revoked", revoked)

            def on_partitions_assigned(self, assigned: Any) -> None:
                group._record(client_id, "assigned", assigned)

        return Record()

    def _record(self, client_id: str, kind: str, tps: Any) -> None:
        with self._lock:
            self.events.append((time.monotonic(), client_id, kind, frozenset((tp.topic, tp.partition) for tp in tps)))


class LiveGroup(Protocol):
    """A classic group whose members this process runs: PlannedGroup (kafka-python threads) or
    jobs.demo.java_members.JavaGroup (Java processes); each member has an `error` (None while it is well)."""

    @property
    def bootstrap(self) -> str: ...

    @property
    def group_id(self) -> str: ...

    @property
    def members(self) -> Mapping[str, Any]: ...

    def assignments(self) -> dict[str, set[TopicPartition]]: ...


@contextlib.contextmanager
def planned_group(
    bootstrap: str,
    group_id: str,
    plan: Mapping[str, Any] | str | os.PathLike[str],
    fallback: type[AbstractPartitionAssignor],
) -> Iterator[PlannedGroup]:
    """A PlannedGroup whose members are all stopped (by their own threads) on exit."""
    group = PlannedGroup(bootstrap, group_id, plan, fallback)
    try:
        yield group
    finally:
        group.stop_all()


def wait_converged(
    group: LiveGroup,
    partitions: set[TopicPartition],
    expected: Mapping[str, set[TopicPartition]] | None = None,
    *,
    timeout_s: float = 90.0,
) -> dict[str, set[TopicPartition]]:
    """Block until the broker reports the group Stable with exactly the running members, every client agrees with
    the broker, and `expected` (client id -> partitions) holds, or, without it, every partition is assigned once."""
    from kafka import KafkaAdminClient

    deadline = time.monotonic() + timeout_s
    with KafkaAdminClient(bootstrap_servers=[group.bootstrap], client_id="planned-watch") as admin:
        while True:
            if failed := {cid: m.error for cid, m in group.members.items() if m.error}:
                raise DemoClusterError(f"group {group.group_id}: members failed: {failed}")
            described = admin.describe_groups([group.group_id])[group.group_id]
            clients = group.assignments()
            if described["group_state"] == "Stable" and _broker_view(described) == clients:
                owned = [tp for tps in clients.values() for tp in tps]
                once = len(owned) == len(set(owned)) and set(owned) == partitions
                if (expected is None and once) or (expected is not None and clients == dict(expected)):
                    return clients
            if time.monotonic() > deadline:
                raise DemoClusterError(
                    f"group {group.group_id} did not converge within {timeout_s:.0f}s: state "
                    f"{described['group_state']}, members report {clients}"
                )
            time.sleep(0.3)


def double_ownership(events: Sequence[OwnershipEvent]) -> list[str]:
    """Every moment a member was given a partition another member still held (KIP-429 says: never)."""
    holder: dict[TopicPartition, str] = {}
    problems = []
    for at, client_id, kind, tps in sorted(events):
        for tp in sorted(tps):
            if kind == "assigned":
                if holder.get(tp, client_id) != client_id:
                    problems.append(f"{tp} given to {client_id} at {at:.3f} while {holder[tp]} held it")
                holder[tp] = client_id
            elif holder.get(tp) == client_id:
                del holder[tp]
    return problems


def _broker_view(described: Mapping[str, Any]) -> dict[str, set[TopicPartition]]:
    return {
        m["client_id"]: {
            (t["topic"], p) for t in m["member_assignment"]["assigned_partitions"] for p in t["partitions"]
        }
        for m in described["members"]
        if isinstance(m["member_assignment"], dict)
    }


def _kafka_strategy(lake: Any, plan: Plan) -> str:
    """The Kafka assignor the group's members used when the plan was made (first one other than `planned`)."""
    rows = lake.read_arrow("snapshots", [("snapshot_id", "=", plan.snapshot_id), ("group_id", "=", plan.group_id)])
    for strategies in rows.column("strategies").to_pylist():
        for strategy in strategies or ():
            if strategy != PlannedAssignor.name:
                return str(strategy)
    return "range"


def _partitions(tps: set[TopicPartition]) -> str:
    by_topic: dict[str, list[int]] = {}
    for topic, partition in sorted(tps):
        by_topic.setdefault(topic, []).append(partition)
    return " ".join(f"{t}{ps}" for t, ps in by_topic.items()) or "-"


def planned_by_client(plan: Plan) -> dict[str, set[TopicPartition]]:
    """client id -> planned partitions (the identities a restarted member keeps)."""
    return {str(m.client_id): set(m.assignment) for m in plan.members.values()}


def _exported(lake: str | os.PathLike[str], group_id: str, directory: Path | None = None) -> tuple[Any, Plan, Path]:
    """A run context on the lake, the group's approved plan, and the plan file written for it (default directory:
    the lake's plans/)."""
    from jobs.config import Config
    from jobs.context import RunContext, new_run_id
    from jobs.tables import export

    ctx = RunContext.create(Config(lake=str(lake)), new_run_id("apply"), trigger="apply")
    plan = export.plan_of(ctx.lake, export.select_generation(ctx.lake, group_id))
    if nameless := [m.member_id for m in plan.members.values() if not m.client_id]:
        raise DemoClusterError(f"plan members {nameless} have no client id to restart them under")
    path = (directory or Path(ctx.lake.root) / "plans") / f"{group_id}.plan.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    write_plan(plan, path)
    return ctx, plan, path


def _verified(ctx: Any, bootstrap: str, group_id: str) -> str:
    """Pull a snapshot of the live group into the lake and verify it against its plan; the verdict line."""
    from jobs.io.kafka_settings import KafkaSettings
    from jobs.io.kafka_source import pull_snapshots
    from jobs.io.snapshot_pieces import RawDocument
    from jobs.steps import ingest, verify

    docs = pull_snapshots(KafkaSettings(bootstrap), group_pattern=group_id)
    ingest.run(ctx, documents=[RawDocument(f"kafka://{bootstrap}/{group_id}", json.dumps(d), doc=d) for d in docs])
    return verify.run(ctx, group=group_id, snapshot_id=ctx.run_id).text


def _summary(
    plan: Plan, path: Path, how: str, seconds: float, assignments: Mapping[str, set[TopicPartition]]
) -> list[str]:
    return [
        f"exported group {plan.group_id} generation {plan.generation_id} ({plan.strategy}) -> {path}",
        f"{how}; converged to the plan in {seconds:.1f} s",
        *(f"  {cid}: {_partitions(tps)}" for cid, tps in sorted(assignments.items())),
    ]


def apply_demo(bootstrap: str, lake: str | os.PathLike[str], group_id: str = "billing-range") -> str:
    """Export the group's approved plan, restart its members with PlannedAssignor, converge, snapshot, verify.

    Call it after the demo groups stopped, with the broker still running; returns a printable summary.
    """
    ctx, plan, path = _exported(lake, group_id)
    fallback = kafka_assignor(_kafka_strategy(ctx.lake, plan))
    started = time.monotonic()
    with planned_group(bootstrap, group_id, path, fallback) as group:
        for m in plan.members.values():
            group.start(str(m.client_id), m.topics, group_instance_id=m.group_instance_id)
        assignments = wait_converged(group, set(plan.owners()), planned_by_client(plan))
        converged_s = time.monotonic() - started
        verdict = _verified(ctx, bootstrap, group_id)
    how = f"restarted {len(plan.members)} members with PlannedAssignor (fallback {fallback.name})"
    return "\n".join([*_summary(plan, path, how, converged_s, assignments), verdict])


def apply_demo_java(bootstrap: str, lake: str | os.PathLike[str], group_id: str = "payments-coop") -> str:
    """The same with Java consumers: the group's members restart as JVM processes (jobs.demo.java_members) whose
    first assignor is the Java PlannedAssignor, reading the exported plan; the leader's log line is shown."""
    from jobs.demo.java_members import JAVA_ASSIGNORS, java_group

    ctx, plan, path = _exported(lake, group_id)
    strategy = _kafka_strategy(ctx.lake, plan)
    started = time.monotonic()
    with java_group(bootstrap, group_id, path, JAVA_ASSIGNORS[strategy]) as group:
        for m in plan.members.values():
            group.start(str(m.client_id), m.topics, group_instance_id=m.group_instance_id)
        assignments = wait_converged(group, set(plan.owners()), planned_by_client(plan))
        converged_s = time.monotonic() - started
        served = group.log_lines("serving plan")
        verdict = _verified(ctx, bootstrap, group_id)
    how = (
        f"restarted {len(plan.members)} members as Java consumer processes with "
        f"io.rebalanceplanner.apply.PlannedAssignor (fallback {strategy})"
    )
    leader = [f"  leader: {served[-1].split('] INFO ', 1)[-1]}"] if served else []
    return "\n".join([*_summary(plan, path, how, converged_s, assignments), *leader, verdict])


def apply_demo_broker(
    bootstrap: str, lake: str | os.PathLike[str], plan_dir: Path, broker_log: Path, group_id: str = "racks-v2"
) -> str:
    """The same for a KIP-848 group, whose assignment the broker computes: the plan goes to the broker's
    rebalance.plan.dir, and the group's static members restart with group.remote.assignor=rebalance-planned
    (jobs.demo.kip848_members); the broker recognises the plan by their group.instance.ids."""
    from jobs.demo import kip848_members
    from jobs.demo.java_members import PROTOCOL

    ctx, plan, path = _exported(lake, group_id, plan_dir)
    if dynamic := [str(m.client_id) for m in plan.members.values() if not m.group_instance_id]:
        raise DemoClusterError(f"members {dynamic} are dynamic: a restarted group is recognised by instance ids only")
    # The demo's members closed as static members do (leaving for now, their assignment kept for a quick restart,
    # which would take it over without a new assignment): the group is assigned anew once their sessions expired.
    kip848_members.wait_members(bootstrap, group_id, 0)
    started = time.monotonic()
    with kip848_members.kip848_group(bootstrap, group_id, PROTOCOL) as group:
        for m in plan.members.values():
            group.start(str(m.client_id), m.topics, group_instance_id=m.group_instance_id)
        converged = kip848_members.wait_converged(group, set(plan.owners()), planned_by_client(plan))
        converged_s = time.monotonic() - started
        verdict = _verified(ctx, bootstrap, group_id)
    how = (
        f"restarted {len(plan.members)} librdkafka members (group.protocol=consumer, group.remote.assignor="
        f"{PROTOCOL}): the broker's PlannedGroupAssignor assigned them"
    )
    served = [
        line for line in broker_log.read_text(errors="replace").splitlines() if f"plan of group '{group_id}'" in line
    ]
    broker = [f"  broker: {served[-1].split('] INFO ', 1)[-1]}"] if served else []
    return "\n".join([*_summary(plan, path, how, converged_s, converged.assignments), *broker, verdict])
