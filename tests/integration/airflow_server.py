"""A real Airflow 3 deployment for tests: api-server, scheduler and dag-processor on 127.0.0.1, stopped by PID.

LocalExecutor on SQLite in a fresh AIRFLOW_HOME, this project's `dags/` folder, SimpleAuthManager with every
user an admin (Airflow docs: "Generate JWT token with simple auth manager", `GET /auth/token`). Nothing listens
beyond loopback: the api-server binds 127.0.0.1 and the scheduler's log server is skipped (`--skip-serve-logs`);
the api-server reads task logs from the shared home instead. No triggerer: the DAGs defer nothing.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import httpx
import psutil
from processes import stop_tree

from jobs.airflow.environment import SCHEDULER_IDLE_SLEEP
from jobs.io.loopback import free_port

REPO = Path(__file__).resolve().parents[2]
DAGS_FOLDER = REPO / "dags"
COMPONENTS = {
    "api-server": ["api-server", "-H", "127.0.0.1", "-p", "{port}", "--workers", "1"],
    "scheduler": ["scheduler", "--skip-serve-logs"],
    "dag-processor": ["dag-processor"],
}
T = TypeVar("T")


@dataclass(frozen=True)
class AirflowServer:
    """A running deployment: a REST client authenticated as admin, its home and its processes by component."""

    api: httpx.Client
    home: Path
    processes: Mapping[str, subprocess.Popen]

    def wait_for(self, what: str, probe: Callable[[], T | None], timeout: float, every: float = 1.0) -> T:
        """Poll `probe` until it returns something other than None; fail naming `what` on timeout or a dead process."""
        deadline = time.monotonic() + timeout
        while True:
            self.check_alive()
            if (value := probe()) is not None:
                return value
            if time.monotonic() > deadline:
                raise TimeoutError(f"Airflow: {what} not reached within {timeout:.0f} s")
            time.sleep(every)

    def check_alive(self) -> None:
        """Fail with the component's log tail if one of the processes has exited."""
        for name, proc in self.processes.items():
            if proc.poll() is not None:
                raise RuntimeError(f"Airflow {name} exited with {proc.returncode}:\n{_tail(self.home / f'{name}.log')}")

    def task_log(self, dag_id: str, run_id: str, task_id: str, attempt: int = 1) -> str:
        """One attempt's log of a task instance, through the REST API."""
        path = f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances/{task_id}/logs/{attempt}"
        return self.api.get(path, headers={"Accept": "application/json"}).raise_for_status().text

    def failures(self, run: Mapping[str, Any]) -> str:
        """The run's failed tasks with the tail of each one's log, and what the scheduler logged about the run: the
        message of a failed success assertion (a task the scheduler failed has nothing in its own log)."""
        dag_id, run_id = run["dag_id"], run["dag_run_id"]
        tasks = self.api.get(f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances").raise_for_status().json()
        failed = [t for t in tasks["task_instances"] if t["state"] == "failed"]
        logs = [
            f"{t['task_id']}: {self.task_log(dag_id, run_id, t['task_id'], max(t['try_number'], 1))[-3000:]}"
            for t in failed
        ]
        scheduler = [line for line in _lines(self.home / "scheduler.log") if run_id in line]
        return "\n".join([*logs, "scheduler:", *scheduler[-20:]]) if failed else str(run["state"])

    def worker_exit_seen(self, dag_id: str, run_id: str, task_id: str) -> bool | None:
        """Whether the scheduler has processed the exit of the task's worker process (True), else None.

        A task parked in `awaiting_input` must not be answered before then: Airflow 3.3's LocalExecutor would take
        the parked worker's late exit for the resumed try's (same key), and the scheduler fails the resumed task
        as "killed externally", with nothing in its log.
        """
        wanted = f"dag_id={dag_id}, task_id={task_id}, run_id={run_id},"
        lines = _lines(self.home / "scheduler.log")
        return any("TaskInstance Finished" in line and wanted in line for line in lines) or None

    def listening(self) -> set[tuple[str, int]]:
        """The (address, port) pairs on which any process of the deployment (children included) listens."""
        found = set()
        for proc in self.processes.values():
            try:
                tree = [psutil.Process(proc.pid), *psutil.Process(proc.pid).children(recursive=True)]
            except psutil.NoSuchProcess:
                continue
            for member in tree:
                try:
                    conns = member.net_connections(kind="inet")
                except (psutil.NoSuchProcess, psutil.AccessDenied):
                    continue
                found |= {(c.laddr.ip, c.laddr.port) for c in conns if c.status == psutil.CONN_LISTEN}
        return found


def airflow_env(home: Path, port: int, extra: Mapping[str, str] = {}) -> dict[str, str]:
    """The environment every component shares: one home, one database, one JWT secret, loopback only."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW")}
    env.update(
        {
            "AIRFLOW_HOME": str(home),
            "AIRFLOW__CORE__DAGS_FOLDER": str(DAGS_FOLDER),
            "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home / 'airflow.db'}",
            "AIRFLOW__CORE__PARALLELISM": "2",
            "AIRFLOW__CORE__MAX_ACTIVE_TASKS_PER_DAG": "2",
            "AIRFLOW__SCHEDULER__SCHEDULER_IDLE_SLEEP_TIME": SCHEDULER_IDLE_SLEEP,
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "False",
            "AIRFLOW__CORE__AUTH_MANAGER": "airflow.api_fastapi.auth.managers.simple.simple_auth_manager."
            "SimpleAuthManager",
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "True",
            "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"http://127.0.0.1:{port}/execution/",
            "AIRFLOW__API__HOST": "127.0.0.1",
            "AIRFLOW__API__PORT": str(port),
            "AIRFLOW__API__BASE_URL": f"http://127.0.0.1:{port}",
            "AIRFLOW__API_AUTH__JWT_SECRET": secrets.token_urlsafe(64),
            "AIRFLOW__LOGGING__LOGGING_LEVEL": "WARNING",
            # The scheduler's account of each task exit ("TaskInstance Finished"): `worker_exit_seen` reads it.
            "AIRFLOW__LOGGING__NAMESPACE_LEVELS": "airflow.jobs.scheduler_job_runner=INFO",
            "NO_PROXY": "127.0.0.1,localhost",
            "no_proxy": "127.0.0.1,localhost",
            "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
            "PYSPARK_PYTHON": sys.executable,
            "SPARK_LOCAL_IP": "127.0.0.1",
            "GX_ANALYTICS_ENABLED": "false",
        }
    )
    env.update(extra)
    return env


def _lines(log: Path) -> list[str]:
    """A component's log as lines, none before it exists."""
    return log.read_text(errors="replace").splitlines() if log.exists() else []


def _tail(log: Path, lines: int = 40) -> str:
    return "\n".join(_lines(log)[-lines:]) or "(no log)"


def _start(
    name: str, port: int, env: Mapping[str, str], home: Path, command: Sequence[str] | None = None
) -> subprocess.Popen:
    """Start one component in its own process group (so it and its children stop together), logging to home;
    `command` (the arguments after `airflow`, `{port}` filled in) replaces the component's default."""
    args = [a.format(port=port) for a in (command or COMPONENTS[name])]
    with open(home / f"{name}.log", "ab") as log:
        return subprocess.Popen(
            [sys.executable, "-m", "airflow", *args],
            env=dict(env),
            cwd=home,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def _responds(api: httpx.Client) -> bool | None:
    try:
        return api.get("/api/v2/monitor/health").status_code == 200 or None
    except httpx.TransportError:
        return None


def _health(api: httpx.Client) -> dict[str, Any] | None:
    """Airflow's health document once the metadatabase, scheduler and dag-processor all report healthy."""
    try:
        response = api.get("/api/v2/monitor/health")
    except httpx.TransportError:
        return None
    if response.status_code != 200:
        return None
    health = response.json()
    parts = ("metadatabase", "scheduler", "dag_processor")
    return health if all((health.get(p) or {}).get("status") == "healthy" for p in parts) else None


def _login(api: httpx.Client, env: Mapping[str, str], home: Path) -> str:
    """An admin's token: any user's when every user is an admin, else admin's password from the file the api-server
    generated (SimpleAuthManager: `[core] simple_auth_manager_passwords_file`)."""
    if env.get("AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS") == "True":
        return api.get("/auth/token").raise_for_status().json()["access_token"]
    file = (
        env.get("AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE")
        or home / "simple_auth_manager_passwords.json.generated"
    )
    password = json.loads(Path(file).read_text())["admin"]
    login = api.post("/auth/token", json={"username": "admin", "password": password})
    return login.raise_for_status().json()["access_token"]


@contextmanager
def airflow_server(
    home: Path,
    env: Mapping[str, str] = {},
    *,
    timeout: float = 240.0,
    commands: Mapping[str, Sequence[str]] = {},
    component_env: Mapping[str, Mapping[str, str]] = {},
) -> Iterator[AirflowServer]:
    """Migrate a metadatabase in `home`, start the three components with `env` added, wait until all are healthy.

    `commands` replaces a component's arguments (after `airflow`; `{port}` is the api-server's port) and
    `component_env` adds variables to one component only, as a container's own `environment` would.
    Every wait is bounded by `timeout`; on exit (a failing test included) every process group is stopped by PID.
    """
    home.mkdir(parents=True, exist_ok=True)
    port = free_port()
    full_env = airflow_env(home, port, env)
    migrate = subprocess.run(
        [sys.executable, "-m", "airflow", "db", "migrate"],
        env=full_env,
        cwd=home,
        timeout=timeout,
        capture_output=True,
        text=True,
    )
    if migrate.returncode != 0:
        raise RuntimeError(f"airflow db migrate exited with {migrate.returncode}:\n{migrate.stderr[-4000:]}")
    with ExitStack() as stack:
        processes: dict[str, subprocess.Popen] = {}
        api = stack.enter_context(httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30.0, trust_env=False))
        server = AirflowServer(api=api, home=home, processes=processes)
        # The api-server first: tasks report to its execution API, and the first one may be queued within seconds.
        # Stopped in reverse start order: the scheduler (and the tasks it forked) before the api-server.
        for name in COMPONENTS:
            own_env = {**full_env, **component_env.get(name, {})}
            processes[name] = _start(name, port, own_env, home, commands.get(name))
            stack.callback(stop_tree, processes[name])
            if name == "api-server":
                server.wait_for("the api-server", lambda: _responds(api), timeout)
        server.wait_for("a healthy api-server, scheduler and dag-processor", lambda: _health(api), timeout)
        api.headers["Authorization"] = (
            f"Bearer {_login(api, {**full_env, **component_env.get('api-server', {})}, home)}"
        )
        yield server
