"""Lake maintenance (`rebalance maintain`, the maintenance DAG) on a lake of three real nightly runs.

The runs are made once per module; every test maintains its own copy of that lake.
"""

from __future__ import annotations

import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable

from jobs import pipeline
from jobs.airflow.environment import DAGS_FOLDER, configure, migrate_once
from jobs.cli import main
from jobs.config import Config
from jobs.context import RunContext
from jobs.io import delta_maintenance as delta
from jobs.io.lake import Lake, rows_table
from jobs.steps import maintain
from jobs.tables import export
from schemas import TABLES

pytestmark = pytest.mark.spark

DEMO = Path(__file__).resolve().parents[2] / "jobs" / "demo" / "data"
RUNS = ("run-1", "run-2", "run-3")
GROUPS = ("audit-archiver", "clickstream-etl", "inventory", "payments", "shipping")
TIME_TRAVELLED = ("plans", "generations")  # their first and last versions are read again
PER_GENERATION = ("plans", "plan_diffs", "partition_loads")


@pytest.fixture(scope="module")
def nightly_lake(spark, tmp_path_factory) -> Path:
    """A lake after three nightly runs of the bundled files: generations 1, 2, 3 of each of the five groups."""
    root = tmp_path_factory.mktemp("nightly") / "lake"
    config = Config(lake=str(root), snapshots=str(DEMO), strategies=("range",))
    for run_id in RUNS:
        pipeline.run(config, run_id, spark=spark)
    return root


@pytest.fixture
def lake(nightly_lake: Path, tmp_path: Path) -> Lake:
    """This test's own copy of the three-run lake (modification times kept)."""
    return Lake(shutil.copytree(nightly_lake, tmp_path / "lake"))


@pytest.fixture(scope="module")
def airflow_db() -> None:
    migrate_once(configure())


def context(lake: Lake) -> RunContext:
    return RunContext.create(Config(lake=str(lake.root)), trigger="maintain")


def current_rows(lake: Lake) -> dict[str, pa.Table]:
    """Every table's current rows, sorted by its keys."""
    return {name: lake.read_arrow(name).sort_by([(k, "ascending") for k in spec.keys]) for name, spec in TABLES.items()}


def read_version(spark, name: str, version: int) -> pa.Table:
    """One version of a registered table through Spark SQL's VERSION AS OF, sorted by the table's keys."""
    order = ", ".join(f"`{k}`" for k in TABLES[name].keys)
    return spark.sql(f"SELECT * FROM `{name}` VERSION AS OF {version} ORDER BY {order}").toArrow()


def files_on_disk(lake: Lake) -> dict[str, int]:
    """Every file of the lake's tables, data and log: relative path -> size."""
    return {
        str(p.relative_to(lake.root)): p.stat().st_size
        for name in TABLES
        for p in (lake.local / name).rglob("*")
        if p.is_file()
    }


def data_files(lake: Lake, name: str) -> set[str]:
    """The data files in a table's directory (its log aside)."""
    return {p.name for p in (lake.local / name).iterdir() if p.is_file()}


def generation_keys(lake: Lake, name: str) -> set[tuple[str, int]]:
    rows = lake.read_arrow(name, columns=("group_id", "generation_id")).to_pylist()
    return {(r["group_id"], r["generation_id"]) for r in rows}


def test_maintenance_compacts_and_keeps_every_row_and_every_version_inside_the_retention(spark, lake):
    rows = current_rows(lake)
    lake.register_views(spark)
    latest = {name: DeltaTable(lake.path(name)).version() for name in TIME_TRAVELLED}
    travelled = {(name, v): read_version(spark, name, v) for name, last in latest.items() for v in (1, last)}
    unchanged = {name for name in TABLES if DeltaTable(lake.path(name)).version() == 0}  # no checkpoint needed
    report = {r["table"]: r for r in maintain.run(context(lake)).rows}  # 7 days, bulky rows 30 days: nothing is old

    assert current_rows(lake) == rows
    assert sum(r["live_files_after"] for r in report.values()) < sum(r["live_files_before"] for r in report.values())
    assert report["plans"]["live_files_before"] >= len(RUNS) and report["plans"]["live_files_after"] == 1
    assert all(r["live_files_after"] <= min(1, r["live_files_before"]) for r in report.values())
    assert all(r["rows_deleted"] == 0 and r["files_vacuumed"] == 0 for r in report.values())
    # Compaction is one more commit: earlier versions read as they did, through Spark's Delta connector and the
    # checkpoint delta-rs wrote, and the protocol stays at reader 1 / writer 2.
    assert all(DeltaTable(lake.path(name)).version() > v for name, v in latest.items())
    for (name, version), before in travelled.items():
        assert read_version(spark, name, version).equals(before), (name, version)
    for name in TABLES:
        assert delta.protocol(lake, name) == (1, 2)
        assert delta.last_checkpoint(lake, name) == DeltaTable(lake.path(name)).version() or name in unchanged
    assert lake.read(spark, "plans").count() == rows["plans"].num_rows


def test_a_zero_day_retention_leaves_only_the_files_of_the_current_version(spark, lake, capsys):
    rows, before = current_rows(lake), files_on_disk(lake)
    data_before = {name: data_files(lake, name) for name in TABLES}
    assert main(["maintain", "--lake", str(lake.root), "--retention-days", "0"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"lake {lake.root}: retention 0 days, bulky rows 30 days"
    assert [line.split()[0] for line in out[1:]] == [*TABLES, "total"]

    assert current_rows(lake) == rows
    data = {path: size for path, size in before.items() if "_delta_log" not in path}
    assert sum(size for path, size in files_on_disk(lake).items() if "_delta_log" not in path) < sum(data.values())
    for name in TABLES:
        live = {a["path"] for a in pa.table(DeltaTable(lake.path(name)).get_add_actions()).to_pylist()}
        assert data_files(lake, name) == live and len(live) <= 1, name
    assert sum(map(len, data_before.values())) > 2 * len(TABLES)
    assert lake.read(spark, "generations").count() == rows["generations"].num_rows


def test_bulky_rows_of_old_generations_go_but_never_a_groups_latest_approved_one(lake):
    """Runs 1 and 2 are made 60 days old; run 3's payments plan was rejected, so payments' generation 2 is still
    its latest approved one: only generations 1 of every group, and generations 2 of the others, lose their rows."""
    old = datetime.now(UTC) - timedelta(days=60)
    generations = lake.read_arrow("generations").to_pylist()
    lake.update(
        "generations",
        rows_table("generations", [{**g, "created_at": old} for g in generations if g["run_id"] != "run-3"]),
        ["created_at"],
    )
    lake.update(
        "generations",
        rows_table(
            "generations",
            [
                {"group_id": "payments", "generation_id": 2, "status": "approved"},
                {"group_id": "payments", "generation_id": 3, "status": "rejected"},
            ],
        ),
        ["status"],
    )
    rows, disk = current_rows(lake), files_on_disk(lake)
    table_versions = {name: DeltaTable(lake.path(name)).version() for name in TABLES}

    dry = {r["table"]: r for r in maintain.run(context(lake), dry_run=True).rows}
    assert files_on_disk(lake) == disk and current_rows(lake) == rows
    assert {name: DeltaTable(lake.path(name)).version() for name in TABLES} == table_versions

    done = {r["table"]: r for r in maintain.run(context(lake)).rows}
    gone = {(g, 1) for g in GROUPS} | {(g, 2) for g in GROUPS if g != "payments"}
    for name in PER_GENERATION:
        assert generation_keys(lake, name) == {(g, i) for g in GROUPS for i in (1, 2, 3)} - gone, name
    for name in ("topic_partitions", "partition_offsets"):  # run-2's snapshot is payments' approved plan's
        assert set(lake.read_arrow(name)["snapshot_id"].to_pylist()) == {"run-2", "run-3"}, name
    after = current_rows(lake)
    for name in TABLES:
        deleted = rows[name].num_rows - after[name].num_rows
        assert done[name]["rows_deleted"] == dry[name]["rows_deleted"] == deleted, name
        if name not in (*PER_GENERATION, "topic_partitions", "partition_offsets"):
            assert after[name] == rows[name], name  # generations and the small tables are kept whole
    assert done["plans"]["rows_deleted"] > 0
    # reads generation 2's plan rows, snapshot and partition counts
    plan = export.plan_of(lake, export.select_generation(lake, "payments")).to_json()
    assert (plan["generation_id"], plan["snapshot_id"], plan["topics"]) == (2, "run-2", {"orders": 12, "refunds": 4})
    assert sum(len(ps) for m in plan["members"].values() for ps in m["assignment"].values()) == 16


def test_old_key_samples_and_key_skew_runs_go_but_the_newest_of_each_stay(lake):
    """Three measured runs 60, 50 and 40 days old: the newest sample set and each topic's newest key-skew run stay,
    whatever their age; the summaries (a small table) are kept whole."""
    now = datetime.now(UTC)
    ages = {"skew-a": 60, "skew-b": 50, "skew-c": 40}
    run = {"topic": "orders", "partitioner": "murmur2", "partition_count": 12}
    for name, rows in {
        "key_samples": [
            {"sample_id": r, "topic": "orders", "partition": 0, "offset": k, "timestamp": now - timedelta(days=d)}
            for r, d in ages.items()
            for k in range(3)
        ],
        "key_skew": [
            {"run_id": r, "computed_at": now - timedelta(days=d), **run, "partition": p}
            for r, d in ages.items()
            for p in range(12)
        ],
        "key_skew_hot_keys": [
            {"run_id": r, "computed_at": now - timedelta(days=d), **run, "rank": 1} for r, d in ages.items()
        ],
        "key_skew_summary": [{"run_id": r, "computed_at": now - timedelta(days=d), **run} for r, d in ages.items()],
    }.items():
        lake.merge(name, rows_table(name, rows))
    dry = {r["table"]: r["rows_deleted"] for r in maintain.run(context(lake), dry_run=True).rows}
    done = {r["table"]: r["rows_deleted"] for r in maintain.run(context(lake)).rows}
    assert done == dry
    assert (done["key_samples"], done["key_skew"], done["key_skew_hot_keys"], done["key_skew_summary"]) == (6, 24, 2, 0)
    for name in ("key_samples", "key_skew", "key_skew_hot_keys"):
        column = "sample_id" if name == "key_samples" else "run_id"
        assert set(lake.read_arrow(name)[column].to_pylist()) == {"skew-c"}, name
    assert lake.read_arrow("key_skew_summary").num_rows == 3


def test_a_retention_beyond_the_tables_own_raises_it_so_time_travel_reaches_as_far(lake):
    report = maintain.run(context(lake), retention_days=45).rows
    raised = {
        "delta.deletedFileRetentionDuration": "interval 45 days",
        "delta.logRetentionDuration": "interval 45 days",
    }
    assert all(r["retention_raised"] == raised for r in report)
    for name in TABLES:
        configuration = DeltaTable(lake.path(name)).metadata().configuration
        assert {k: configuration[k] for k in raised} == raised and delta.protocol(lake, name) == (1, 2)
    assert "raised delta.deletedFileRetentionDuration = interval 45 days" in maintain.format_report(report)
    assert all(not r["retention_raised"] for r in maintain.run(context(lake), retention_days=30).rows)  # never lowered


@pytest.mark.parametrize(
    ("option", "value"), [("--retention-days", "-1"), ("--bulky-retention-days", "x"), ("--retention-days", "1.5")]
)
def test_a_bad_retention_is_one_line_and_exit_2(tmp_path, capsys, option, value):
    assert main(["maintain", "--lake", str(tmp_path / "lake"), option, value]) == 2
    err = capsys.readouterr().err
    assert (
        err == f"rebalance maintain: error: {option}: expected a whole number of days from 0 to 36500, got {value!r}\n"
    )
    assert not (tmp_path / "lake").exists()


def test_maintaining_no_lake_is_one_line_and_exit_2(tmp_path, capsys):
    assert main(["maintain", "--lake", str(tmp_path / "none")]) == 2
    assert (
        capsys.readouterr().err
        == f"rebalance maintain: error: --lake: no lake at {tmp_path / 'none'} (nothing to maintain)\n"
    )
    assert not (tmp_path / "none").exists()


@pytest.mark.airflow
def test_the_maintenance_dag_is_weekly_with_typed_retentions_and_runs_the_step(airflow_db, lake):
    from airflow.dag_processing.dagbag import DagBag
    from airflow.sdk.definitions.param import ParamsDict
    from airflow.sdk.exceptions import ParamValidationError
    from airflow.utils.state import DagRunState

    bag = DagBag(dag_folder=str(DAGS_FOLDER))
    assert bag.import_errors == {}
    dag = bag.dags["rebalance_maintenance"]
    assert (dag.schedule, dag.catchup, dag.max_active_runs) == ("0 4 * * 0", False, 1)
    assert [t.task_id for t in dag.tasks] == ["maintain"]
    params = ParamsDict(dag.params)
    assert (params["retention_days"], params["bulky_retention_days"]) == (7, 30)
    for name, bad in [("retention_days", -1), ("bulky_retention_days", "30")]:
        with pytest.raises(ParamValidationError, match=f"param {name}"):
            params.update({name: bad})

    live = sum(delta.footprint(lake, name).live_files for name in TABLES)
    run = dag.test(run_conf={"lake": str(lake.root), "retention_days": 7, "bulky_retention_days": 30})
    assert run.state == DagRunState.SUCCESS  # Airflow 3's dag.test() returns a failed run instead of raising
    assert sum(delta.footprint(lake, name).live_files for name in TABLES) < live
    failed = dag.test(run_conf={"lake": str(lake.root), "retention": 7})
    assert failed.state == DagRunState.FAILED  # a key no param declares is refused, named
