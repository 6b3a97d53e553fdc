"""Ingest's reading in its own process and with a worker per core (`jobs.steps.ingest.read_files`), by input size:
wall and CPU (this process and its reaped workers), best of --repeat. Where the workers start paying for their
start is the crossover `jobs.steps.ingest.MIN_BYTES_FOR_WORKERS` is set from.

    .venv/bin/python bench/ingest_workers.py --groups 10,50,100,200,1000 --repeat 3
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from pipeline import CAPTURED, sized_groups  # noqa: E402

from jobs.steps.ingest import read_files  # noqa: E402

RECEIVED = datetime(2026, 11, 20, 3, 0, tzinfo=UTC)


def measure(path: Path, workers: int, repeat: int) -> tuple[float, float]:
    """Best wall and CPU seconds of reading `path` into a snapshot's tables with `workers` workers."""
    best = (float("inf"), float("inf"))
    for _ in range(repeat):
        wall, cpu = time.perf_counter(), _cpu()
        snapshot = read_files([(path, None)], "bench", "bench", RECEIVED, workers)
        for _name, _rows in snapshot.tables():
            pass
        best = min(best, (time.perf_counter() - wall, _cpu() - cpu))
    return best


def _cpu() -> float:
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--groups", default="10,50,100,200,1000", help="input sizes in groups (~57 KB each)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--workers", type=int, default=len(os.sched_getaffinity(0)))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as work:
        warm_up = Path(work) / "warm-up.jsonl"
        sized_groups(warm_up, 5, CAPTURED[0])
        measure(warm_up, 0, 1)
        print(f"load {os.getloadavg()[0]:.2f}; best of {args.repeat}; {args.workers} workers")
        for groups in map(int, args.groups.split(",")):
            path = Path(work) / f"{groups}.jsonl"
            sized_groups(path, groups, CAPTURED[0])
            here, apart = measure(path, 0, args.repeat), measure(path, args.workers, args.repeat)
            size = path.stat().st_size / 1e6
            print(
                f"{groups:6d} groups {size:7.1f} MB: here {here[0]:5.2f} s wall {here[1]:5.2f} s CPU;"
                f" workers {apart[0]:5.2f} s wall {apart[1]:5.2f} s CPU",
                flush=True,
            )
    print(f"load {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
