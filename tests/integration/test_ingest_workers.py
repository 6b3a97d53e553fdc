"""Ingest read by worker processes: the same verdicts, rows and quarantine, in the same order, as in its own
process; a worker that dies fails the step with one line, and every worker is reaped."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from jobs.io.ingest_worker import IngestWorkers
from jobs.steps import ingest
from planner.errors import SourceError

NOW = datetime(2026, 11, 21, 2, 0, tzinfo=UTC)
KEYS = {"snapshots": ["group_id", "member_id"], "partition_offsets": ["group_id", "topic", "partition"]}


def group(group_id: str, topics: dict[str, int], **extra) -> dict:
    """A valid group: two members splitting every partition, an offsets entry per partition."""
    pairs = [[t, p] for t, n in sorted(topics.items()) for p in range(n)]
    return {
        "group_id": group_id,
        "captured_at": "2026-11-21T01:00:00Z",
        "topics": topics,
        "members": [
            {"member_id": f"{group_id}-m{i}", "topics": sorted(topics), "owned": pairs[i::2], "assignment": pairs[i::2]}
            for i in range(2)
        ],
        "offsets": [{"topic": t, "partition": p, "committed": 10 * p, "end": 10 * p + 7} for t, p in pairs],
        **extra,
    }


def snapshot_dir(tmp_path: Path) -> Path:
    """A directory of every kind of input: JSON lines long enough for several pieces, holding good groups and,
    near its start and its end, bad ones (broken JSON, a rule broken, a conflicting partition count, a group twice,
    a capture time from the future); an array file; a file that is not UTF-8; a link out of the directory."""
    lines = [json.dumps(group("first", {"orders": 3})), "", '{"group_id": "broken", "topics": {', '{"x": NaN}']
    twice = group("twice", {"orders": 3})
    twice["members"][1]["member_id"] = "twice-m0"
    lines.append(json.dumps(twice))
    lines += [json.dumps(group(f"filler-{g:03d}", {f"topic-{g % 7}": 120})) for g in range(120)]
    lines += [
        json.dumps(group("conflicting", {"orders": 6})),
        json.dumps(group("first", {"orders": 3})),
        json.dumps(group("future", {"orders": 3}, captured_at="2030-01-01T00:00:00Z")),
        json.dumps(group("last", {"orders": 3, "refunds": 2}, topic_ids={"refunds": "AAAAAAAAAAAAAAAAAAAAAA"})),
    ]
    files = tmp_path / "snapshots"
    files.mkdir()
    (files / "a.jsonl").write_text("\n".join(lines) + "\n")
    (files / "b.json").write_text(
        json.dumps([group("array", {"orders": 3}), {"group_id": 7}, group("filler-005", {"topic-5": 120})])
    )
    (files / "c.json").write_bytes(b"\xff\xfe{")
    (tmp_path / "outside.json").write_text(json.dumps(group("outside", {"orders": 3})))
    (files / "d.json").symlink_to(tmp_path / "outside.json")
    return files


def test_workers_give_the_tables_and_quarantine_of_this_process_in_its_order(tmp_path, lake):
    files = ingest.snapshot_files(str(snapshot_dir(tmp_path)))
    here = ingest.read_files(files, "s1", "r1", NOW, workers=0)
    apart = ingest.read_files(files, "s1", "r1", NOW, workers=2)
    assert len(apart.pieces) >= 4  # the JSON lines in three pieces or more (256 KB each), and the array file
    assert apart.result == here.result
    assert here.result.groups == ["first", *(f"filler-{g:03d}" for g in range(120)), "last", "array"]
    assert [source.rpartition("/")[2] for source, _ in here.result.quarantined] == [
        *(f"a.jsonl:{n}" for n in (3, 4, 5, 126, 127, 128)),
        "b.json[1]",
        "b.json[2]",
        "c.json",
        "d.json",
    ]
    tables, expected = dict(apart.tables()), dict(here.tables())
    assert list(tables) == list(expected)
    for name, rows in expected.items():
        assert tables[name].equals(rows), name
    assert expected["snapshots"].num_rows == 2 * 123 and expected["partition_offsets"].num_rows == 3 + 120 * 120 + 5 + 3

    ingest.ingest_files(lake, files, "s1", "r1", NOW, workers=2)
    for name, keys in KEYS.items():
        stored = lake.read_arrow(name, columns=expected[name].column_names)
        order = [(key, "ascending") for key in keys]
        assert stored.sort_by(order).equals(expected[name].sort_by(order)), name


def test_a_worker_that_died_fails_the_step_with_one_line_and_every_worker_is_reaped(tmp_path):
    files = tmp_path / "snapshots"
    files.mkdir()
    for name in ("a", "b"):
        (files / f"{name}.json").write_text(json.dumps(group(name, {"orders": 3})))
    workers = IngestWorkers(2)
    workers.processes[1].kill()
    workers.processes[1].wait()
    with pytest.raises(SourceError) as failure:
        ingest.read_files(ingest.snapshot_files(str(files)), "s1", "r1", NOW, workers)
    assert str(failure.value) == "ingest's worker process 2 of 2 ended (exit code -9)"
    assert [process.poll() is not None for process in workers.processes] == [True, True]


def test_by_default_a_single_piece_is_read_here_and_several_by_workers(tmp_path, monkeypatch):
    monkeypatch.setattr(ingest, "MIN_BYTES_FOR_WORKERS", 0)  # every input large enough for workers
    one = tmp_path / "one"
    one.mkdir()
    (one / "large.json").write_text(json.dumps(group("large", {"orders": 3000})))
    alone = ingest.read_files(ingest.snapshot_files(str(one)), "s1", "r1", NOW)
    assert alone.pieces == [] and alone.result.groups == ["large"]  # no piece came from a worker
    files = ingest.snapshot_files(str(snapshot_dir(tmp_path)))
    several = ingest.read_files(files, "s1", "r1", NOW)
    assert len(several.pieces) >= 4
    assert several.result == ingest.read_files(files, "s1", "r1", NOW, workers=0).result
