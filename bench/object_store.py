"""Object-store benchmark: the nightly `rebalance run` into a local lake and into a lake in an S3 bucket, side by side.

The S3 server is moto's server mode on 127.0.0.1 (`jobs.io.s3_server`, signed requests required), so the figures
show what the object-store path costs in requests and commits on this machine (every commit a conditional PUT, the
lake lock a lease object), not a network's latency. Cases: the demo fleet (the bundled snapshot files: five groups)
and `--groups N` seeded groups of issue 12's shape (`bench/pipeline.py`'s generator). Each run is a fresh lake or
bucket; `--repeat` runs per case and store, the best and median wall times printed with the load average.
Run: `python bench/object_store.py [--groups N] [--repeat R]`.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from pipeline import CAPTURED, sized_groups  # noqa: E402

from jobs.io.s3_server import s3_server  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "jobs" / "demo" / "data"


def timed_run(snapshots: Path, lake: str, env: dict[str, str], work: Path) -> float:
    """Wall seconds of one `rebalance run` (exits on failure with its error)."""
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "jobs.cli", "run", "--snapshots", str(snapshots), "--lake", lake],
        env=env,
        cwd=work,
        capture_output=True,
        text=True,
    )
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        sys.exit(f"rebalance run into {lake} failed: {done.stderr[-2000:]}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--groups", type=int, default=1000, help="seeded groups of the second case (0: skip it)")
    parser.add_argument("--repeat", type=int, default=3, help="runs per case and store")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        work = Path(scratch)
        cases = [("demo fleet (5 groups)", DEMO)]
        if args.groups:
            fleet = work / "fleet"
            fleet.mkdir()
            sized_groups(fleet / "groups.jsonl", args.groups, CAPTURED[0])
            cases.append((f"{args.groups} groups", fleet))
        base = {k: v for k, v in os.environ.items() if not k.startswith(("REBALANCE_", "AWS_"))}
        base |= {"REBALANCE_SPARK_MASTER": "local[2]", "REBALANCE_REPORTS": str(work / "reports")}
        with s3_server(work / "s3-logs") as s3:
            print(f"{'case':<24} {'lake':<6} {'best s':>7} {'median s':>9}  load (1 min)")
            for name, snapshots in cases:
                for store in ("local", "s3"):
                    times = []
                    for k in range(args.repeat):
                        if store == "s3":
                            lake, env = f"s3://{s3.bucket()}/lake", base | s3.env()
                        else:
                            lake, env = str(work / f"lake-{name[:4]}-{k}"), base
                        times.append(timed_run(snapshots, lake, env, work))
                    load = os.getloadavg()[0]
                    print(f"{name:<24} {store:<6} {min(times):>7.1f} {statistics.median(times):>9.1f}  {load:.1f}")


if __name__ == "__main__":
    main()
