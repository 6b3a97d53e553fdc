"""A lake in an S3 bucket (an S3-compatible server on 127.0.0.1): nightly runs from several processes at once, history
through Spark SQL, leases instead of file locks, and one line for every way reaching the bucket fails."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from jobs.io.lake import Lake
from jobs.io.lake_locks import ObjectLease
from jobs.io.lake_store import S3Settings, parse_store
from jobs.io.s3_server import S3Server
from planner.errors import InputError

pytestmark = pytest.mark.spark

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "jobs" / "demo" / "data"


def rebalance(*args: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "jobs.cli", *args], env=env, cwd=cwd, capture_output=True, text=True, timeout=600
    )


def cli_env(s3: S3Server, reports: Path, **overrides: str) -> dict[str, str]:
    """This environment without REBALANCE_ or AWS_ settings, pointed at the server (local Spark, reports in tmp)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("REBALANCE_", "AWS_", "SPARK_", "PYSPARK_"))}
    return env | s3.env() | {"REBALANCE_SPARK_MASTER": "local[2]", "REBALANCE_REPORTS": str(reports)} | overrides


def one_line(done: subprocess.CompletedProcess[str]) -> str:
    """The error line of a failed command: exit 2 and exactly one line on stderr besides the JVM's start-up notes."""
    assert done.returncode == 2, done.stderr[-3000:]
    lines = [line for line in done.stderr.splitlines() if line.startswith("rebalance ")]
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr[-3000:]
    return lines[0]


def test_store_parses_roots_and_refuses_other_schemes(tmp_path: Path) -> None:
    env = {"AWS_REGION": "eu-west-1", "AWS_ENDPOINT_URL": "http://127.0.0.1:9", "AWS_ACCESS_KEY_ID": "id"}
    store = parse_store("s3a://bucket/deep/lake/", env)
    assert (store.bucket, store.prefix, store.root, store.local) == (
        "bucket",
        "deep/lake",
        "s3://bucket/deep/lake",
        None,
    )
    assert store.spark_uri("plans") == "s3a://bucket/deep/lake/plans"
    assert store.delta_options()["conditional_put"] == "etag" and store.delta_options()["AWS_ALLOW_HTTP"] == "true"
    assert parse_store(f"file://{tmp_path}").local == tmp_path
    assert parse_store(tmp_path / "lake").local == tmp_path / "lake"
    for bad, reason in [
        ("gs://bucket/lake", "scheme 'gs' is not supported"),
        ("abfss://c@account.dfs.core.windows.net/lake", "scheme 'abfss' is not supported"),
        ("hdfs://namenode/lake", "scheme 'hdfs' is not supported"),
        ("s3:///lake", "expected s3://bucket/prefix"),
        ("s3://bucket/a//b", "expected s3://bucket/prefix"),
    ]:
        with pytest.raises(InputError, match=reason):
            parse_store(bad)
    # The secret never shows in the settings' text.
    assert "hunter2" not in repr(S3Settings(access_key="id", secret_key="hunter2"))


def test_lake_settings_from_an_airflow_connection(monkeypatch: pytest.MonkeyPatch) -> None:
    connection = {
        "conn_type": "aws",
        "login": "conn-key",
        "password": "conn-secret",
        "extra": {"region_name": "eu-central-1", "endpoint_url": "http://127.0.0.1:9"},
    }
    monkeypatch.setenv("AIRFLOW_CONN_PLANNER_LAKE", json.dumps(connection))
    settings = S3Settings.from_env({"REBALANCE_LAKE_CONN_ID": "planner_lake", "AWS_REGION": "us-west-2"})
    assert (settings.access_key, settings.secret_key) == ("conn-key", "conn-secret")
    assert (settings.region, settings.endpoint) == ("eu-central-1", "http://127.0.0.1:9")
    with pytest.raises(InputError, match="'nowhere' .REBALANCE_LAKE_CONN_ID. is not defined"):
        S3Settings.from_env({"REBALANCE_LAKE_CONN_ID": "nowhere"})


def test_an_unsupported_scheme_is_one_line_and_writes_nothing(s3: S3Server, tmp_path: Path) -> None:
    done = rebalance(
        "run", "--snapshots", str(DEMO), "--lake", "gs://bucket/lake", env=cli_env(s3, tmp_path), cwd=tmp_path
    )
    assert "lake gs://bucket/lake: scheme 'gs' is not supported" in one_line(done)
    assert list(tmp_path.iterdir()) == []  # no folder named `gs:`


def test_missing_bucket_wrong_credentials_and_no_server_are_one_line_each(s3: S3Server, tmp_path: Path) -> None:
    bucket = s3.bucket()
    run = ("run", "--snapshots", str(DEMO), "--lake")
    missing = rebalance(*run, "s3://no-such-bucket/lake", env=cli_env(s3, tmp_path), cwd=tmp_path)
    assert f"bucket 'no-such-bucket' does not exist at {s3.endpoint}" in one_line(missing)
    for wrong in ({"AWS_SECRET_ACCESS_KEY": "not-the-secret"}, {"AWS_ACCESS_KEY_ID": "AKIANOBODY"}):
        refused = rebalance(*run, f"s3://{bucket}/lake", env=cli_env(s3, tmp_path, **wrong), cwd=tmp_path)
        line = one_line(refused)
        assert "the credentials were refused" in line and s3.secret_key not in refused.stderr + refused.stdout
    down = rebalance(
        *run, f"s3://{bucket}/lake", env=cli_env(s3, tmp_path, AWS_ENDPOINT_URL="http://127.0.0.1:9"), cwd=tmp_path
    )
    assert "cannot reach the object store at http://127.0.0.1:9" in one_line(down)
    assert s3.client().list_objects_v2(Bucket=bucket).get("KeyCount", 0) == 0  # nothing was written


@pytest.mark.slow
def test_two_concurrent_runs_share_the_bucket_and_history_travels_in_time(s3: S3Server, tmp_path: Path) -> None:
    lake_uri = f"s3://{s3.bucket()}/lake"
    env = cli_env(s3, tmp_path / "reports")
    runs = [
        subprocess.Popen(
            [sys.executable, "-m", "jobs.cli", "run", "--snapshots", str(DEMO), "--lake", lake_uri, "--run-id", run_id],
            env=env,
            cwd=tmp_path,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for run_id in ("night-a", "night-b")
    ]
    outputs = [run.communicate(timeout=900) for run in runs]
    for run, (out, err) in zip(runs, outputs, strict=True):
        assert run.returncode == 0, err[-4000:]
        assert "5 groups ingested" in out

    with pytest.MonkeyPatch.context() as patch:
        for name, value in s3.env().items():
            patch.setenv(name, value)
        lake = Lake(lake_uri)
        generations = lake.read_arrow("generations").to_pylist()
    by_group: dict[str, list[dict[str, Any]]] = {}
    for row in generations:
        by_group.setdefault(row["group_id"], []).append(row)
    assert len(by_group) == 5
    for rows in by_group.values():  # each run got its own generation of each group: ids 1 and 2, no duplicate
        assert sorted(r["generation_id"] for r in rows) == [1, 2]
        assert sorted(r["run_id"] for r in rows) == ["night-a", "night-b"]
        assert sorted(r["status"] for r in rows) == ["approved", "superseded"]  # the newer plan supersedes
    plans = lake.read_arrow("plans", columns=["group_id", "generation_id"]).to_pylist()
    assert {(r["group_id"], r["generation_id"]) for r in plans} == {(g, i) for g in by_group for i in (1, 2)}
    # No lease is left behind: both runs released the lake lock and their run locks.
    keys = [o["Key"] for o in s3.client().list_objects_v2(Bucket=lake.store.bucket).get("Contents", [])]
    assert not [k for k in keys if k.endswith(".lock")]
    assert "lake/metrics/rebalance.prom" in keys and not (tmp_path / "lake").exists()

    # History through Spark SQL on the bucket: who wrote, and the generations as of the first version.
    sql = ("sql", "--lake", lake_uri)
    statements = [
        "DESCRIBE HISTORY generations",
        "SELECT count(*) AS n FROM generations VERSION AS OF 1",
        "SELECT count(*) AS n FROM generations",
    ]
    answered = rebalance(*sql, *statements, env=env, cwd=tmp_path)  # in turn, one Spark session
    assert answered.returncode == 0, answered.stderr[-3000:]
    history, first, now = answered.stdout.split("\n\n")
    assert "MERGE" in history and "delta-rs" in history
    assert first.split() == ["n", "5"] and now.split() == ["n", "10"]

    # Maintenance works on the bucket too (compaction, checkpoints, vacuum) and keeps every generation.
    maintained = rebalance("maintain", "--lake", lake_uri, env=env, cwd=tmp_path)
    assert maintained.returncode == 0, maintained.stderr[-3000:]
    assert "generations" in maintained.stdout
    after = rebalance(*sql, "SELECT count(*) AS n FROM generations", env=env, cwd=tmp_path)
    assert int(after.stdout.split()[-1]) == 10


def test_the_lake_lock_is_a_lease_other_processes_wait_for(s3: S3Server, tmp_path: Path) -> None:
    bucket = s3.bucket()
    holder = (
        "import sys, time\n"
        "from jobs.io.lake import Lake\n"
        "lake = Lake(sys.argv[1])\n"
        "with lake.lock():\n"
        "    print('held', flush=True)\n"
        "    time.sleep(2)\n"
        "    print('letting go', flush=True)\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")} | s3.env()
    process = subprocess.Popen(
        [sys.executable, "-c", holder, f"s3://{bucket}/lake"], env=env, cwd=ROOT, stdout=subprocess.PIPE, text=True
    )
    try:
        assert process.stdout is not None and process.stdout.readline().strip() == "held"
        client = s3.client()
        lease = ObjectLease(client, bucket, "lake/.lake.lock")
        assert not lease.acquire(blocking=False)
        assert lease.holder().startswith("pid ")
        lease.acquire()  # waits for the other process to let go
        try:
            assert process.stdout.readline().strip() == "letting go"  # written while it still held the lease
        finally:
            lease.release()
        assert process.wait(timeout=30) == 0
    finally:
        process.kill()
        process.wait(timeout=30)
    assert client.list_objects_v2(Bucket=bucket).get("KeyCount", 0) == 0


def test_a_lease_its_holder_stopped_renewing_is_broken_after_its_term(s3: S3Server) -> None:
    bucket, key = s3.bucket(), "lake/.lake.lock"
    client = s3.client()
    stale = json.dumps({"holder": "pid 1 (crashed)", "expires": time.time() - 1}).encode()
    client.put_object(Bucket=bucket, Key=key, Body=stale)
    lease = ObjectLease(client, bucket, key)
    assert lease.acquire(blocking=False)
    lease.release()
    # A live holder renews its lease: a waiter with a short term sees it extended, not broken.
    short = ObjectLease(client, bucket, key, term=5)
    assert short.acquire()
    other = ObjectLease(client, bucket, key, term=5)
    took = threading.Event()
    waiter = threading.Thread(target=lambda: other.acquire() and took.set(), daemon=True)
    waiter.start()
    time.sleep(7)  # more than a term: renewed meanwhile
    assert not took.is_set()
    short.release()
    waiter.join(timeout=10)
    assert took.is_set()
    other.release()
