"""Benchmark the Kafka source against Apache Kafka itself: pull 1,000 live consumer groups of both protocols.

One broker (`jobs.io.kafka_broker`), a few topics, keyed records; then `--groups` live groups, half classic and
half KIP-848, each with 1-3 members driven at the protocol level, so a thousand groups cost a few connections:
classic members (`jobs.demo.classic_members`) join with JoinGroup/SyncGroup and get an assignment the leader
computed with this project's assignors (range, roundrobin, sticky, cooperative-sticky, mixed preferences);
KIP-848 members (`jobs.demo.protocol_members`) join with ConsumerGroupHeartbeat, are assigned by the broker
(uniform or range) and reconcile until their group is Stable. Before its members join, each group commits offsets
for part of its partitions (a simple commit, as `kafka-consumer-groups --reset-offsets` does), so lag is non-zero.
Members then stay quiet: the broker is configured with long sessions for both protocols, so no member is fenced
during the run. The pull (`pull_snapshots` over every group) is timed `--repeat` times, then key sampling.

Run: .venv/bin/python bench/kafka_pull.py [--groups 1000] [--records 100000] [--repeat 3]
Prints wall-clock figures and peak RSS; not a test (no timed assertions). The broker runs on free 127.0.0.1
ports and is stopped by PID on every exit path (including SIGTERM).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import signal
import statistics
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TypeVar

from jobs.demo import cluster as demo_cluster
from jobs.demo.classic_members import ClassicGroup, MemberSpec
from jobs.demo.protocol_members import ProtocolGroup
from jobs.io import kip848_source
from jobs.io.kafka_broker import broker
from jobs.io.kafka_settings import KafkaSettings
from jobs.io.kafka_source import pull_snapshots, sample_keys

PREFIX = "bench-"
TOPICS = {f"{PREFIX}orders": 12, f"{PREFIX}payments": 6, f"{PREFIX}clicks": 24, f"{PREFIX}audit": 3}
SESSION_MS = 600_000  # members send nothing after they joined: the whole run must fit in one session
# KIP-848 sessions are the broker's to set (GroupCoordinatorConfig): long ones, the heartbeat interval below them,
# and every min <= default <= max (the minimums stay at kafka_broker.TEST_TIMINGS'). Classic members ask for
# their own session timeout within group.min/max.session.timeout.ms (6 s / 30 min).
OVERRIDES = {
    "group.consumer.session.timeout.ms": str(SESSION_MS),
    "group.consumer.max.session.timeout.ms": str(SESSION_MS),
    "group.consumer.heartbeat.interval.ms": "5000",
    "group.consumer.max.heartbeat.interval.ms": "15000",
}
# Assignors the classic members offer, preferred first; the coordinator picks one every member of a group offers.
CLASSIC_ASSIGNORS: tuple[tuple[str, ...], ...] = (
    ("range",),
    ("roundrobin", "range"),
    ("cooperative-sticky",),
    ("sticky", "range"),
    ("range", "roundrobin"),
)
SERVER_ASSIGNORS = ("uniform", "range")
MAX_MEMBERS = 3
T = TypeVar("T")


@dataclass(frozen=True)
class GroupPlan:
    """One group to create: its protocol, topics, members, assignors and how far it has committed."""

    group_id: str
    kind: Literal["classic", "consumer"]
    topics: tuple[str, ...]
    members: int
    assignors: tuple[str, ...]  # classic: what every member offers; consumer: the server assignor (one)
    commit_fraction: float


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--groups", type=int, default=1000, help="live groups, half classic and half KIP-848")
    parser.add_argument("--records", type=int, default=100_000, help="records produced (over all topics), then sampled")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, _exit_on_sigterm)  # so the broker is still stopped by PID when killed

    started = time.perf_counter()
    plans = plan_groups(args.groups, args.seed)
    with broker(overrides=OVERRIDES) as running, contextlib.ExitStack() as stack:
        broker_s = time.perf_counter() - started
        demo_cluster.create_topics(running.bootstrap, TOPICS)
        ends = demo_cluster.produce(running.bootstrap, TOPICS, args.records // len(TOPICS)).end_offsets()
        produced_s = time.perf_counter() - started - broker_s
        connections = [stack.enter_context(_admin(running.bootstrap, f"bench-member-{i}")) for i in range(MAX_MEMBERS)]

        t0 = time.perf_counter()
        commit_offsets(connections[0], plans, ends)
        committed_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        classic = classic_groups(connections, [p for p in plans if p.kind == "classic"])
        classic_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        consumer = consumer_groups(connections[0], [p for p in plans if p.kind == "consumer"])
        consumer_s = time.perf_counter() - t0

        settings = KafkaSettings(running.bootstrap)
        setup_peak_mb, pulls_from_mb = _status_mb(os.getpid(), "VmHWM"), _status_mb(os.getpid(), "VmRSS")
        reset = _reset_hwm()  # so VmHWM now tells the pulls' own peak
        pulls, docs = timed(args.repeat, lambda: pull_snapshots(settings, group_pattern=f"{PREFIX}*"))
        pulls_peak_mb = _status_mb(os.getpid(), "VmHWM")
        samples, table = timed(
            args.repeat,
            lambda: sample_keys(
                settings, list(TOPICS), records_per_partition=args.records, max_records=args.records, timeout_s=45.0
            ),
        )
        broker_peak_mb = _status_mb(running.pid, "VmHWM")
        bench_peak_mb = max(setup_peak_mb, _status_mb(os.getpid(), "VmHWM"))
        t0 = time.perf_counter()
        for classic_group in classic:
            classic_group.leave_all()
        for consumer_group in consumer:
            consumer_group.leave_all()
        left_s = time.perf_counter() - t0

    members = sum(p.members for p in plans)
    print(
        f"setup: broker started in {broker_s:.1f} s; {len(TOPICS)} topics ({sum(TOPICS.values())} partitions), "
        f"{sum(ends.values()):,} records produced in {produced_s:.1f} s"
    )
    print(
        f"groups: {len(plans)} live groups with {members} members set up in "
        f"{committed_s + classic_s + consumer_s:.1f} s (offsets committed {committed_s:.1f} s; "
        f"{len(classic)} classic joined and synced {classic_s:.1f} s; "
        f"{len(consumer)} KIP-848 joined and reconciled {consumer_s:.1f} s); all left in {left_s:.1f} s"
    )
    if (seen := sum(len(d["members"]) for d in docs)) != members or len(docs) != len(plans):
        print(f"warning: the last pull saw {len(docs)} groups and {seen} members, not {len(plans)} and {members}")
    print()
    print_pull_table(docs, pulls)
    print()
    median_s = statistics.median(samples)
    sampled = len(set(zip(table.column("topic").to_pylist(), table.column("partition").to_pylist(), strict=True)))
    print(f"{'sample_keys':<16}{'records':>8}{'partitions':>11}{'median s':>10}{'best s':>8}{'records/s':>11}")
    print(
        f"{'':<16}{table.num_rows:>8}{sampled:>11}{median_s:>10.2f}"
        f"{min(samples):>8.2f}{table.num_rows / median_s:>11,.0f}   ({args.repeat} samples)"
    )
    print()
    during = f"{pulls_peak_mb:.0f} MB" if reset else "not measured: /proc/self/clear_refs refused"
    print(
        f"peak RSS: bench process {bench_peak_mb:.0f} MB (pulls: from {pulls_from_mb:.0f} MB to a peak of {during}), "
        f"broker {broker_peak_mb:.0f} MB; total wall {time.perf_counter() - started:.1f} s"
    )


def plan_groups(n: int, seed: int) -> list[GroupPlan]:
    """`n` groups, alternately classic and KIP-848, each on one or two topics with 1-3 members (seeded)."""
    rng = random.Random(seed)
    names = sorted(TOPICS)
    plans = []
    for i in range(n):
        kind: Literal["classic", "consumer"] = "classic" if i % 2 == 0 else "consumer"
        topics = tuple(sorted(rng.sample(names, rng.choice((1, 2)))))
        assignors = (
            CLASSIC_ASSIGNORS[i // 2 % len(CLASSIC_ASSIGNORS)]
            if kind == "classic"
            else (SERVER_ASSIGNORS[i // 2 % len(SERVER_ASSIGNORS)],)
        )
        plans.append(
            GroupPlan(
                f"{PREFIX}{kind}-{i:04d}", kind, topics, i // 2 % MAX_MEMBERS + 1, assignors, rng.uniform(0.2, 0.8)
            )
        )
    return plans


def commit_offsets(admin: Any, plans: Sequence[GroupPlan], ends: dict[demo_cluster.TopicPartition, int]) -> None:
    """Commit offsets for the first half of each group's partitions (per topic), before the group has members.

    A commit with generation -1 and no member id creates an empty ("simple") classic group holding the offsets;
    the first JoinGroup makes it a live classic group, the first ConsumerGroupHeartbeat converts it to a KIP-848
    consumer group (GroupMetadataManager: a simple classic group only holds offsets), offsets kept.
    """
    from kafka.structs import OffsetAndMetadata
    from kafka.structs import TopicPartition as KTP

    for plan in plans:
        offsets = {
            KTP(t, p): OffsetAndMetadata(int(ends[(t, p)] * plan.commit_fraction), "", -1)
            for t in plan.topics
            for p in range((TOPICS[t] + 1) // 2)
        }
        deadline = time.monotonic() + 30
        while failed := {e for e in _retried(admin.alter_group_offsets, plan.group_id, offsets).values() if e.errno}:
            if not all(e.retriable for e in failed) or time.monotonic() > deadline:
                raise RuntimeError(f"{plan.group_id}: offset commit failed: {sorted(e.__name__ for e in failed)}")
            kip848_source.forget_coordinator(admin, plan.group_id)  # NOT_COORDINATOR while __consumer_offsets loads
            time.sleep(0.2)


def classic_groups(connections: Sequence[Any], plans: Sequence[GroupPlan]) -> list[ClassicGroup]:
    """Join every classic group's members (one group at a time: member i sends through connection i)."""
    groups = []
    for plan in plans:
        group = ClassicGroup(connections, plan.group_id, TOPICS, session_timeout_ms=SESSION_MS)
        group.join([MemberSpec(plan.topics, plan.assignors)] * plan.members)
        groups.append(group)
    return groups


def consumer_groups(admin: Any, plans: Sequence[GroupPlan]) -> list[ProtocolGroup]:
    """Join every KIP-848 group's members, then heartbeat until every group is Stable at its target assignment."""
    groups = []
    for plan in plans:
        group = ProtocolGroup(admin, plan.group_id, plan.assignors[0])
        for _ in range(plan.members):
            group.join(plan.topics)
        groups.append(group)
    reconcile(admin, groups)
    return groups


def reconcile(admin: Any, groups: Sequence[ProtocolGroup], timeout_s: float = 120.0) -> None:
    """Heartbeat every member of every unsettled group, as a consumer reconciles, until each group is Stable.

    A member reports what it owns: the assignment of its last heartbeat answer (dropping a partition it is told
    to revoke is its acknowledgement). The first round is a full heartbeat (rebalance timeout, subscription and
    owned list all set), which the coordinator answers with the member's whole assignment.
    """
    pending, full = list(groups), True
    deadline = time.monotonic() + timeout_s
    while pending:
        for group in pending:
            for member_id in group.members:
                group.reconcile(member_id, full=full)
        full = False
        described = kip848_source.describe_consumer_groups(admin, [g.group_id for g in pending])
        pending = [g for g in pending if not _stable(described[g.group_id], len(g.members))]
        if pending and time.monotonic() > deadline:
            states = Counter(described[g.group_id].group_state for g in pending)
            raise RuntimeError(f"{len(pending)} KIP-848 groups not Stable within {timeout_s:.0f} s: {dict(states)}")
        if pending:
            time.sleep(0.05)


def _stable(group: kip848_source.ConsumerGroup, members: int) -> bool:
    return (
        group.group_state == "Stable"
        and len(group.members) == members
        and group.fields.get("group_epoch") == group.fields.get("assignment_epoch")
        and all(m["assignment"] == m["target_assignment"] for m in group.members)
    )


def print_pull_table(docs: Sequence[dict[str, Any]], pulls: Sequence[float]) -> None:
    """The pull's figures, then per group type: groups, members, offset rows and states."""
    print(f"{'pull_snapshots':<16}{'groups':>8}{'members':>9}{'partitions':>12}{'median ms':>11}{'best ms':>9}")
    print(
        f"{'':<16}{len(docs):>8}{sum(len(d['members']) for d in docs):>9}{sum(len(d['offsets']) for d in docs):>12}"
        f"{statistics.median(pulls) * 1e3:>11.0f}{min(pulls) * 1e3:>9.0f}   ({len(pulls)} pulls)"
    )
    by_type: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for d in docs:
        by_type[d.get("group_type") or "?"].append(d)
    for kind, ds in sorted(by_type.items()):
        states = ", ".join(f"{n} {s}" for s, n in sorted(Counter(d["state"] for d in ds).items()))
        lagging = sum(
            1 for d in ds if any(o["committed"] is not None and o["committed"] < o["end"] for o in d["offsets"])
        )
        print(
            f"{'  ' + kind:<16}{len(ds):>8}{sum(len(d['members']) for d in ds):>9}"
            f"{sum(len(d['offsets']) for d in ds):>12}   ({states}; {lagging} with lag)"
        )


@contextlib.contextmanager
def _admin(bootstrap: str, client_id: str) -> Iterator[Any]:
    from kafka import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=[bootstrap], client_id=client_id)
    try:
        yield admin
    finally:
        admin.close()


def _retried(call: Callable[..., T], *args: Any, budget_s: float = 30.0) -> T:
    """`call(*args)`, again while the broker answers a retriable error (on a fresh broker the first FindCoordinator
    creates __consumer_offsets and answers COORDINATOR_NOT_AVAILABLE until its partitions are loaded)."""
    from kafka.errors import KafkaError

    deadline = time.monotonic() + budget_s
    while True:
        try:
            return call(*args)
        except KafkaError as exc:
            if not exc.retriable or time.monotonic() > deadline:
                raise
        time.sleep(0.2)


def timed(repeat: int, fn: Callable[[], T]) -> tuple[list[float], T]:
    """Wall-clock seconds of `repeat` calls, and the last call's result."""
    seconds = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        result = fn()
        seconds.append(time.perf_counter() - t0)
    return seconds, result


def _status_mb(pid: int, field: str) -> float:
    """A memory figure of a live process from /proc/PID/status (VmHWM: peak resident set, VmRSS: resident now), in
    MB; NaN where /proc is not available."""
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(f"{field}:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def _reset_hwm() -> bool:
    """Reset this process's VmHWM to its current RSS (Linux: "5" to /proc/self/clear_refs); False if it cannot."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        return False
    return True


def _exit_on_sigterm(signum: int, frame: Any) -> None:
    raise SystemExit(128 + signum)


if __name__ == "__main__":
    main()
