"""Plans applied by the Java appliers on a real broker (jvm/planned-assignor's jars, built from source if missing).

One Apache Kafka broker for the module, with the broker jar on its classpath and PlannedGroupAssignor in
`group.consumer.assignors`, serving the plans of a directory. Two live groups, planned by the real nightly pipeline
(Kafka pull, Spark plan, gate, publish) while records flow:

- a classic cooperative group of Java consumer processes (PlanConsumer, PlannedAssignor first with the default
  CooperativeStickyAssignor fallback, one member static), and
- a KIP-848 group of librdkafka consumers (confluent-kafka, `group.protocol=consumer`, static members) choosing the
  broker-side assignor with `group.remote.assignor=rebalance-planned`.

Each group converges to its exported plan and `rebalance verify` says `applied`; a member the plan does not know
joins and the group falls back (the reason logged: by the Java leader, in the broker's log); it leaves and the plan
is served again; a planned topic grows and the plan is refused. Records are produced throughout, and every member
commits what it consumed before a partition is revoked from it: every record is consumed exactly once, never by two
members, and the group's committed offsets reach every partition's end.
"""

from __future__ import annotations

import json
import shutil
import sys
import time
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

import pytest
from kafka import KafkaAdminClient
from kafka.admin import NewPartitions, NewTopic

from jobs import pipeline
from jobs.apply.plan_file import Plan, TopicPartition
from jobs.cli import main
from jobs.config import Config
from jobs.context import RunContext
from jobs.demo import kip848_members
from jobs.demo.apply import planned_by_client, wait_converged
from jobs.demo.java_members import PROTOCOL, JavaGroup, broker_log, java_group, planned_broker
from jobs.demo.kip848_members import Kip848Group, kip848_group
from jobs.demo.traffic import Traffic, drained
from jobs.io.kafka_broker import Broker
from jobs.io.lake import Lake
from jobs.tables import export

pytestmark = [pytest.mark.kafka, pytest.mark.spark]

PREFIX = "jvm-"
JAVA = PREFIX + "java-coop"  # classic, cooperative: three Java processes, m2 static
KIP = PREFIX + "kip848"  # consumer protocol: three static librdkafka members, the broker's planned assignor
JAVA_TOPICS = {PREFIX + "orders": 8, PREFIX + "refunds": 4}
KIP_TOPICS = {PREFIX + "clicks": 8, PREFIX + "views": 4}
GROWN = 10  # the partition count the first topic of each group grows to


@dataclass
class Setup:
    broker: Broker
    lake: Lake
    config: Config
    plans: dict[str, Plan]
    plan_dir: Path  # the broker's rebalance.plan.dir
    java: JavaGroup
    java_plan_path: Path  # the Java members' rebalance.plan.path
    java_traffic: Traffic
    kip: Kip848Group
    kip_traffic: Traffic


def note(line: str) -> None:
    """A measurement for the closing note, shown with `pytest -s` (past any capture of the test's own output)."""
    print(line, file=sys.__stderr__, flush=True)


def wait_for_line(log: Path, text: str, timeout_s: float = 90.0) -> None:
    """Block until a line holding `text` is in the broker's log (a failed test when none comes in time)."""
    deadline = time.monotonic() + timeout_s
    while not any(text in line for line in log.read_text().splitlines()):
        assert time.monotonic() < deadline, f"no line with {text!r} in {log} after {timeout_s:.0f} s"
        time.sleep(0.3)


def partitions(topics: dict[str, int]) -> list[TopicPartition]:
    return [(t, p) for t, n in topics.items() for p in range(n)]


@pytest.fixture(scope="module")
def setup(spark, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Setup]:
    """Both groups live with records flowing, one nightly run over them (range plans, approved)."""
    root = tmp_path_factory.mktemp("apply-jvm")
    plan_dir, java_plan_path = root / "broker-plans", root / "java.plan.json"  # empty / absent until exported
    plan_dir.mkdir()
    config = Config(lake=str(root / "lake"), strategies=("range",), group_pattern=PREFIX + "*")
    with ExitStack() as stack:
        broker = stack.enter_context(planned_broker(plan_dir))
        with KafkaAdminClient(bootstrap_servers=[broker.bootstrap], client_id="setup") as admin:
            admin.create_topics([NewTopic(t, n, 1) for t, n in {**JAVA_TOPICS, **KIP_TOPICS}.items()])
        java_traffic = Traffic(broker.bootstrap, partitions(JAVA_TOPICS)).start()
        kip_traffic = Traffic(broker.bootstrap, partitions(KIP_TOPICS)).start()
        java = stack.enter_context(java_group(broker.bootstrap, JAVA, java_plan_path))
        for i in range(3):
            java.start(f"{JAVA}-m{i}", list(JAVA_TOPICS), group_instance_id=f"{JAVA}-static" if i == 2 else None)
        wait_converged(java, set(partitions(JAVA_TOPICS)))
        kip = stack.enter_context(kip848_group(broker.bootstrap, KIP, PROTOCOL))
        for i in range(3):
            kip.start(f"{KIP}-m{i}", list(KIP_TOPICS), group_instance_id=f"{KIP}-instance-{i}")
        kip848_members.wait_converged(kip, set(partitions(KIP_TOPICS)))
        with pytest.MonkeyPatch.context() as env:
            env.setenv("REBALANCE_KAFKA_BOOTSTRAP_SERVERS", broker.bootstrap)
            result = pipeline.run(config, "nightly-1", spark=spark)
        assert {(r["group_id"], r["status"]) for r in result.report} == {(JAVA, "approved"), (KIP, "approved")}
        lake = Lake(config.lake)
        plans = {g: export.plan_of(lake, export.select_generation(lake, g)) for g in (JAVA, KIP)}
        try:
            yield Setup(broker, lake, config, plans, plan_dir, java, java_plan_path, java_traffic, kip, kip_traffic)
        finally:
            java_traffic.stop()
            kip_traffic.stop()
            shutil.copy(broker_log(broker), root / "broker.log")  # kept by pytest's basetemp, for a failure's story


def snapshot_and_verify(setup: Setup, run_id: str) -> dict[str, dict]:
    """The nightly's first two steps on a fresh run: pull a snapshot of the live groups, then verify it."""
    with pytest.MonkeyPatch.context() as env:
        env.setenv("REBALANCE_KAFKA_BOOTSTRAP_SERVERS", setup.broker.bootstrap)
        ctx = RunContext.create(setup.config, run_id)
        pipeline.STEPS["ingest"](ctx, {})
        return {r["group_id"]: r for r in pipeline.STEPS["verify"](ctx, {}).rows}


def grow(setup: Setup, topic: str) -> None:
    with KafkaAdminClient(bootstrap_servers=[setup.broker.bootstrap], client_id="grow") as admin:
        admin.create_partitions({topic: NewPartitions(GROWN)})


def verified(setup: Setup, group: str, capsys: pytest.CaptureFixture[str], run_id: str) -> str:
    plan = setup.plans[group]
    assert snapshot_and_verify(setup, run_id)[group] == {
        "group_id": group,
        "generation_id": plan.generation_id,
        "verification": "applied",
        "differing": 0,
    }
    capsys.readouterr()
    assert main(["verify", "--group", group, "--lake", str(setup.lake.root)]) == 0
    return capsys.readouterr().out


def test_java_consumers_run_the_plan_then_fall_back_for_an_unknown_member_and_a_grown_topic(
    setup: Setup, capsys: pytest.CaptureFixture[str]
) -> None:
    plan, group = setup.plans[JAVA], setup.java
    expected = planned_by_client(plan)
    everything = set(partitions(JAVA_TOPICS))
    assert plan.strategy == "range" and {m.group_instance_id for m in plan.members.values()} == {None, f"{JAVA}-static"}
    assert group.assignments() != expected  # cooperative-sticky's assignment is not the plan: converging proves it

    assert main(["export", "--group", JAVA, "--output", str(setup.java_plan_path), "--lake", str(setup.lake.root)]) == 0
    # A rolling restart of one dynamic member (same client id, new member id): the leader reads the plan at the
    # rebalances it causes; the static member keeps its identity throughout.
    started = time.monotonic()
    group.stop(f"{JAVA}-m1")
    group.start(f"{JAVA}-m1", list(JAVA_TOPICS))
    assert wait_converged(group, everything, expected) == expected
    note(f"java: converged to the plan in {time.monotonic() - started:.1f} s")
    served = f"serving plan of group '{JAVA}' generation {plan.generation_id} (range) to 3 members"
    assert any(served in line for line in group.log_lines())
    assert "applied, all 12 partitions owned as planned" in verified(setup, JAVA, capsys, "after-java")

    # A member the plan does not know joins: the leader falls back to cooperative-sticky, saying why, once a round.
    extra = f"{JAVA}-extra"
    group.start(extra, list(JAVA_TOPICS))
    now = wait_converged(group, everything)
    assert len(now) == 4 and all(now.values())
    refused = [line for line in group.log_lines() if " not served (" in line]
    assert refused and f"(client id '{extra}') is not in the plan" in refused[-1]
    assert refused[-1].endswith("assigning with cooperative-sticky (io.rebalanceplanner.apply.PlannedAssignor)")
    # It leaves: the plan fits the group again and is served again.
    group.stop(extra)
    assert wait_converged(group, everything, expected) == expected

    # A planned topic grows: the plan names partition counts that no longer hold, and is refused.
    topic = next(iter(JAVA_TOPICS))
    grow(setup, topic)
    everything |= {(topic, p) for p in range(JAVA_TOPICS[topic], GROWN)}
    wait_converged(group, everything)
    refused = [line for line in group.log_lines() if " not served (" in line]
    assert f"partition count of '{topic}' changed: planned {JAVA_TOPICS[topic]}, now {GROWN}" in refused[-1]

    # Records flowed through every switch: each consumed once, by one member, and committed.
    ends = setup.java_traffic.stop()
    result = drained(setup.broker.bootstrap, JAVA, group.consumed, ends)
    note(f"java: {result.summary()}")
    assert result.ok, result
    # Partitions moved between members, each after a clean revocation (none lost to a fenced member). A commit
    # refused while a rebalance is in progress is kept and made again, at the latest in onPartitionsRevoked.
    assert [e for _, e in group.events if e["event"] == "revoked" and e["partitions"]]
    assert not [e for _, e in group.events if e["event"] == "lost"]


def test_a_kip848_group_is_assigned_its_plan_by_the_broker_then_as_uniform_when_it_no_longer_fits(
    setup: Setup, capsys: pytest.CaptureFixture[str]
) -> None:
    plan, group = setup.plans[KIP], setup.kip
    expected = planned_by_client(plan)
    everything = set(partitions(KIP_TOPICS))
    assert plan.topic_ids and set(plan.topic_ids) == set(KIP_TOPICS)  # the broker knows topics by id only
    assert group.assignments() != expected  # uniform's assignment is not the plan
    log = broker_log(setup.broker)

    path = setup.plan_dir / f"{KIP}.plan.json"
    assert main(["export", "--group", KIP, "--output", str(path), "--lake", str(setup.lake.root)]) == 0
    # The next group epoch bump serves it. One static member stops: it leaves for now (epoch -2), keeping its
    # assignment for a quick restart, which would take it over with no new assignment computed. Once its session
    # expired the coordinator removes it (an epoch bump: the plan is recognised by the other two instance ids and
    # not served, a planned member missing); it restarts (same group.instance.id, new member id): the plan is served.
    started = time.monotonic()
    group.stop(f"{KIP}-m1")
    # Restart only once the coordinator has removed it and asked the assignor, which refused the plan: a describe
    # may stop listing a static member that left (epoch -2) before its session expires, and a restart within the
    # session takes its old assignment over with no assignment computed.
    gone = "(group.instance.id 'jvm-kip848-instance-1') is missing"
    wait_for_line(log, gone)
    kip848_members.wait_members(setup.broker.bootstrap, KIP, 2)
    group.start(f"{KIP}-m1", list(KIP_TOPICS), group_instance_id=f"{KIP}-instance-1")
    converged = kip848_members.wait_converged(group, everything, expected)
    assert converged.assignments == expected and converged.server_assignor == PROTOCOL
    note(f"kip848: converged to the plan in {time.monotonic() - started:.1f} s")
    served = f"serving plan of group '{KIP}' generation {plan.generation_id} (range, file {path.name}) to 3 members"
    assert served in log.read_text()
    missing = [line for line in log.read_text().splitlines() if " not served (" in line]
    assert missing and any(gone in line for line in missing)
    assert "applied, all 12 partitions owned as planned" in verified(setup, KIP, capsys, "after-kip848")

    # A member the plan does not know joins: the broker assigns as uniform and logs why.
    extra = f"{KIP}-extra"
    group.start(extra, list(KIP_TOPICS))
    now = kip848_members.wait_converged(group, everything)
    assert len(now.assignments) == 4 and all(now.assignments.values())
    refused = [line for line in log.read_text().splitlines() if " not served (" in line]
    assert refused and "is not in the plan" in refused[-1] and "assigning with uniform" in refused[-1]
    group.stop(extra)
    assert kip848_members.wait_converged(group, everything, expected).assignments == expected

    # A planned topic grows: its count no longer matches the plan's, which is refused; uniform assigns.
    topic = next(iter(KIP_TOPICS))
    grow(setup, topic)
    everything |= {(topic, p) for p in range(KIP_TOPICS[topic], GROWN)}
    kip848_members.wait_converged(group, everything)
    refused = [line for line in log.read_text().splitlines() if " not served (" in line]
    assert f"partition count of '{topic}' changed: planned {KIP_TOPICS[topic]}, now {GROWN}" in refused[-1]

    ends = setup.kip_traffic.stop()
    result = drained(setup.broker.bootstrap, KIP, group.consumed, ends)
    note(f"kip848: {result.summary()}")
    assert result.ok, result
    assert [e for e in group.events if e[2] == "revoked" and e[3]]  # partitions did move between members
    assert not [e for e in group.events if e[2] == "lost"]
    assert json.loads(path.read_text())["group_id"] == KIP
