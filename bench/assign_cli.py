"""End-to-end time of `rebalance assign` on Kafka's largest sticky tests: 8 cases, each the command in a new process.

Inputs (AbstractStickyAssignorTest.testLargeAssignmentAndGroupWithUniformSubscription and
...WithNonEqualSubscription): 500 topics t000..t499 of 2,000 partitions (1,000,000), 2,000 members c0000..c1999 (Kafka's
getTopicName / getConsumerName), every member subscribed to every topic, or (unequal) the last one to t000 only.
Rounds: the first (nobody owns anything) and the second, where every member owns what the first round gave it
(sticky, computed here with the planner), generation 1 as Kafka's test sets it (Kafka's test rejoins member 0
without its partitions; the issue has every member own its share, so here member 0 does too). Forms: the compact
assignor form (one line of `json.dumps`) and the snapshot-file form as `rebalance snapshot` writes it (a JSON array,
`indent=1`, keys sorted: four lines a pair).

Prints, per case: (1) the command `.venv/bin/rebalance assign --strategy sticky FILE` (start-up, reading, checks,
assignment and the full JSON output to a pipe included), --repeat runs in a row: min / median / max wall seconds,
the child's CPU seconds (user + system; the figure that holds on a busy machine), the load average
(`os.getloadavg()`) before and after, output size; (2) with --phases (default on), one in-process run in a fresh
interpreter split into phases, wall and CPU: imports, read, the plain-file path (`schemas.plain_groups`: structural
walk, skeleton through the reader and the rules, the bulk lists, the GroupSpec), assign, encode, write through the
CLI's stdout wrapper to /dev/null. `--general` adds the general path's phases on the same input (reader, rules,
parse_group: what every input took before), `--checkout DIR` times `python -m jobs.cli` of another checkout (e.g.
a `git worktree` of the previous commit) instead of this one's command, for before / after figures.

Run: `python bench/assign_cli.py [--repeat 3] [--cases uniform-first-compact,...] [--no-phases] [--general]`.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
REBALANCE = REPO / ".venv" / "bin" / "rebalance"
PYTHON = REPO / ".venv" / "bin" / "python"
TOPICS, PARTITIONS, MEMBERS = 500, 2000, 2000
SHAPES, ROUNDS, FORMS = ("uniform", "unequal"), ("first", "second"), ("compact", "snapshot")
CASES = [f"{s}-{r}-{f}" for s in SHAPES for r in ROUNDS for f in FORMS]


def kafka_name(prefix: str, i: int, count: int) -> str:
    """AbstractStickyAssignorTest.getCanonicalName: the prefix and i padded to the digits of `count`."""
    return f"{prefix}{i:0{len(str(count))}d}"


def subscriptions(shape: str) -> dict[str, list[str]]:
    topics = [kafka_name("t", i, TOPICS) for i in range(TOPICS)]
    subs = {kafka_name("c", i, MEMBERS): topics for i in range(MEMBERS)}
    if shape == "unequal":  # testLargeAssignmentAndGroupWithNonEqualSubscription: the last member, one topic
        subs[kafka_name("c", MEMBERS - 1, MEMBERS)] = topics[:1]
    return subs


def first_round_owned(subs: dict[str, list[str]]) -> dict[str, list[list]]:
    """What sticky gives each member in the first round, as `rebalance assign` lists it (sorted pairs)."""
    from planner import assign

    topics = {kafka_name("t", i, TOPICS): PARTITIONS for i in range(TOPICS)}
    result = assign("sticky", {"topics": topics, "members": {m: {"topics": t} for m, t in subs.items()}})
    return {m: [[t, p] for t, p in parts] for m, parts in result.assignment.items()}


def write_inputs(folder: Path, cases: list[str]) -> dict[str, Path]:
    """The input file of each case."""
    topics = {kafka_name("t", i, TOPICS): PARTITIONS for i in range(TOPICS)}
    paths = {}
    for shape in SHAPES:
        wanted = [c for c in cases if c.startswith(shape)]
        if not wanted:
            continue
        subs = subscriptions(shape)
        owned = first_round_owned(subs) if any("-second-" in c for c in wanted) else {}
        for case in wanted:
            _, round_, form = case.split("-")
            second = round_ == "second"
            if form == "compact":
                members = {
                    m: {"topics": t, **({"owned": owned[m], "generation": 1} if second else {})}
                    for m, t in subs.items()
                }
                text = json.dumps({"topics": topics, "members": members})
            else:
                members = [
                    {
                        "member_id": m,
                        "client_id": m,
                        "host": "/10.0.0.1",
                        "topics": t,
                        "owned": owned[m] if second else [],
                    }
                    for m, t in subs.items()
                ]
                doc = {
                    "group_id": f"large-{shape}",
                    "source": "file",
                    "state": "Stable" if second else "PreparingRebalance",
                    "protocol_type": "consumer",
                    "protocol": "sticky",
                    "generation": 1 if second else -1,
                    "topics": topics,
                    "members": members,
                }
                text = json.dumps([doc], indent=1, sort_keys=True) + "\n"  # as jobs.io.kafka_source.write_snapshots
            paths[case] = folder / f"{case}.json"
            paths[case].write_text(text)
    return paths


def load() -> str:
    return "/".join(f"{x:.1f}" for x in os.getloadavg())


def run_command(path: Path, repeat: int, checkout: Path | None, extra: list[str]) -> dict:
    """The command as a user runs it, `repeat` times in a row: wall and child CPU seconds of each run."""
    if checkout is None:
        cmd = [str(REBALANCE), "assign", "--strategy", "sticky", *extra, str(path)]
        cwd = REPO
    else:
        cmd = [str(PYTHON), "-m", "jobs.cli", "assign", "--strategy", "sticky", *extra, str(path)]
        cwd = checkout
    walls, cpus, size, elapsed = [], [], 0, 0.0
    load_before = load()
    for i in range(repeat):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        done = subprocess.run(cmd, capture_output=True, cwd=cwd)
        walls.append(time.perf_counter() - start)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
        if done.returncode != 0:
            raise SystemExit(f"{' '.join(cmd)}: exit {done.returncode}: {done.stderr.decode()[-2000:]}")
        if i == 0:
            size = len(done.stdout)
            elapsed = json.loads(done.stdout)["elapsed_ms"]
    return {"walls": walls, "cpus": cpus, "size": size, "elapsed_ms": elapsed, "load": (load_before, load())}


def spread(values: list[float]) -> str:
    return f"{min(values):.2f} / {statistics.median(values):.2f} / {max(values):.2f}"


# --- the phases, in a fresh interpreter ------------------------------------------------------------------------


def phases(path: str, general: bool) -> None:
    """Time the command's phases in this (fresh) process and print them; called as `--phases-of FILE`."""
    rows: list[tuple[str, float, float]] = []

    def timed(name: str, fn):  # noqa: ANN001, ANN202
        wall, cpu = time.perf_counter(), time.process_time()
        out = fn()
        rows.append((name, time.perf_counter() - wall, time.process_time() - cpu))
        return out

    def imports():  # noqa: ANN202
        import jobs.cli  # noqa: F401  (what the command imports before it runs)
        import planner.assignors.sticky  # noqa: F401
        from planner.assignment import assign_arrays, result_of, write_json
        from schemas import plain_groups
        from schemas.rules import Limits

        return assign_arrays, result_of, write_json, plain_groups, Limits

    assign_arrays, result_of, write_json, pg, limits_cls = timed("imports (jobs.cli, planner, schemas)", imports)
    from planner.gc_pause import gc_paused

    data = timed("read the file", lambda: Path(path).read_bytes())
    limits = limits_cls.from_env()
    with gc_paused():
        walk = pg._Walk(data)
        groups = timed("plain: structural walk", walk.document)

        def skeleton():  # noqa: ANN202
            docs = [d.doc for d in pg._read_whole(walk.skeleton(), path)]
            for doc in docs:
                pg.check_group(doc, limits)
            return docs

        docs = timed("plain: skeleton -> reader + rules", skeleton)
        specs = timed("plain: lists in bulk -> GroupSpec", lambda: [pg._group_spec(docs[0], groups[0], data)])
    rows.append(("  (= plain path, read_plain_groups)", sum(r[1] for r in rows[2:5]), sum(r[2] for r in rows[2:5])))
    arrays = timed("assign (sticky)", lambda: assign_arrays("sticky", specs[0]))
    result = result_of(arrays)
    encoded = timed("encode (full form, bulk)", lambda: pg_encode(result))
    with open(os.devnull, "w", encoding="utf-8") as null:
        from jobs.terminal import SafeWriter

        out = SafeWriter(null)
        timed("write through SafeWriter", lambda: out.buffer.write(encoded))
        result = result_of(arrays)
        timed("  (= write_json, as the command)", lambda: write_json(result, out, compact=False))
    if general:
        from planner.group import from_snapshot, is_snapshot, parse_group
        from schemas.reader import read_json_documents
        from schemas.rules import check_group

        docs = timed("general: reader (schemas.reader)", lambda: [d.value() for d in read_json_documents(data, path)])
        timed("general: rules (check_group)", lambda: [check_group(d, limits) for d in docs])
        timed("general: parse_group", lambda: [parse_group(from_snapshot(d) if is_snapshot(d) else d) for d in docs])
    for name, wall, cpu in rows:
        print(f"    {name:40s} {wall:6.3f} s wall {cpu:6.3f} s CPU")


def pg_encode(result) -> bytes:  # noqa: ANN001
    from planner.assignment import _encode_full

    data = _encode_full(result, None)
    assert data is not None
    return data


def main() -> None:
    """Build the inputs, then per case: the command's wall and CPU times, and where the time goes."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3, help="runs of the command per case (default 3)")
    ap.add_argument("--cases", default=",".join(CASES), help=f"comma-separated, of {', '.join(CASES)}")
    ap.add_argument("--no-phases", dest="phases", action="store_false", help="skip the in-process breakdown")
    ap.add_argument("--general", action="store_true", help="also time the general path's phases (~5 s a case)")
    ap.add_argument("--checkout", type=Path, help="time `python -m jobs.cli` run in this checkout instead")
    ap.add_argument("--compact-output", action="store_true", help="run the command with --compact")
    ap.add_argument("--phases-of", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.phases_of:
        phases(args.phases_of, args.general)
        return
    cases = [c for c in args.cases.split(",") if c]
    if unknown := set(cases) - set(CASES):
        ap.error(f"unknown cases {sorted(unknown)}")
    print(f"cpus={os.cpu_count()} load average (1/5/15 min) at start {load()}")
    # The project's own modules compiled once, as the first run of the command leaves them (`pip install -e` does not
    # compile them; an environment with PYTHONDONTWRITEBYTECODE set would recompile them every run, ~0.03 s CPU).
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    checkout = args.checkout or REPO
    subprocess.run(
        [str(PYTHON), "-m", "compileall", "-q", "jobs", "planner", "schemas"], cwd=checkout, env=env, check=True
    )
    flag = os.environ.get("PYTHONDONTWRITEBYTECODE")
    print(f"bytecode of {checkout}'s jobs/, planner/, schemas/ compiled (PYTHONDONTWRITEBYTECODE here: {flag})")
    with tempfile.TemporaryDirectory() as tmp:
        paths = write_inputs(Path(tmp), cases)
        print(f"inputs written (load {load()})")
        extra = ["--compact"] if args.compact_output else []
        for case in cases:
            path = paths[case]
            r = run_command(path, args.repeat, args.checkout, extra)
            print(
                f"{case:26s} wall {spread(r['walls'])} s (min/median/max of {args.repeat}), "
                f"CPU {spread(r['cpus'])} s, load {r['load'][0]} -> {r['load'][1]}, "
                f"input {path.stat().st_size / 1e6:.1f} MB, output {r['size'] / 1e6:.1f} MB, "
                f"elapsed_ms {r['elapsed_ms']:.0f}",
                flush=True,
            )
            if args.phases and args.checkout is None:
                cmd = [str(PYTHON), __file__, "--phases-of", str(path), *(["--general"] if args.general else [])]
                print(
                    subprocess.run(cmd, capture_output=True, text=True, check=True, cwd=REPO).stdout, end="", flush=True
                )
    print(f"load average at end {load()}")


if __name__ == "__main__":
    main()
