"""The pipeline on real Spark, delta-rs and Great Expectations over a temporary lake."""

from __future__ import annotations

import dataclasses
import json
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable

from jobs import pipeline
from jobs.cli import history
from jobs.config import Config
from jobs.context import RunContext
from jobs.io.gx_worker import GxWorker
from jobs.io.lake import Lake, rows_table
from jobs.steps import gate, ingest, plan, publish
from planner import assign
from planner.group import from_snapshot

pytestmark = pytest.mark.spark

DEMO = Path(__file__).resolve().parents[2] / "jobs" / "demo" / "data"
T0 = datetime(2026, 11, 21, 2, 0, tzinfo=UTC)


@pytest.fixture
def config(lake) -> Config:
    return Config(lake=str(lake.root), snapshots=str(DEMO), strategies=("range",))


def counts(lake) -> dict[str, int]:
    return {
        t: lake.read_arrow(t).num_rows
        for t in ("snapshots", "plans", "plan_metrics", "generations", "gate_results", "quarantine")
    }


def test_a_run_plans_every_group_exactly_as_the_planner_and_approves_it(spark, lake, config):
    result = pipeline.run(config, "run-1", spark=spark)
    assert [(r["group_id"], r["generation_id"], r["status"]) for r in result.report] == [
        ("audit-archiver", 1, "approved"),
        ("clickstream-etl", 1, "approved"),
        ("inventory", 1, "approved"),
        ("payments", 1, "approved"),
        ("shipping", 1, "approved"),
    ]
    assert all(r["gate_summary"] == "4/4 expectations passed" for r in result.report)
    plans = lake.read_arrow("plans").to_pylist()
    import json

    doc = json.loads((DEMO / "payments.json").read_text())
    expected = assign("range", from_snapshot(doc)).assignment
    got: dict[str, list[tuple[str, int]]] = {}
    for row in sorted(plans, key=lambda r: (r["topic"], r["partition"])):
        if row["group_id"] == "payments":
            got.setdefault(row["member"], []).append((row["topic"], row["partition"]))
    assert got == {m: list(tps) for m, tps in expected.items() if tps}
    moved = {(r["topic"], r["partition"]): r for r in plans if r["group_id"] == "payments"}
    assert moved[("orders", 4)]["previous_member"] == "payments-1-4b1c2f"
    assert moved[("orders", 4)]["member"] == "payments-2-9f0e11" and moved[("orders", 4)]["moved"]
    metrics = {r["group_id"]: r for r in lake.read_arrow("plan_metrics").to_pylist()}
    assert metrics["payments"]["partitions"] == 16 and metrics["payments"]["members"] == 3
    assert metrics["payments"]["count_spread"] == 1
    assert metrics["payments"]["partitions_moved"] == sum(r["moved"] for r in moved.values())
    assert metrics["inventory"]["count_spread"] == 5 - 1 and metrics["audit-archiver"]["stickiness"] == 1.0
    assert all(m["chosen"] for m in metrics.values())


def test_a_small_run_planned_in_this_process_writes_what_spark_tasks_write(spark, tmp_path, monkeypatch):
    # The demo fleet is a small run: on a local master it plans in this process, unless the bound says otherwise.
    written = {}
    for small_run in (plan.SMALL_RUN, 0):
        monkeypatch.setattr(plan, "SMALL_RUN", small_run)
        store = Lake(tmp_path / f"lake-{small_run}")
        store.create_all()
        ctx = RunContext.create(Config(lake=str(store.root), snapshots=str(DEMO)), "run-1", spark=spark)
        ingest.run(ctx, received_at=T0)
        result = plan.run(ctx)
        split = "groups planned in this process" if small_run else "groups in 5 tasks on 1 executor (driver on"
        assert result.text.startswith(f"plan: 5 {split}")
        written[small_run] = {
            name: sorted(map(str, store.read_arrow(name).to_pylist()))
            for name in ("plans", "plan_metrics", "plan_diffs", "partition_loads")
        }
    assert written[plan.SMALL_RUN] == written[0] and all(written[0].values())


def test_generation_ids_increase_per_group_and_a_rerun_duplicates_nothing(spark, lake, config):
    pipeline.run(config, "run-1", spark=spark)
    before = counts(lake)
    pipeline.run(config, "run-1", spark=spark)
    assert counts(lake) == before
    second = pipeline.run(config, "run-2", spark=spark)
    assert {r["generation_id"] for r in second.report} == {2}
    generations = lake.read_arrow("generations").to_pylist()
    inventory = [(g["group_id"], g["generation_id"], g["run_id"]) for g in generations if g["group_id"] == "inventory"]
    assert sorted(inventory) == [("inventory", 1, "run-1"), ("inventory", 2, "run-2")]


def test_generation_ids_are_never_reused_even_when_a_group_skips_a_run(lake):
    ids = plan.allocate_generations(lake, ["a", "b"], "r1", "r1", "manual", {}, T0)
    assert ids == {"a": 1, "b": 1}
    assert plan.allocate_generations(lake, ["b"], "r2", "r2", "manual", {}, T0) == {"b": 2}
    assert plan.allocate_generations(lake, ["a", "b"], "r3", "r3", "manual", {}, T0) == {"a": 2, "b": 3}
    assert plan.allocate_generations(lake, ["a", "b"], "r1", "r1", "manual", {}, T0) == {"a": 1, "b": 1}


@pytest.mark.parametrize(
    ("alone", "batch_rows"),
    [(False, 1_000_000), (False, 40), (True, 1_000_000)],
    ids=["every-group", "batches", "one-group"],
)
def test_the_gate_rejects_a_plan_that_breaks_the_invariants(
    spark, lake, config, tmp_path, monkeypatch, alone, batch_rows
):
    # In batches of about 40 plan rows the run's groups are checked in several batches: the same verdicts, counts and
    # rows as in one.
    monkeypatch.setattr(gate, "BATCH_ROWS", batch_rows)
    batches: list[int] = []
    whole = gate.group_batches
    monkeypatch.setattr(gate, "group_batches", lambda *args: [batches.append(len(b)) or b for b in whole(*args)])
    if alone:  # a what-if's run: one group
        inventory = json.loads((DEMO / "fulfilment.json").read_text())[0]
        (tmp_path / "one").mkdir()
        (tmp_path / "one" / "inventory.json").write_text(json.dumps(inventory))
        config = dataclasses.replace(config, snapshots=str(tmp_path / "one"))
    ctx = RunContext.create(config, "run-1", trigger="scheduled", spark=spark)
    ingest.run(ctx, received_at=T0)
    break_inventory_plan(lake, plan.run(ctx).by_group("generation_id"))
    passed = gate.run(ctx).by_group("passed")
    assert (len(batches) > 1) == (batch_rows == 40)
    others = {"audit-archiver": True, "clickstream-etl": True, "payments": True, "shipping": True}
    assert passed == {"inventory": False} | ({} if alone else others)
    report = {r["group_id"]: r for r in publish.run(ctx).rows}
    assert report["inventory"]["status"] == "rejected"
    assert alone or report["payments"]["status"] == "approved"
    assert report["inventory"]["gate_summary"] == (
        "1/4 expectations passed; failed: expect_column_values_to_be_in_set(expected), "
        "expect_column_values_to_be_in_set(subscribed), expect_column_values_to_not_be_null(member)"
    )
    results = {r["expectation"]: r for r in lake.read_arrow("gate_results").to_pylist() if r["group_id"] == "inventory"}
    assert results["expect_column_values_to_not_be_null(member)"]["observed_value"] == "1 unexpected rows"
    assert '"partition": 5' in results["expect_column_values_to_not_be_null(member)"]["details"]


def test_the_gate_through_a_what_ifs_worker_process_writes_the_same_gate_results(spark, lake, config):
    ctx = RunContext.create(config, "run-1", trigger="scheduled", spark=spark)
    ingest.run(ctx, received_at=T0)
    break_inventory_plan(lake, plan.run(ctx).by_group("generation_id"))
    here = gate.run(ctx)
    written = lake.read_arrow("gate_results").to_pylist()
    lake.table("gate_results").delete()
    ctx.gx_worker = GxWorker()
    try:
        assert gate.run(ctx) == here
    finally:
        ctx.stop_gx_worker()
    assert sorted(lake.read_arrow("gate_results").to_pylist(), key=str) == sorted(written, key=str)
    assert len(written) == 5 * 4 and not here.by_group("passed")["inventory"]


def break_inventory_plan(lake: Lake, ids: dict[str, int]) -> None:
    """Drop one inventory partition and hand another to a member that does not subscribe to its topic."""
    table = DeltaTable(lake.path("plans"))
    table.delete("group_id = 'inventory' AND topic = 'stock' AND partition = 5")
    table.update(
        predicate="group_id = 'inventory' AND topic = 'stock' AND partition = 0", updates={"member": "'inv-c-33'"}
    )
    lake.append(
        "plans",
        rows_table(
            "plans",
            [
                {
                    "generation_id": ids["inventory"],
                    "group_id": "inventory",
                    "strategy": "range",
                    "topic": "stock",
                    "partition": 9,
                    "member": "inv-b-22",
                }
            ],
        ),
    )


def test_history_is_queryable_with_spark_sql(spark, lake, config):
    pipeline.run(config, "run-1", spark=spark)
    pipeline.run(config, "run-2", spark=spark)
    text = history.query(
        RunContext.create(config, spark=spark),
        "SELECT group_id, count(DISTINCT generation_id) AS generations, "
        "count(*) AS rows FROM assignment_history WHERE group_id = 'payments' "
        "GROUP BY group_id",
    )
    assert text.split("\n")[1].split() == ["payments", "2", "32"]


def test_an_empty_table_reads_as_an_empty_dataframe_with_its_schema(spark, lake):
    frame = lake.read(spark, "plans")
    assert frame.count() == 0
    assert frame.columns == [
        "generation_id",
        "group_id",
        "strategy",
        "topic",
        "partition",
        "member",
        "previous_member",
        "moved",
        "phase",
        "weight",
    ]
    assert dict(frame.dtypes)["partition"] == "int"


def test_merge_upserts_on_the_table_keys(lake):
    row = {"ingest_id": "x", "run_id": "r", "source": "f", "raw_payload": "{}", "error": "first"}
    lake.merge("quarantine", rows_table("quarantine", [row]))
    lake.merge("quarantine", rows_table("quarantine", [{**row, "error": "second"}]))
    assert lake.read_arrow("quarantine").column("error").to_pylist() == ["second"]
    with pytest.raises(ValueError, match="key column 'ingest_id' is missing"):
        lake.merge("quarantine", pa.table({"error": ["no key"]}))


def test_a_lake_reads_each_tables_latest_version_whoever_committed_it(lake):
    # A Lake keeps each table it read and brings it up to date before the next read: the commits of another Lake
    # (as another process's) since then are read, and threads reading at once share it.
    row = {"ingest_id": "x", "run_id": "r", "source": "f", "raw_payload": "{}", "error": "first"}
    assert lake.read_arrow("quarantine").num_rows == 0
    other = Lake(lake.root)
    other.append("quarantine", rows_table("quarantine", [row]))
    assert lake.read_arrow("quarantine").column("error").to_pylist() == ["first"]
    other.merge("quarantine", rows_table("quarantine", [{**row, "error": "second"}, {**row, "ingest_id": "y"}]))
    with ThreadPoolExecutor(4) as pool:
        read = pool.map(lambda _: sorted(lake.read_arrow("quarantine").column("ingest_id").to_pylist()), range(16))
        assert list(read) == [["x", "y"]] * 16
    assert lake.read_arrow("quarantine", [("ingest_id", "=", "x")]).column("error").to_pylist() == ["second"]
    with lake.latest("quarantine") as table:
        assert table.version() == DeltaTable(lake.path("quarantine")).version() == 2
    # Commits too go through a table kept open, brought up to date first: each MERGE sees the other Lake's rows.
    lake.merge("quarantine", rows_table("quarantine", [{**row, "ingest_id": "z"}]))
    other.append("quarantine", rows_table("quarantine", [{**row, "ingest_id": "w"}]))
    lake.merge("quarantine", rows_table("quarantine", [{**row, "ingest_id": "w", "error": "third"}]))
    errors = dict(zip(*lake.read_arrow("quarantine", columns=["ingest_id", "error"]).to_pydict().values(), strict=True))
    assert errors == {"w": "third", "x": "second", "y": "first", "z": "first"}


def test_key_samples_become_partition_weights_of_the_plans(spark, lake, config):
    from collections import Counter

    from planner.hashing import partition_for_key

    keys = [f"tenant-{i % 7}".encode() for i in range(200)] + [b"hot"] * 300
    lake.merge(
        "key_samples",
        rows_table(
            "key_samples",
            [
                {
                    "sample_id": "run-1",
                    "topic": "clicks",
                    "partition": 0,
                    "offset": i,
                    "key": k,
                    "value_size": 10,
                    "timestamp": T0,
                    "weight": 3.0,
                }
                for i, k in enumerate(keys)
            ],
        ),
    )
    pipeline.run(config, "run-1", spark=spark)
    expected = Counter(partition_for_key(k, 10) for k in keys)
    weights = {
        r["partition"]: r["weight"] for r in lake.read_arrow("plans").to_pylist() if r["group_id"] == "clickstream-etl"
    }
    assert weights == {p: 3.0 * expected.get(p, 0) for p in range(10)}  # each sample stands for 3 messages
    metrics = {r["group_id"]: r for r in lake.read_arrow("plan_metrics").to_pylist()}
    assert metrics["clickstream-etl"]["mean_load"] == 3.0 * len(keys) / 3


def test_tables_are_catalog_delta_tables(spark, lake, config):
    from delta.tables import DeltaTable as SparkDeltaTable

    pipeline.run(config, "run-1", spark=spark)
    history.register(spark, Lake(config.lake))
    assert SparkDeltaTable.forName(spark, "generations").toDF().count() == 5
