"""The README's first command: `rebalance demo`, live and on the bundled files, run as a user runs it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from deltalake import DeltaTable

pytestmark = [pytest.mark.slow, pytest.mark.airflow, pytest.mark.kafka]

DEMO_GROUPS = {"audit-archiver", "clickstream-etl", "inventory", "payments", "shipping"}


def _demo(tmp_path: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], Path]:
    """`rebalance demo ARGS` in a child process on a fresh lake, with no REBALANCE_* settings inherited."""
    lake = tmp_path / "lake"
    env = {k: v for k, v in os.environ.items() if not k.startswith("REBALANCE_")}
    rebalance = Path(sys.executable).with_name("rebalance")
    result = subprocess.run(
        [str(rebalance), "demo", "--lake", str(lake), *args], env=env, capture_output=True, text=True, timeout=900
    )
    return result, lake


def _statuses(lake: Path) -> dict[str, str]:
    rows = DeltaTable(lake / "generations").to_pyarrow_table().to_pylist()
    return {r["group_id"]: r["status"] for r in rows}


def test_demo_on_the_bundled_files(tmp_path: Path) -> None:
    result, lake = _demo(tmp_path, "--files")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "DAG run succeeded" in result.stdout
    assert _statuses(lake) == dict.fromkeys(DEMO_GROUPS, "approved")
    (quarantined,) = DeltaTable(lake / "quarantine").to_pyarrow_table().to_pylist()
    assert quarantined["source"].endswith("billing-truncated.json")
    assert "billing-truncated.json" in result.stdout.split("Quarantined input of this run:")[1]
    history = result.stdout.split("History (Spark SQL):")[1]
    assert "FROM generations GROUP BY group_id" in history
    assert all(group in history for group in DEMO_GROUPS)
    _assert_reports(result.stdout, DEMO_GROUPS)


def test_demo_against_a_live_embedded_kafka(tmp_path: Path) -> None:
    result, lake = _demo(tmp_path)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "DAG run succeeded" in result.stdout and "broker and consumer groups stopped" in result.stdout
    applied = result.stdout.split("Applying approved plans to their live groups, one through each applier")[1]
    python, java, broker = applied.split("\n1. ")[1].split("\n2. ")[0], *applied.split("\n2. ")[1].split("\n3. ")
    assert "restarted" in python and "with PlannedAssignor" in python and "converged to the plan" in python
    assert "group billing-range: generation" in python and ": applied, all " in python
    assert "as Java consumer processes with io.rebalanceplanner.apply.PlannedAssignor" in java
    assert "leader: planned assignor: serving plan of group 'payments-coop'" in java
    assert "group payments-coop: generation" in java and ": applied, all " in java
    assert "group.remote.assignor=rebalance-planned" in broker and "broker: planned assignor: serving plan" in broker
    assert "group racks-v2: generation" in broker and ": applied, all " in broker
    verified = {
        r["group_id"]: r["verification"] for r in DeltaTable(lake / "generations").to_pyarrow_table().to_pylist()
    }
    assert {g: verified[g] for g in ("billing-range", "payments-coop", "racks-v2")} == dict.fromkeys(
        ("billing-range", "payments-coop", "racks-v2"), "applied"
    )
    statuses = _statuses(lake)
    assert statuses and set(statuses.values()) == {"approved"}
    skew = DeltaTable(lake / "key_skew").to_pyarrow_table()
    assert skew.num_rows > 0  # the live demo samples keys: the skew task measured them
    history = result.stdout.split("History (Spark SQL):")[1]
    assert all(group in history for group in statuses)
    _assert_reports(result.stdout, set(statuses))


def _assert_reports(stdout: str, groups: set[str]) -> None:
    """The demo ends by printing one existing report page per group."""
    pages = dict(
        line.removeprefix("report ").split(": ", 1)
        for line in stdout.split("Reports (open in a browser")[1].splitlines()
        if line.startswith("report ")
    )
    assert set(pages) == groups
    assert all(Path(page).is_file() and Path(page).read_text().startswith("<!DOCTYPE html>") for page in pages.values())
