"""Airflow: every DAG file imports cleanly, and the nightly DAG runs end to end through `dag.test()`."""

from __future__ import annotations

from pathlib import Path

import pytest

from jobs.airflow.environment import DAGS_FOLDER, configure, migrate_once
from jobs.pipeline import NIGHTLY, WHAT_IF

DEMO = Path(__file__).resolve().parents[2] / "jobs" / "demo" / "data"


@pytest.fixture(scope="session")
def airflow_db() -> None:
    migrate_once(configure())


def dag_bag():
    from airflow.dag_processing.dagbag import DagBag

    return DagBag(dag_folder=str(DAGS_FOLDER))


def test_every_dag_file_imports_cleanly():
    bag = dag_bag()
    assert bag.import_errors == {}
    assert "rebalance_nightly" in bag.dags
    nightly = bag.dags["rebalance_nightly"]
    assert nightly.catchup is False and nightly.max_active_runs == 1
    assert [t.task_id for t in nightly.topological_sort() if t.task_id in NIGHTLY] == list(NIGHTLY)
    assert NIGHTLY[:4] == ("ingest", "verify", "skew", "plan") and NIGHTLY.index("gate") < NIGHTLY.index("publish")
    assert set(nightly.params) >= {"snapshots", "strategies", "lake"}


@pytest.mark.airflow
@pytest.mark.spark
def test_the_nightly_dag_plans_and_approves_every_good_group(airflow_db, spark, lake):
    from airflow.utils.state import DagRunState

    dag = dag_bag().dags["rebalance_nightly"]
    run = dag.test(run_conf={"lake": str(lake.root), "snapshots": str(DEMO), "strategies": "range"})
    assert run.state == DagRunState.SUCCESS
    generations = lake.read_arrow("generations").to_pylist()
    assert sorted((g["group_id"], g["status"]) for g in generations) == [
        ("audit-archiver", "approved"),
        ("clickstream-etl", "approved"),
        ("inventory", "approved"),
        ("payments", "approved"),
        ("shipping", "approved"),
    ]
    assert {g["run_id"] for g in generations} == {run.run_id}
    assert {g["trigger"] for g in generations} == {"manual"}
    assert lake.read_arrow("plans").num_rows == 2 + 10 + 9 + 16 + 20
    assert lake.read_arrow("gate_results").num_rows == 5 * 4
    (quarantined,) = lake.read_arrow("quarantine").to_pylist()
    assert quarantined["source"].endswith("billing-truncated.json")


def test_the_what_if_dag_is_manual_with_validated_parameters():
    dag = dag_bag().dags["rebalance_what_if"]
    assert dag.schedule is None
    assert [t.task_id for t in dag.topological_sort() if t.task_id in WHAT_IF] == list(WHAT_IF)
    assert WHAT_IF[:4] == ("scenario", "plan", "gate", "publish")
    from airflow.sdk.definitions.param import ParamsDict
    from airflow.sdk.exceptions import ParamValidationError

    params = ParamsDict(dag.params)
    params.update({"group": "payments", "add_members": 1, "partitions": {"orders": 24}})
    params.validate()
    for name, bad in [
        ("add_members", -1),
        ("partitions", {"orders": 0}),
        ("group", ""),
        ("remove_members", ["a", "a"]),
    ]:
        with pytest.raises(ParamValidationError, match=f"param {name}"):
            params.update({name: bad})


@pytest.mark.airflow
@pytest.mark.spark
def test_the_what_if_dag_publishes_a_scenario_generation(airflow_db, spark, lake):
    from airflow.utils.state import DagRunState

    from jobs import pipeline
    from jobs.config import Config

    pipeline.run(Config(lake=str(lake.root), snapshots=str(DEMO), strategies=("range",)), "nightly", spark=spark)
    dag = dag_bag().dags["rebalance_what_if"]
    run = dag.test(
        run_conf={
            "lake": str(lake.root),
            "group": "inventory",
            "partitions": {"stock": 9},
            "add_members": 1,
            "strategies": "range,sticky",
        }
    )
    assert run.state == DagRunState.SUCCESS
    latest = max(
        (g for g in lake.read_arrow("generations").to_pylist() if g["group_id"] == "inventory"),
        key=lambda g: g["generation_id"],
    )
    assert (latest["generation_id"], latest["run_id"], latest["status"]) == (2, run.run_id, "approved")
    failed = dag.test(run_conf={"lake": str(lake.root), "group": "inventory", "partitions": {"stock": 3}})
    assert failed.state == DagRunState.FAILED
    assert {g["run_id"] for g in lake.read_arrow("generations").to_pylist()} == {"nightly", run.run_id}
