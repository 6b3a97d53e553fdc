"""The changes and migration steps and the plan's member diffs on two real runs (ingest and plan with Spark), and their
commands."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from jobs import pipeline
from jobs.cli import main
from jobs.config import Config
from jobs.context import RunContext
from jobs.steps import ingest

STRATEGIES = ("range", "cooperative-sticky")


def classic(members: int, partitions: int, protocol: str = "cooperative-sticky") -> dict:
    """A classic group whose members hold the first partitions round robin, the last one unassigned."""
    ids = [f"pay-{i}" for i in range(members)]
    return {
        "group_id": "payments",
        "captured_at": "2026-11-21T02:00:00Z",
        "protocol": protocol,
        "topics": {"orders": partitions},
        "members": [
            {
                "member_id": m,
                "strategies": [protocol],
                "topics": ["orders"],
                "rack": "az1" if i == 0 else None,
                "assignment": [["orders", p] for p in range(i, partitions - 1, members)],
            }
            for i, m in enumerate(ids)
        ],
    }


CONSUMER = {
    "group_id": "orders-v2",
    "captured_at": "2026-11-21T02:00:00Z",
    "state": "Stable",
    "group_type": "consumer",
    "server_assignor": "uniform",
    "group_epoch": 3,
    "assignment_epoch": 3,
    "topics": {"clicks": 6},
    "members": [
        {"member_id": "c0", "member_epoch": 3, "topics": ["clicks"], "assignment": [["clicks", 0], ["clicks", 1]]}
    ],
}


def run_once(spark, lake_root: Path, run_id: str, documents: list[dict], tmp_path: Path) -> RunContext:
    path = tmp_path / f"{run_id}.json"
    path.write_text(json.dumps(documents))
    ctx = RunContext.create(
        Config(lake=str(lake_root), snapshots=str(path), strategies=STRATEGIES), run_id, spark=spark
    )
    ingest.run(ctx)
    for name in ("plan", *pipeline.AFTER_PLAN):
        pipeline.STEPS[name](ctx, {})
    return ctx


@pytest.fixture(scope="module")
def two_runs(spark, tmp_path_factory):
    from jobs.io.lake import Lake

    tmp_path = tmp_path_factory.mktemp("runs")
    lake = Lake(tmp_path / "lake")
    first = classic(2, 6)
    second = classic(3, 8)  # pay-2 joins, orders grows from 6 to 8 partitions
    second["captured_at"] = CONSUMER["captured_at"] = "2026-11-22T02:00:00Z"
    second["members"][1]["topics"] = ["orders", "refunds"]
    second["topics"]["refunds"] = 2
    run_once(spark, lake.root, "run-1", [first], tmp_path)
    ctx = run_once(spark, lake.root, "run-2", [second, CONSUMER], tmp_path)
    return lake, ctx


def test_the_steps_follow_the_gate_in_the_nightly_run():
    nightly = pipeline.NIGHTLY  # after the gate, the last step that needs Spark, and before publish reports them
    assert nightly.index("plan") < nightly.index("gate") < nightly.index("changes") < nightly.index("migration")
    assert nightly.index("migration") < nightly.index("publish")


def test_changes_since_the_previous_snapshot_are_stored_with_the_generation(two_runs):
    lake, _ = two_runs
    generations = {(r["group_id"], r["run_id"]): r for r in lake.read_arrow("generations").to_pylist()}
    first = json.loads(generations[("payments", "run-1")]["changes"])
    assert first == {"previous_snapshot_id": None, "first": True, "changed": False}
    second = json.loads(generations[("payments", "run-2")]["changes"])
    assert second == {
        "previous_snapshot_id": "run-1",
        "first": False,
        "changed": True,
        "members_joined": ["pay-2"],
        "members_left": [],
        "subscriptions": {"pay-1": {"added": ["refunds"], "removed": []}},
        "partition_counts": {"orders": [6, 8], "refunds": [None, 2]},
    }
    assert json.loads(generations[("orders-v2", "run-2")]["changes"])["first"] is True


def test_migration_readiness_is_stored_for_classic_groups_only_and_printed(two_runs, capsys):
    lake, _ = two_runs
    rows = {(r["group_id"], r["generation_id"]): r for r in lake.read_arrow("migration_readiness").to_pylist()}
    assert set(rows) == {("payments", 1), ("payments", 2)}
    latest = rows[("payments", 2)]
    assert (latest["client_assignor"], latest["server_assignor"], latest["ready"]) == (
        "cooperative-sticky",
        "uniform",
        True,
    )
    assert latest["warnings"] == [
        "rack awareness lost: 1 members set client.rack, which cooperative-sticky uses (KIP-881) and the uniform "
        "server assignor ignores (KAFKA-16694)"
    ]
    # 8 orders partitions (7 held today) and 2 new refunds ones over 3 members: uniform moves the unowned ones.
    moved = {(m["topic"], m["partition"]): m for m in latest["moves"]}
    assert latest["partitions"] == 7 and latest["partitions_moved"] == len(moved) >= 3
    assert {("orders", 7), ("refunds", 0), ("refunds", 1)} <= set(moved)
    assert all(moved[tp]["from_member"] == "" for tp in [("orders", 7), ("refunds", 0), ("refunds", 1)])

    assert main(["migration", "--group", "payments", "--lake", str(lake.root)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("group payments, generation 2 (snapshot run-2)\n")
    assert "client assignor cooperative-sticky -> server assignor uniform" in out
    assert "ready for group.protocol=consumer: yes" in out and "orders-7: (none) -> " in out
    assert main(["migration", "--group", "payments", "--generation", "1", "--lake", str(lake.root)]) == 0
    assert "generation 1 (snapshot run-1)" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["migration", "--group", "orders-v2"], "--group: 'orders-v2' is already a consumer group (KIP-848)"),
        (["migration", "--group", "nope"], "--group: no migration readiness for group 'nope'"),
        (["diff", "--group", "payments", "--strategy", "sticky"], "--strategy: 'sticky' is not a candidate"),
        (["diff", "--group", "payments", "--generation", "9"], "--generation: group 'payments' has no generation 9"),
    ],
)
def test_bad_input_exits_2_naming_the_option(two_runs, capsys, argv, message):
    lake, _ = two_runs
    assert main([*argv, "--lake", str(lake.root)]) == 2
    assert message in capsys.readouterr().err


def test_plan_diffs_match_the_plans_member_by_member_and_print(two_runs, capsys):
    lake, _ = two_runs
    plans = [r for r in lake.read_arrow("plans").to_pylist() if (r["group_id"], r["generation_id"]) == ("payments", 2)]
    diffs = [
        r for r in lake.read_arrow("plan_diffs").to_pylist() if (r["group_id"], r["generation_id"]) == ("payments", 2)
    ]
    for strategy in STRATEGIES:
        rows = {r["member"]: r for r in diffs if r["strategy"] == strategy}
        assert set(rows) == {"pay-0", "pay-1", "pay-2"}
        candidate = [p for p in plans if p["strategy"] == strategy]
        for member, row in rows.items():
            gained = {(p["topic"], p["partition"]) for p in candidate if p["member"] == member != p["previous_member"]}
            lost = {(p["topic"], p["partition"]) for p in candidate if p["previous_member"] == member != p["member"]}
            assert {(g["topic"], g["partition"]) for g in row["gained"]} == gained
            assert {(g["topic"], g["partition"]) for g in row["lost"]} == lost
            assert row["partitions_after"] == sum(1 for p in candidate if p["member"] == member)
            assert row["partitions_before"] == sum(1 for p in candidate if p["previous_member"] == member)
    assert {r["partitions_before"] for r in diffs if r["member"] == "pay-2"} == {2}  # orders-2 and orders-5 today

    assert main(["diff", "--group", "payments", "--strategy", "range", "--lake", str(lake.root)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("group payments, generation 2, strategy range: ")
    assert "  pay-2: 2 -> " in out and "    + " in out


def test_migration_assessed_in_parts_of_whole_groups_stores_the_same_rows(two_runs, monkeypatch):
    from jobs.steps import migration

    lake, ctx = two_runs
    before = lake.read_arrow("migration_readiness").sort_by([("group_id", "ascending"), ("generation_id", "ascending")])
    monkeypatch.setattr(migration, "PART_ROWS", 1)  # every group a part of its own
    migration.run(ctx)
    after = lake.read_arrow("migration_readiness").sort_by([("group_id", "ascending"), ("generation_id", "ascending")])
    assert after.equals(before)


def test_group_parts_are_whole_groups_in_order():
    import pyarrow as pa

    from jobs.steps.migration import group_parts

    rows = pa.table({"group_id": ["a", "a", "a", "b", "c", "c", "d"], "n": list(range(7))})
    parts = [part.column("group_id").to_pylist() for part in group_parts(rows, 2)]
    assert parts == [["a", "a", "a"], ["b"], ["c", "c"], ["d"]]
    assert [p.column("group_id").to_pylist() for p in group_parts(rows, 4)] == [["a", "a", "a", "b"], ["c", "c", "d"]]
    assert list(group_parts(rows.slice(0, 0), 2)) == []
