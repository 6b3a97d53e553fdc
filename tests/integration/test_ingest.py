"""Ingest from snapshot files into a temporary lake: good groups land, bad input is quarantined whole."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pytest

from jobs.config import Config
from jobs.context import RunContext, StepResult
from jobs.steps import ingest
from planner.errors import InputError

NOW = datetime(2026, 11, 21, 2, 0, tzinfo=UTC)
DEMO = Path(__file__).resolve().parents[2] / "jobs" / "demo" / "data"


def group(group_id: str, **extra) -> dict:
    return {
        "group_id": group_id,
        "topics": {"orders": 3},
        "generation": 2,
        "members": [
            {"member_id": f"{group_id}-m1", "topics": ["orders"], "assignment": [["orders", 0]]},
            {"member_id": f"{group_id}-m2", "topics": ["orders"], "assignment": [["orders", 1]]},
        ],
        "offsets": [{"topic": "orders", "partition": 0, "committed": 5, "end": 9}],
        **extra,
    }


def run(lake, pattern, run_id="run-1") -> StepResult:
    return ingest.run(RunContext.create(Config(lake=str(lake.root), snapshots=str(pattern)), run_id), received_at=NOW)


def test_demo_snapshots_land_in_the_lake_and_the_truncated_file_in_quarantine(lake):
    result = run(lake, DEMO)
    assert sorted(result.groups) == ["audit-archiver", "clickstream-etl", "inventory", "payments", "shipping"]
    assert [Path(source).name for source, _ in result.quarantined] == ["billing-truncated.json"]
    snapshots = lake.read_arrow("snapshots").to_pylist()
    assert len(snapshots) == 3 + 3 + 2 + 3 + 1
    payments = {r["member_id"]: r for r in snapshots if r["group_id"] == "payments"}
    member = payments["payments-1-4b1c2f"]
    assert member["kafka_generation"] == 41 and member["rack"] == "az1" and member["source"] == "file"
    assert member["captured_at"] == datetime(2026, 11, 21, 2, 0, tzinfo=UTC)
    assert member["owned"][:2] == [{"topic": "orders", "partition": 0}, {"topic": "orders", "partition": 1}]
    shipping = [r for r in snapshots if r["group_id"] == "shipping"]
    assert sorted(r["group_instance_id"] for r in shipping) == ["ship-east", "ship-west"]
    partitions = lake.read_arrow("topic_partitions").to_pylist()
    assert {(r["topic"], r["partition_count"]) for r in partitions} >= {("orders", 12), ("refunds", 4), ("audit", 2)}
    assert len([r for r in partitions if r["topic"] == "orders"]) == 12
    offsets = {(r["group_id"], r["topic"], r["partition"]): r for r in lake.read_arrow("partition_offsets").to_pylist()}
    assert offsets[("payments", "orders", 0)]["lag"] == 250
    (quarantined,) = lake.read_arrow("quarantine").to_pylist()
    assert quarantined["error"].endswith(
        "billing-truncated.json: invalid JSON at line 4 column 1: Expecting ',' delimiter"
    )
    assert quarantined["raw_payload"] == (DEMO / "billing-truncated.json").read_text()
    assert quarantined["raw_bytes"] == (DEMO / "billing-truncated.json").read_bytes()


def test_one_bad_group_never_stops_the_others(lake, tmp_path):
    bad = group("bad")
    bad["members"][1]["member_id"] = "bad-m1"
    (tmp_path / "groups.json").write_text(json.dumps([group("good-1"), bad, group("good-2")]))
    result = run(lake, tmp_path / "*.json")
    assert result.groups == ["good-1", "good-2"]
    (row,) = lake.read_arrow("quarantine").to_pylist()
    assert row["source"].endswith("groups.json[1]")
    assert row["error"] == "members[1].member_id: duplicate member id 'bad-m1' (also members[0])"
    assert json.loads(row["raw_payload"]) == bad


def test_json_lines_keep_good_lines_and_quarantine_the_broken_one(lake, tmp_path):
    lines = [json.dumps(group("a")), '{"group_id": "b", "topics": {', json.dumps(group("c"))]
    (tmp_path / "groups.jsonl").write_text("\n".join(lines) + "\n")
    result = run(lake, tmp_path / "groups.jsonl")
    assert result.groups == ["a", "c"]
    (row,) = lake.read_arrow("quarantine").to_pylist()
    assert row["source"].endswith("groups.jsonl:2") and row["error"].endswith(
        "groups.jsonl:2: invalid JSON at line 1 column 30: Expecting property name enclosed in double quotes"
    )
    assert row["raw_payload"] == lines[1]


def test_an_unreadable_file_is_quarantined_whole(lake, tmp_path):
    (tmp_path / "binary.json").write_bytes(b"\xff\xfe{not json")
    (tmp_path / "ok.json").write_text(json.dumps(group("ok")))
    result = run(lake, tmp_path)
    assert result.groups == ["ok"]
    (row,) = lake.read_arrow("quarantine").to_pylist()
    assert row["error"].endswith("binary.json: not UTF-8 text: byte 0xff at byte offset 0 (invalid start byte)")
    assert row["raw_payload"].startswith("\\xff\\xfe{not json")


def test_a_bad_group_pulled_from_kafka_keeps_its_payload_bytes(lake):
    """Kafka documents arrive as text (the pulled group as JSON): the row keeps that payload, encoded as UTF-8."""
    bad = group("caf\u00e9", topics={"orders": -1})
    payload = json.dumps(bad, ensure_ascii=False)
    raw = ingest.RawDocument("kafka://127.0.0.1:9092/caf\u00e9", payload, doc=bad)
    result = ingest.ingest_documents(lake, [raw], snapshot_id="k", run_id="k", received_at=NOW, source="kafka")
    assert result.groups == []
    (row,) = lake.read_arrow("quarantine").to_pylist()
    assert (row["raw_payload"], row["raw_bytes"]) == (payload, payload.encode())


def test_a_lake_from_before_raw_bytes_gets_the_column_and_keeps_its_rows(tmp_path):
    """Schema evolution: the old rows read raw_bytes as null, new rows fill it."""
    from deltalake import DeltaTable, write_deltalake

    from jobs.io.lake import Lake
    from schemas import TABLES

    old_schema = pa.schema([f for f in TABLES["quarantine"].schema if f.name != "raw_bytes"])
    lake = Lake(tmp_path / "lake")
    old = {"ingest_id": "old", "run_id": "before", "source": "s", "raw_payload": "{", "error": "e", "received_at": NOW}
    write_deltalake(lake.path("quarantine"), pa.Table.from_pylist([old], schema=old_schema))
    (tmp_path / "bad.json").write_bytes(b"\xff{")
    run(lake, tmp_path / "bad.json")
    assert "raw_bytes" in DeltaTable(lake.path("quarantine")).schema().to_arrow().names
    rows = {r["ingest_id"]: r for r in lake.read_arrow("quarantine").to_pylist()}
    assert rows.pop("old")["raw_bytes"] is None
    assert [r["raw_bytes"] for r in rows.values()] == [b"\xff{"]


def test_a_topic_with_two_partition_counts_in_one_snapshot_rejects_the_later_group(lake, tmp_path):
    other = group("later")
    other["topics"]["orders"] = 6
    (tmp_path / "a.json").write_text(json.dumps([group("first"), other]))
    result = run(lake, tmp_path / "a.json")
    assert result.groups == ["first"]
    assert result.quarantined[0][1] == "topics.orders: 6 partitions here, but 3 in group 'first' of the same snapshot"


def test_rerunning_the_same_run_writes_no_duplicates(lake):
    run(lake, DEMO)
    counts = {name: lake.read_arrow(name).num_rows for name in ("snapshots", "topic_partitions", "quarantine")}
    run(lake, DEMO)
    assert {name: lake.read_arrow(name).num_rows for name in counts} == counts
    run(lake, DEMO, run_id="run-2")
    assert lake.read_arrow("snapshots").num_rows == 2 * counts["snapshots"]


def test_rerunning_a_long_run_id_writes_no_duplicates(lake):
    """The first ingest of a run id appends; a re-run finds its rows by the Delta log's bounds, which are truncated
    for long ids, and merges on them."""
    run_id = "manual__2026-11-21T02:00:00.000+00:00_" + "x" * 100
    run(lake, DEMO, run_id=run_id)
    counts = {name: lake.read_arrow(name).num_rows for name in ("snapshots", "topic_partitions", "partition_offsets")}
    run(lake, DEMO, run_id=run_id)
    assert {name: lake.read_arrow(name).num_rows for name in counts} == counts


def test_an_empty_group_is_recorded_with_its_state(lake, tmp_path):
    (tmp_path / "empty.json").write_text(
        json.dumps({"group_id": "idle", "state": "Empty", "topics": {}, "members": []})
    )
    run(lake, tmp_path / "empty.json")
    (row,) = lake.read_arrow("snapshots").to_pylist()
    assert (row["group_id"], row["member_id"], row["state"]) == ("idle", "", "Empty")


def test_no_matching_files_is_a_clear_error(lake, tmp_path):
    with pytest.raises(InputError, match="no snapshot files match"):
        run(lake, tmp_path / "missing-*.json")


def in_time(fn, seconds: float = 60.0):
    """fn()'s result, or a failed test when it does not return in time (a hang must fail, not stall the run)."""
    import threading

    box: list = []
    worker = threading.Thread(target=lambda: box.append(fn()), daemon=True)
    worker.start()
    worker.join(seconds)
    assert box, f"still running after {seconds} s"
    return box[0]


def test_file_system_shapes_that_would_hang_abort_or_leak_are_quarantined_by_name(lake, tmp_path):
    import os

    files = tmp_path / "snapshots"
    (files / "..data").mkdir(parents=True)
    (files / "good.json").write_text(json.dumps(group("good")))
    (files / "..data" / "mounted.json").write_text(json.dumps(group("mounted")))
    (files / "mounted.json").symlink_to("..data/mounted.json")  # a Kubernetes ConfigMap's shape: followed
    (files / "loop.json").symlink_to("loop.json")
    os.mkfifo(files / "fifo.json")
    (files / "shadow.json").symlink_to("/etc/hostname")
    (files / "folder.json").mkdir()
    (files / "gone.json").symlink_to("nowhere.json")
    result = in_time(lambda: run(lake, files))
    assert sorted(result.groups) == ["good", "mounted"]
    reasons = dict(result.quarantined)
    assert reasons == {
        f"{files}/fifo.json": f"{files}/fifo.json: a FIFO: not read",
        f"{files}/folder.json": f"{files}/folder.json: a directory: not read",
        f"{files}/gone.json": f"{files}/gone.json: No such file or directory: not read",
        f"{files}/loop.json": f"{files}/loop.json: a symbolic link loop: not read",
        f"{files}/shadow.json": f"{files}/shadow.json: a symbolic link to /etc/hostname, outside {files}: not read",
    }
    kept = lake.read_arrow("quarantine").to_pylist()
    assert {r["source"] for r in kept} == set(reasons) and all(r["raw_bytes"] == b"" for r in kept)


def test_a_glob_keeps_its_links_inside_the_directory_and_a_named_file_is_followed(lake, tmp_path):
    outside = tmp_path / "elsewhere.json"
    outside.write_text(json.dumps(group("named")))
    files = tmp_path / "snapshots"
    files.mkdir()
    (files / "a.json").symlink_to(outside)
    result = run(lake, f"{files}/*.json", run_id="glob")
    assert result.groups == [] and "outside" in result.quarantined[0][1]
    assert run(lake, files / "a.json", run_id="named").groups == ["named"]  # the user named it: followed


def test_assign_on_a_fifo_or_a_directory_exits_2_with_one_line(tmp_path, capsys):
    import os

    from jobs.cli import main

    os.mkfifo(tmp_path / "group.json")
    assert in_time(lambda: main(["assign", "--strategy", "range", str(tmp_path / "group.json")])) == 2
    assert capsys.readouterr().err == f"rebalance assign: error: {tmp_path}/group.json: a FIFO: not read\n"
    assert main(["assign", "--strategy", "range", str(tmp_path)]) == 2
    assert capsys.readouterr().err == f"rebalance assign: error: {tmp_path}: a directory: not read\n"


def test_a_capture_time_after_the_receipt_is_quarantined_and_a_day_of_skew_is_not(lake, tmp_path):
    files = tmp_path / "snapshots"
    files.mkdir()
    (files / "future.json").write_text(json.dumps(group("future", captured_at="2090-01-01T00:00:00Z")))
    (files / "skewed.json").write_text(json.dumps(group("skewed", captured_at="2026-11-21T20:00:00Z")))
    result = run(lake, files)
    assert result.groups == ["skewed"]
    assert list(result.quarantined) == [
        (
            f"{files}/future.json",
            "captured_at: 2090-01-01T00:00:00Z is after the snapshot was received (2026-11-21T02:00:00+00:00)",
        )
    ]
