"""Runs sharing one lake: `rebalance run` processes at once, and two runs given the same run id.

Every test starts real `rebalance run` processes (each its own Spark driver) on one lake and then reads every
table back: nothing lost, nothing duplicated, generation ids unique per group.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable

from jobs.io.delta_files import replace_generations, write_file
from jobs.io.lake import Lake, conform
from schemas import TABLES
from schemas.tables import PLAN_METRICS

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "jobs" / "demo" / "data"
GROUPS = ["audit-archiver", "clickstream-etl", "inventory", "payments", "shipping"]

pytestmark = pytest.mark.integration


def cli_env() -> dict[str, str]:
    """The environment of a `rebalance` process: one Spark core each, snapshot files only (no Kafka)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("REBALANCE_")}
    return {**env, "REBALANCE_SPARK_MASTER": "local[1]", "PYTHONUNBUFFERED": "1"}


def start_run(lake: Path, run_id: str) -> subprocess.Popen:
    """`rebalance run` on the demo files as its own process."""
    return subprocess.Popen(
        [sys.executable, "-m", "jobs.cli", "run", "--snapshots", str(DEMO), "--lake", str(lake), "--run-id", run_id]
        + ["--strategies", "range,sticky"],
        cwd=ROOT,
        env=cli_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def finish(proc: subprocess.Popen) -> tuple[str, str]:
    """Wait for a run; it must succeed (exit 0 also when a concurrent run's newer approval superseded its own)."""
    out, err = proc.communicate(timeout=1800)
    assert "Traceback" not in err
    assert proc.returncode == 0 and "rejected" not in out, err[-3000:]
    return out, err


def assert_keys_unique(lake: Lake) -> None:
    """No table holds two rows with the same key."""
    for name, spec in TABLES.items():
        table = lake.read_arrow(name)
        keys = Counter(zip(*(table.column(k).to_pylist() for k in spec.keys), strict=True))
        assert not [k for k, n in keys.items() if n > 1], f"{name}: duplicated keys"


def rows_of(lake: Lake, name: str, column: str, value: object) -> pa.Table:
    return lake.read_arrow(name, [(column, "=", value)])


@pytest.mark.slow
def test_three_runs_at_once_all_succeed_and_lose_nothing(tmp_path: Path) -> None:
    lake_dir = tmp_path / "lake"
    runs = ["conc-a", "conc-b", "conc-c"]
    procs = [start_run(lake_dir, run_id) for run_id in runs]
    outputs = [finish(p)[0] for p in procs]
    lake = Lake(lake_dir)
    assert_keys_unique(lake)
    for run_id, out in zip(runs, outputs, strict=True):
        assert f"run {run_id}: 5 groups ingested, 1 inputs quarantined" in out
        assert rows_of(lake, "quarantine", "run_id", run_id).num_rows == 1
        for name in ("snapshots", "topic_partitions", "partition_offsets"):
            assert (
                rows_of(lake, name, "snapshot_id", run_id).num_rows
                == rows_of(lake, name, "snapshot_id", runs[0]).num_rows
            )
    generations = lake.read_arrow("generations").to_pylist()
    assert len(generations) == 15
    for group in GROUPS:
        mine = [g for g in generations if g["group_id"] == group]
        assert sorted(g["generation_id"] for g in mine) == [1, 2, 3]  # one per run, never reused
        assert sorted(g["run_id"] for g in mine) == runs
    # The newest approval of each group stands; the two older ones were superseded by it.
    assert Counter(g["status"] for g in generations) == {"approved": 5, "superseded": 10}
    by_run = Counter(g["run_id"] for g in generations)
    assert by_run == {run_id: 5 for run_id in runs}
    plans = lake.read_arrow("plans")
    metrics = lake.read_arrow("plan_metrics")
    per_generation = Counter(
        zip(plans.column("group_id").to_pylist(), plans.column("generation_id").to_pylist(), strict=True)
    )
    for group in GROUPS:
        assert per_generation[(group, 1)] == per_generation[(group, 2)] == per_generation[(group, 3)] > 0
    assert metrics.num_rows == 15 * 2  # every generation, both strategies
    gated = lake.read_arrow("gate_results")
    checks = Counter(zip(gated.column("group_id").to_pylist(), gated.column("generation_id").to_pylist(), strict=True))
    assert len(checks) == 15 and len(set(checks.values())) == 1  # every generation gated, with the same suite


@pytest.mark.slow
def test_two_runs_with_one_run_id_run_one_after_the_other(tmp_path: Path) -> None:
    """The second waits (and says so) for the one holding the run id, then rewrites the same rows."""
    lake_dir = tmp_path / "lake"
    lake = Lake(lake_dir)
    holder = lake.run_lock("same")  # this test plays the first run, so the others must wait for it
    procs = [start_run(lake_dir, "same"), start_run(lake_dir, "same")]
    for proc in procs:
        line = ""
        while "is running in another process" not in line:
            line = proc.stderr.readline()
            assert line, "the run ended without waiting for the run id"
        assert "pid" in line and "'same'" in line
    assert not (lake_dir / "snapshots").exists() or rows_of(lake, "snapshots", "snapshot_id", "same").num_rows == 0
    holder.release()
    outputs = [finish(p)[0] for p in procs]
    assert_keys_unique(lake)
    generations = lake.read_arrow("generations").to_pylist()
    assert sorted((g["group_id"], g["generation_id"], g["status"]) for g in generations) == [
        (group, 1, "approved") for group in GROUPS
    ]
    for out in outputs:
        assert out.count("approved") == 5
        assert "superseded" not in out
    assert rows_of(lake, "quarantine", "run_id", "same").num_rows == 1


def hold_from_another_process(path: Path) -> bool:
    """Whether another process can take the flock on `path` right now (it tries without waiting)."""
    probe = (
        "import fcntl, os, sys\n"
        "fd = os.open(sys.argv[1], os.O_RDONLY)\n"
        "try:\n    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)\nexcept BlockingIOError:\n    sys.exit(1)\n"
    )
    return subprocess.run([sys.executable, "-c", probe, str(path)], check=False).returncode == 0


def test_the_lake_lock_is_reentrant_and_excludes_other_processes(tmp_path: Path) -> None:
    lake = Lake(tmp_path / "lake")
    lake.create_all()
    row = pa.Table.from_pylist([{"ingest_id": "i", "run_id": "r", "source": "s", "raw_payload": "{}", "error": "e"}])
    assert hold_from_another_process(lake.root)
    with lake.lock():
        assert not hold_from_another_process(lake.root)
        with lake.lock():
            lake.merge("quarantine", row)  # commits take the lock again inside a locked block
        assert not hold_from_another_process(lake.root)
    assert hold_from_another_process(lake.root)
    assert lake.read_arrow("quarantine").num_rows == 1


def test_a_run_id_is_held_until_its_last_holder_in_the_process_releases_it(tmp_path: Path) -> None:
    lake = Lake(tmp_path / "lake")
    first, second = lake.run_lock("r1"), lake.run_lock("r1")  # one process: shared, not a deadlock
    (path,) = (lake.local / ".runs").iterdir()
    assert f"pid {os.getpid()}" in path.read_text()
    first.release()
    assert not hold_from_another_process(path)
    second.release()
    assert hold_from_another_process(path)


# Another process holding the lake lock (as a concurrent run does while it commits) until its stdin gets a line.
HOLD = (
    "import fcntl, os, sys\n"
    "fd = os.open(sys.argv[1], os.O_RDONLY)\n"
    "fcntl.flock(fd, fcntl.LOCK_EX)\n"
    "print('held', flush=True)\n"
    "sys.stdin.readline()\n"
)


def test_replacing_generations_waits_while_another_process_holds_the_lake(tmp_path: Path) -> None:
    """The plan step's own Delta transaction is made under the lake lock, like every MERGE."""
    lake = Lake(tmp_path / "lake")
    lake.create_all()
    metrics = conform(PLAN_METRICS, pa.Table.from_pylist([{"generation_id": 1, "group_id": "g", "strategy": "range"}]))
    written = [write_file(lake, "plan_metrics", metrics)]
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(lake.root)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        replacing = threading.Thread(target=replace_generations, args=(lake, "plan_metrics", written, {"g": 1}))
        replacing.start()
        replacing.join(timeout=1.0)
        assert replacing.is_alive()  # waiting for the other process's turn
        assert DeltaTable(lake.path("plan_metrics")).version() == 0
    finally:
        holder.communicate("\n", timeout=30)
    replacing.join(timeout=30)
    assert not replacing.is_alive()
    assert lake.read_arrow("plan_metrics").num_rows == 1
