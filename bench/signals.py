"""Signals: time to compute and write the metrics file of a lake with many groups (what each run and each scrape pay).

A synthetic lake: G groups, each with H generations of M members and P partitions (one chosen candidate, its plan
rows, the snapshot's members and offsets). Prints one line per size: rows read, seconds to write the .prom file.

    .venv/bin/python bench/signals.py [--groups 100,1000] [--history 5] [--members 10] [--partitions 50]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa

from jobs.io.lake import Lake, rows_table
from jobs.steps import signals

T0 = datetime(2026, 11, 21, tzinfo=UTC)


def build(lake: Lake, groups: int, history: int, members: int, partitions: int) -> int:
    """Fill the lake; returns the number of rows written."""
    generations, metrics, plans, snapshots, offsets = [], [], [], [], []
    for g in range(groups):
        group = f"group-{g:05d}"
        for n in range(1, history + 1):
            run = f"run-{n}"
            status = "approved" if n < history else "gated"
            generations.append(
                {"group_id": group, "generation_id": n, "run_id": run, "snapshot_id": run, "created_at": T0}
                | {"chosen_strategy": "sticky", "status": status}
            )
            metrics.append(
                {"generation_id": n, "group_id": group, "strategy": "sticky", "members": members}
                | {"partitions": partitions, "max_load": 6.0, "mean_load": 5.0, "max_mean_load": 1.2}
                | {"partitions_moved": 3, "chosen": True}
            )
            plans += [
                {"generation_id": n, "group_id": group, "strategy": "sticky", "topic": "t", "partition": p}
                | {"member": f"m{p % members}", "moved": False, "weight": 1.0 + p % 3}
                for p in range(partitions)
            ]
            snapshots += [{"snapshot_id": run, "group_id": group, "member_id": f"m{m}"} for m in range(members)]
            offsets += [
                {"snapshot_id": run, "group_id": group, "topic": "t", "partition": p, "lag": p}
                for p in range(partitions)
            ]
    for name, rows in [
        ("generations", generations),
        ("plan_metrics", metrics),
        ("plans", plans),
        ("snapshots", snapshots),
        ("partition_offsets", offsets),
    ]:
        lake.append(name, rows_table(name, rows))
    return sum(map(len, (generations, metrics, plans, snapshots, offsets)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--groups", default="100,1000")
    parser.add_argument("--history", type=int, default=5)
    parser.add_argument("--members", type=int, default=10)
    parser.add_argument("--partitions", type=int, default=50)
    args = parser.parse_args()
    print(
        f"pyarrow {pa.__version__}; {args.history} generations a group, {args.members} members, "
        f"{args.partitions} partitions"
    )
    print(f"{'groups':>7} {'rows':>10} {'write s':>8} {'series':>7}")
    for groups in (int(x) for x in args.groups.split(",")):
        with tempfile.TemporaryDirectory() as root:
            lake = Lake(root)
            lake.create_all()
            rows = build(lake, groups, args.history, args.members, args.partitions)
            started = time.perf_counter()
            path = signals.write(lake)
            elapsed = time.perf_counter() - started
            series = sum(1 for line in Path(path).read_text().splitlines() if not line.startswith("#"))
            print(f"{groups:>7} {rows:>10} {elapsed:>8.2f} {series:>7}")


if __name__ == "__main__":
    main()
