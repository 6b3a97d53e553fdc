"""The DAGs under the real scheduler: where a run's time goes, task by task.

Starts an Airflow 3 deployment as the tests do (api-server, scheduler and dag-processor on 127.0.0.1, LocalExecutor,
SQLite, `tests/integration/airflow_server.py`) on the demo snapshot files, then triggers through the REST API:
(1) the nightly DAG `--runs` times, each from trigger to success, after the run Airflow schedules when the DAG is
unpaused (its latest interval, `catchup=False`), which is timed apart; (2) the what-if DAG with approval on (payments,
+2 members, orders at 24 partitions), from trigger to its approval task awaiting the reviewer, then approved through
the API and run to success. Per task it prints min / median / max over the runs of the time between the task's
upstream ending (for the first task: the run being queued) and the task starting (the scheduler's loop and the
executor's process start) and of the task's own run (its process: imports, the step, its Spark session when it has
one). The load average is printed with every figure, and at the end each component's CPU while nothing runs.
`--idle-sleep S` sets the scheduler's `scheduler_idle_sleep_time` (the deployment's is
`jobs.airflow.environment.SCHEDULER_IDLE_SLEEP`; Airflow's default 1 s): a loop that found nothing to do sleeps that
long, so a task waits up to that for the loop that schedules it.
Run: `python bench/scheduler.py [--runs 3] [--spark-master local[2]] [--idle-sleep S]`.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "integration"))

import psutil  # noqa: E402
from airflow_server import AirflowServer, airflow_server  # noqa: E402
from pipeline import sample_tree  # noqa: E402

from jobs import pipeline  # noqa: E402
from jobs.airflow.environment import SCHEDULER_IDLE_SLEEP  # noqa: E402
from jobs.config import Config  # noqa: E402

DEMO = REPO / "jobs" / "demo" / "data"
NIGHTLY, WHAT_IF = "rebalance_nightly", "rebalance_what_if"
WHAT_IF_CONF = {"group": "payments", "add_members": 2, "partitions": {"orders": 24}, "approval": True}
TIMEOUT = 900.0


def at(stamp: str | None) -> float | None:
    """Seconds since the epoch of an API timestamp (None stays None)."""
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp() if stamp else None


def dag_parsed(server: AirflowServer, dag_id: str) -> bool | None:
    return server.api.get(f"/api/v2/dags/{dag_id}").status_code == 200 or None


def trigger(server: AirflowServer, dag_id: str, conf: Mapping[str, Any]) -> str:
    """A manual run of `dag_id` with `conf`; its run id."""
    response = server.api.post(f"/api/v2/dags/{dag_id}/dagRuns", json={"logical_date": None, "conf": dict(conf)})
    return str(response.raise_for_status().json()["dag_run_id"])


def run_of(server: AirflowServer, dag_id: str, run_id: str) -> dict[str, Any]:
    return dict(server.api.get(f"/api/v2/dags/{dag_id}/dagRuns/{run_id}").raise_for_status().json())


def finished(server: AirflowServer, dag_id: str, run_id: str) -> dict[str, Any]:
    """Wait for the run's end; fail naming its failed tasks."""

    def ended() -> dict[str, Any] | None:
        run = run_of(server, dag_id, run_id)
        return run if run["state"] in ("success", "failed") else None

    run = server.wait_for(f"the end of {dag_id} run {run_id}", ended, TIMEOUT, every=0.2)
    if run["state"] != "success":
        raise SystemExit(f"{dag_id} run {run_id} failed:\n{server.failures(run)}")
    return run


def task_times(server: AirflowServer, dag_id: str, run: Mapping[str, Any]) -> dict[str, tuple[float, float]]:
    """Per task that succeeded: (seconds from its upstream's end, or the run's queueing, to its start; its run)."""
    path = f"/api/v2/dags/{dag_id}/dagRuns/{run['dag_run_id']}/taskInstances"
    listed = server.api.get(path).raise_for_status().json()["task_instances"]
    tasks = [t for t in listed if t["start_date"] and t["state"] == "success"]  # not a skipped approval
    structure = server.api.get(f"/api/v2/dags/{dag_id}/tasks").raise_for_status().json()["tasks"]
    upstream = {t["task_id"]: t.get("downstream_task_ids", []) for t in structure}
    parents: dict[str, list[str]] = {}
    for task_id, downstream in upstream.items():
        for child in downstream:
            parents.setdefault(child, []).append(task_id)
    # A skipped upstream (the nightly's approval tasks when no approval is asked) ends too: its end counts.
    ended = {t["task_id"]: at(t["end_date"]) for t in listed if t["end_date"]}
    queued = at(run["queued_at"]) or 0.0
    times = {}
    for t in tasks:
        start, end = at(t["start_date"]), at(t["end_date"])
        if start is None or end is None:
            continue
        before = [e for p in parents.get(t["task_id"], []) if (e := ended.get(p)) is not None]
        times[t["task_id"]] = (start - max(before, default=queued), end - start)
    return times


def order_of(server: AirflowServer, dag_id: str) -> list[str]:
    """The DAG's task ids in dependency order (ties by name)."""
    tasks = server.api.get(f"/api/v2/dags/{dag_id}/tasks").raise_for_status().json()["tasks"]
    parents: dict[str, set[str]] = {t["task_id"]: set() for t in tasks}
    for t in tasks:
        for child in t.get("downstream_task_ids", []):
            parents[child].add(t["task_id"])
    ordered: list[str] = []
    while len(ordered) < len(parents):
        ordered.append(min(t for t, p in parents.items() if t not in ordered and p <= set(ordered)))
    return ordered


def spread(values: Sequence[float]) -> str:
    return f"{min(values):5.1f} / {statistics.median(values):5.1f} / {max(values):5.1f}"


def table(title: str, order: Sequence[str], runs: Sequence[dict[str, tuple[float, float]]]) -> None:
    """Min / median / max per task over the runs of its wait and its run."""
    print(f"\n{title}: per task, seconds, min / median / max of {len(runs)} run(s)")
    print(f"  {'task':<16} {'wait (scheduling)':>22}  {'run (process)':>22}")
    for task_id in order:
        seen = [r[task_id] for r in runs if task_id in r]
        if seen:
            print(f"  {task_id:<16} {spread([w for w, _ in seen]):>22}  {spread([d for _, d in seen]):>22}")


def scheduled_run(server: AirflowServer) -> dict[str, Any] | None:
    """The nightly DAG's scheduled run: unpausing a DAG with `catchup=False` runs its latest interval at once."""
    listed = server.api.get(f"/api/v2/dags/{NIGHTLY}/dagRuns").raise_for_status().json()["dag_runs"]
    return next((r for r in listed if r["run_type"] == "scheduled"), None)


def nightly(server: AirflowServer, runs: int) -> None:
    # The run of the latest interval comes first; a run triggered while it runs would queue behind it
    # (max_active_runs=1) and count its time as its own: it is timed apart.
    first = server.wait_for("the nightly DAG's scheduled run", partial(scheduled_run, server), 120.0)
    first = finished(server, NIGHTLY, first["dag_run_id"])
    wall = (at(first["end_date"]) or 0.0) - (at(first["queued_at"]) or 0.0)
    print(f"{NIGHTLY}: its scheduled run on unpause (the latest interval), queued -> success {wall:5.1f} s", flush=True)
    walls, per_task = [], []
    for _ in range(runs):
        run = finished(server, NIGHTLY, trigger(server, NIGHTLY, {}))
        walls.append((at(run["end_date"]) or 0.0) - (at(run["queued_at"]) or 0.0))
        per_task.append(task_times(server, NIGHTLY, run))
        print(f"{NIGHTLY}: queued -> success {walls[-1]:5.1f} s (load {os.getloadavg()[0]:.1f})", flush=True)
    print(f"{NIGHTLY}, demo fleet: {spread(walls)} s (min / median / max, target < 30 s)")
    table(NIGHTLY, order_of(server, NIGHTLY), per_task)


def what_if(server: AirflowServer, runs: int) -> None:
    asked, per_task = [], []
    for _ in range(runs):
        run_id, started = trigger(server, WHAT_IF, WHAT_IF_CONF), time.monotonic()
        task = f"/api/v2/dags/{WHAT_IF}/dagRuns/{run_id}/taskInstances/approval"

        def awaiting(task: str = task) -> bool | None:
            state = server.api.get(task).raise_for_status().json()["state"]
            if state in ("failed", "upstream_failed", "skipped"):
                raise SystemExit(f"the approval task ended {state}")
            return state == "awaiting_input" or None

        server.wait_for("the approval task awaiting input", awaiting, TIMEOUT, every=0.2)
        asked.append(time.monotonic() - started)
        print(f"{WHAT_IF}: trigger -> approval awaiting input {asked[-1]:5.1f} s (load {os.getloadavg()[0]:.1f})")
        # Answered once the scheduler has seen the parked worker exit (Airflow 3.3's LocalExecutor, see the README).
        parked = partial(server.worker_exit_seen, WHAT_IF, run_id, "approval")
        server.wait_for("the parked approval worker's exit", parked, 120.0)
        answer = {"chosen_options": ["Approve"], "params_input": {"comment": "bench"}}
        server.api.patch(f"{task}/-1/hitlDetails", json=answer).raise_for_status()
        per_task.append(task_times(server, WHAT_IF, finished(server, WHAT_IF, run_id)))
    print(f"{WHAT_IF}, trigger -> awaiting approval: {spread(asked)} s (min / median / max, target < 20 s)")
    table(f"{WHAT_IF} (approval waits for the reviewer: its run is not the DAG's)", order_of(server, WHAT_IF), per_task)


def idle_cpu(server: AirflowServer, seconds: float = 20.0) -> None:
    """Each component's CPU over `seconds` with nothing to run (its processes and their children), in cores."""

    def used() -> dict[str, float]:
        totals = {}
        for name, proc in server.processes.items():
            cpu: dict[int, float] = {}
            sample_tree(psutil.Process(proc.pid), cpu)
            totals[name] = sum(cpu.values())
        return totals

    before = used()
    time.sleep(seconds)
    after = used()
    shares = ", ".join(f"{name} {(after[name] - before[name]) / seconds:.3f}" for name in before)
    print(f"\nidle, CPU in cores over {seconds:.0f} s: {shares}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--spark-master", default="local[2]")
    parser.add_argument("--idle-sleep", type=float, help="[scheduler] scheduler_idle_sleep_time, seconds")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-scheduler-") as tmp:
        lake = Path(tmp) / "lake"
        # A first night, so the what-if has a snapshot of payments to start from.
        pipeline.run(Config(lake=str(lake), snapshots=str(DEMO)), "bench-first-night")
        env = {
            "REBALANCE_LAKE": str(lake),
            "REBALANCE_SNAPSHOTS": str(DEMO),
            "REBALANCE_NIGHTLY_SCHEDULE": "0 0 1 1 *",  # once a year: one scheduled run, on unpause
            "REBALANCE_SPARK_MASTER": args.spark_master,
            "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "True",
        }
        if args.idle_sleep is not None:
            env["AIRFLOW__SCHEDULER__SCHEDULER_IDLE_SLEEP_TIME"] = str(args.idle_sleep)
        with airflow_server(Path(tmp) / "airflow_home", env) as server:
            for dag_id in (NIGHTLY, WHAT_IF):
                parsed = partial(dag_parsed, server, dag_id)
                server.wait_for(f"{dag_id} parsed", parsed, 120.0)
                server.api.patch(f"/api/v2/dags/{dag_id}", json={"is_paused": False}).raise_for_status()
            nap = SCHEDULER_IDLE_SLEEP if args.idle_sleep is None else f"{args.idle_sleep:g}"
            print(
                f"{os.cpu_count()} cores, Spark {args.spark_master}, LocalExecutor (parallelism 2), demo fleet, "
                f"scheduler idle sleep {nap} s"
            )
            nightly(server, args.runs)
            what_if(server, args.runs)
            idle_cpu(server)


if __name__ == "__main__":
    main()
