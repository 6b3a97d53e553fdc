"""The compose stack's first night, without Docker: the Airflow containers' own commands, env files and environment
from docker/compose.yaml, their volumes as directories, against an empty Kafka broker (a new deployment's: no groups).

What maps where, each a stand-in for what Docker would provide:
- env files: written by docker/make_env.py from the examples, as docker/README.md says; each component gets the
  files its service lists, then the service's `environment`, then the image's ENV (docker/Dockerfile);
- volumes: `lake`, `airflow-logs` and `airflow-auth` are temporary directories (`/opt/airflow` is the home);
- service names: `kafka:9092` is the test broker on 127.0.0.1, `airflow-api-server:8080` the api-server's port;
- left out: Postgres (SQLite in the home instead: the database URL of airflow.env names a host that does not exist
  here) and the Spark cluster (the scheduler's tasks run Spark embedded, `local[1]`: no master or worker here).

The night is the real one: compose sets no schedule, so the nightly DAG's own (02:00 UTC) runs its latest past
boundary as soon as the DAG is parsed, unpaused by compose's setting, not by the test's.
"""

from __future__ import annotations

import importlib.util
import json
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import psutil
import pytest
import yaml
from airflow_server import REPO, AirflowServer, airflow_server
from deltalake import DeltaTable

pytestmark = [pytest.mark.slow, pytest.mark.airflow, pytest.mark.kafka]

DOCKER = REPO / "docker"
NIGHTLY = "rebalance_nightly"
# compose service -> the helper's component name
COMPONENTS = {
    "airflow-api-server": "api-server",
    "airflow-scheduler": "scheduler",
    "airflow-dag-processor": "dag-processor",
}


def compose() -> dict:
    return json.loads(json.dumps(yaml.safe_load((DOCKER / "compose.yaml").read_text())))


def image_env() -> dict[str, str]:
    """The Dockerfile's ENV instructions (continuation lines joined)."""
    text = (DOCKER / "Dockerfile").read_text().replace("\\\n", " ")
    lines = [line.split(None, 1)[1] for line in text.splitlines() if line.startswith("ENV ")]
    return dict(token.split("=", 1) for line in lines for token in shlex.split(line))


def make_env(directory: Path) -> dict[str, dict[str, str]]:
    """The env files as `python3 docker/make_env.py` writes them, each read as Docker's env_file does."""
    spec = importlib.util.spec_from_file_location("make_env", DOCKER / "make_env.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.main(["--output", str(directory)]) == 0
    return {name: dict(module.settings((directory / name).read_text())) for name in module.FILES}


class Host:
    """Container paths and service addresses of compose.yaml, translated to this machine."""

    def __init__(self, paths: dict[str, Path], addresses: dict[str, str]) -> None:
        self.paths = sorted(paths.items(), key=lambda item: -len(item[0]))  # the longest prefix first
        self.addresses = addresses

    def __call__(self, value: str) -> str:
        for service, address in self.addresses.items():
            value = value.replace(service, address)
        for inside, outside in self.paths:
            if value == inside or value.startswith(inside + "/"):
                return str(outside) + value[len(inside) :]
        return value


def service_env(c: dict, name: str, files: dict[str, dict[str, str]], host: Host) -> dict[str, str]:
    """A container's environment: the image's ENV, then its env files, then its own `environment` (Compose's order)."""
    service = c["services"][name]
    env = dict(image_env())
    for file in service.get("env_file") or []:
        env.update(files[file])
    env.update({k: str(v) for k, v in (service.get("environment") or {}).items()})
    return {k: host(v) for k, v in env.items()}


def command(c: dict, name: str) -> list[str]:
    """The service's command after `airflow`, listening on loopback (the helper's port) instead of every address."""
    argv = shlex.split(c["services"][name]["command"])
    assert argv[0] == "airflow"
    out = ["127.0.0.1" if a == "0.0.0.0" else a for a in argv[1:]]
    if "--port" in out:
        out[out.index("--port") + 1] = "{port}"
    return out


@pytest.fixture(scope="module")
def night(tmp_path_factory: pytest.TempPathFactory, kafka_broker) -> dict[str, Any]:
    c = compose()
    root = tmp_path_factory.mktemp("compose")
    (root / "env").mkdir()
    files = make_env(root / "env")
    home, lake, auth = root / "airflow", root / "volumes" / "lake", root / "volumes" / "airflow-auth"
    for directory in (home / "logs", lake, auth):
        directory.mkdir(parents=True)
    # Each named volume mounted by an Airflow service must have its directory here.
    volumes = {"/opt/airflow/logs": home / "logs", "/lake": lake, "/opt/airflow/auth": auth}
    for name in COMPONENTS:
        for mount in c["services"][name]["volumes"]:
            source, target = mount.split(":")[:2]
            assert source in c["volumes"] and target in volumes, f"{name}: volume {mount} not mapped"
    paths = {
        **volumes,
        "/opt/airflow": home,
        "/opt/rebalance/dags": REPO / "dags",
        "/opt/rebalance/delta-lib": REPO / ".cache" / "delta" / "lib",
        "/usr/local/bin/python": Path(sys.executable),
    }
    host = Host(paths, {"kafka:9092": kafka_broker.bootstrap})
    envs = {component: service_env(c, name, files, host) for name, component in COMPONENTS.items()}
    scheduler = envs["scheduler"]
    # Stand-ins for what is left out (module docstring): SQLite, embedded Spark; the helper sets the loopback URLs.
    api_url = urlsplit(scheduler.pop("AIRFLOW__CORE__EXECUTION_API_SERVER_URL"))
    assert (api_url.hostname, api_url.port, api_url.path) == ("airflow-api-server", 8080, "/execution/")
    for env in envs.values():
        assert urlsplit(env.pop("AIRFLOW__DATABASE__SQL_ALCHEMY_CONN")).hostname == "postgres"
        env.pop("AIRFLOW__CORE__EXECUTION_API_SERVER_URL", None)
        # Airflow's default unless compose says otherwise: the helper's own "False" must not hide a missing setting.
        env.setdefault("AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION", "True")
        # compose's users log in with the generated password; the helper's all-admins mode would hide its file.
        env["AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS"] = "False"
    assert scheduler.pop("REBALANCE_SPARK_MASTER") == "spark://spark-master:7077"
    scheduler["REBALANCE_SPARK_MASTER"] = "local[1]"
    del scheduler["REBALANCE_SPARK_CONF"]  # the driver's cluster addresses (airflow-scheduler, 0.0.0.0)
    assert scheduler["REBALANCE_KAFKA_BOOTSTRAP_SERVERS"] == kafka_broker.bootstrap  # from kafka.env
    assert scheduler["REBALANCE_LAKE"] == str(lake) and "REBALANCE_NIGHTLY_SCHEDULE" not in scheduler
    shared = {k: v for k, v in envs["scheduler"].items() if all(e.get(k) == v for e in envs.values())}
    own = {component: {k: v for k, v in env.items() if k not in shared} for component, env in envs.items()}
    commands = {component: command(c, name) for name, component in COMPONENTS.items()}
    with airflow_server(home, shared, commands=commands, component_env=own) as server:
        run = server.wait_for("the first scheduled night", lambda: _scheduled(server), 180.0)
        run = server.wait_for("its end", lambda: _finished(server, run["dag_run_id"]), 600.0, every=3.0)
        health = {name: _healthcheck(c, name, envs[component], server) for name, component in COMPONENTS.items()}
        yield {"server": server, "run": run, "lake": lake, "auth": auth, "health": health, "envs": envs}


def _scheduled(server: AirflowServer) -> dict[str, Any] | None:
    response = server.api.get(f"/api/v2/dags/{NIGHTLY}/dagRuns")
    if response.status_code == 404:  # not parsed yet
        return None
    runs = response.raise_for_status().json()["dag_runs"]
    return next((r for r in runs if r["run_type"] == "scheduled"), None)


def _finished(server: AirflowServer, run_id: str) -> dict[str, Any] | None:
    run = server.api.get(f"/api/v2/dags/{NIGHTLY}/dagRuns/{run_id}").raise_for_status().json()
    return run if run["state"] in ("success", "failed") else None


def _healthcheck(c: dict, name: str, env: dict[str, str], server: AirflowServer) -> int:
    """The service's own health check command, run as its container would (its environment, loopback port)."""
    test = c["services"][name]["healthcheck"]["test"]
    assert test[0] == "CMD"
    argv = [a.replace("localhost:8080", str(server.api.base_url.netloc.decode())) for a in test[1:]]
    if argv[0] == "python":
        argv[0] = sys.executable
    elif argv[0] == "airflow":
        argv = [sys.executable, "-m", "airflow", *argv[1:]]
    full = {**server_env(server), **env}
    return subprocess.run(argv, env=full, cwd=server.home, capture_output=True, timeout=180).returncode


def server_env(server: AirflowServer) -> dict[str, str]:
    """The environment the helper gave every component (its database, home, dags folder)."""
    return psutil.Process(server.processes["scheduler"].pid).environ()


def test_the_first_scheduled_night_on_an_empty_broker_succeeds_with_no_groups(night):
    server, run = night["server"], night["run"]
    assert run["state"] == "success", server.failures(run)
    path = f"/api/v2/dags/{NIGHTLY}/dagRuns/{run['dag_run_id']}/taskInstances/ingest/xcomEntries/return_value"
    ingested = server.api.get(path, params={"deserialize": "true", "stringify": "false"}).raise_for_status().json()
    assert ingested["value"] == {"rows": [], "text": "", "quarantined": [], "alarms": []}
    # The night's lake is in the volume's directory: its tables exist, and no generation (nothing was planned).
    assert (night["lake"] / "generations" / "_delta_log").is_dir()
    assert DeltaTable(str(night["lake"] / "generations")).to_pyarrow_table().num_rows == 0


def test_the_admin_password_is_in_the_auth_volume(night):
    passwords = json.loads((night["auth"] / "passwords.json").read_text())
    assert set(passwords) == {"admin"} and passwords["admin"]
    assert not (night["server"].home / "simple_auth_manager_passwords.json.generated").exists()


def test_each_airflow_service_passes_its_own_health_check(night):
    assert night["health"] == dict.fromkeys(COMPONENTS, 0)


def test_kafka_credentials_reach_only_the_scheduler(night):
    envs = night["envs"]
    assert "REBALANCE_KAFKA_BOOTSTRAP_SERVERS" in envs["scheduler"]
    assert "REBALANCE_KAFKA_BOOTSTRAP_SERVERS" not in envs["api-server"]
    assert "REBALANCE_KAFKA_BOOTSTRAP_SERVERS" not in envs["dag-processor"]
