"""A live Kafka playground on 127.0.0.1: Apache Kafka (KRaft), skewed keyed traffic, real consumer groups.

`running()` is what `make demo`, the Kafka tests and the pull benchmark use: it starts (or reuses) a broker,
creates topics, produces keyed traffic where a few hot keys carry much of the load, runs real consumer groups
(kafka-python members with range, roundrobin, sticky and cooperative-sticky, static members, one librdkafka
member through confluent-kafka), lets each group consume and commit part of the data so lag is non-zero, waits
until every group is stable, and on exit stops every member and the broker it started (by PID).
"""

from __future__ import annotations

import contextlib
import random
import re
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from jobs.io.kafka_broker import Broker, broker
from planner.errors import SourceError

TopicPartition = tuple[str, int]
Strategy = Literal["range", "roundrobin", "sticky", "cooperative-sticky"]


class DemoClusterError(SourceError):
    """The playground could not be started or did not settle in time."""


@dataclass(frozen=True)
class DemoGroup:
    """A consumer group to run: its members, their client and assignor, and how far it consumes before committing.

    Classic groups (`group_protocol="classic"`) run the client-side `strategy`. KIP-848 consumer groups
    (`group_protocol="consumer"`, librdkafka members) are assigned by the broker's `remote_assignor` (None: the
    broker's default, uniform); their members may subscribe to different topics (`subscriptions`, one tuple per
    member), to a regular expression over topic names (`pattern`), and name their rack (`racks`). `topics` is
    every topic the group consumes.
    """

    group_id: str
    topics: tuple[str, ...]
    members: int = 2
    strategy: Strategy = "range"
    client: Literal["kafka-python", "librdkafka"] = "kafka-python"
    static: bool = False
    commit_fraction: float = 0.5
    group_protocol: Literal["classic", "consumer"] = "classic"
    remote_assignor: str | None = None
    subscriptions: tuple[tuple[str, ...], ...] = ()
    pattern: str | None = None
    racks: tuple[str, ...] = ()

    def subscription(self, index: int) -> list[str]:
        """What member `index` subscribes to: its own topics, the group's, or the pattern (librdkafka: '^regex')."""
        if self.pattern is not None:
            return [f"^{self.pattern}$"]
        return list(self.subscriptions[index] if self.subscriptions else self.topics)

    def prefixed(self, prefix: str) -> DemoGroup:
        """The same group with `prefix` before its id and every topic name (several playgrounds share one broker)."""
        return replace(
            self,
            group_id=prefix + self.group_id,
            topics=tuple(prefix + t for t in self.topics),
            subscriptions=tuple(tuple(prefix + t for t in ts) for ts in self.subscriptions),
            pattern=None if self.pattern is None else re.escape(prefix) + self.pattern,
        )


_CONSUMER: dict[str, Any] = {"client": "librdkafka", "group_protocol": "consumer"}
DEFAULT_TOPICS: dict[str, int] = {"orders": 12, "refunds": 4, "clicks": 6}
DEFAULT_GROUPS: tuple[DemoGroup, ...] = (
    DemoGroup("billing-range", ("orders", "refunds"), 3, "range", commit_fraction=0.5),
    DemoGroup("audit-roundrobin", ("orders", "refunds"), 3, "roundrobin", commit_fraction=0.6),
    DemoGroup("search-sticky", ("orders", "clicks"), 2, "sticky", commit_fraction=0.7),
    DemoGroup("payments-coop", ("orders", "refunds"), 2, "cooperative-sticky", commit_fraction=0.4),
    DemoGroup("ledger-static", ("orders",), 2, "range", static=True, commit_fraction=0.8),
    DemoGroup("clicks-rdkafka", ("clicks",), 1, "range", client="librdkafka", commit_fraction=0.3),
    # KIP-848 consumer groups: the broker assigns (uniform by default, range when the members ask for it).
    DemoGroup("orders-uniform-v2", ("orders", "refunds"), 3, **_CONSUMER, commit_fraction=0.5),
    DemoGroup("refunds-range-v2", ("orders", "refunds"), 2, **_CONSUMER, remote_assignor="range", commit_fraction=0.6),
    DemoGroup(
        "mixed-subscriptions-v2",
        ("orders", "refunds", "clicks"),
        3,
        **_CONSUMER,
        subscriptions=(("orders",), ("orders", "clicks"), ("refunds", "clicks")),
        commit_fraction=0.7,
    ),
    DemoGroup("pattern-v2", ("orders", "clicks"), 2, **_CONSUMER, pattern="(orders|clicks)", commit_fraction=0.4),
    DemoGroup(
        "racks-v2", ("clicks", "refunds"), 2, **_CONSUMER, racks=("az1", "az2"), static=True, commit_fraction=0.8
    ),
)


@dataclass
class Produced:
    """What the producer wrote, record by record, as the broker acknowledged it."""

    topics: dict[str, int]
    keys: list[bytes] = field(default_factory=list)
    topic: list[str] = field(default_factory=list)
    partition: list[int] = field(default_factory=list)
    offset: list[int] = field(default_factory=list)

    def end_offsets(self) -> dict[TopicPartition, int]:
        """End offset of every partition of every produced topic (records written, as nothing was deleted)."""
        ends = {(t, p): 0 for t, n in self.topics.items() for p in range(n)}
        for t, p, o in zip(self.topic, self.partition, self.offset, strict=True):
            ends[(t, p)] = max(ends[(t, p)], o + 1)
        return ends


@dataclass
class RunningGroup:
    """A live group: its spec, the offsets it committed, and what each member (by client id) is assigned now."""

    spec: DemoGroup
    targets: dict[TopicPartition, int]
    committed: dict[TopicPartition, int] = field(default_factory=dict)
    members: dict[str, Any] = field(default_factory=dict)  # client_id -> KafkaConsumer | confluent Consumer
    threads: list[threading.Thread] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    # Written by each member's own thread after every poll: clients are not thread-safe, so no other thread
    # may call consumer.assignment() (kafka-python blocks on the coordinator lock held by poll()).
    assigned: dict[str, frozenset[TopicPartition]] = field(default_factory=dict)
    # Raised by wait_settled when the group stays Stable without settling: each member re-subscribes once per raise.
    rejoins: int = 0

    def assignments(self) -> dict[str, set[TopicPartition]]:
        """Each member's current assignment as its own client last reported it, keyed by client id."""
        return {cid: set(self.assigned.get(cid, ())) for cid in self.members}


@dataclass
class Cluster:
    """Everything `running()` started: the broker address, topics, produced records and the live groups."""

    bootstrap: str
    broker_pid: int | None
    topics: dict[str, int]
    produced: Produced
    groups: dict[str, RunningGroup]


def create_topics(bootstrap: str, topics: dict[str, int]) -> None:
    """Create the topics (one replica each) and wait until their metadata is visible."""
    from kafka import KafkaAdminClient
    from kafka.admin import NewTopic

    with KafkaAdminClient(bootstrap_servers=[bootstrap], client_id="demo-admin") as admin:
        existing = set(admin.list_topics())
        new = [NewTopic(t, n, 1) for t, n in topics.items() if t not in existing]
        if new:
            admin.create_topics(new)
        admin.wait_for_topics(list(topics), timeout_ms=30_000)


def skewed_keys(n: int, *, distinct: int = 2_000, hot: int = 3, hot_share: float = 0.4, seed: int = 7) -> list[bytes]:
    """`n` keys where `hot` keys carry `hot_share` of the records and the rest spread over `distinct` keys."""
    rng = random.Random(seed)
    hot_keys = [f"customer-hot-{i}".encode() for i in range(hot)]
    weights = [hot_share / hot * (1.0 - 0.3 * i) for i in range(hot)]  # unequal hot keys: the hottest first
    rest = 1.0 - sum(weights)
    out = []
    for _ in range(n):
        r = rng.random()
        if r < sum(weights):
            acc = 0.0
            for k, w in zip(hot_keys, weights, strict=True):
                acc += w
                if r < acc:
                    out.append(k)
                    break
        else:
            out.append(f"customer-{rng.randrange(distinct):05d}".encode() if rest > 0 else hot_keys[0])
    return out


def produce(bootstrap: str, topics: dict[str, int], records_per_topic: int, *, seed: int = 7) -> Produced:
    """Write keyed, skewed records to every topic with kafka-python's default (murmur2) partitioner."""
    from kafka import KafkaProducer

    produced = Produced(dict(topics))
    rng = random.Random(seed)
    lock = threading.Lock()
    failures: list[BaseException] = []

    def acked(key: bytes, meta: Any) -> None:
        with lock:
            produced.keys.append(key)
            produced.topic.append(meta.topic)
            produced.partition.append(meta.partition)
            produced.offset.append(meta.offset)

    producer = KafkaProducer(
        bootstrap_servers=[bootstrap], client_id="demo-producer", linger_ms=20, batch_size=256 * 1024, acks=1
    )
    try:
        for i, topic in enumerate(topics):
            for key in skewed_keys(records_per_topic, seed=seed + i):
                value = bytes(rng.randrange(32, 512))
                future = producer.send(topic, key=key, value=value)
                future.add_callback(lambda meta, key=key: acked(key, meta))
                future.add_errback(failures.append)
        producer.flush(timeout=120)
    finally:
        producer.close(timeout=10)
    if failures:
        raise DemoClusterError(f"{len(failures)} records failed to produce: {failures[0]!r}")
    return produced


@contextlib.contextmanager
def consumer_groups(
    bootstrap: str, groups: Sequence[DemoGroup], ends: dict[TopicPartition, int], *, settle_timeout_s: float = 90.0
) -> Iterator[dict[str, RunningGroup]]:
    """Run the groups' members in background threads until every group is stable with its offsets committed."""
    stop = threading.Event()
    running: dict[str, RunningGroup] = {}
    try:
        for spec in groups:
            targets = {tp: int(end * spec.commit_fraction) for tp, end in ends.items() if tp[0] in spec.topics}
            group = running[spec.group_id] = RunningGroup(spec, targets)
            for i in range(spec.members):
                client_id = f"{spec.group_id}-m{i}"
                start = _start_librdkafka_member if spec.client == "librdkafka" else _start_python_member
                start(bootstrap, group, client_id, i, stop)
        wait_settled(bootstrap, running, timeout_s=settle_timeout_s)
        yield running
    finally:
        stop.set()
        for group in running.values():
            for t in group.threads:
                t.join(timeout=30)


def _start_python_member(
    bootstrap: str, group: RunningGroup, client_id: str, index: int, stop: threading.Event
) -> None:
    from kafka import KafkaConsumer
    from kafka.coordinator.assignors.cooperative_sticky import CooperativeStickyAssignor
    from kafka.coordinator.assignors.range import RangePartitionAssignor
    from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
    from kafka.coordinator.assignors.sticky.sticky_assignor import StickyPartitionAssignor

    assignor = {
        "range": RangePartitionAssignor,
        "roundrobin": RoundRobinPartitionAssignor,
        "sticky": StickyPartitionAssignor,
        "cooperative-sticky": CooperativeStickyAssignor,
    }
    spec = group.spec
    consumer = KafkaConsumer(
        *spec.topics,
        bootstrap_servers=[bootstrap],
        group_id=spec.group_id,
        client_id=client_id,
        group_instance_id=f"{spec.group_id}-instance-{index}" if spec.static else None,
        partition_assignment_strategy=[assignor[spec.strategy]],
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        max_poll_records=500,
        session_timeout_ms=30_000,
        heartbeat_interval_ms=1_000,
    )
    group.members[client_id] = consumer
    thread = threading.Thread(
        target=_python_member_loop, args=(consumer, group, index, stop), name=f"demo-{client_id}", daemon=True
    )
    group.threads.append(thread)
    thread.start()


def _python_member_loop(consumer: Any, group: RunningGroup, index: int, stop: threading.Event) -> None:
    from kafka.errors import KafkaError
    from kafka.structs import OffsetAndMetadata
    from kafka.structs import TopicPartition as KTP

    rejoins = 0
    try:
        while not stop.is_set():
            rejoins = _rejoin_if_asked(consumer, group, index, rejoins)
            consumer.poll(timeout_ms=200)
            assignment = consumer.assignment()
            group.assigned[consumer.config["client_id"]] = _client_assignment(assignment)
            for tp in assignment:
                key = (tp.topic, tp.partition)
                if key in group.committed:
                    consumer.pause(tp)  # reached its target: stop fetching, keep heartbeating
                    continue
                with contextlib.suppress(KafkaError):  # a rebalance in flight: retried next loop
                    if consumer.position(tp, timeout_ms=1_000) >= group.targets[key]:
                        consumer.commit({KTP(*key): OffsetAndMetadata(group.targets[key], "", -1)})
                        group.committed[key] = group.targets[key]
    except Exception as exc:  # noqa: BLE001 - reported by wait_settled instead of dying silently
        group.errors.append(f"{consumer.config['client_id']}: {exc!r}")
    finally:
        consumer.close(autocommit=False)


def _start_librdkafka_member(
    bootstrap: str, group: RunningGroup, client_id: str, index: int, stop: threading.Event
) -> None:
    from confluent_kafka import Consumer  # dev dependency: only the demo runs a librdkafka member

    spec = group.spec
    config: dict[str, Any] = {
        "bootstrap.servers": bootstrap,
        "group.id": spec.group_id,
        "client.id": client_id,
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
    }
    if spec.group_protocol == "consumer":  # KIP-848: the broker assigns and sets the session and heartbeat timing
        config["group.protocol"] = "consumer"
        if spec.remote_assignor:
            config["group.remote.assignor"] = spec.remote_assignor
    else:
        config |= {"partition.assignment.strategy": spec.strategy, "session.timeout.ms": 30_000}
    if spec.static:
        config["group.instance.id"] = f"{spec.group_id}-instance-{index}"
    if spec.racks:
        config["client.rack"] = spec.racks[index]
    consumer = Consumer(config)
    consumer.subscribe(spec.subscription(index))
    group.members[client_id] = consumer
    thread = threading.Thread(
        target=_librdkafka_member_loop,
        args=(consumer, client_id, group, index, stop),
        name=f"demo-{client_id}",
        daemon=True,
    )
    group.threads.append(thread)
    thread.start()


def _librdkafka_member_loop(
    consumer: Any, client_id: str, group: RunningGroup, index: int, stop: threading.Event
) -> None:
    from confluent_kafka import KafkaException
    from confluent_kafka import TopicPartition as CTP

    seen: dict[TopicPartition, int] = {}
    rejoins = 0
    try:
        while not stop.is_set():
            rejoins = _rejoin_if_asked(consumer, group, index, rejoins)
            msg = consumer.poll(0.2)
            if msg is not None and msg.error() is None:
                seen[(msg.topic(), msg.partition())] = msg.offset() + 1
            assignment = consumer.assignment()
            group.assigned[client_id] = _client_assignment(assignment)
            for tp in assignment:
                key = (tp.topic, tp.partition)
                if key in group.committed:
                    consumer.pause([tp])
                elif seen.get(key, 0) >= group.targets[key] or group.targets[key] == 0:
                    with contextlib.suppress(KafkaException):
                        consumer.commit(offsets=[CTP(*key, group.targets[key])], asynchronous=False)
                        group.committed[key] = group.targets[key]
    except Exception as exc:  # noqa: BLE001 - reported by wait_settled instead of dying silently
        group.errors.append(f"{client_id}: {exc!r}")
    finally:
        consumer.close()


def _rejoin_if_asked(consumer: Any, group: RunningGroup, index: int, handled: int) -> int:
    """Re-subscribe (leave and join again) when wait_settled asked the group to rejoin since this member last did;
    returns the requests now handled. Both clients take the same two calls."""
    if handled < group.rejoins:
        consumer.unsubscribe()
        consumer.subscribe(group.spec.subscription(index))
    return group.rejoins


def _client_assignment(assignment: Any) -> frozenset[TopicPartition]:
    return frozenset((tp.topic, tp.partition) for tp in assignment)


def topics_known(consumer: Any, topics: Sequence[str], timeout_s: float) -> bool:
    """Wait (at most `timeout_s`) until a kafka-python consumer's metadata holds every one of `topics`; whether it does.

    kafka-python's group leader assigns from the metadata it holds when the group syncs: a round assigned before that
    held a topic gives its partitions to no one ("no partition metadata for topic"), and a group left so can stay
    Stable without another round. A member that subscribes once this holds joins with its topics known."""
    deadline = time.monotonic() + timeout_s
    while not all(consumer.partitions_for_topic(t) for t in topics):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


REJOIN_AFTER_S = 10.0  # how long a group may stay Stable without settling before its members are asked to rejoin


@dataclass(frozen=True)
class BrokerView:
    """What the coordinator says of a group: its state, each member's assignment by client id, and whether every
    member has reached its target (always for classic groups; KIP-848 members reconcile towards a target)."""

    state: str
    assigned: dict[str, set[TopicPartition]]
    members: int
    reconciled: bool = True


def describe(admin: Any, groups: dict[str, RunningGroup]) -> dict[str, BrokerView]:
    """Each group as its coordinator sees it: DescribeGroups for classic groups, ConsumerGroupDescribe for KIP-848."""
    from jobs.io import kip848_source

    classic = [g for g in groups if groups[g].spec.group_protocol == "classic"]
    consumer = [g for g in groups if groups[g].spec.group_protocol == "consumer"]
    views: dict[str, BrokerView] = {}
    for g, d in (admin.describe_groups(classic) if classic else {}).items():
        assigned = {
            m["client_id"]: {
                (t["topic"], p) for t in m["member_assignment"]["assigned_partitions"] for p in t["partitions"]
            }
            for m in d["members"]
            if isinstance(m["member_assignment"], dict)
        }
        views[g] = BrokerView(d["group_state"], assigned, len(d["members"]))
    for g, c in kip848_source.describe_consumer_groups(admin, consumer).items():
        assigned = {m["client_id"]: {(t, p) for t, p in m["assignment"]} for m in c.members}
        reconciled = all(m["assignment"] == m["target_assignment"] for m in c.members) and (
            c.fields.get("group_epoch") == c.fields.get("assignment_epoch")
        )
        views[g] = BrokerView(c.group_state, assigned, len(c.members), reconciled)
    return views


def wait_settled(bootstrap: str, groups: dict[str, RunningGroup], *, timeout_s: float = 90.0) -> None:
    """Block until every group is Stable with all its members, all targets committed and clients agreeing."""
    from kafka import KafkaAdminClient

    deadline = time.monotonic() + timeout_s
    stuck_since: dict[str, float] = {}
    with KafkaAdminClient(bootstrap_servers=[bootstrap], client_id="demo-watch") as admin:
        while True:
            for group in groups.values():
                if group.errors:
                    raise DemoClusterError(f"group {group.spec.group_id} failed: {group.errors[0]}")
            described = describe(admin, groups)
            pending = [g for g in groups if not _settled(groups[g], described[g])]
            if not pending:
                return
            now = time.monotonic()
            if now > deadline:
                states = {g: described[g].state for g in pending}
                raise DemoClusterError(f"groups did not settle within {timeout_s:.0f}s: {states}")
            # A group Stable but not settled for a while is one whose clients lost a round (kafka-python under load
            # can end a cooperative round with revoked partitions left unassigned): its members join again.
            for g in pending:
                if described[g].state != "Stable":
                    stuck_since.pop(g, None)
                elif now - stuck_since.setdefault(g, now) > REJOIN_AFTER_S:
                    groups[g].rejoins += 1
                    del stuck_since[g]
            time.sleep(0.3)


def _settled(group: RunningGroup, described: BrokerView) -> bool:
    if described.state != "Stable" or described.members != group.spec.members or not described.reconciled:
        return False
    if set(group.committed) != set(group.targets):
        return False
    client_view = group.assignments()
    covered = set().union(*client_view.values()) if client_view else set()
    return client_view == described.assigned and covered == set(group.targets)


@contextlib.contextmanager
def running(
    *,
    bootstrap: str | None = None,
    topics: dict[str, int] | None = None,
    records_per_topic: int = 5_000,
    groups: Sequence[DemoGroup] = DEFAULT_GROUPS,
    prefix: str = "",
    seed: int = 7,
    settle_timeout_s: float = 120.0,
) -> Iterator[Cluster]:
    """Start (or reuse, given `bootstrap`) a broker, create topics, produce, run groups; stop all of it on exit.

    `prefix` namespaces topic and group names so several playgrounds can share one broker.
    """
    topics = {prefix + t: n for t, n in (topics or DEFAULT_TOPICS).items()}
    groups = [g.prefixed(prefix) for g in groups]
    with contextlib.ExitStack() as stack:
        started: Broker | None = None
        if bootstrap:
            address = bootstrap
        else:
            started = stack.enter_context(broker())
            address = started.bootstrap
        create_topics(address, topics)
        produced = produce(address, topics, records_per_topic, seed=seed)
        live = stack.enter_context(
            consumer_groups(address, groups, produced.end_offsets(), settle_timeout_s=settle_timeout_s)
        )
        yield Cluster(address, started.pid if started else None, topics, produced, live)
