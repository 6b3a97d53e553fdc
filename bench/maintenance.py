"""Maintenance benchmark: a year of nightly runs of the demo fleet, then `maintain`, with the lake measured around it.

The fleet is the bundled snapshot files (`jobs/demo/data`: five groups, one truncated file that is quarantined),
planned with the default five strategies. A full run takes 30-60 s on 2 cores, and without maintenance the
Python steps slow down as small files pile up (at night 110 they took 7 s of the night's 8.5 s reading tables of
a hundred files each), so only the first two nights run the steps:
- night 1 is a real `jobs.pipeline.run` on local[2]; its generations are then dated to night 1 (`Lake.update`);
- night 2 runs ingest, verify, changes, migration and publish for real, and replays the Spark steps from night 1's
  rows with the writers those steps use: plan = `plan.allocate_generations` (created at the night's time) + night
  1's plans, plan_diffs, partition_loads and plan_metrics rows under the night's generation ids, written with
  `delta_files.write_file` into as many Parquet files per table as night 1's Spark tasks wrote and committed with
  `delta_files.replace_generations`, then the chosen strategy and load source set with `Lake.update`; gate = night
  1's gate_results under the night's ids, `Lake.merge`d;
- nights 3 to N run ingest for real (the files -> snapshots, topic_partitions, partition_offsets, quarantine) and
  replay everything else from night 2's rows, commit for commit, with the writers of the steps that made them:
  verify (`Lake.update` of the previous generations' verification), plan and gate as above, changes
  (`Lake.update`), migration (`Lake.merge` into migration_readiness), publish (`Lake.update` of the status and
  gate summary) and its settling (`Lake.update`: the previous generations superseded).
Skew has nothing to do (the files carry no key samples); report, review and signals write nothing into the
tables. Night i is dated N - i days before today: its snapshot files' capture times (a copy of the demo's files,
`dated_files`), generations' `created_at`, ingest's `received_at`, and the modification time of every file written
that night, so the log retention (30 days, which delta-rs applies to log files' modification times, also after
every commit) sees a year of log.

Then it prints the files of the tables (data and log), the lake's size, the data files a reader opens, and the wall
time of an `assignment_history` query (Spark SQL over `jobs.cli.history`'s view; best of 3 after a warm-up):
before maintenance; after `maintain --bulky-retention-days 36500` (compaction and checkpoints alone: the query
reads the same rows as before); after `maintain` with its defaults (7 days, bulky rows 30 days); and after
`maintain --retention-days 0`. Delta dates a removed file by the remove action's timestamp in the log, which is
the time the bench ran, not the simulated night, so a 7-day VACUUM finds nothing old enough here; 0 days shows
where weekly runs converge on a real year (every file removed more than 7 days earlier deleted).
Run: `python bench/maintenance.py [--nights N] [--keep DIR [--reuse]]` (`--reuse`: measure and maintain a lake
built before with `--keep DIR`, without building it again).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import tempfile
import time
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from deltalake import DeltaTable

from jobs import pipeline
from jobs.cli import history
from jobs.config import Config
from jobs.context import RunContext
from jobs.io.delta_files import replace_generations, write_file
from jobs.io.lake import Lake, conform, rows_table
from jobs.io.spark import get_spark
from jobs.steps import changes, ingest, maintain, migration, publish, verify
from jobs.steps.plan import allocate_generations
from jobs.tables.lifecycle import SETTLED_COLUMNS
from schemas import TABLES

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "jobs" / "demo" / "data"
PLANNED = ("plans", "plan_diffs", "partition_loads", "plan_metrics")  # the plan step's files, per generation
PER_GENERATION = (*PLANNED, "gate_results", "migration_readiness")
VERIFIED = ["verification", "verified_at", "verification_detail"]
QUERY = (
    "SELECT group_id, count(DISTINCT generation_id) AS generations, count(*) AS assignments, "
    "sum(CAST(moved AS INT)) AS moves FROM assignment_history GROUP BY group_id ORDER BY group_id"
)


class Night:
    """One night's rows, to be copied under another night's run id and generation ids."""

    def __init__(self, lake: Lake, run_id: str, files: Mapping[str, int] | None = None) -> None:
        generations = lake.read_arrow("generations").to_pylist()
        self.generations = {g["group_id"]: g for g in generations if g["run_id"] == run_id}
        wanted = {(g, row["generation_id"]) for g, row in self.generations.items()}
        self.rows = {name: _of(lake.read_arrow(name), wanted) for name in PER_GENERATION}
        # How many files the plan step's Spark tasks wrote per table (night 1 had that table to itself).
        self.files = dict(files or {n: pa.table(DeltaTable(lake.path(n)).get_add_actions()).num_rows for n in PLANNED})
        self.verified = {g["group_id"]: g for g in generations if g["verified_at"] is not None}

    def renumbered(self, name: str, ids: Mapping[str, int], run_id: str) -> pa.Table:
        """The table's rows of this night under another night's generation ids (and snapshot id)."""
        rows = self.rows[name]
        groups = rows.column("group_id").to_pylist()
        rows = rows.set_column(
            rows.schema.get_field_index("generation_id"),
            "generation_id",
            pa.array([ids[g] for g in groups], pa.int64()),
        )
        if "snapshot_id" in rows.column_names:
            column = rows.schema.get_field_index("snapshot_id")
            rows = rows.set_column(column, "snapshot_id", pa.array([run_id] * rows.num_rows, pa.string()))
        return conform(TABLES[name], rows)


def _of(rows: pa.Table, generations: set[tuple[str, int]]) -> pa.Table:
    """The rows of these (group, generation) pairs."""
    pairs = zip(rows.column("group_id").to_pylist(), rows.column("generation_id").to_pylist(), strict=True)
    return rows.filter(pa.array([pair in generations for pair in pairs], pa.bool_()))


def spark_steps(lake: Lake, night: Night, run_id: str, groups: list[str], at: datetime) -> dict[str, int]:
    """Plan and gate, replayed: the night's generations allocated, the plan step's files written and committed
    as its Spark tasks and driver do, the choices recorded, the gate's results merged. Returns the ids."""
    first = night.generations[groups[0]]
    parameters = json.loads(first["parameters"] or "{}")
    ids = allocate_generations(lake, groups, run_id, run_id, "scheduled", parameters, at)
    for name in PLANNED:
        rows = night.renumbered(name, ids, run_id)
        shares = [groups[k :: night.files[name]] for k in range(night.files[name])]
        files = [
            write_file(lake, name, rows.filter(pc.is_in(rows.column("group_id"), pa.array(share))))
            for share in shares
            if share
        ]
        replace_generations(lake, name, files, ids)
    copied = ("chosen_strategy", "load_source")
    chosen = [
        {"group_id": g, "generation_id": i} | {k: night.generations[g][k] for k in copied} for g, i in ids.items()
    ]
    lake.update("generations", rows_table("generations", chosen), list(copied))
    lake.merge("gate_results", night.renumbered("gate_results", ids, run_id))
    return ids


def python_steps(
    lake: Lake, night: Night, run_id: str, ids: Mapping[str, int], before: Mapping[str, int], at: datetime
) -> None:
    """Verify, changes, migration and publish, replayed from `night` commit for commit (`before`: the previous
    night's generation ids, which verify checks and publish supersedes)."""

    def on(generations: Mapping[str, int], values: Mapping[str, Mapping[str, Any]]) -> pa.Table:
        return rows_table(
            "generations", [{"group_id": g, "generation_id": i, **values[g]} for g, i in generations.items()]
        )

    verified = {g: {c: night.verified[g][c] for c in VERIFIED} | {"verified_at": at} for g in before}
    lake.update("generations", on(before, verified), VERIFIED)
    lake.update("generations", on(ids, {g: {"changes": night.generations[g]["changes"]} for g in ids}), ["changes"])
    lake.merge("migration_readiness", night.renumbered("migration_readiness", ids, run_id))
    published = [*SETTLED_COLUMNS, "gate_summary"]
    decided = {g: {c: night.generations[g][c] for c in published} | {"status_at": at} for g in ids}
    lake.update("generations", on(ids, decided), published)
    superseded = {
        g: {"status": "superseded", "status_reason": f"generation {ids[g]} was approved", "status_at": at}
        for g in before
    }
    lake.update("generations", on(before, superseded), SETTLED_COLUMNS)


class Clock:
    """Dates every file written since the last call to the night it belongs to (its modification time)."""

    def __init__(self, lake: Lake) -> None:
        self.lake = lake
        self.seen: set[str] = set()

    def date(self, at: datetime) -> None:
        stamp = at.timestamp()
        for name in TABLES:
            for folder, _, files in os.walk(self.lake.path(name)):
                for file in files:
                    path = os.path.join(folder, file)
                    if path not in self.seen:
                        self.seen.add(path)
                        os.utime(path, (stamp, stamp))


def measure(lake: Lake) -> dict[str, int]:
    """Files of the lake's tables (data, log), their bytes, and the data files their current versions reference."""
    data = log = size = live = 0
    for name in TABLES:
        for folder, _, files in os.walk(lake.path(name)):
            for file in files:
                size += os.path.getsize(os.path.join(folder, file))
                if "_delta_log" in folder:
                    log += 1
                else:
                    data += 1
        live += pa.table(DeltaTable(lake.path(name)).get_add_actions()).num_rows
    return {"files": data + log, "data": data, "log": log, "bytes": size, "live": live}


def time_query(spark: Any, lake: Lake) -> tuple[float, int]:
    """Best wall time of the history query over 3 runs after a warm-up (views registered afresh), and its rows."""
    history.register(spark, lake)
    rows = spark.sql(QUERY).collect()
    times = []
    for _ in range(3):
        start = time.perf_counter()
        spark.sql(QUERY).collect()
        times.append(time.perf_counter() - start)
    return min(times), sum(r["assignments"] for r in rows)


CAPTURED_ON = re.compile(rb'("captured_at"\s*:\s*")\d{4}-\d{2}-\d{2}T')


def dated_files(directory: Path, at: datetime) -> Path:
    """The demo's snapshot files as captured on `at`'s day (their times of day kept), in `directory`: a night's
    ingest refuses a snapshot captured after it was received. The bytes are edited, not the JSON, so the truncated
    file stays as truncated."""
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True)
    day = at.strftime("%Y-%m-%d").encode()
    for source in sorted(DEMO.iterdir()):
        (directory / source.name).write_bytes(CAPTURED_ON.sub(rb"\g<1>" + day + b"T", source.read_bytes()))
    return directory


def build(lake: Lake, nights: int, spark: Any) -> str:
    """Write the year of nights (see the docstring); returns how long each kind of night took."""
    today = datetime.now(UTC).replace(hour=2, minute=0, second=0, microsecond=0)
    dates = [today - timedelta(days=nights - i) for i in range(1, nights + 1)]
    files = lake.local.parent / "snapshots" if lake.local is not None else Path(tempfile.mkdtemp())

    def config(i: int) -> Config:
        return Config(lake=str(lake.root), snapshots=str(dated_files(files, dates[i])))

    clock = Clock(lake)
    start = time.perf_counter()
    pipeline.run(config(0), "night-0001", trigger="scheduled", spark=spark)
    first = lake.read_arrow("generations").to_pylist()
    lake.update(
        "generations", rows_table("generations", [{**g, "created_at": dates[0]} for g in first]), ["created_at"]
    )
    clock.date(dates[0])
    real = time.perf_counter() - start
    if nights < 2:
        return f"night 1 a real pipeline run ({real:.1f} s)"
    start = time.perf_counter()
    one = Night(lake, "night-0001")
    ctx = RunContext.create(config(1), "night-0002", trigger="scheduled")
    groups = sorted(ingest.run(ctx, received_at=dates[1]).groups)
    verify.run(ctx, verified_at=dates[1])
    before = spark_steps(lake, one, ctx.run_id, groups, dates[1])
    changes.run(ctx)
    migration.run(ctx)
    publish.run(ctx)
    clock.date(dates[1])
    second = time.perf_counter() - start
    template = Night(lake, "night-0002", one.files)
    start = time.perf_counter()
    for i in range(2, nights):
        run_id = f"night-{i + 1:04d}"
        night = RunContext.create(config(i), run_id, trigger="scheduled")
        groups = sorted(ingest.run(night, received_at=dates[i]).groups)
        ids = spark_steps(lake, template, run_id, groups, dates[i])
        python_steps(lake, template, run_id, ids, before, dates[i])
        before = ids
        clock.date(dates[i])
    rest = time.perf_counter() - start
    return (
        f"night 1 a real pipeline run ({real:.1f} s), night 2 its Python steps ({second:.1f} s), nights 3-{nights} "
        f"replayed ({rest:.1f} s, {rest / max(1, nights - 2):.2f} s a night)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nights", type=int, default=365, help="nightly runs to simulate (default 365)")
    parser.add_argument("--keep", help="build the lake in this directory and keep it (default: a temporary one)")
    parser.add_argument("--reuse", action="store_true", help="with --keep: measure the lake built there before")
    args = parser.parse_args()
    if args.reuse and not args.keep:
        parser.error("--reuse needs --keep DIR")
    work = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="maintenance-bench-"))
    lake = Lake(work / "lake")
    spark = get_spark("local[2]")
    try:
        if args.reuse:
            nights = len({g["run_id"] for g in lake.read_arrow("generations", columns=("run_id",)).to_pylist()})
            print(f"{nights} nights of the demo fleet, built before in {lake.root}")
        else:
            made = build(lake, args.nights, spark)
            print(f"{args.nights} nights of the demo fleet: {made}; load average {os.getloadavg()[0]:.1f}")
        states: list[tuple[str, dict[str, int], float, int]] = [
            ("before maintenance", measure(lake), *time_query(spark, lake))
        ]
        ctx = RunContext.create(Config(lake=str(lake.root)), trigger="maintain", spark=spark)
        for days, bulky in ((7, maintain.MAX_DAYS), (7, 30), (0, 30)):
            start = time.perf_counter()
            result = maintain.run(ctx, retention_days=days, bulky_retention_days=bulky)
            took = time.perf_counter() - start
            label = f"after maintain {days} / {bulky} days"
            states.append((label, measure(lake), *time_query(spark, lake)))
            print(f"\nmaintain --retention-days {days} --bulky-retention-days {bulky} ({took:.1f} s):")
            print(result.text)
        print(f"\n{'':<36} {'files':>7} {'data':>7} {'log':>7} {'live':>6} {'size':>9} {'query':>8} {'rows':>8}")
        for label, m, seconds, result_rows in states:
            print(
                f"{label:<36} {m['files']:>7,} {m['data']:>7,} {m['log']:>7,} {m['live']:>6,} "
                f"{maintain.format_bytes(m['bytes']):>9} {seconds:>7.2f}s {result_rows:>8,}"
            )
        print(f"query: {QUERY}\nload average {os.getloadavg()[0]:.1f}")
    finally:
        spark.stop()
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
