"""Fixtures for running the pipeline on other Spark engines: a worker Python without the project, a standalone
cluster and a Spark Connect server on 127.0.0.1, the `rebalance` CLI in a subprocess, and lake rows to compare.
"""

from __future__ import annotations

import os
import random
import re
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable

from jobs.io.spark_servers import Cluster, Server, connect_server, standalone_cluster
from planner.partitioners import partition_key
from schemas import TABLES

ROOT = Path(__file__).resolve().parents[2]
DEMO_FILES = ROOT / "jobs" / "demo" / "data"
# What a Spark worker needs to run this project's executor code, and nothing else: pandas' and pyspark's own
# run-time imports (dateutil, six, py4j) come along because the install takes no dependencies.
WORKER_PACKAGES = ("numpy", "pandas", "pyarrow", "pyspark", "py4j", "python-dateutil", "six")
# Not on a worker: the project itself, and what only the driver uses.
DRIVER_ONLY = ("jobs", "planner", "deltalake")
# Columns that name the run or the clock rather than the result.
RUN_COLUMNS = {"run_id", "snapshot_id", "sample_id", "ingest_id"}
LOOPBACK_ADDRESSES = {"127.0.0.1", "::ffff:127.0.0.1", "::1"}


def build_worker_python(root: Path) -> Path:
    """A venv with the pinned NumPy, pandas, pyarrow and pyspark only (from pip's cache); returns its python."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True)
    python = root / "bin" / "python"
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps"]
        + ["-c", str(ROOT / "constraints.txt"), *WORKER_PACKAGES],
        check=True,
        env={**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"},
    )
    return python


def importable(python: Path, module: str, pythonpath: str = "") -> bool:
    """Whether `python` imports `module`, run isolated from this checkout (empty cwd, only `pythonpath` added)."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    done = subprocess.run(
        [str(python), "-c", f"import {module}"], cwd=python.parent, env=env, capture_output=True, text=True
    )
    return done.returncode == 0


@pytest.fixture(scope="session")
def worker_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The executors' Python: the pinned data packages and pyspark, without the project or deltalake."""
    python = build_worker_python(tmp_path_factory.mktemp("worker-venv"))
    for module in DRIVER_ONLY:
        assert not importable(python, module), f"{module} must not be importable on the worker"
    return python


@pytest.fixture(scope="session")
def standalone(tmp_path_factory: pytest.TempPathFactory, worker_python: Path) -> Iterator[Cluster]:
    """A standalone master and worker on 127.0.0.1 whose executors run `worker_python`."""
    with standalone_cluster(tmp_path_factory.mktemp("standalone-logs"), python=str(worker_python)) as cluster:
        yield cluster


@pytest.fixture(scope="session")
def connect(tmp_path_factory: pytest.TempPathFactory, worker_python: Path) -> Iterator[Server]:
    """A Spark Connect server on 127.0.0.1 (its own local[2] driver) whose Python UDFs run in `worker_python`."""
    with connect_server(tmp_path_factory.mktemp("connect-logs"), master="local[2]", python=str(worker_python)) as s:
        yield s


def engine_env(**spark: str) -> dict[str, str]:
    """This environment without Spark or REBALANCE settings, plus REBALANCE_SPARK_<NAME> for each keyword."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SPARK_", "PYSPARK_", "REBALANCE_"))}
    env.update({f"REBALANCE_SPARK_{name.upper()}": value for name, value in spark.items()})
    return env


def local_env() -> dict[str, str]:
    return engine_env(master="local[2]")


def standalone_env(cluster: Cluster, worker_python: Path) -> dict[str, str]:
    """The cluster's settings, with one core per executor: the worker's two cores run two executors."""
    return engine_env(
        master=cluster.master.url,
        python=str(worker_python),
        driver_host="127.0.0.1",
        driver_bind_address="127.0.0.1",
        conf="spark.executor.cores=1",
    )


def connect_env(server: Server) -> dict[str, str]:
    return engine_env(remote=server.url)


def rebalance(
    args: Sequence[str], env: Mapping[str, str], cwd: Path, listeners: Listeners | None = None
) -> subprocess.CompletedProcess[str]:
    """Run the `rebalance` CLI in a subprocess, its own process group (watched by `listeners`, driver JVM included)."""
    process = subprocess.Popen(
        [sys.executable, "-m", "jobs.cli", *args],
        env=dict(env),
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    if listeners is not None:
        listeners.watch(process.pid)
    out, err = process.communicate()
    return subprocess.CompletedProcess(process.args, process.returncode, out, err)


def lake_rows(
    lake: Path | str, names: Sequence[str] | None = None, storage_options: Mapping[str, str] | None = None
) -> dict[str, list[tuple[Any, ...]]]:
    """Every table's rows without run ids and timestamps, floats rounded to 9 digits, sorted: comparable across runs.

    `lake` is a directory or an s3:// URI (reached with `storage_options`)."""
    out = {}
    for name in names or list(TABLES):
        table = DeltaTable(f"{lake}/{name}", storage_options=dict(storage_options or {})).to_pyarrow_table()
        keep = [
            f.name
            for f in TABLES[name].schema
            if f.name not in RUN_COLUMNS and not pa.types.is_timestamp(f.type) and f.name in table.column_names
        ]
        rows = [tuple(_comparable(row[c]) for c in keep) for row in table.select(keep).to_pylist()]
        out[name] = sorted(rows, key=repr)
    return out


def _comparable(value: Any) -> Any:
    """Floats rounded (sums may add in another order on another engine), lists as tuples."""
    if isinstance(value, float):
        return round(value, 9)
    if isinstance(value, list):
        return tuple(_comparable(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((k, _comparable(v)) for k, v in value.items()))
    return value


def write_key_samples(path: Path, seed: int = 11) -> dict[str, int]:
    """Skewed key samples (hot keys, null keys, observed partitions by murmur2) for two topics; returns the counts."""
    counts = {"orders": 12, "refunds": 4}
    rng = random.Random(seed)
    rows: dict[str, list] = {"topic": [], "key": [], "partition": [], "value_size": []}
    for topic, n in (("orders", 6000), ("refunds", 1500)):
        for _ in range(n):
            r = rng.random()
            key = None if r < 0.02 else f"{topic}-{int(300 * r**3)}".encode()
            observed = partition_key("murmur2", key, counts[topic])
            rows["topic"].append(topic)
            rows["key"].append(key)
            rows["partition"].append(observed if observed >= 0 else rng.randrange(counts[topic]))
            rows["value_size"].append(rng.randrange(20, 400))
    table = pa.table(
        rows,
        schema=pa.schema(
            [("topic", pa.string()), ("key", pa.binary()), ("partition", pa.int32()), ("value_size", pa.int32())]
        ),
    )
    pq.write_table(table, path, row_group_size=1000)
    return counts


class Listeners:
    """Samples `ss -ltnp` while a block runs: the TCP listening addresses of the given process groups."""

    def __init__(self, groups: Sequence[int], interval: float = 0.5) -> None:
        self.groups = set(groups)
        self.interval = interval
        self.seen: set[tuple[int, str, int]] = set()  # (process group, address, port)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def watch(self, group: int) -> None:
        self.groups.add(group)

    def __enter__(self) -> Listeners:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.sample()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.sample()

    def sample(self) -> None:
        for address, port, pid in listening_sockets():
            group = process_group(pid)
            if group in self.groups:
                self.seen.add((group, address, port))

    def non_loopback(self) -> list[tuple[int, str, int]]:
        return sorted(s for s in self.seen if s[1] not in LOOPBACK_ADDRESSES)


SS_LINE = re.compile(r"^\S+\s+\d+\s+\d+\s+(?P<local>\S+):(?P<port>\d+)\s+\S+\s+users:\((?P<users>.*)\)\s*$")


def listening_sockets() -> list[tuple[str, int, int]]:
    """(address, port, pid) of every listening TCP socket, from `ss -ltnpH`."""
    if shutil.which("ss") is None:
        pytest.skip("ss (iproute2) is not installed")
    out = subprocess.run(["ss", "-ltnpH"], capture_output=True, text=True, check=True).stdout
    found = []
    for line in out.splitlines():
        match = SS_LINE.match(line.strip())
        if match:
            address = match["local"].strip("[]")
            for pid in re.findall(r"pid=(\d+)", match["users"]):
                found.append((address, int(match["port"]), int(pid)))
    return found


def process_group(pid: int) -> int | None:
    """The process group of `pid`, None when it has exited."""
    try:
        return os.getpgid(pid)
    except ProcessLookupError:
        return None


def group_alive(group: int) -> bool:
    """Whether any process of the group is left."""
    try:
        os.killpg(group, 0)
    except ProcessLookupError:
        return False
    return True
