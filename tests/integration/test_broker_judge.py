"""The broker is the judge of the simulation: Kafka's own target assignments against the planner's, step by step.

For 100 seeded random KIP-848 scenarios, run once with the broker's `uniform` assignor and once with its `range`
assignor, members driven by ConsumerGroupHeartbeat (`jobs.demo.protocol_members`) join with random subscriptions
(the same topics for all, or their own), racks and static instance ids; then, one event at a time, members join,
leave, change their subscription, or a subscribed topic grows. After each step the group is pulled with
ConsumerGroupDescribe and the planner assigns the step's group from the previous step's targets (the input the
coordinator gives its assignor: TargetAssignmentBuilder hands it each member's current target); every member's
target must be the broker's, partition for partition. The one allowed exception is named and bounded: a member whose
previous target holds two topics in one bucket of the coordinator's HashMap (the map then iterates them in the order
they were acquired, history a snapshot does not carry).
"""

from __future__ import annotations

import base64
import random
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest

from jobs.demo import cluster as demo_cluster
from jobs.demo.protocol_members import ProtocolGroup, new_member_id
from jobs.io.kafka_broker import Broker
from jobs.io.kip848_source import ConsumerGroup
from planner import assign
from planner.assignors._topic_order import filled_capacity, spread, uuid_hash_codes
from planner.group import uuid_bits

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

SCENARIOS = 100
EVENTS = 3
POOL = {f"judge-t{i}": n for i, n in enumerate((6, 3, 8, 1, 5, 4))}
PLANNER = {"uniform": "uniform", "range": "server-range"}  # the broker's assignor name -> the planner's strategy


@dataclass
class Agreement:
    steps: dict[str, int] = field(default_factory=lambda: dict.fromkeys(PLANNER, 0))
    explained: dict[str, int] = field(default_factory=lambda: dict.fromkeys(PLANNER, 0))
    differences: list[str] = field(default_factory=list)


def history_dependent(before: dict[str, list[list[Any]]], ids: dict[str, str]) -> bool:
    """A member's previous target holds two topics in one bucket of the coordinator's HashMap<Uuid, Set<Integer>>
    (Assignment.fromRecord): the map then iterates them in the order the member acquired them, which the sorted
    lists of a snapshot do not carry (`planner.assignors._topic_order.member_topic_keys` takes the most likely
    order). Only then may the planner's uniform differ from the broker's."""
    for pairs in before.values():
        topics = sorted({t for t, _ in pairs})
        if len(topics) < 2:
            continue
        bits = np.array([uuid_bits(ids[t], t) for t in topics], dtype=np.int64)
        buckets = spread(uuid_hash_codes(bits)) & (filled_capacity(len(topics)) - 1)
        if len(set(buckets.tolist())) < len(topics):
            return True
    return False


@pytest.fixture(scope="module")
def admin(kafka_broker: Broker) -> Iterator[Any]:
    from kafka import KafkaAdminClient

    # Every topic exists before any member joins: a topic created a moment before a join reaches the coordinator's
    # metadata image after it, and the broker then computes two targets in one step (without it, then with it).
    private = {f"judge-s{seed}": random.Random(seed).randint(1, 4) for seed in range(SCENARIOS)}
    demo_cluster.create_topics(kafka_broker.bootstrap, POOL | private)
    time.sleep(1.0)
    client = KafkaAdminClient(bootstrap_servers=[kafka_broker.bootstrap], client_id="judge")
    try:
        yield client
    finally:
        client.close()


def topic_ids(admin: Any, topics: list[str]) -> tuple[dict[str, int], dict[str, str]]:
    """Partition counts and topic ids (Uuid.toString: base64url) of `topics` as the broker's metadata has them."""
    described = admin.describe_topics(topics)
    counts = {t["name"]: len(t["partitions"]) for t in described}
    ids = {
        t["name"]: base64.urlsafe_b64encode(uuid.UUID(str(t["topic_id"])).bytes).decode().rstrip("=") for t in described
    }
    return counts, ids


def planned(admin: Any, strategy: str, now: ConsumerGroup, before: dict[str, list[list[Any]]]) -> dict[str, set]:
    """The planner's assignment of the group as described now, from each member's previous target."""
    subscribed = sorted({t for m in now.members for t in m["topics"]})
    counts, ids = topic_ids(admin, subscribed)
    doc = {
        "topics": counts,
        "topic_ids": ids,
        "members": {
            m["member_id"]: {
                "topics": m["topics"],
                "owned": before.get(m["member_id"], []),
                "group_instance_id": m["group_instance_id"],
                "rack": m["rack"],
            }
            for m in now.members
        },
    }
    result = assign(strategy, doc).assignment
    return {member: {tuple(tp) for tp in parts} for member, parts in result.items()}


def targets(group: ConsumerGroup) -> dict[str, list[list[Any]]]:
    return {m["member_id"]: m["target_assignment"] for m in group.members}


def run_scenario(admin: Any, seed: int, assignor: str, agreement: Agreement) -> None:
    rng = random.Random(seed)
    private = f"judge-s{seed}"
    rng.randint(1, 4)  # its partition count, drawn where the fixture created it
    pool = [*POOL, private]
    homogeneous = rng.random() < 0.5
    shared = sorted(rng.sample(pool, rng.randint(1, 3)))
    group = ProtocolGroup(admin, f"judge-{assignor}-{seed}", assignor)

    def subscription() -> list[str]:
        return shared if homogeneous else sorted(rng.sample(pool, rng.randint(1, 4)))

    def join() -> None:
        static = rng.random() < 0.3
        group.join(
            subscription(),
            member_id=new_member_id(rng.getrandbits(128)),
            instance_id=f"instance-{rng.randrange(10**6)}" if static else None,
            rack=rng.choice(("az1", "az2", None)),
        )

    before: dict[str, list[list[Any]]] = {}
    epoch = -1
    # Each event is its own step: the coordinator computes a target at every group epoch, from the previous one.
    events = ["join"] * rng.randint(1, 5) + [rng.choice(("join", "leave", "subscribe", "grow")) for _ in range(EVENTS)]
    for event in events:
        if event == "join" or (event == "leave" and len(group.members) < 2):
            join()
        elif event == "leave":
            group.leave(rng.choice(sorted(group.members)))
        elif event == "subscribe":
            member = rng.choice(sorted(group.members))
            old = group.members[member].topics
            new = [t for t in pool if t not in old][:1] + list(old[1:]) or [pool[0]]
            group.heartbeat(member, topics=sorted(set(new)))
        else:  # grow a subscribed topic (the scenario's own, or one a member subscribes to)
            counts, _ = topic_ids(admin, [private])
            from kafka.admin import NewPartitions

            grown = counts[private] + rng.randint(1, 3)
            admin.create_partitions({private: NewPartitions(grown)})
            wait_for_count(admin, private, grown)
            if not any(private in m.topics for m in group.members.values()):
                group.heartbeat(rng.choice(sorted(group.members)), topics=[private])
        now = complete_target(admin, group, epoch)
        epoch = now.fields["group_epoch"]
        broker = {m["member_id"]: {tuple(tp) for tp in m["target_assignment"]} for m in now.members}
        ours = planned(admin, PLANNER[assignor], now, before)
        if ours == broker:
            agreement.steps[assignor] += 1
        elif history_dependent(before, topic_ids(admin, sorted({t for ps in before.values() for t, _ in ps}))[1]):
            agreement.explained[assignor] += 1
        else:
            agreement.differences.append(
                f"seed {seed} {assignor} after {event}: broker {sorted_view(broker)} planner {sorted_view(ours)} "
                f"from {before} members {[(m['member_id'], m['topics']) for m in now.members]}"
            )
        before = targets(now)
    group.leave_all()


def wait_for_count(admin: Any, topic: str, count: int, timeout_s: float = 30.0) -> None:
    """Until the broker's metadata describes `topic` with `count` partitions: CreatePartitions answers before its
    metadata cache has them, and a target judged complete against the old count would be compared with the
    planner's of the new one (seen once in a full run under load)."""
    deadline = time.monotonic() + timeout_s
    while topic_ids(admin, [topic])[0][topic] != count:
        if time.monotonic() > deadline:
            raise AssertionError(f"{topic} did not reach {count} partitions in the broker's metadata")
        time.sleep(0.05)


def complete_target(admin: Any, group: ProtocolGroup, epoch: int) -> ConsumerGroup:
    """The next target once it covers every partition the members subscribe to: a grown topic reaches the
    coordinator's metadata image a moment after CreatePartitions answers, and its next heartbeat bumps the epoch."""
    for _ in range(100):
        now = group.settled_target(after_epoch=epoch)
        counts, _ = topic_ids(admin, sorted({t for m in now.members for t in m["topics"]}))
        assigned = sum(len(m["target_assignment"]) for m in now.members)
        if assigned == sum(counts.values()):
            return now
        epoch = now.fields["group_epoch"]
        group.heartbeat(sorted(group.members)[0])
    raise AssertionError(f"{group.group_id}: the target never covered the grown topic")


def sorted_view(assignment: dict[str, set]) -> dict[str, list]:
    return {m: sorted(ps) for m, ps in sorted(assignment.items())}


def test_the_planners_server_assignors_compute_the_brokers_target_assignment(admin: Any) -> None:
    agreement = Agreement()
    for seed in range(SCENARIOS):
        for assignor in PLANNER:
            run_scenario(admin, seed, assignor, agreement)
    print(
        f"agreement with Kafka: {agreement.steps} steps equal, {agreement.explained} differ only where a member's "
        f"previous target had two topics in one hash bucket, {len(agreement.differences)} other differences"
    )
    assert agreement.differences == [], "\n".join(agreement.differences[:5])
    assert agreement.explained["range"] == 0
    total = {a: agreement.steps[a] + agreement.explained[a] for a in PLANNER}
    assert min(total.values()) >= SCENARIOS * (1 + EVENTS)
    # A rare case, by join timing: 0, 8 and 14 of 590 steps in runs so far; under 5% keeps it from hiding a rule.
    assert agreement.explained["uniform"] <= total["uniform"] // 20
