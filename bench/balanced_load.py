"""balanced-load on many small groups: CPU per group of the assignment on the nightly plan's shape (issue 21).

The groups are bench/pipeline.py's (`sized_documents`, issue 12's shape, seed 12: 5-50 members, 1-3 of 200 shared
topics of 10-500 partitions, the last member just joined so no group is settled), read as the plan step reads them
(`planner.group.from_snapshot`) with loads from lag (end - committed offset), as the plan step picks them when
there are neither key samples nor a previous snapshot. Prints the CPU seconds of `balanced_load_assign` over all
groups per run and per group (min / median / max of --repeat runs), the slowest group, the load average, and with
--profile cProfile's top functions of one more run. CPU time, not wall time: the machine is shared.
Run: `python bench/balanced_load.py [--groups N] [--repeat N] [--seed S] [--profile]`.
"""

from __future__ import annotations

import argparse
import cProfile
import dataclasses
import os
import pstats
import statistics
import time
from typing import Any

from pipeline import CAPTURED, GroupShape, sized_documents

from planner.assignors.balanced_load import balanced_load_assign
from planner.group import GroupSpec, from_snapshot, parse_group


def lag_groups(groups: int, seed: int) -> list[GroupSpec]:
    """The pipeline benchmark's groups, parsed, each partition weighing its lag."""
    specs = []
    for doc in sized_documents(groups, CAPTURED[0], GroupShape(seed=seed)):
        compact = from_snapshot(doc)
        lags: dict[str, list[float]] = {t: [0.0] * n for t, n in compact["topics"].items()}
        offsets: list[dict[str, Any]] = doc["offsets"]  # type: ignore[assignment]
        for o in offsets:
            lags[o["topic"]][o["partition"]] = float(o["end"] - o["committed"])
        specs.append(parse_group({**compact, "loads": lags}))
    return specs


def cpu_per_group(specs: list[GroupSpec]) -> tuple[float, float, int]:
    """CPU seconds of one assignment of every group, and the slowest group's seconds and index."""
    slowest, which = 0.0, -1
    start = time.process_time()
    for i, spec in enumerate(specs):
        before = time.process_time()
        balanced_load_assign(spec)
        took = time.process_time() - before
        if took > slowest:
            slowest, which = took, i
    return time.process_time() - start, slowest, which


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--groups", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--seed", type=int, default=GroupShape.seed)
    parser.add_argument("--profile", action="store_true", help="cProfile's top functions of one more run")
    args = parser.parse_args()
    specs = lag_groups(args.groups, args.seed)
    partitions = sum(s.num_partitions for s in specs)
    members = sum(len(s.members) for s in specs)
    print(f"{len(specs):,} groups, {partitions:,} partitions, {members:,} members (seed {args.seed})")
    balanced_load_assign(specs[0])  # imports and first-call costs outside the figures
    totals = []
    for run in range(args.repeat):
        total, slowest, which = cpu_per_group([dataclasses.replace(s) for s in specs])  # nothing cached from before
        totals.append(total)
        print(
            f"run {run + 1}: CPU {total:.2f} s, {1000 * total / len(specs):.2f} ms per group; slowest group "
            f"{which} ({specs[which].num_partitions} partitions, {len(specs[which].members)} members) "
            f"{1000 * slowest:.1f} ms  (load avg {os.getloadavg()[0]:.1f})"
        )
    per_group = [1000 * t / len(specs) for t in totals]
    print(
        f"balanced-load, {len(specs):,} groups: CPU {min(totals):.2f} / {statistics.median(totals):.2f} / "
        f"{max(totals):.2f} s (min / median / max of {args.repeat}), {min(per_group):.2f} / "
        f"{statistics.median(per_group):.2f} / {max(per_group):.2f} ms per group  "
        f"(load avg {' '.join(f'{v:.1f}' for v in os.getloadavg())})"
    )
    if args.profile:
        profile = cProfile.Profile()
        profile.runcall(lambda: [balanced_load_assign(s) for s in specs])
        pstats.Stats(profile).sort_stats("tottime").print_stats(20)


if __name__ == "__main__":
    main()
