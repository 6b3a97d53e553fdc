"""What-if scenarios: rebuilt from the lake, changed, validated, then planned like any run (also by Airflow)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from jobs import pipeline
from jobs.config import Config
from jobs.context import RunContext
from jobs.steps import ingest, what_if
from jobs.steps.what_if import ScenarioError

DEMO = Path(__file__).resolve().parents[2] / "jobs" / "demo" / "data"
T0 = datetime(2026, 11, 21, 2, 0, tzinfo=UTC)


@pytest.fixture
def config(lake) -> Config:
    ingest.run(RunContext.create(Config(lake=str(lake.root), snapshots=str(DEMO)), "nightly-1"), received_at=T0)
    return Config(lake=str(lake.root), strategies=("range", "cooperative-sticky"))


def test_the_latest_snapshot_is_rebuilt_as_a_valid_document(lake, config):
    doc = what_if.latest_document(lake, "payments")
    assert doc["topics"] == {"orders": 12, "refunds": 4} and doc["generation"] == 41
    assert [m["member_id"] for m in doc["members"]] == ["payments-1-4b1c2f", "payments-2-9f0e11", "payments-3-07aa35"]
    assert doc["members"][0]["owned"][:2] == [["orders", 0], ["orders", 1]]
    assert doc["what_if_of"] == "nightly-1"


def test_apply_changes_counts_and_members():
    doc = {
        "group_id": "g",
        "protocol": "range",
        "topics": {"a": 4, "b": 2},
        "members": [
            {"member_id": "m1", "strategies": ["range"], "topics": ["a"], "owned": [], "assignment": []},
            {"member_id": "m2", "strategies": ["range"], "topics": ["b"], "owned": [], "assignment": []},
        ],
    }
    scenario = what_if.apply(doc, partitions={"a": 8}, add_members=2, remove_members=["m2"])
    assert scenario["topics"] == {"a": 8, "b": 2}
    assert [(m["member_id"], m["topics"]) for m in scenario["members"]] == [
        ("m1", ["a"]),
        ("what-if-1", ["a", "b"]),
        ("what-if-2", ["a", "b"]),
    ]
    assert doc["topics"]["a"] == 4  # the source document is left as it was


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (
            {"partitions": {"orders": 6}},
            "partitions.orders: 6 is fewer than today's 12; Kafka cannot remove partitions",
        ),
        (
            {"partitions": {"audit": 3}},
            "partitions.audit: unknown topic; the group subscribes to ['orders', 'refunds']",
        ),
        ({"remove_members": ["nobody"]}, "remove_members: ['nobody'] are not members of group 'payments'"),
        ({"add_members": -1}, "add_members: must be zero or more, got -1"),
    ],
)
def test_impossible_scenarios_are_rejected_with_the_parameter_named(lake, config, kwargs, message):
    with pytest.raises(ScenarioError) as error:
        what_if.run(RunContext.create(config, "what-if-1"), "payments", **kwargs)
    assert str(error.value) == message
    assert lake.read_arrow("snapshots", [("snapshot_id", "=", "what-if-1")]).num_rows == 0


def test_an_unknown_group_is_a_clear_error(lake, config):
    with pytest.raises(ScenarioError, match="group: no observed snapshot of group 'nope' in the lake"):
        what_if.run(RunContext.create(config, "what-if-1"), "nope")


def test_a_scenario_starts_from_the_latest_observed_snapshot_never_an_earlier_scenario(lake, config):
    for run_id in ("what-if-1", "what-if-2"):
        what_if.run(RunContext.create(config, run_id), "payments", add_members=1, received_at=T0)
    members = lake.read_arrow("snapshots", [("snapshot_id", "=", "what-if-2")]).column("member_id").to_pylist()
    assert sorted(members) == ["payments-1-4b1c2f", "payments-2-9f0e11", "payments-3-07aa35", "what-if-1"]


def test_members_added_by_a_scenario_take_names_the_group_does_not_use():
    member = {"strategies": ["range"], "topics": ["a"], "owned": [], "assignment": []}
    doc = {"group_id": "g", "topics": {"a": 4}, "members": [{"member_id": "what-if-1", **member}]}
    scenario = what_if.apply(doc, add_members=2)
    assert [m["member_id"] for m in scenario["members"]] == ["what-if-1", "what-if-2", "what-if-3"]


@pytest.mark.spark
def test_a_scenario_is_planned_gated_and_published_as_a_new_generation(spark, lake, config):
    pipeline.run(config.with_overrides(snapshots=str(DEMO)), "nightly-2", spark=spark)
    ctx = RunContext.create(config, "what-if-1", spark=spark)
    what_if.run(
        ctx,
        "payments",
        partitions={"orders": 24},
        add_members=1,
        remove_members=["payments-3-07aa35"],
        received_at=T0,
    )
    pipeline.plan(ctx, {})
    pipeline.gate(ctx, {})
    (report,) = pipeline.publish(ctx, {}).rows
    assert {k: report[k] for k in ("group_id", "generation_id", "status")} == {
        "group_id": "payments",
        "generation_id": 2,
        "status": "approved",
    }
    plans = [r for r in lake.read_arrow("plans").to_pylist() if r["generation_id"] == 2]
    chosen = {
        r["strategy"]
        for r in lake.read_arrow("plan_metrics").to_pylist()
        if r["generation_id"] == 2 and r["group_id"] == "payments" and r["chosen"]
    }
    rows = [r for r in plans if r["strategy"] in chosen]
    assert len(rows) == 24 + 4
    assert {r["member"] for r in rows} == {"payments-1-4b1c2f", "payments-2-9f0e11", "what-if-1"}
    (member,) = lake.read_arrow(
        "snapshots", [("snapshot_id", "=", "what-if-1"), ("member_id", "=", "what-if-1")]
    ).to_pylist()
    assert member["source"] == "what-if"
