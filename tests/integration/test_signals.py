"""Signals: the metrics file each run writes, `rebalance metrics` scraped over HTTP, and a run's alarms."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import defaultdict
from datetime import UTC, datetime
from pathlib import Path

import httpx
import numpy as np
import pytest
from prometheus_client.parser import text_string_to_metric_families

from jobs import pipeline
from jobs.cli import main
from jobs.config import Config
from jobs.io.lake import rows_table
from jobs.steps import signals
from schemas.status import GenerationStatus as S

REPO = Path(__file__).resolve().parents[2]
DEMO = REPO / "jobs" / "demo" / "data"
T0 = datetime(2026, 11, 21, 2, 0, tzinfo=UTC)


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of a text exposition: (name, sorted labels) -> value."""
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def value(found: dict, name: str, **labels: str) -> float:
    return found[(name, tuple(sorted(labels.items())))]


def expected_gini(loads: list[float]) -> float:
    """Gini as the mean absolute difference over twice the mean (the textbook definition, not planner.load's)."""
    x = np.asarray(loads, dtype=np.float64)
    return float(np.abs(x[:, None] - x[None, :]).mean() / (2 * x.mean()))


@pytest.mark.spark
def test_a_run_writes_the_metrics_and_the_server_serves_the_lake_as_it_is_at_each_scrape(
    spark, lake, monkeypatch, capsys
):
    monkeypatch.setenv("REBALANCE_APPROVAL", "true")
    config = Config(lake=str(lake.root), snapshots=str(DEMO), strategies=("range", "sticky"))
    pipeline.run(config, "run-1", spark=spark)
    path = lake.local / "metrics" / "rebalance.prom"
    written = samples(path.read_text())
    assert [p.name for p in path.parent.iterdir()] == ["rebalance.prom"]  # written atomically: no temp file left

    # Every value is the lake's: the chosen candidate's loads and moves, the Gini of member loads, the lag.
    chosen = {m["group_id"]: m for m in lake.read_arrow("plan_metrics").to_pylist() if m["chosen"]}
    loads: dict[str, dict[str, float]] = defaultdict(dict)
    for m in lake.read_arrow("snapshots").to_pylist():
        if m["member_id"]:
            loads[m["group_id"]][m["member_id"]] = 0.0
    for p in lake.read_arrow("plans").to_pylist():
        if p["strategy"] == chosen[p["group_id"]]["strategy"]:
            loads[p["group_id"]][p["member"]] += p["weight"]
    lag: dict[str, int] = defaultdict(int)
    for o in lake.read_arrow("partition_offsets").to_pylist():
        lag[o["group_id"]] += o["lag"] or 0
    assert len(chosen) == 5
    for group, m in chosen.items():
        assert value(written, "rebalance_generation", group=group) == 1
        assert value(written, "rebalance_generation_status", group=group, status="gated") == 1
        assert value(written, "rebalance_generation_status", group=group, status="approved") == 0
        assert value(written, "rebalance_plan_max_load", group=group) == pytest.approx(m["max_load"])
        assert value(written, "rebalance_plan_mean_load", group=group) == pytest.approx(m["mean_load"])
        assert value(written, "rebalance_plan_max_mean_load_ratio", group=group) == pytest.approx(m["max_mean_load"])
        assert value(written, "rebalance_plan_moves", group=group) == m["partitions_moved"]
        assert value(written, "rebalance_plan_load_gini", group=group) == pytest.approx(
            expected_gini(list(loads[group].values()))
        )
        if group in lag:
            assert value(written, "rebalance_lag_messages", group=group) == lag[group]
        else:  # no offsets in the snapshot: lag unknown, no series
            assert ("rebalance_lag_messages", (("group", group),)) not in written
    assert {v for (name, _), v in written.items() if name == "rebalance_generation_status"} == {0.0, 1.0}
    assert not any(name == "rebalance_approved_generation" for name, _ in written)
    assert any(v > 0 for g, v in lag.items()) and any(
        value(written, "rebalance_plan_load_gini", group=g) > 0 for g in chosen
    )

    server = subprocess.Popen(
        [sys.executable, "-m", "jobs.cli", "metrics", "--port", "0", "--lake", str(lake.root)],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        banner = server.stdout.readline()
        assert banner.startswith(f"serving the metrics of lake {lake.root} at http://127.0.0.1:"), (
            banner + server.stderr.read()
        )
        url = banner.split(" at ")[1].strip()
        with httpx.Client(trust_env=False, timeout=30.0) as http:
            assert samples(http.get(url).raise_for_status().text) == written
            assert (
                main(["review", "--lake", str(lake.root), "--group", "payments", "--generation", "1", "--approve"]) == 0
            )
            scraped = samples(http.get(url).raise_for_status().text)
        assert value(scraped, "rebalance_generation_status", group="payments", status="approved") == 1
        assert value(scraped, "rebalance_generation_status", group="payments", status="gated") == 0
        assert value(scraped, "rebalance_approved_generation", group="payments") == 1
        assert value(scraped, "rebalance_generation_status", group="shipping", status="gated") == 1
    finally:
        server.terminate()  # SIGTERM by PID: the server shuts down and exits 0
        assert server.wait(timeout=30) == 0, server.stderr.read()
        server.stdout.close()
        server.stderr.close()


def _generation(group: str, n: int, run_id: str, status: str, **extra) -> dict:
    return {"group_id": group, "generation_id": n, "run_id": run_id, "status": status, "created_at": T0, **extra}


def test_alarms_name_the_runs_rejected_generations_and_the_plans_its_snapshot_found_drifted(lake):
    drifted = {"snapshot_id": "run-2", "differing": [{"topic": "t", "partition": 0}, {"topic": "t", "partition": 3}]}
    lake.merge(
        "generations",
        rows_table(
            "generations",
            [
                _generation(
                    "orders",
                    1,
                    "run-1",
                    S.APPROVED,
                    verification="drifted",
                    verified_at=T0,
                    verification_detail=json.dumps(drifted),
                ),
                _generation("orders", 2, "run-2", S.REJECTED, status_reason="gate failed: balance"),
                _generation(
                    "billing",
                    1,
                    "run-1",
                    S.APPROVED,
                    verification="applied",
                    verified_at=T0,
                    verification_detail=json.dumps({"snapshot_id": "run-2", "differing": []}),
                ),
                _generation("billing", 2, "run-2", S.APPROVED),
                _generation("audit", 1, "run-1", S.REJECTED),
            ],
        ),
    )
    assert signals.alarms(lake, "run-2") == [
        "group orders: the approved plan of generation 1 has drifted (snapshot run-2)",
        "group orders: generation 2 rejected (gate failed: balance)",
    ]
    assert signals.alarms(lake, "run-1") == ["group audit: generation 1 rejected (no reason)"]
    found = samples(Path(signals.write(lake)).read_text())
    assert value(found, "rebalance_plan_verification", group="orders", verification="drifted") == 1
    assert value(found, "rebalance_plan_verification", group="orders", verification="applied") == 0
    assert value(found, "rebalance_plan_drifted_partitions", group="orders") == 2
    assert value(found, "rebalance_plan_verification", group="billing", verification="applied") == 1
    assert value(found, "rebalance_generation_status", group="orders", status="rejected") == 1
    assert value(found, "rebalance_approved_generation", group="orders") == 1
    assert value(found, "rebalance_approved_generation", group="billing") == 2
    assert not any(labels == (("group", "audit"),) for name, labels in found if name == "rebalance_approved_generation")


def test_metrics_refuses_a_directory_that_is_no_lake(tmp_path, capsys):
    assert main(["metrics", "--port", "0", "--lake", str(tmp_path / "nowhere")]) == 2
    assert f"--lake: no lake at {tmp_path / 'nowhere'}" in capsys.readouterr().err
