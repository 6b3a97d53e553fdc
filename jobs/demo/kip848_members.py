"""A KIP-848 consumer group of real librdkafka consumers (confluent-kafka, `group.protocol=consumer`) whose broker-side
assignor they choose with `group.remote.assignor`, for the broker plugin's live tests and the demo.

Each member runs in its own thread, reports every record it consumed (topic, partition, offset) and each change of
ownership, commits synchronously after each batch and, for partitions being revoked, in its revocation callback
(the coordinator gives a partition to its next owner only after this one acknowledged the revocation), so a switch
of assignment redelivers nothing. `wait_converged()` waits until the coordinator (ConsumerGroupDescribe) says the
group is Stable at its target assignment and every client agrees with it.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from jobs.apply.plan_file import TopicPartition
from jobs.demo.apply import MemberThread, OwnershipEvent, ThreadedGroup
from jobs.demo.cluster import DemoClusterError


@dataclass
class Kip848Group(ThreadedGroup):
    """Members of one KIP-848 group naming `remote_assignor`; start and stop them one by one."""

    bootstrap: str
    group_id: str
    remote_assignor: str | None
    members: dict[str, MemberThread] = field(default_factory=dict)
    events: list[OwnershipEvent] = field(default_factory=list)
    records: list[tuple[str, str, int, int]] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def start(self, client_id: str, topics: Sequence[str], *, group_instance_id: str | None = None) -> MemberThread:
        from confluent_kafka import Consumer

        config: dict[str, Any] = {
            "bootstrap.servers": self.bootstrap,
            "group.id": self.group_id,
            "client.id": client_id,
            "group.protocol": "consumer",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "topic.metadata.refresh.interval.ms": 1000,
        }
        if self.remote_assignor:
            config["group.remote.assignor"] = self.remote_assignor
        if group_instance_id:
            config["group.instance.id"] = group_instance_id
        member = MemberThread(client_id, Consumer(config), threading.Event())
        member.thread = threading.Thread(target=self._loop, args=(member, list(topics)), name=f"kip848-{client_id}")
        member.thread.daemon = True
        self.members[client_id] = member
        member.thread.start()
        return member

    def consumed(self) -> list[tuple[str, str, int, int]]:
        with self._lock:
            return list(self.records)

    def _loop(self, member: MemberThread, topics: list[str]) -> None:
        from confluent_kafka import KafkaException
        from confluent_kafka import TopicPartition as CTP

        consumer = member.consumer
        uncommitted: dict[TopicPartition, int] = {}

        def commit(tps: Any) -> None:
            offsets = [CTP(t, p, uncommitted[(t, p)]) for t, p in tps if (t, p) in uncommitted]
            if offsets:
                try:
                    consumer.commit(offsets=offsets, asynchronous=False)
                    for o in offsets:
                        uncommitted.pop((o.topic, o.partition), None)
                except KafkaException as e:
                    self._event(member.client_id, f"commit_failed {e}", ())

        def on_assign(_: Any, partitions: Any) -> None:
            self._event(member.client_id, "assigned", partitions)

        def on_revoke(_: Any, partitions: Any) -> None:
            commit([(tp.topic, tp.partition) for tp in partitions])
            self._event(member.client_id, "revoked", partitions)

        def on_lost(_: Any, partitions: Any) -> None:
            for tp in partitions:
                uncommitted.pop((tp.topic, tp.partition), None)
            self._event(member.client_id, "lost", partitions)

        try:
            consumer.subscribe(topics, on_assign=on_assign, on_revoke=on_revoke, on_lost=on_lost)
            while not member.stop.is_set():
                batch = [m for m in consumer.consume(num_messages=200, timeout=0.2) if m.error() is None]
                with self._lock:
                    for m in batch:
                        self.records.append((member.client_id, m.topic(), m.partition(), m.offset()))
                for m in batch:
                    uncommitted[(m.topic(), m.partition())] = m.offset() + 1
                commit(list(uncommitted))
                member.assigned = frozenset((tp.topic, tp.partition) for tp in consumer.assignment())
        except Exception as exc:  # noqa: BLE001 - reported by wait_converged instead of dying silently
            member.error = repr(exc)
        finally:
            commit(list(uncommitted))
            consumer.close()  # revokes (on_revoke commits nothing new) and leaves; a static member leaves for now
            member.assigned = frozenset()

    def _event(self, client_id: str, kind: str, tps: Any) -> None:
        with self._lock:
            self.events.append((time.monotonic(), client_id, kind, frozenset((tp.topic, tp.partition) for tp in tps)))


@contextlib.contextmanager
def kip848_group(bootstrap: str, group_id: str, remote_assignor: str | None) -> Iterator[Kip848Group]:
    group = Kip848Group(bootstrap, group_id, remote_assignor)
    try:
        yield group
    finally:
        group.stop_all()


@dataclass(frozen=True)
class Converged:
    assignments: dict[str, set[TopicPartition]]
    group_epoch: int
    server_assignor: str | None


def wait_converged(
    group: Kip848Group,
    partitions: set[TopicPartition],
    expected: Mapping[str, set[TopicPartition]] | None = None,
    *,
    timeout_s: float = 90.0,
) -> Converged:
    """Block until the coordinator reports the group Stable, reconciled (every member at its target, the assignment
    epoch at the group epoch) with exactly the running members, every client agrees with it, and `expected` (client
    id -> partitions) holds, or, without it, every partition is assigned once."""
    from kafka import KafkaAdminClient

    from jobs.io import kip848_source

    deadline = time.monotonic() + timeout_s
    with KafkaAdminClient(bootstrap_servers=[group.bootstrap], client_id="kip848-watch") as admin:
        while True:
            if failed := {c: m.error for c, m in group.members.items() if m.error}:
                raise DemoClusterError(f"group {group.group_id}: members failed: {failed}")
            described = kip848_source.describe_consumer_groups(admin, [group.group_id]).get(group.group_id)
            clients = group.assignments()
            if described is not None and described.group_state == "Stable":
                broker = {m["client_id"]: {(t, p) for t, p in m["assignment"]} for m in described.members}
                reconciled = all(m["assignment"] == m["target_assignment"] for m in described.members) and (
                    described.fields.get("group_epoch") == described.fields.get("assignment_epoch")
                )
                owned = [tp for tps in clients.values() for tp in tps]
                once = len(owned) == len(set(owned)) and set(owned) == partitions
                wanted = once if expected is None else clients == dict(expected)
                if reconciled and broker == clients and len(described.members) == len(clients) and wanted:
                    epoch = int(described.fields.get("group_epoch") or 0)
                    return Converged(clients, epoch, described.fields.get("server_assignor"))
            if time.monotonic() > deadline:
                state = described.group_state if described is not None else "absent"
                raise DemoClusterError(
                    f"group {group.group_id} did not converge within {timeout_s:.0f}s: state {state}, "
                    f"members report {clients}"
                )
            time.sleep(0.3)


def wait_members(bootstrap: str, group_id: str, count: int, *, timeout_s: float = 60.0) -> None:
    """Block until the coordinator counts `count` members in the group: a static member that closed (it leaves
    with epoch -2, keeping its assignment for a restart) is removed only when its session times out."""
    from kafka import KafkaAdminClient

    from jobs.io import kip848_source

    deadline = time.monotonic() + timeout_s
    with KafkaAdminClient(bootstrap_servers=[bootstrap], client_id="kip848-watch") as admin:
        while True:
            described = kip848_source.describe_consumer_groups(admin, [group_id]).get(group_id)
            members = len(described.members) if described is not None else 0
            if members == count:
                return
            if time.monotonic() > deadline:
                raise DemoClusterError(f"group {group_id} has {members} members, not {count}, after {timeout_s:.0f}s")
            time.sleep(0.3)
