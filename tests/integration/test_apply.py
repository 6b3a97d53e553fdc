"""Plans applied on the embedded broker: export an approved plan, run PlannedAssignor members, verify the result.

The plans come from the real nightly pipeline (Kafka pull, Spark plan, GX gate, publish) over live groups; the
groups are real kafka-python consumers; every verdict comes from a snapshot pulled from the broker afterwards.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from kafka.coordinator.assignors.cooperative_sticky import CooperativeStickyAssignor
from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor

from jobs import pipeline
from jobs.apply.plan_file import Plan, load_plan, write_plan
from jobs.cli import main
from jobs.config import Config
from jobs.context import RunContext
from jobs.demo import cluster as demo_cluster
from jobs.demo.apply import (
    PlannedGroup,
    apply_demo,
    double_ownership,
    planned_by_client,
    planned_group,
    wait_converged,
)
from jobs.io.lake import Lake
from jobs.tables import export
from planner import assign

pytestmark = [pytest.mark.kafka, pytest.mark.spark]

PREFIX = "apply-"
BILLING = PREFIX + "billing"  # eager: range members, restarted with PlannedAssignor(fallback=roundrobin)
PAYMENTS = PREFIX + "payments"  # cooperative: PlannedAssignor(fallback=cooperative-sticky) from the start
LOGGER = "jobs.apply.planned_assignor"


@dataclass
class Setup:
    bootstrap: str
    lake: Lake
    config: Config
    plans: dict[str, Plan]
    payments: PlannedGroup
    payments_plan_path: Path


@pytest.fixture(scope="module")
def setup(kafka_broker: demo_cluster.Broker, spark, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Setup]:
    """Both groups live, one nightly run over them (range plans, approved), then BILLING's members stopped."""
    root = tmp_path_factory.mktemp("apply")
    config = Config(lake=str(root / "lake"), strategies=("range",), group_pattern=PREFIX + "*")
    plan_path = root / "payments.plan.json"  # absent until the test drops the approved plan in place
    billing = demo_cluster.DemoGroup("billing", ("orders", "refunds"), 3, "range")
    with (
        pytest.MonkeyPatch.context() as env,
        planned_group(kafka_broker.bootstrap, PAYMENTS, plan_path, CooperativeStickyAssignor) as payments,
    ):
        env.setenv("REBALANCE_KAFKA_BOOTSTRAP_SERVERS", kafka_broker.bootstrap)
        with demo_cluster.running(
            bootstrap=kafka_broker.bootstrap, groups=[billing], prefix=PREFIX, records_per_topic=300
        ) as cluster:
            for i in range(3):
                payments.start(f"{PAYMENTS}-m{i}", [PREFIX + "orders"])
            wait_converged(payments, {(PREFIX + "orders", p) for p in range(12)})
            result = pipeline.run(config, "nightly-1", spark=spark)
            assert {(r["group_id"], r["status"]) for r in result.report} == {
                (BILLING, "approved"),
                (PAYMENTS, "approved"),
            }
            assert cluster.groups[BILLING].assignments()  # running until here: the with block stops them
        lake = Lake(config.lake)
        plans = {g: export.plan_of(lake, export.select_generation(lake, g)) for g in (BILLING, PAYMENTS)}
        yield Setup(kafka_broker.bootstrap, lake, config, plans, payments, plan_path)


def snapshot_and_verify(setup: Setup, run_id: str) -> dict[str, dict]:
    """The nightly's first two steps on a fresh run: pull a snapshot of the live groups, then verify it."""
    ctx = RunContext.create(setup.config, run_id)
    pipeline.STEPS["ingest"](ctx, {})
    return {r["group_id"]: r for r in pipeline.STEPS["verify"](ctx, {}).rows}


def generation_row(setup: Setup, group: str, generation: int) -> dict:
    rows = setup.lake.read_arrow("generations", [("group_id", "=", group)]).to_pylist()
    return next(r for r in rows if r["generation_id"] == generation)


def partitions_of(plan: Plan) -> set[tuple[str, int]]:
    return set(plan.owners())


def test_a_restarted_group_runs_the_exported_plan_then_an_unknown_member_falls_back(
    setup: Setup, tmp_path: Path, caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "billing.plan.json"
    lake = str(setup.lake.root)
    assert main(["export", "--group", BILLING, "--output", str(path), "--lake", lake]) == 0
    plan = load_plan(path)
    assert plan == setup.plans[BILLING] and plan.strategy == "range" and len(plan.members) == 3
    expected = planned_by_client(plan)
    # What the fallback would do with the same members: the plan is not it, so converging proves the plan served.
    roundrobin = assign(
        "roundrobin", {"topics": plan.topics, "members": {c: {"topics": list(plan.topics)} for c in expected}}
    ).assignment
    assert {c: set(tps) for c, tps in roundrobin.items()} != expected

    with (
        caplog.at_level(logging.INFO, LOGGER),
        planned_group(setup.bootstrap, BILLING, path, RoundRobinPartitionAssignor) as group,
    ):
        for member in plan.members.values():
            group.start(str(member.client_id), member.topics)
        # Each member's own consumer.assignment() (and the broker's view of it) is its planned partitions.
        assert wait_converged(group, partitions_of(plan), expected) == expected
        assert any("serving plan of group 'apply-billing' generation 1 (range)" in r.message for r in caplog.records)

        verdicts = snapshot_and_verify(setup, "after-apply")
        assert verdicts[BILLING] == {
            "group_id": BILLING,
            "generation_id": plan.generation_id,
            "verification": "applied",
            "differing": 0,
        }
        row = generation_row(setup, BILLING, plan.generation_id)
        detail = json.loads(row["verification_detail"])
        assert (row["verification"], detail["snapshot_id"], detail["differing"]) == ("applied", "after-apply", [])
        assert row["verified_at"] is not None
        capsys.readouterr()
        assert main(["verify", "--group", BILLING, "--lake", lake]) == 0
        assert "applied, all 16 partitions owned as planned" in capsys.readouterr().out

        # A member the plan does not know joins: the leader falls back to roundrobin, with one line saying why.
        caplog.clear()
        extra = f"{BILLING}-extra"
        group.start(extra, sorted(plan.topics))
        now = wait_converged(group, partitions_of(plan))
        owned = [tp for tps in now.values() for tp in tps]
        assert len(now) == 4 and sorted(owned) == sorted(partitions_of(plan))  # everything once, nothing lost
        assert all(now[c] for c in now)  # roundrobin over 4 members of 16 partitions: everyone works
        warnings = [r.message for r in caplog.records if "of group 'apply-billing'" in r.message]
        assert warnings and all(" not served (" in w for w in warnings)
        assert f"(client id '{extra}') is not in the plan" in warnings[-1]
        assert warnings[-1].endswith("assigning with roundrobin")

        verdicts = snapshot_and_verify(setup, "after-extra")
        moved = {tp for c, tps in now.items() for tp in tps if tp not in expected.get(c, set())}
        assert verdicts[BILLING]["verification"] == "drifted" and verdicts[BILLING]["differing"] == len(moved)
        detail = json.loads(generation_row(setup, BILLING, plan.generation_id)["verification_detail"])
        assert {(d["topic"], d["partition"]) for d in detail["differing"]} == moved
        assert [m for m in detail["unknown_members"] if f"(client id '{extra}')" in m]
        capsys.readouterr()
        assert main(["verify", "--group", BILLING, "--lake", lake]) == 1
        out = capsys.readouterr().out
        assert f"drifted, {len(moved)} of 16 partitions differ" in out
        for topic, partition in moved:
            assert f"  {topic}-{partition}: planned for " in out
    assert double_ownership(group.events) == []


def test_a_cooperative_group_restarted_on_a_plan_dropped_in_place_runs_it(
    setup: Setup, caplog: pytest.LogCaptureFixture
) -> None:
    """The whole group restarts (a deploy) with the plan in place; cooperative rounds never double-assign.

    The revoke-first rule itself is checked against Kafka's validateCooperativeAssignment in
    tests/unit/test_planned_assignor.py.
    """
    plan, group = setup.plans[PAYMENTS], setup.payments
    expected = planned_by_client(plan)
    before = group.assignments()
    assert any(before[c] != tps for c, tps in expected.items())  # cooperative-sticky's assignment is not the plan

    write_plan(plan, setup.payments_plan_path)  # the operator drops the approved plan where the members read it
    with caplog.at_level(logging.INFO, LOGGER):
        group.stop_all()
        for client in sorted(before):
            group.start(client, [PREFIX + "orders"])
        assert wait_converged(group, partitions_of(plan), expected) == expected
    assert any("serving plan of group 'apply-payments' generation 1 (range)" in r.message for r in caplog.records)
    # From every member's rebalance listener: no partition was ever given while another member held it.
    assert double_ownership(group.events) == []
    assert snapshot_and_verify(setup, "after-cooperative")[PAYMENTS]["verification"] == "applied"


def test_export_and_verify_name_what_is_wrong(setup: Setup, capsys: pytest.CaptureFixture[str]) -> None:
    lake = str(setup.lake.root)
    assert main(["export", "--group", "no-such-group", "--lake", lake]) == 2
    assert "no generation of group 'no-such-group'" in capsys.readouterr().err
    assert main(["export", "--group", BILLING, "--generation", "7", "--lake", lake]) == 2
    assert "group 'apply-billing' has no generation 7 (generations 1 to 1)" in capsys.readouterr().err
    assert main(["verify", "--group", "no-such-group", "--lake", lake]) == 2
    assert "no snapshot of group 'no-such-group'" in capsys.readouterr().err
    assert main(["verify", "--group", BILLING, "--snapshot", "nightly-1", "--lake", lake]) == 2
    assert "no approved plan of group 'apply-billing' older than snapshot 'nightly-1'" in capsys.readouterr().err
    assert main(["export", "--group", BILLING, "--lake", lake]) == 0
    assert json.loads(capsys.readouterr().out) == setup.plans[BILLING].to_json()


def test_the_demo_restarts_a_group_on_its_plan_and_verifies_it(setup: Setup) -> None:
    """`apply_demo` as `rebalance demo` calls it once the demo groups stopped: the group's members are down."""
    summary = apply_demo(setup.bootstrap, setup.lake.root, BILLING)
    plan = setup.plans[BILLING]
    lines = summary.splitlines()
    assert lines[0].startswith(f"exported group {BILLING} generation {plan.generation_id} (range) -> ")
    assert "restarted 3 members with PlannedAssignor (fallback range); converged to the plan in" in lines[1]
    for client, partitions in planned_by_client(plan).items():
        assert any(line.startswith(f"  {client}: ") for line in lines)
        assert len(partitions) in (5, 6)
    assert f"group {BILLING}: generation {plan.generation_id} (range) vs snapshot apply__" in summary
    assert summary.endswith("applied, all 16 partitions owned as planned")
