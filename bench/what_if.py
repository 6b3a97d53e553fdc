"""What-if benchmark: `rebalance what-if` on one group of the demo lake, as a person at a terminal runs it.

Each run is a new `rebalance` process (wall time from exec to exit, the answer printed): cold with the embedded
local Spark (a new driver JVM each time), then against a running Spark Connect server (`make spark-connect`'s, here
started on 127.0.0.1 and warmed by one run first). The lake is the demo fleet planned once by `rebalance run`.
Printed per case: min / median / max of `--repeat` runs' wall time and the median CPU time of everything a run
started (its Python, its driver JVM and Python workers: this process adopts them when their parent exits, Linux's
child subreaper), and the load average before each case. CPU time is the figure to compare on a busy machine.
Targets (issue 21): under 10 s cold embedded, under 3 s through Connect, on an idle 2-core machine.
Run: `python bench/what_if.py [--repeat 3] [--no-connect | --connect-only]`.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Collection
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from jobs.io.spark_servers import connect_server  # noqa: E402

DEMO = ROOT / "jobs" / "demo" / "data"
QUESTION = ["what-if", "--group", "payments", "--add-members", "2", "--partitions", "orders=24"]


PR_SET_CHILD_SUBREAPER = 36  # prctl(2): orphaned descendants are re-parented to this process, not to init


def adopt_orphans() -> None:
    """Become the child subreaper (Linux), so a run's JVM, which outlives the `rebalance` process that started it
    by a moment, can be waited for and its CPU time counted."""
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


def children(keep: Collection[int]) -> set[int]:
    """This process's children but `keep` (a running server), from /proc."""
    me, found = os.getpid(), set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) not in keep:
            with contextlib.suppress(OSError, IndexError, ValueError):
                # The fields after the command's closing parenthesis: state, then the parent's pid.
                if int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1]) == me:
                    found.add(int(entry.name))
    return found


def reap(keep: Collection[int]) -> None:
    """Wait for every child but `keep`: the orphans of the last run (its JVM ends once its stdin closes)."""
    while pending := children(keep):
        for pid in pending:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def rebalance(argv: list[str], env: dict[str, str], cwd: Path, keep: Collection[int] = ()) -> tuple[float, float]:
    """Wall and CPU seconds of one `rebalance` command and what it started (exits with its error when it fails)."""
    cpu = cpu_seconds()
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "jobs.cli", *argv], env=env, cwd=cwd, capture_output=True, text=True)
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        sys.exit(f"rebalance {' '.join(argv)} failed: {done.stderr[-2000:]}")
    reap(keep)
    return elapsed, cpu_seconds() - cpu


def compile_bytecode() -> None:
    """The project's own modules compiled, as the first run of a command leaves them (`pip install -e` does not
    compile them, and with PYTHONDONTWRITEBYTECODE set every run would compile them again)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    subprocess.run(
        [sys.executable, "-m", "compileall", "-q", "jobs", "planner", "schemas"], cwd=ROOT, env=env, check=True
    )


def figures(label: str, runs: list[tuple[float, float]], load: float) -> str:
    walls = [wall for wall, _ in runs]
    cpu = statistics.median(cpu for _, cpu in runs)
    return (
        f"{label:<34} min {min(walls):6.2f} s  median {statistics.median(walls):6.2f} s  max {max(walls):6.2f} s  "
        f"CPU {cpu:6.2f} s  ({len(runs)} runs, load {load:.2f})"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=3, help="runs per case")
    cases = parser.add_mutually_exclusive_group()
    cases.add_argument("--no-connect", action="store_true", help="skip the Spark Connect case")
    cases.add_argument("--connect-only", action="store_true", help="skip the embedded case")
    args = parser.parse_args()
    adopt_orphans()
    compile_bytecode()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("REBALANCE_", "SPARK_", "PYSPARK_"))}
    with tempfile.TemporaryDirectory(prefix="bench-what-if-") as scratch:
        work = Path(scratch)
        env |= {"REBALANCE_LAKE": str(work / "lake"), "REBALANCE_SPARK_LOG": str(work / "spark.log")}
        rebalance(["run", "--snapshots", str(DEMO)], env, work)
        if not args.connect_only:
            load = os.getloadavg()[0]
            cold = [rebalance(QUESTION, env, work) for _ in range(args.repeat)]
            print(figures("what-if, embedded Spark (cold JVM)", cold, load), flush=True)
        if args.no_connect:
            return
        with connect_server(work / "connect", python=sys.executable) as server:
            remote = env | {"REBALANCE_SPARK_REMOTE": server.url}
            keep = {server.process.pid}
            rebalance(QUESTION, remote, work, keep)  # the server's first query loads its classes: not a user's wait
            load = os.getloadavg()[0]
            warm = [rebalance(QUESTION, remote, work, keep) for _ in range(args.repeat)]
        print(figures("what-if, Spark Connect server", warm, load))
        print("  (Connect: the CPU figure is the client's alone; the server's is not counted)")


if __name__ == "__main__":
    main()
