"""What-if benchmark: `rebalance what-if` on one group of the demo lake, as a person at a terminal runs it.

Each run is a new `rebalance` process (wall time from exec to exit, the answer printed): cold with the embedded
local Spark (a new driver JVM each time), then against a running Spark Connect server (`make spark-connect`'s, here
started on 127.0.0.1 and warmed by one run first). The lake is the demo fleet planned once by `rebalance run`.
Printed per case: min / median / max of `--repeat` runs and the load average before each case.
Targets (issue 21): under 10 s cold embedded, under 3 s through Connect, on an idle 2-core machine.
Run: `python bench/what_if.py [--repeat 3] [--no-connect]`.
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

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from jobs.io.spark_servers import connect_server  # noqa: E402

DEMO = ROOT / "jobs" / "demo" / "data"
QUESTION = ["what-if", "--group", "payments", "--add-members", "2", "--partitions", "orders=24"]


def rebalance(argv: list[str], env: dict[str, str], cwd: Path) -> float:
    """Wall seconds of one `rebalance` command (exits with its error when it fails)."""
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "jobs.cli", *argv], env=env, cwd=cwd, capture_output=True, text=True)
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        sys.exit(f"rebalance {' '.join(argv)} failed: {done.stderr[-2000:]}")
    return elapsed


def figures(label: str, runs: list[float], load: float) -> str:
    return (
        f"{label:<34} min {min(runs):6.2f} s  median {statistics.median(runs):6.2f} s  max {max(runs):6.2f} s  "
        f"({len(runs)} runs, load {load:.2f})"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=3, help="runs per case")
    parser.add_argument("--no-connect", action="store_true", help="skip the Spark Connect case")
    args = parser.parse_args()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("REBALANCE_", "SPARK_", "PYSPARK_"))}
    with tempfile.TemporaryDirectory(prefix="bench-what-if-") as scratch:
        work = Path(scratch)
        env |= {"REBALANCE_LAKE": str(work / "lake"), "REBALANCE_SPARK_LOG": str(work / "spark.log")}
        rebalance(["run", "--snapshots", str(DEMO)], env, work)
        load = os.getloadavg()[0]
        cold = [rebalance(QUESTION, env, work) for _ in range(args.repeat)]
        print(figures("what-if, embedded Spark (cold JVM)", cold, load), flush=True)
        if args.no_connect:
            return
        with connect_server(work / "connect", python=sys.executable) as server:
            remote = env | {"REBALANCE_SPARK_REMOTE": server.url}
            rebalance(QUESTION, remote, work)  # the server's first query loads its classes: not a user's wait
            load = os.getloadavg()[0]
            warm = [rebalance(QUESTION, remote, work) for _ in range(args.repeat)]
        print(figures("what-if, Spark Connect server", warm, load))


if __name__ == "__main__":
    main()
