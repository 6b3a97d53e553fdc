"""Pipeline benchmark: `rebalance run` end to end on (a) 1,000 groups of issue 12's shape (5-50 members, 1-3 topics of
10-500 partitions, seeded), (c) a fleet of 10,000 such groups (about 5M partitions) and (b) one group of 1,000,000
partitions x 2,000 members, from snapshot files in a temporary directory.

Each case runs the real command in a subprocess with Spark's default driver memory (no spark.driver.memory set)
and samples the whole process tree (the CLI, Spark's driver JVM, its Python workers) every 50 ms. Prints wall
time, CPU time of the tree (user + system: on a shared machine wall time includes waiting for a core, so the
load average is printed too), peak RSS of the tree, the command's exit code and the time of each step as the
command prints it. With `--repeat N` each case runs N times on a fresh lake: min / median / max. `all` is (a) and
(b); the fleet runs when asked for by name (`--case fleet`).
A fresh clone's first run pays one-time costs the later ones do not (Python's bytecode, numba's compiled loops, the
JVM's class archive when `make install` was skipped): a warm-up run of 20 groups goes first and is printed apart,
so the figures are the same on a fresh clone as on a working copy (`--no-warm-up` to see the first run's cost).
Run: `python bench/pipeline.py [--case groups|fleet|large|all] [--repeat N] [--groups N] [--fleet N]
[--group-members MIN MAX] [--group-partitions MIN MAX] [--group-topics MIN MAX] [--seed S]
[--topics T --partitions P --members M]`.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[1]
CAPTURED = ("2026-11-20T02:00:00Z", "2026-11-21T02:00:00Z")


@dataclass(frozen=True)
class GroupShape:
    """The size ranges of the groups case (inclusive); the defaults are issue 12's."""

    members: tuple[int, int] = (5, 50)
    partitions: tuple[int, int] = (10, 500)  # per topic
    topics: tuple[int, int] = (1, 3)  # per group
    seed: int = 12


def sized_groups(path: Path, groups: int, captured_at: str, shape: GroupShape = GroupShape(), growth: int = 0) -> None:
    """`sized_documents` as one snapshot file, a group per line; the same seed gives the same file."""
    with path.open("w") as out:
        for doc in sized_documents(groups, captured_at, shape, growth):
            out.write(json.dumps(doc, separators=(",", ":")) + "\n")


def sized_documents(
    groups: int, captured_at: str, shape: GroupShape = GroupShape(), growth: int = 0
) -> Iterator[dict[str, object]]:
    """`groups` seeded snapshot documents of `shape` over 200 shared topics: members, some subscribed to fewer
    topics, today's owners, static members, racks and committed offsets (bench/balanced_load.py plans them too)."""
    rng = random.Random(shape.seed)
    counts = {f"topic-{k:03d}": rng.randint(*shape.partitions) for k in range(200)}
    names = sorted(counts)
    for g in range(groups):
        topics = rng.sample(names, rng.randint(*shape.topics))
        yield {
            "group_id": f"group-{g:04d}",
            "captured_at": captured_at,
            "state": "Stable",
            "protocol": "cooperative-sticky",
            "generation": 10 + g % 7,
            "topics": {t: counts[t] for t in topics},
            "members": group_members(g, topics, rng.randint(*shape.members), counts),
            "offsets": group_offsets(g, topics, counts, growth),
        }


def group_members(g: int, topics: list[str], n_members: int, counts: dict[str, int]) -> list[dict[str, object]]:
    """Members of group `g`, the first subscribed to its first topic only; today's owners round robin over every
    member but the last (it just joined and owns nothing)."""
    subscribed = [topics if i or len(topics) == 1 else topics[:1] for i in range(n_members)]
    owned: list[list[list[object]]] = [[] for _ in range(n_members)]
    for t in topics:
        holders = [i for i in range(n_members - 1) if t in subscribed[i]]
        for p in range(counts[t]):
            owned[holders[p % len(holders)]].append([t, p])
    return [
        {
            "member_id": f"g{g:04d}-m{i}-{g * 31 + i:06x}",
            "client_id": f"g{g:04d}-m{i}",
            "host": f"/10.{g // 250}.{g % 250}.{i + 1}",
            "group_instance_id": f"g{g:04d}-static-{i}" if g % 4 == 0 else None,
            "rack": f"az{1 + i % 3}",
            "strategies": ["cooperative-sticky", "range"],
            "topics": subscribed[i],
            "owned": owned[i],
            "assignment": owned[i],
        }
        for i in range(n_members)
    ]


def group_offsets(g: int, topics: list[str], counts: dict[str, int], growth: int) -> list[dict[str, object]]:
    """Committed and end offsets of every partition of group `g`'s topics (lag under 900)."""
    offsets: list[dict[str, object]] = []
    for t in topics:
        for p in range(counts[t]):
            end = 10_000 + 97 * p + 13 * g + growth * (1 + p % 5)
            offsets.append({"topic": t, "partition": p, "committed": end - (p * 37 + g) % 900, "end": end})
    return offsets


def large_group(path: Path, topics: int, partitions: int, members: int, captured_at: str) -> None:
    """One group of `topics` x `partitions` partitions and `members` members subscribed to every topic, each
    owning a round-robin share today, with committed and end offsets for every partition."""
    names = [f"big-{t:03d}" for t in range(topics)]
    owned: list[list[list[object]]] = [[] for _ in range(members)]
    offsets = []
    i = 0
    for t in names:
        for p in range(partitions):
            owned[i % members].append([t, p])
            i += 1
            end = 1_000_000 + 7 * p
            offsets.append({"topic": t, "partition": p, "committed": end - (p * 31) % 5000, "end": end})
    doc = {
        "group_id": "large",
        "captured_at": captured_at,
        "state": "Stable",
        "protocol": "cooperative-sticky",
        "generation": 7,
        "topics": {t: partitions for t in names},
        "members": [
            {
                "member_id": f"large-m{m:05d}",
                "client_id": f"large-{m:05d}",
                "host": f"/10.9.{m // 250}.{m % 250}",
                "strategies": ["cooperative-sticky", "range"],
                "topics": names,
                "owned": owned[m],
                "assignment": owned[m],
            }
            for m in range(members)
        ],
        "offsets": offsets,
    }
    path.write_text(json.dumps(doc, separators=(",", ":")))


def describe(shape: GroupShape) -> str:
    """The shape as the figures state it."""
    (m0, m1), (t0, t1), (p0, p1) = shape.members, shape.topics, shape.partitions
    return f"{m0}-{m1} members, {t0}-{t1} topics of {p0}-{p1} partitions, seed {shape.seed}"


def sample_tree(root: psutil.Process, cpu: dict[int, float]) -> int:
    """Resident bytes of a process and all its descendants now; records each one's CPU seconds so far in `cpu`
    (processes that end between samples count as they were last seen)."""
    total = 0
    try:
        tree = [root, *root.children(recursive=True)]
    except psutil.Error:  # the command ended
        return 0
    for proc in tree:
        try:
            with proc.oneshot():
                total += proc.memory_info().rss
                times = proc.cpu_times()
                cpu[proc.pid] = times.user + times.system
        except psutil.Error:
            pass
    return total


def run_measured(args: list[str], env: dict[str, str]) -> tuple[float, int, float, int, str]:
    """Run a command; returns (wall seconds, peak RSS of its process tree, CPU seconds of the tree, exit code,
    the plan step's task split and the last lines of output). CPU time is the figure to compare on a shared
    machine: wall time includes waiting."""
    start = time.perf_counter()
    proc = subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    root = psutil.Process(proc.pid)
    peak = 0
    cpu: dict[int, float] = {}
    done = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not done.is_set():
            peak = max(peak, sample_tree(root, cpu))
            time.sleep(0.05)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    output, _ = proc.communicate()
    wall = time.perf_counter() - start
    done.set()
    sampler.join()
    lines = output.strip().splitlines()
    split = [line for line in lines[:-8] if line.startswith("plan: ")]  # the plan step's tasks per executor
    return wall, peak, sum(cpu.values()), proc.returncode, "\n".join(split + lines[-8:])


def rebalance_run(snapshots: Path, lake: Path, run_id: str, strategies: str) -> tuple[float, int, float, int, str]:
    """`rebalance run` as a user starts it, with Spark's default driver memory."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("REBALANCE_")}
    env |= {"REBALANCE_LAKE": str(lake), "REBALANCE_REPORTS": str(lake / "reports")}
    command = [sys.executable, "-m", "jobs.cli", "run", "--snapshots", str(snapshots), "--run-id", run_id]
    return run_measured(command + (["--strategies", strategies] if strategies else []), env)


def repeated(
    case: str, snapshots: Path, lake: Path, run_id: str, strategies: str, repeat: int
) -> tuple[float, int, float, int, str]:
    """The case `repeat` times, each into a fresh lake; prints each run, then min / median / max when more than one.
    Returns the last run's figures."""
    walls, cpus, peaks = [], [], []
    for _ in range(repeat):
        shutil.rmtree(lake, ignore_errors=True)
        figures = rebalance_run(snapshots, lake, run_id, strategies)
        report(case, figures)
        walls.append(figures[0])
        peaks.append(figures[1])
        cpus.append(figures[2])
    if repeat > 1:
        print(
            f"{case:<48} min / median / max: wall {spread(walls)} s, CPU {spread(cpus)} s, "
            f"peak RSS {spread([p / 2**30 for p in peaks], 2)} GB"
        )
    return figures


def spread(values: list[float], digits: int = 1) -> str:
    return " / ".join(f"{v:.{digits}f}" for v in (min(values), statistics.median(values), max(values)))


def report(case: str, figures: tuple[float, int, float, int, str]) -> None:
    wall, peak, cpu, code, tail = figures
    load = os.getloadavg()[0]
    print(
        f"{case:<48} wall {wall:6.1f} s  CPU {cpu:6.1f} s  peak RSS (tree) {peak / 2**30:4.2f} GB  exit {code}"
        f"  (load avg {load:.1f})"
    )
    for prefix in ("plan: ", "steps: "):
        printed = [line for line in tail.splitlines() if line.startswith(prefix)]
        if printed:
            print("  " + printed[-1])
    if code not in (0, 1):
        print("  " + tail.replace("\n", "\n  "))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", choices=("groups", "fleet", "large", "all"), default="all")
    parser.add_argument("--repeat", type=int, default=1, help="runs per case, each into a fresh lake")
    parser.add_argument("--groups", type=int, default=1000)
    parser.add_argument("--fleet", type=int, default=10_000, help="groups of the fleet case")
    parser.add_argument("--group-members", type=int, nargs=2, default=GroupShape.members, metavar=("MIN", "MAX"))
    parser.add_argument("--group-partitions", type=int, nargs=2, default=GroupShape.partitions, metavar=("MIN", "MAX"))
    parser.add_argument("--group-topics", type=int, nargs=2, default=GroupShape.topics, metavar=("MIN", "MAX"))
    parser.add_argument("--seed", type=int, default=GroupShape.seed)
    parser.add_argument("--topics", type=int, default=500)
    parser.add_argument("--partitions", type=int, default=2000)
    parser.add_argument("--members", type=int, default=2000)
    parser.add_argument("--strategies", default="", help="default: the configured strategies")
    parser.add_argument("--second-run", action="store_true", help="(a) again a day later: throughput loads")
    parser.add_argument("--no-warm-up", dest="warm_up", action="store_false", help="no warm-up run first")
    args = parser.parse_args()
    print(f"spark.driver.memory: not set (Spark's default, 1g); {os.cpu_count()} cores")
    shape = GroupShape(args.group_members, args.group_partitions, args.group_topics, args.seed)
    with tempfile.TemporaryDirectory(prefix="bench-pipeline-") as tmp:
        work = Path(tmp)
        if args.warm_up:
            (work / "warm-up").mkdir()
            sized_groups(work / "warm-up" / "day1.jsonl", 20, CAPTURED[0], shape)
            report("warm-up: 20 groups (one-time costs)", rebalance_run(work / "warm-up", work / "lake-w", "w", ""))
        for case, label, groups in (("groups", "a", args.groups), ("fleet", "c", args.fleet)):
            if args.case != case and (args.case != "all" or case == "fleet"):  # the fleet's half hour: asked by name
                continue
            files = work / case
            files.mkdir()
            sized_groups(files / "day1.jsonl", groups, CAPTURED[0], shape)
            size = (files / "day1.jsonl").stat().st_size / 2**20
            name = f"({label}) {groups:,} groups, {describe(shape)} ({size:.0f} MB)"
            repeated(name, files, work / f"lake-{label}", f"bench-{label}1", args.strategies, args.repeat)
            if args.second_run:
                (files / "day1.jsonl").unlink()
                sized_groups(files / "day2.jsonl", groups, CAPTURED[1], shape, growth=86_400)
                report(
                    f"({label}) the same groups a day later",
                    rebalance_run(files, work / f"lake-{label}", f"bench-{label}2", args.strategies),
                )
            shutil.rmtree(files)
        if args.case in ("large", "all"):
            files = work / "large"
            files.mkdir()
            large_group(files / "large.json", args.topics, args.partitions, args.members, CAPTURED[1])
            n = args.topics * args.partitions
            size = (files / "large.json").stat().st_size / 2**20
            name = f"(b) {n:,} partitions x {args.members:,} members ({size:.0f} MB)"
            repeated(name, files, work / "lake-b", "bench-b", args.strategies, args.repeat)


if __name__ == "__main__":
    main()
