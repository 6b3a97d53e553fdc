"""Both DAGs under a real Airflow 3 scheduler (LocalExecutor, SQLite), triggered through the REST API v2.

One deployment for the module (`airflow_server`), one lake on the demo snapshot files. The nightly DAG's schedule
is a yearly cron: with catchup=False, Airflow's CronTriggerTimetable runs its latest past boundary (1 January) as
soon as the DAG is parsed, and the next only a year later, so exactly one run of type `scheduled` exists.
"""

from __future__ import annotations

import ipaddress
import json
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from airflow_server import REPO, AirflowServer, airflow_server
from deltalake import DeltaTable

pytestmark = [pytest.mark.slow, pytest.mark.airflow]

DEMO = REPO / "jobs" / "demo" / "data"
NIGHTLY, WHAT_IF = "rebalance_nightly", "rebalance_what_if"
DEMO_GROUPS = ["audit-archiver", "clickstream-etl", "inventory", "payments", "shipping"]
RUN_TIMEOUT = 900.0
LOOPBACK = "127.0.0.1"


@pytest.fixture(scope="module")
def lake(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("lake")


@pytest.fixture(scope="module")
def listeners() -> set[tuple[str, int]]:
    """Every (address, port) the deployment was seen listening on while runs were polled."""
    return set()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, lake: Path) -> Iterator[AirflowServer]:
    env = {
        "REBALANCE_LAKE": str(lake),
        "REBALANCE_SNAPSHOTS": str(DEMO),
        "REBALANCE_NIGHTLY_SCHEDULE": "0 0 1 1 *",
        "REBALANCE_SPARK_MASTER": "local[1]",
    }
    with airflow_server(tmp_path_factory.mktemp("airflow_home"), env) as deployment:
        deployment.wait_for("both DAGs parsed and unpaused", lambda: _dags_ready(deployment), 120.0)
        yield deployment


@pytest.fixture(scope="module")
def scheduled_run(server: AirflowServer, listeners: set) -> dict[str, Any]:
    """The nightly DAG's one scheduled run, finished (later runs queue behind it: max_active_runs=1)."""
    run = server.wait_for("the nightly DAG's scheduled run", lambda: _scheduled(server), 120.0)
    return _wait_for_run(server, NIGHTLY, run["dag_run_id"], listeners)


def _dags_ready(server: AirflowServer) -> bool | None:
    for dag_id in (NIGHTLY, WHAT_IF):
        response = server.api.get(f"/api/v2/dags/{dag_id}")
        if response.status_code != 200 or response.json()["is_paused"]:
            return None
    return True


def _scheduled(server: AirflowServer) -> dict[str, Any] | None:
    runs = server.api.get(f"/api/v2/dags/{NIGHTLY}/dagRuns").raise_for_status().json()["dag_runs"]
    return next((r for r in runs if r["run_type"] == "scheduled"), None)


def _trigger(server: AirflowServer, dag_id: str, conf: dict[str, Any]):
    return server.api.post(f"/api/v2/dags/{dag_id}/dagRuns", json={"logical_date": None, "conf": conf})


def _wait_for_run(server: AirflowServer, dag_id: str, run_id: str, listeners: set) -> dict[str, Any]:
    """Poll the run until it ends; meanwhile note every socket the deployment (tasks and Spark included) listens on."""

    def finished() -> dict[str, Any] | None:
        listeners.update(server.listening())
        run = server.api.get(f"/api/v2/dags/{dag_id}/dagRuns/{run_id}").raise_for_status().json()
        return run if run["state"] in ("success", "failed") else None

    return server.wait_for(f"the end of {dag_id} run {run_id}", finished, RUN_TIMEOUT, every=2.0)


def _generations(lake: Path, run_id: str) -> list[dict[str, Any]]:
    rows = DeltaTable(str(lake / "generations")).to_pyarrow_table().to_pylist()
    return sorted((g for g in rows if g["run_id"] == run_id), key=lambda g: g["group_id"])


def _wall_seconds(run: dict[str, Any]) -> float:
    def at(field: str) -> datetime:
        return datetime.fromisoformat(run[field].replace("Z", "+00:00"))

    return (at("end_date") - at("queued_at")).total_seconds()


def test_a_scheduled_nightly_run_is_recorded_as_scheduled(server, scheduled_run, lake):
    assert scheduled_run["state"] == "success", server.failures(scheduled_run)
    generations = _generations(lake, scheduled_run["dag_run_id"])
    assert [g["group_id"] for g in generations] == DEMO_GROUPS
    assert {g["trigger"] for g in generations} == {"scheduled"}


def test_a_triggered_nightly_run_is_manual_with_the_chosen_strategies(server, scheduled_run, lake, listeners, capsys):
    strategies = ["sticky", "cooperative-sticky"]
    response = _trigger(server, NIGHTLY, {"strategies": ",".join(strategies)})
    assert response.status_code == 200, response.text
    run = _wait_for_run(server, NIGHTLY, response.json()["dag_run_id"], listeners)
    with capsys.disabled():
        print(f"\n{NIGHTLY} wall time, queued -> {run['state']}: {_wall_seconds(run):.1f} s")
    assert run["state"] == "success", server.failures(run)
    generations = _generations(lake, run["dag_run_id"])
    assert [g["group_id"] for g in generations] == DEMO_GROUPS
    assert {g["trigger"] for g in generations} == {"manual"}
    assert {g["status"] for g in generations} == {"approved"}
    assert all(json.loads(g["parameters"])["strategies"] == strategies for g in generations)
    assert {g["chosen_strategy"] for g in generations} <= set(strategies)


def test_a_valid_what_if_run_publishes_a_manual_generation(server, scheduled_run, lake, listeners):
    conf = {"group": "inventory", "partitions": {"stock": 9}, "add_members": 1, "strategies": "range,sticky"}
    response = _trigger(server, WHAT_IF, conf)
    assert response.status_code == 200, response.text
    run = _wait_for_run(server, WHAT_IF, response.json()["dag_run_id"], listeners)
    assert run["state"] == "success", server.failures(run)
    (generation,) = _generations(lake, run["dag_run_id"])
    assert (generation["group_id"], generation["trigger"], generation["status"]) == ("inventory", "manual", "approved")


@pytest.mark.parametrize(
    ("name", "bad"),
    [("add_members", -1), ("partitions", {"stock": 0}), ("group", ""), ("remove_members", ["m1", "m1"])],
)
def test_invalid_what_if_values_are_refused_at_trigger_time(server, name, bad):
    before = server.api.get(f"/api/v2/dags/{WHAT_IF}/dagRuns").raise_for_status().json()["total_entries"]
    conf = {"group": "inventory", "partitions": {"stock": 9}, name: bad}
    response = _trigger(server, WHAT_IF, conf)
    assert response.status_code == 400
    assert f"param {name}" in response.json()["detail"]
    assert server.api.get(f"/api/v2/dags/{WHAT_IF}/dagRuns").json()["total_entries"] == before


@pytest.mark.parametrize(
    ("dag_id", "first_task", "conf"),
    [
        (WHAT_IF, "scenario", {"group": "inventory", "partitons": {"stock": 9}}),
        (NIGHTLY, "ingest", {"stratgies": "sticky"}),
    ],
)
def test_an_unknown_conf_key_fails_the_first_task_naming_it(
    server, scheduled_run, lake, listeners, dag_id, first_task, conf
):
    """Airflow 3.3 accepts conf keys no Param declares (SerializedParamsDict.deep_merge adds them unvalidated;
    apache/airflow#29018), so the trigger succeeds and the DAG's first task refuses the key before any work."""
    (unknown,) = set(conf) - {"group"}
    response = _trigger(server, dag_id, conf)
    assert response.status_code == 200, response.text
    run = _wait_for_run(server, dag_id, response.json()["dag_run_id"], listeners)
    assert run["state"] == "failed"
    task_path = f"/api/v2/dags/{dag_id}/dagRuns/{run['dag_run_id']}/taskInstances/{first_task}"
    assert server.api.get(task_path).raise_for_status().json()["state"] == "failed"
    assert f"unknown parameter(s) {unknown}" in server.task_log(dag_id, run["dag_run_id"], first_task)
    assert _generations(lake, run["dag_run_id"]) == []


def _ipv4(address: str) -> str:
    """The IPv4 address behind an IPv4-mapped IPv6 one (a JVM listening on 127.0.0.1 shows ::ffff:127.0.0.1)."""
    ip = ipaddress.ip_address(address)
    return str(getattr(ip, "ipv4_mapped", None) or ip)


def test_nothing_listens_beyond_loopback(server, listeners):
    seen = listeners | server.listening()
    assert seen
    assert {_ipv4(address) for address, _ in seen} == {LOOPBACK}
