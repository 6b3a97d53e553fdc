"""End-to-end time of `rebalance assign` on Kafka's largest sticky test: wall time beside the reported elapsed_ms.

Input: AbstractStickyAssignorTest.testLargeAssignmentAndGroupWithUniformSubscription, 500 topics x 2,000
partitions, 2,000 members all subscribed (1,000,000 partitions), written once as a compact-form JSON file.
Prints (1) the in-process breakdown of one run, wall and CPU seconds: read + decode, the rule checks,
parse_group, assign, naming + encoding of the full form (write_json) and of the compact form, the old
`json.dump` of `to_json()` for scale; (2) the
command itself as a subprocess (`.venv/bin/rebalance assign --strategy sticky FILE`, and with `--compact`
when its `--help` offers it): wall time, including start-up, parsing and output, and the child's CPU time
(the figure that holds on a busy machine) beside its elapsed_ms.
Run: `python bench/assign_cli.py [--strategy sticky] [--repeat 3] [--skip-slow]`.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import resource
import subprocess
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
REBALANCE = REPO / ".venv" / "bin" / "rebalance"


def write_input(path: Path, topics: int = 500, partitions: int = 2000, members: int = 2000) -> None:
    """Kafka's test group: topic{i}, consumer{i}, every member subscribed to every topic."""
    names = [f"topic{i:03d}" for i in range(topics)]
    doc = {
        "topics": dict.fromkeys(names, partitions),
        "members": {f"consumer{i:05d}": {"topics": names} for i in range(members)},
    }
    path.write_text(json.dumps(doc))


def timed(fn):
    """(result, wall seconds, CPU seconds) of fn()."""
    wall, cpu = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.perf_counter() - wall, time.process_time() - cpu


def breakdown(path: Path, strategy: str, skip_slow: bool) -> None:
    """One in-process run of the command's phases, output to the null device: wall and CPU seconds each."""
    from planner.assignment import assign_arrays, result_of, write_json
    from planner.group import from_snapshot, is_snapshot, parse_group
    from schemas.reader import read_groups
    from schemas.rules import Limits, check_group

    def row(name: str, wall: float, cpu: float, note: str = "") -> None:
        print(f"  {name:34s} {wall:6.3f} s wall {cpu:6.3f} s CPU {note}")

    groups, wall, cpu = timed(lambda: read_groups(path.read_bytes(), str(path)))
    row("read + decode (schemas.reader)", wall, cpu)

    def check_all() -> None:
        for g in groups:
            check_group(g, Limits.from_env())

    _, wall, cpu = timed(check_all)
    row("check (schemas.rules)", wall, cpu)
    group = groups[0]
    spec, wall, cpu = timed(lambda: parse_group(from_snapshot(group) if is_snapshot(group) else group))
    row("parse_group", wall, cpu)
    arrays, wall, cpu = timed(lambda: assign_arrays(strategy, spec))
    row("assign", wall, cpu, f"(elapsed_ms {arrays.elapsed_ms:.0f})")
    with open(os.devnull, "w", encoding="utf-8") as null:
        for compact in (False, True):
            result = result_of(arrays)  # fresh: names are built inside write_json, not cached from a run before
            _, wall, cpu = timed(lambda r=result, c=compact: write_json(r, null, compact=c))
            out = io.BytesIO()
            write_json(result, out, compact=compact)
            form = "compact" if compact else "full"
            row(f"name + encode + write, {form}", wall, cpu, f"({len(out.getvalue()) / 1e6:.1f} MB)")
        if not skip_slow:
            result = result_of(arrays)
            _, wall, cpu = timed(lambda: json.dump(result.to_json(), null))
            row("before: to_json() + json.dump", wall, cpu)


def run_cli(path: Path, strategy: str, extra: list[str], repeat: int) -> None:
    """The command as a user runs it: best wall time of `repeat` runs, its CPU time, the elapsed_ms it printed."""
    cmd = [str(REBALANCE), "assign", "--strategy", strategy, *extra, str(path)]
    walls, cpus, elapsed, size = [], [], [], 0
    for _ in range(repeat):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        done = subprocess.run(cmd, capture_output=True, check=True)
        walls.append(time.perf_counter() - start)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
        size = len(done.stdout)
        elapsed.append(json.loads(done.stdout)["elapsed_ms"])
    label = " ".join(["rebalance assign --strategy", strategy, *extra])
    print(
        f"  {label:45s} wall {min(walls):6.2f} s (runs: {', '.join(f'{w:.2f}' for w in walls)}), "
        f"CPU {min(cpus):.2f} s, elapsed_ms {min(elapsed):.0f}, output {size / 1e6:.1f} MB"
    )


def main() -> None:
    """Build the input, print the breakdown and the command's wall times."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--strategy", default="sticky")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--skip-slow", action="store_true", help="skip the old json.dump path (tens of seconds)")
    args = ap.parse_args()
    print(f"cpus={os.cpu_count()} load average before={os.getloadavg()}")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "kafka_large_uniform.json"
        write_input(path)
        print(f"input: 500 topics x 2,000 partitions, 2,000 members, {path.stat().st_size / 1e6:.1f} MB")
        print(f"in process ({args.strategy}):")
        breakdown(path, args.strategy, args.skip_slow)
        if not REBALANCE.exists():
            print(f"{REBALANCE} is missing: run `make install` for the command's figures")
            return
        help_text = subprocess.run([str(REBALANCE), "assign", "--help"], capture_output=True, text=True).stdout
        print("the command (subprocess, start-up and output included):")
        run_cli(path, args.strategy, [], args.repeat)
        if "--compact" in help_text:
            run_cli(path, args.strategy, ["--compact"], args.repeat)
        else:
            print("  rebalance assign has no --compact option yet: compact figure in process only")
    print(f"load average after={os.getloadavg()}")


if __name__ == "__main__":
    main()
