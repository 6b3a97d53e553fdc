"""Faults named, nothing half-written: `rebalance` processes killed mid-run, read-only and full lakes, no Java,
a broker stopped or lost mid-sampling, refused SASL, secrets, and ids that carry control characters.

Every fault is real: processes are SIGKILLed (`fault_runner.py` picks the exact moment), lakes live on tmpfs
mounts made read-only or full, Java is taken off PATH, brokers are Apache Kafka processes stopped or killed.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable
from fixtures_kafka import SASL_PASSWORD, SASL_USER

from jobs.demo import cluster as demo_cluster
from jobs.io.lake import Lake
from jobs.io.loopback import free_port
from jobs.steps.ingest import ingest_documents, read_documents, snapshot_files
from jobs.steps.plan import allocate_generations
from jobs.steps.what_if import latest_document
from planner.errors import SourceError
from schemas import TABLES

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "jobs" / "demo" / "data"
RUNNER = Path(__file__).with_name("fault_runner.py")
GROUPS = ["audit-archiver", "clickstream-etl", "inventory", "payments", "shipping"]
PASSWORD = SASL_PASSWORD

pytestmark = pytest.mark.integration


def cli_env(**extra: str) -> dict[str, str]:
    """A `rebalance` process's environment: one Spark core, no REBALANCE_* or JAVA_HOME from outside."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("REBALANCE_") and k != "JAVA_HOME"}
    return {**env, "REBALANCE_SPARK_MASTER": "local[1]", "PYTHONPATH": str(ROOT), **extra}


def rebalance(
    *args: str | Path, env: dict[str, str] | None = None, fault: tuple[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run `rebalance ARGS` as its own process (through `fault_runner.py` when a fault is given)."""
    entry = [str(RUNNER), *fault] if fault else ["-m", "jobs.cli"]
    return subprocess.run(
        [sys.executable, *entry, *map(str, args)],
        cwd=ROOT,
        env=env or cli_env(),
        capture_output=True,
        text=True,
        timeout=1800,
        check=False,
    )


def run_args(lake: Path, run_id: str) -> list[str | Path]:
    return ["run", "--snapshots", DEMO, "--lake", lake, "--run-id", run_id, "--strategies", "range,sticky"]


def one_error_line(done: subprocess.CompletedProcess, command: str = "run") -> str:
    """The process failed with exit 2 and one line naming the cause (no traceback, no Rust panic)."""
    assert done.returncode == 2, done.stderr[-3000:]
    assert "Traceback" not in done.stderr and "panicked" not in done.stderr, done.stderr[-3000:]
    line = done.stderr.strip().splitlines()[-1]
    assert line.startswith(f"rebalance {command}: error: "), done.stderr[-3000:]
    return line


def ingest_only(lake: Lake, run_id: str, source: Path = DEMO) -> None:
    """A complete snapshot written by ingest alone (no Spark), as a run's first step writes it."""
    lake.create_all()
    documents = (raw for path, within in snapshot_files(str(source)) for raw in read_documents(path, within))
    ingest_documents(lake, documents, snapshot_id=run_id, run_id=run_id, received_at=datetime.now(UTC))


def run_rows(lake: Lake, run_id: str) -> dict[str, list[dict[str, Any]]]:
    """Every table's rows of one run, comparable across lakes: timestamps dropped, the lake's path replaced."""
    ids = [g["generation_id"] for g in lake.read_arrow("generations", [("run_id", "=", run_id)]).to_pylist()]
    out = {}
    for name, spec in TABLES.items():
        names = spec.schema.names
        if "run_id" in names:
            where = [("run_id", "=", run_id)]
        elif "snapshot_id" in names:
            where = [("snapshot_id", "=", run_id)]
        elif "generation_id" in names:
            where = [("generation_id", "in", ids)]
        else:
            continue
        table = lake.read_arrow(name, where)
        kept = [f.name for f in table.schema if not pa.types.is_timestamp(f.type)]
        text = json.dumps(table.select(kept).to_pylist(), default=repr).replace(str(lake.root), "<lake>")
        out[name] = sorted(json.dumps(r, sort_keys=True) for r in json.loads(text))
    return out


@contextlib.contextmanager
def tmpfs(path: Path, size: str) -> Iterator[Path]:
    """A fresh tmpfs of `size` mounted at `path` (root only), unmounted afterwards."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    path.mkdir(parents=True)
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], capture_output=True)
    if mounted.returncode:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.decode().strip()}")
    try:
        yield path
    finally:
        if subprocess.run(["umount", str(path)], check=False).returncode:
            subprocess.run(["umount", "-l", str(path)], check=True)


# -- killed mid-run ---------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_a_run_killed_at_each_step_reruns_to_the_same_rows(tmp_path: Path) -> None:
    lake = Lake(tmp_path / "lake")
    ingest_only(lake, "earlier")  # a complete snapshot from before, for what-if to fall back on

    # Killed once topic_partitions is written but before snapshots: the half snapshot is invisible.
    assert rebalance(*run_args(lake.root, "k"), fault=("commit", "topic_partitions")).returncode == -signal.SIGKILL
    assert lake.read_arrow("snapshots", [("snapshot_id", "=", "k")]).num_rows == 0
    assert latest_document(lake, "payments")["what_if_of"] == "earlier"

    # Killed right after the snapshots commit: the snapshot is complete, and what-if takes it.
    assert rebalance(*run_args(lake.root, "k"), fault=("commit", "snapshots")).returncode == -signal.SIGKILL
    assert latest_document(lake, "payments")["what_if_of"] == "k"

    for table in ("generations", "plans", "gate_results"):  # planning started, planned, half gated
        assert rebalance(*run_args(lake.root, "k"), fault=("commit", table)).returncode == -signal.SIGKILL
        statuses = {g["status"] for g in lake.read_arrow("generations", [("run_id", "=", "k")]).to_pylist()}
        assert statuses == {"candidate"}
    finished = rebalance(*run_args(lake.root, "k"))
    assert finished.returncode == 0, finished.stderr[-3000:]

    reference = Lake(tmp_path / "reference")
    ingest_only(reference, "earlier")  # the same history, so what changed since the earlier snapshot compares too
    clean = rebalance(*run_args(reference.root, "k"))
    assert clean.returncode == 0, clean.stderr[-3000:]
    rows, expected = run_rows(lake, "k"), run_rows(reference, "k")
    assert {name: len(r) for name, r in rows.items()} == {name: len(r) for name, r in expected.items()}
    assert rows == expected
    assert len(rows["generations"]) == 5 and len(rows["plans"]) > 0 and len(rows["gate_results"]) > 0


@pytest.mark.slow
def test_a_crashed_runs_candidates_are_abandoned_by_the_next_run(tmp_path: Path) -> None:
    lake = Lake(tmp_path / "lake")
    ingest_only(lake, "crashed")
    # The crashed run got as far as plan's first commit: its generations are candidates, and it never comes back.
    allocate_generations(lake, GROUPS, "crashed", "crashed", "manual", {}, datetime.now(UTC))
    done = rebalance(*run_args(lake.root, "next"))
    assert done.returncode == 0, done.stderr[-3000:]
    rows = {(g["run_id"], g["group_id"]): g for g in lake.read_arrow("generations").to_pylist()}
    for group in GROUPS:
        crashed, following = rows[("crashed", group)], rows[("next", group)]
        assert (crashed["generation_id"], following["generation_id"]) == (1, 2)
        assert (crashed["status"], following["status"]) == ("abandoned", "approved")
        assert "run crashed ended without publishing it" in crashed["status_reason"]


# -- the lake cannot be written -----------------------------------------------------------------------------------


@pytest.mark.slow
def test_a_read_only_lake_is_named_writes_nothing_and_still_reads(tmp_path: Path) -> None:
    with tmpfs(tmp_path / "mnt", "64m") as mnt:
        lake = Lake(mnt / "lake")
        ingest_only(lake, "before")
        subprocess.run(["mount", "-o", "remount,ro", str(mnt)], check=True)
        line = one_error_line(rebalance(*run_args(lake.root, "ro")))
        assert line == (
            f"rebalance run: error: lake {lake.root}: cannot write table topic_partitions: "
            f"Read-only file system (EROFS) at {lake.local / 'topic_partitions'}"
        )
        assert {r["snapshot_id"] for r in lake.read_arrow("snapshots").to_pylist()} == {"before"}
        query = rebalance("sql", "SELECT count(DISTINCT snapshot_id) AS n FROM snapshots", "--lake", lake.root)
        assert query.returncode == 0, query.stderr[-3000:]
        assert query.stdout.split() == ["n", "1"]


def test_a_lake_the_user_may_not_write_is_named(tmp_path: Path) -> None:
    """As a user without write permission (root ignores file modes, so the run drops to `nobody`)."""
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("needs root and setpriv to run as another user")
    base = Path(tempfile.mkdtemp(prefix="rebalance-ro-"))
    try:
        base.chmod(0o755)
        lake = Lake(base / "lake")
        ingest_only(lake, "before")
        nobody = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--"]
        done = subprocess.run(
            [*nobody, sys.executable, "-m", "jobs.cli", *map(str, run_args(lake.root, "denied"))],
            cwd=ROOT,
            env={**cli_env(), "HOME": str(base)},
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        line = one_error_line(done)
        assert line.endswith(
            f"cannot write table topic_partitions: Permission denied (EACCES) at {lake.local / 'topic_partitions'}"
        )
        assert {r["snapshot_id"] for r in lake.read_arrow("snapshots").to_pylist()} == {"before"}
    finally:
        shutil.rmtree(base)


def test_a_full_disk_is_named_and_leaves_every_table_readable(tmp_path: Path) -> None:
    with tmpfs(tmp_path / "mnt", "4m") as mnt:
        lake = Lake(mnt / "lake")
        lake.create_all()
        filler = mnt / "filler"
        with open(filler, "wb", buffering=0) as f, contextlib.suppress(OSError):
            while True:
                f.write(b"\0" * 4096)
        line = one_error_line(rebalance(*run_args(lake.root, "full")))
        assert line == (
            f"rebalance run: error: lake {lake.root}: writing table topic_partitions failed: "
            "No space left on device (ENOSPC)"
        )
        with pytest.raises(SourceError, match=r"writing table quarantine failed: No space left on device \(ENOSPC\)"):
            row = {"ingest_id": "i", "run_id": "r", "source": "s", "raw_payload": "{}", "error": "e"}
            lake.merge("quarantine", pa.Table.from_pylist([row]))
        for name in TABLES:
            assert DeltaTable(str(lake.path(name))).version() == 0  # created, never committed to
        filler.unlink()
        ingest_only(lake, "full")  # space again: the same lake takes the run
        assert latest_document(lake, "payments")["what_if_of"] == "full"


@pytest.mark.slow
def test_a_disk_that_fills_after_each_step_is_one_line_and_the_next_run_completes(tmp_path: Path) -> None:
    with tmpfs(tmp_path / "mnt", "48m") as mnt:
        lake = Lake(mnt / "lake")
        filler = mnt / "filler"
        said = {}
        env = cli_env() | {"REBALANCE_SPARK_LOG": str(tmp_path / "spark.log")}  # as at a terminal: the JVM's to a file
        for table in ("snapshots", "generations", "plans", "gate_results"):  # ingested, planning, planned, gated
            done = rebalance(*run_args(lake.root, "full"), env=env, fault=("fill", f"{table}={filler}"))
            said[table] = one_error_line(done)
            assert "No space left on device" in said[table], said[table]
            for name in TABLES:
                DeltaTable(str(lake.path(name))).to_pyarrow_table()  # every table still reads
            filler.unlink()
        finished = rebalance(*run_args(lake.root, "full"))
        assert finished.returncode == 0, finished.stderr[-3000:]
        assert {g["status"] for g in lake.read_arrow("generations", [("run_id", "=", "full")]).to_pylist()} == {
            "approved"
        }


# -- no Java ------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("env", "cause"),
    [
        ({"PATH": "/nonexistent"}, "Java not found: no `java` on PATH and JAVA_HOME is not set"),
        ({"JAVA_HOME": "/nonexistent/jdk"}, "Java not found: JAVA_HOME is '/nonexistent/jdk' but"),
    ],
    ids=["no-java-on-path", "bad-java-home"],
)
def test_missing_java_is_named_before_anything_is_written(tmp_path: Path, env: dict[str, str], cause: str) -> None:
    lake = tmp_path / "lake"
    line = one_error_line(rebalance(*run_args(lake, "nojava"), env=cli_env(**env)))
    assert cause in line
    assert not lake.exists()


def test_spark_connect_needs_no_local_java(tmp_path: Path) -> None:
    remote = f"sc://127.0.0.1:{free_port()}"
    env = cli_env(PATH="/nonexistent", REBALANCE_SPARK_REMOTE=remote)
    line = one_error_line(rebalance(*run_args(tmp_path / "lake", "connect"), env=env))
    assert "Java" not in line and remote in line


# -- Kafka --------------------------------------------------------------------------------------------------------


def kafka_env(bootstrap: str, **extra: str) -> dict[str, str]:
    return cli_env(
        REBALANCE_KAFKA_BOOTSTRAP_SERVERS=bootstrap,
        REBALANCE_KAFKA_CONNECT_TIMEOUT_MS="3000",
        REBALANCE_KAFKA_REQUEST_TIMEOUT_MS="5000",
        **extra,
    )


def sasl_env(bootstrap: str, mechanism: str, **extra: str) -> dict[str, str]:
    return kafka_env(
        bootstrap,
        REBALANCE_KAFKA_SECURITY_PROTOCOL="SASL_PLAINTEXT",
        REBALANCE_KAFKA_SASL_MECHANISM=mechanism,
        REBALANCE_KAFKA_SASL_USERNAME=SASL_USER,
        REBALANCE_KAFKA_SASL_PASSWORD=PASSWORD,
        **extra,
    )


@pytest.mark.kafka
@pytest.mark.parametrize("broker_state", ["stopped", "never-started"])
def test_a_stopped_broker_or_closed_port_is_named_and_writes_nothing(tmp_path: Path, broker_state: str) -> None:
    if broker_state == "stopped":
        with demo_cluster.broker() as stopped:
            address = stopped.bootstrap
    else:
        address = f"127.0.0.1:{free_port()}"
    lake = Lake(tmp_path / "lake")
    line = one_error_line(rebalance("run", "--lake", lake.root, "--run-id", "gone", env=kafka_env(address)))
    assert f"no broker answered at {address}" in line
    assert all(lake.read_arrow(name).num_rows == 0 for name in TABLES)
    output = tmp_path / "snap.json"
    line = one_error_line(rebalance("snapshot", "--output", output, env=kafka_env(address)), "snapshot")
    assert f"no broker answered at {address}" in line
    assert list(tmp_path.glob("snap*")) == []


@pytest.mark.kafka
@pytest.mark.slow
def test_a_broker_lost_mid_sampling_fails_the_snapshot_and_writes_nothing(tmp_path: Path) -> None:
    with demo_cluster.broker() as lost:
        demo_cluster.create_topics(lost.bootstrap, {"sampled": 3})
        demo_cluster.produce(lost.bootstrap, {"sampled": 3}, 300)
        output = tmp_path / "snap.json"
        args = ("snapshot", "--sample-topics", "sampled", "--output", output)
        done = rebalance(*args, env=kafka_env(lost.bootstrap), fault=("broker-at-poll", str(lost.pid)))
    line = one_error_line(done, "snapshot")
    # The sample names a partition it could not finish and how far it got (pulling the groups never starts).
    short = re.search(r"sampled-\d was read to offset (\d+) of its end offset (\d+)", line)
    assert f"sampling keys: Kafka at {lost.bootstrap} did not deliver the sample within 60 s: " in line
    assert short is not None and int(short[1]) < int(short[2]), line
    assert list(tmp_path.glob("snap*")) == []


@pytest.mark.kafka
def test_a_snapshot_file_that_cannot_be_written_is_named_and_nothing_is_left(
    kafka_broker: demo_cluster.Broker, tmp_path: Path
) -> None:
    demo_cluster.create_topics(kafka_broker.bootstrap, {"faults-out": 2})
    demo_cluster.produce(kafka_broker.bootstrap, {"faults-out": 2}, 50)
    with tmpfs(tmp_path / "mnt", "64k") as mnt:
        with open(mnt / "filler", "wb", buffering=0) as f, contextlib.suppress(OSError):
            while True:
                f.write(b"\0" * 4096)
        output = mnt / "snap.json"
        args = ("snapshot", "--sample-topics", "faults-out", "--output", output)
        line = one_error_line(rebalance(*args, env=kafka_env(kafka_broker.bootstrap)), "snapshot")
        assert line == f"rebalance snapshot: error: writing {output} failed, nothing written: No space left on device"
        assert sorted(p.name for p in mnt.iterdir()) == ["filler"]


@pytest.fixture(scope="module")
def live_groups(kafka_broker: demo_cluster.Broker) -> Iterator[demo_cluster.Cluster]:
    """One small live group on the session broker, and one whose id carries control characters."""
    groups = (
        demo_cluster.DemoGroup("plain", ("events",), 2, "range"),
        demo_cluster.DemoGroup("red\x1b[31m\x07", ("events",), 1, "range"),
    )
    with demo_cluster.running(
        bootstrap=kafka_broker.bootstrap, topics={"events": 4}, groups=groups, prefix="faults-", records_per_topic=400
    ) as running:
        yield running


@pytest.mark.kafka
@pytest.mark.slow
def test_secrets_never_reach_outputs_logs_or_tables(
    kafka_broker: demo_cluster.Broker, live_groups: demo_cluster.Cluster, tmp_path: Path
) -> None:
    sasl = kafka_broker.listeners["SASL"]
    env = sasl_env(sasl, "PLAIN", REBALANCE_GROUP_PATTERN="faults-*", REBALANCE_SAMPLE_TOPICS="faults-events")
    output = tmp_path / "snap.json"
    pulled = rebalance(
        "snapshot", "--group", "faults-*", "--sample-topics", "faults-events", "--output", output, env=env
    )
    assert pulled.returncode == 0, pulled.stderr[-3000:]
    lake = Lake(tmp_path / "lake")
    ran = rebalance("run", "--lake", lake.root, "--run-id", "secret", "--strategies", "range", env=env)
    assert ran.returncode == 0, ran.stderr[-3000:]
    assert lake.read_arrow("snapshots", [("group_id", "=", "faults-plain")]).num_rows == 2
    assert lake.read_arrow("key_samples").num_rows > 0
    refused = rebalance("snapshot", "--output", tmp_path / "refused.json", env=sasl_env(sasl, "SCRAM-SHA-256"))
    assert refused.returncode == 2
    for done in (pulled, ran, refused):
        assert PASSWORD not in done.stdout + done.stderr
    for path in [*tmp_path.rglob("*")]:
        if path.is_file():
            assert PASSWORD.encode() not in path.read_bytes(), path
    for name in TABLES:
        assert PASSWORD not in json.dumps(lake.read_arrow(name).to_pylist(), default=repr), name


@pytest.mark.kafka
@pytest.mark.slow
def test_group_ids_with_control_characters_print_escaped(live_groups: demo_cluster.Cluster, tmp_path: Path) -> None:
    env = kafka_env(live_groups.bootstrap, REBALANCE_GROUP_PATTERN="faults-*")
    ran = rebalance("run", "--lake", tmp_path / "lake", "--run-id", "ctl", "--strategies", "range", env=env)
    assert ran.returncode == 0, ran.stderr[-3000:]
    assert "\x1b" not in ran.stdout and "\x07" not in ran.stdout
    assert r"faults-red\x1b[31m\x07" in ran.stdout  # quarantined by the id rules, its source shown escaped


@pytest.mark.kafka
def test_a_refused_sasl_mechanism_is_named(kafka_broker: demo_cluster.Broker, tmp_path: Path) -> None:
    sasl = kafka_broker.listeners["SASL"]
    done = rebalance("snapshot", "--output", tmp_path / "s.json", env=sasl_env(sasl, "SCRAM-SHA-256"))
    line = one_error_line(done, "snapshot")
    # the mechanism refused (Apache Kafka closes the connection after its handshake answer: kafka-python 3.0.12
    # keeps no list of the mechanisms it offers)
    assert line.endswith(f"Kafka at {sasl} does not offer SASL mechanism SCRAM-SHA-256")
    assert PASSWORD not in done.stderr


# -- quarantine keeps bytes ---------------------------------------------------------------------------------------


def test_quarantine_keeps_the_raw_bytes_of_a_file_that_is_not_utf8(tmp_path: Path) -> None:
    data = b'\xff\xfe{"group_id": "g\xe9", \x00\x81 not json'
    (tmp_path / "bad.json").write_bytes(data)
    lake = Lake(tmp_path / "lake")
    ingest_only(lake, "bytes", tmp_path / "bad.json")
    (row,) = lake.read_arrow("quarantine").to_pylist()
    assert row["raw_bytes"] == data
