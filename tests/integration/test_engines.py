"""The pipeline on a standalone Spark cluster and over Spark Connect gives the rows local mode gives.

The cluster's and the Connect server's Python has the pinned data packages and pyspark only, so everything the
executors run must reach them in the code zip that `jobs.io.spark` ships. Every server binds 127.0.0.1 only.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from engines import (
    DEMO_FILES,
    Listeners,
    connect,  # noqa: F401 (fixture)
    connect_env,
    group_alive,
    importable,
    lake_rows,
    listening_sockets,
    local_env,
    process_group,
    rebalance,
    standalone,  # noqa: F401 (fixture)
    standalone_env,
    worker_python,  # noqa: F401 (fixture)
    write_key_samples,
)

from jobs.io.loopback import free_port
from jobs.io.s3_server import S3Server
from jobs.io.spark import SparkSettings, code_zip, get_spark, parse_conf, shipped_files
from jobs.io.spark_servers import STOP_TIMEOUT_S
from planner.errors import InputError, SourceError

RUN_TABLES = ("snapshots", "topic_partitions", "partition_offsets", "plans", "plan_metrics", "generations")
RUN_TABLES += ("gate_results", "quarantine")
SKEW_TABLES = ("key_skew", "key_skew_summary", "key_skew_hot_keys", "key_skew_fingerprint")


def test_settings_from_env_local_defaults_and_overrides() -> None:
    settings = SparkSettings.from_env({}, master="local[2]")
    assert settings.is_local and settings.conf == () and settings.remote == ""
    env = {
        "REBALANCE_SPARK_MASTER": "spark://10.0.0.5:7077",
        "REBALANCE_SPARK_CONF": "spark.executor.memory=2g, spark.sql.shuffle.partitions = 4",
        "REBALANCE_SPARK_PYTHON": "/opt/py/bin/python",
    }
    settings = SparkSettings.from_env(env)
    assert not settings.is_local
    assert settings.conf == (("spark.executor.memory", "2g"), ("spark.sql.shuffle.partitions", "4"))
    assert settings.python == "/opt/py/bin/python" and settings.driver_host == ""
    # An explicit master (CLI flag, Config) wins over the variable; a Connect remote wins over any master.
    assert SparkSettings.from_env(env, master="local[1]").master == "local[1]"
    assert not SparkSettings.from_env({"REBALANCE_SPARK_REMOTE": "sc://127.0.0.1:15002"}, master="local[1]").is_local


def test_conf_as_json_and_bad_conf_named() -> None:
    assert parse_conf('{"spark.a": "x,y", "spark.b": true, "spark.c": 4}') == (
        ("spark.a", "x,y"),
        ("spark.b", "true"),
        ("spark.c", "4"),
    )
    with pytest.raises(InputError, match=r"REBALANCE_SPARK_CONF: item 1 'spark\.b' is not key=value"):
        parse_conf("spark.a=1,spark.b")
    with pytest.raises(InputError, match="REBALANCE_SPARK_CONF: not a JSON object"):
        parse_conf("{spark.a: 1}")
    with pytest.raises(InputError, match=r"item 0 '\[\]' is not key=value"):
        parse_conf("[]")


def test_unreachable_or_malformed_connect_url_is_named_without_waiting() -> None:
    remote = f"sc://127.0.0.1:{free_port()}"
    with pytest.raises(SourceError, match=f"Spark Connect server {remote} is not reachable"):
        get_spark(SparkSettings(remote=remote))
    with pytest.raises(InputError, match="REBALANCE_SPARK_REMOTE: 'grpc://h:1' is not a Spark Connect URL"):
        get_spark(SparkSettings(remote="grpc://h:1"))


def test_code_zip_holds_executor_code_only_and_is_content_addressed(tmp_path: Path) -> None:
    first = code_zip(cache=tmp_path)
    assert code_zip(cache=tmp_path) == first and len(list(tmp_path.iterdir())) == 1
    names = zipfile.ZipFile(first).namelist()
    assert names == [name for name, _ in shipped_files()]
    assert {
        "planner/__init__.py",
        "schemas/snapshot.schema.json",
        "jobs/__init__.py",
        "jobs/kernels/key_skew.py",
    } <= set(names)
    assert not [n for n in names if n.startswith(("jobs/steps", "jobs/io")) or "__pycache__" in n]


@pytest.mark.slow
def test_kernels_import_on_the_worker_from_the_zip_alone(worker_python: Path) -> None:  # noqa: F811
    shipped = str(code_zip())
    kernels = [n[: -len(".py")].replace("/", ".") for n, _ in shipped_files() if n.startswith("jobs/kernels/")]
    for module in [*kernels, "planner", "schemas"]:
        assert importable(worker_python, module, shipped), f"{module} does not import from the shipped zip"
    assert not importable(worker_python, "jobs.steps", shipped)


@pytest.fixture(scope="session")
def local_run(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """`rebalance run` on the demo files in local mode: the rows the other engines must reproduce."""
    printed: list[str] = []
    rows = _run(tmp_path_factory.mktemp("local-run"), local_env(), printed=printed)
    [split] = [line for line in printed if line.startswith("plan: ")]
    assert split == "plan: 5 groups planned in this process (a small run)"  # a local master: no Python workers
    return rows


@pytest.fixture(scope="session")
def local_skew(tmp_path_factory: pytest.TempPathFactory) -> dict:
    return _skew(tmp_path_factory.mktemp("local-skew"), local_env())


def _run(
    work: Path,
    env: dict[str, str],
    listeners: Listeners | None = None,
    s3: S3Server | None = None,
    printed: list[str] | None = None,
) -> dict:
    """`rebalance run` on the demo files into a lake in `work`, or into a new bucket of `s3`; the lake's rows (and
    the lines it printed, appended to `printed`)."""
    lake = f"s3://{s3.bucket()}/lake" if s3 else str(work / "lake")
    env = env | (s3.env() if s3 else {})
    args = ["run", "--snapshots", str(DEMO_FILES), "--lake", lake, "--run-id", f"engines-{work.name}"]
    done = rebalance(args, env, work, listeners)
    assert done.returncode == 0, done.stderr[-4000:]
    assert "5 groups ingested, 1 inputs quarantined" in done.stdout
    if printed is not None:
        printed += done.stdout.splitlines()
    options = {"AWS_ENDPOINT_URL": s3.endpoint, "AWS_ALLOW_HTTP": "true"} | s3.env() if s3 else {}
    rows = lake_rows(lake, RUN_TABLES, options)
    assert len(rows["plans"]) > 0 and len(rows["gate_results"]) > 0
    return rows


def _skew(work: Path, env: dict[str, str], listeners: Listeners | None = None) -> dict:
    counts = write_key_samples(work / "samples.parquet")
    args = ["skew", "--input", str(work / "samples.parquet"), "--lake", str(work / "lake")]
    args += ["--partitions", ",".join(f"{t}={n}" for t, n in counts.items()), "--what-if", "6,16", "--run-id", "s"]
    done = rebalance(args, env, work, listeners)
    assert done.returncode == 0, done.stderr[-4000:]
    rows = lake_rows(work / "lake", SKEW_TABLES)
    assert len(rows["key_skew"]) == 12 + 6 + 16 + 4 + 6 + 16
    return rows


@pytest.mark.slow
def test_run_on_a_standalone_cluster_into_an_s3_lake_matches_local(
    standalone,  # noqa: F811
    worker_python: Path,  # noqa: F811
    local_run: dict,
    s3: S3Server,
    tmp_path: Path,
) -> None:
    # The lake is in a bucket: the executors write the plans' Parquet files there, the driver commits them.
    printed: list[str] = []
    with Listeners([standalone.master.process.pid, standalone.worker.process.pid]) as listeners:
        rows = _run(tmp_path, standalone_env(standalone, worker_python), listeners, s3, printed)
    assert rows == local_run
    # The plan step names its task split: the five groups' tasks ran on both executors, each with a share.
    [split] = [line for line in printed if line.startswith("plan: ")]
    assert re.fullmatch(r"plan: 5 groups in 5 tasks on 2 executors \(0 on 127\.0\.0\.1: \d tasks?, .*\)", split)
    assert re.search(r"; 1 on 127\.0\.0\.1: \d tasks?, [\d.]+ s\)$", split), split
    groups = {g for g, _, _ in listeners.seen}
    assert len(groups) == 3, "master, worker and driver each listen"  # the sampling can fail: it saw all three
    assert listeners.non_loopback() == []


@pytest.mark.slow
def test_skew_on_a_standalone_cluster_matches_local(
    standalone,  # noqa: F811
    worker_python: Path,  # noqa: F811
    local_skew: dict,
    tmp_path: Path,
) -> None:
    assert _skew(tmp_path, standalone_env(standalone, worker_python)) == local_skew


@pytest.mark.slow
def test_run_over_connect_matches_local(connect, local_run: dict, tmp_path: Path) -> None:  # noqa: F811
    with Listeners([connect.process.pid]) as listeners:
        rows = _run(tmp_path, connect_env(connect), listeners)
    assert rows == local_run
    assert listeners.seen and listeners.non_loopback() == []
    # The client started no JVM: nothing in its process group ever listened.
    assert {g for g, _, _ in listeners.seen} == {connect.process.pid}


@pytest.mark.slow
def test_run_over_connect_into_an_s3_lake_matches_local(
    connect,  # noqa: F811
    local_run: dict,
    s3: S3Server,
    tmp_path: Path,
) -> None:
    # The server shares no path with the client: the lake is in a bucket both reach (the server is given the
    # endpoint and keys by the client's session, as a server on another host would be).
    assert _run(tmp_path, connect_env(connect), s3=s3) == local_run


@pytest.mark.slow
def test_skew_over_connect_matches_local(connect, local_skew: dict, tmp_path: Path) -> None:  # noqa: F811
    assert _skew(tmp_path, connect_env(connect)) == local_skew


@pytest.mark.slow
def test_sql_history_over_connect_matches_local(connect, tmp_path: Path) -> None:  # noqa: F811
    _run(tmp_path, local_env())
    query = ["sql", "SELECT group_id, count(*) AS n FROM assignment_history GROUP BY group_id ORDER BY group_id"]
    query += ["--lake", str(tmp_path / "lake")]
    local = rebalance(query, local_env(), tmp_path)
    remote = rebalance(query, connect_env(connect), tmp_path)
    assert local.returncode == 0 and remote.returncode == 0, remote.stderr[-4000:]
    assert remote.stdout == local.stdout and "payments" in local.stdout


@pytest.mark.slow
def test_connect_session_has_no_jvm_and_reads_delta_through_the_server(connect, tmp_path: Path) -> None:  # noqa: F811
    script = (
        "import psutil\n"
        "from pyspark import SparkContext\n"
        "from jobs.io.spark import get_spark, is_connect\n"
        "spark = get_spark()\n"
        "assert is_connect(spark)\n"
        f"spark.range(3).write.format('delta').save({str(tmp_path / 'delta')!r})\n"
        f"first = spark.sql('SELECT count(*) AS n FROM delta.`{tmp_path / 'delta'}` VERSION AS OF 0')\n"
        "assert first.collect()[0].n == 3\n"
        "assert spark.range(5).selectExpr('sum(id) AS s').collect()[0].s == 10\n"
        "assert SparkContext._active_spark_context is None\n"
        "print([p.name() for p in psutil.Process().children(recursive=True)])\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], env=connect_env(connect), cwd=tmp_path, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr[-4000:]
    assert done.stdout.strip() == "[]"


@pytest.mark.slow
def test_stopping_a_local_session_ends_its_jvm_and_accumulator_server_quietly(tmp_path: Path) -> None:
    # A Python task opens the JVM's connection to the driver's accumulator server; stop_spark ends that server on a
    # thread once the JVM has gone (its handler's EOF is not reported), and a new session starts after it.
    script = (
        "import psutil, time\n"
        "from jobs.io.spark import SparkSettings, get_spark, stop_spark\n"
        "for _ in range(2):\n"
        "    spark = get_spark(SparkSettings.from_env())\n"
        "    server = spark.sparkContext._accumulatorServer\n"
        "    assert spark.range(4).mapInArrow(lambda batches: batches, 'id long').count() == 4\n"
        "    jvm = psutil.Process().children()\n"
        "    stop_spark(spark)\n"
        "    assert not [p for p in jvm if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]\n"
        "    deadline = time.monotonic() + 10\n"
        "    while server.socket.fileno() != -1 and time.monotonic() < deadline:\n"
        "        time.sleep(0.05)\n"
        "    assert server.socket.fileno() == -1, 'the accumulator server still listens'\n"
        "print('stopped twice')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], env=local_env(), cwd=tmp_path, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-4000:]
    assert done.stdout.strip() == "stopped twice"
    assert "Exception occurred" not in done.stderr and "Traceback" not in done.stderr, done.stderr[-4000:]


# `python -m jobs.io.spark_servers` with Ctrl-C handled as a shell's foreground command gets it, whatever this test
# process ignores or blocks (a test runner's worker is not a terminal).
AS_FROM_A_TERMINAL = (
    "import runpy, signal; signal.signal(signal.SIGINT, signal.default_int_handler); "
    "signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT}); "
    "runpy.run_module('jobs.io.spark_servers', run_name='__main__')"
)


@pytest.mark.slow
def test_connect_server_main_stops_its_jvm_on_ctrl_c(tmp_path: Path) -> None:
    port = free_port()
    command = [sys.executable, "-X", "faulthandler", "-c", AS_FROM_A_TERMINAL, "connect", "--port", str(port)]
    with (tmp_path / "main.err").open("w") as errors:
        process = subprocess.Popen(
            [*command, "--master", "local[1]", "--log-dir", str(tmp_path)],
            stdout=subprocess.PIPE,
            stderr=errors,
            text=True,
        )
    jvm_group = None
    try:
        assert f"connect at sc://127.0.0.1:{port}" in process.stdout.readline()
        owners = [pid for address, p, pid in listening_sockets() if p == port]
        assert owners and {a for a, p, _ in listening_sockets() if p == port} <= {"127.0.0.1", "::ffff:127.0.0.1"}
        jvm_group = process_group(owners[0])
        assert jvm_group is not None and jvm_group != os.getpgid(process.pid)
        process.send_signal(signal.SIGINT)
        # Within stop's bound (SIGTERM's grace, then SIGKILL's, then the leader's reaping) and the interpreter's exit.
        try:
            process.wait(3 * STOP_TIMEOUT_S + 30)
        except subprocess.TimeoutExpired:
            signals = [line for line in Path(f"/proc/{process.pid}/status").read_text().splitlines() if "Sig" in line]
            process.send_signal(signal.SIGABRT)  # faulthandler prints where each thread is
            process.wait(10)
            pytest.fail(f"still running after Ctrl-C: {signals}; {(tmp_path / 'main.err').read_text()[-3000:]}")
        assert process.returncode == 0
        deadline = time.monotonic() + 5
        while group_alive(jvm_group) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not group_alive(jvm_group)
        assert not [s for s in listening_sockets() if s[1] == port]
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        if jvm_group is not None and group_alive(jvm_group):  # a failed stop leaves no server behind either
            with contextlib.suppress(ProcessLookupError):
                os.killpg(jvm_group, signal.SIGKILL)


def test_a_cluster_whose_executors_lack_the_packages_refuses_in_one_line_before_any_work(
    standalone,  # noqa: F811 (fixture)
    worker_python,  # noqa: F811 (fixture)
    tmp_path,
) -> None:
    bare = tmp_path / "bare"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True)  # no numpy, no pyarrow
    env = standalone_env(standalone, worker_python) | {"REBALANCE_SPARK_PYTHON": str(bare / "bin" / "python")}
    done = rebalance(["run", "--snapshots", str(DEMO_FILES), "--lake", str(tmp_path / "lake")], env, tmp_path)
    assert done.returncode == 2, done.stderr
    [line] = [line for line in done.stderr.splitlines() if line.startswith("rebalance run: error: ")]
    assert line == done.stderr.strip().splitlines()[-1] and "Traceback" not in done.stderr
    assert f"the executors of {standalone.master.url}" in line and "REBALANCE_SPARK_PYTHON" in line
    assert "pyarrow" in line or "numpy" in line
    assert not (tmp_path / "lake" / "snapshots").exists() or lake_rows(tmp_path / "lake", ["snapshots"]) == {
        "snapshots": []
    }


@pytest.mark.spark
def test_executors_that_cannot_see_a_local_lake_are_one_line(spark, tmp_path) -> None:
    # What a Connect server or a cluster on another host meets with a lake directory of this one (here: a directory
    # nobody has, asked of this session's executors by the same probe).
    from jobs.io.spark_preflight import check_executors

    check_executors(spark, "local", str(tmp_path))  # seen: passes
    with pytest.raises(SourceError) as unseen:
        check_executors(spark, "sc://elsewhere:15002", str(tmp_path / "not-there"))
    assert str(unseen.value) == (
        f"lake {tmp_path / 'not-there'}: the executors of sc://elsewhere:15002 do not see this directory; put the "
        "lake on storage they share (s3://bucket/prefix), or run them on this host"
    )


@pytest.mark.spark
def test_a_one_group_run_checks_the_lake_without_a_python_task(spark, tmp_path) -> None:
    # A what-if runs no Python on the executors: the lake (its tables made when the run's context is) is read by a
    # JVM task alone, and an unseen one is the same line with Spark's cause.
    from jobs.io.lake import Lake
    from jobs.io.spark_preflight import check_lake

    Lake(tmp_path / "lake").create_all()
    check_lake(spark, "local", str(tmp_path / "lake"))  # seen: passes
    with pytest.raises(SourceError) as unseen:
        check_lake(spark, "sc://elsewhere:15002", str(tmp_path / "not-there"))
    assert str(unseen.value).startswith(
        f"lake {tmp_path / 'not-there'}: the executors of sc://elsewhere:15002 do not see this directory ("
    )
    assert str(unseen.value).endswith(
        "); put the lake on storage they share (s3://bucket/prefix), or run them on this host"
    )


@pytest.mark.spark
def test_local_workers_import_from_the_environment_not_from_sparks_archives(spark) -> None:
    # Spark puts its zips and its core jar first on the workers' path; read from there, modules compile from source in
    # every worker and each task re-reads the archives' directories (jobs.io.spark_daemon). The local session's
    # daemon takes them off: a task's worker has no importer of an archive, and pyspark from this environment.
    import pyarrow as pa

    assert spark.conf.get("spark.python.daemon.module") == "jobs.io.spark_daemon"

    def probe(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import sys as worker_sys
        import zipimport

        import pyspark as worker_pyspark

        zips = [
            entry
            for entry, finder in worker_sys.path_importer_cache.items()
            if isinstance(finder, zipimport.zipimporter)
        ]
        for _ in batches:
            yield pa.RecordBatch.from_pylist([{"pyspark": worker_pyspark.__file__, "zips": zips}])

    rows = spark.range(0, 2, 1, 2).mapInArrow(probe, "pyspark string, zips array<string>").collect()
    import pyspark

    assert [(r.pyspark, r.zips) for r in rows] == [(pyspark.__file__, [])] * 2
