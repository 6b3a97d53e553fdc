"""Maintain: keep the lake small and fast to read as nightly runs pile up, without losing history.

For every table, under the lake lock (no run commits meanwhile; a run's next commit waits for the end):
1. with `retention_days` above the table's file or log retention, those properties are raised to it (time travel
   needs both the removed files and the log entries of a version);
2. bulky tables lose the rows of generations and runs older than `bulky_retention_days`, except what the lake still
   works from (`jobs.tables.expiry`: every group's newest and newest approved generation, among others);
3. OPTIMIZE (delta-rs bin-packing compaction) rewrites the small files each commit leaves into few;
4. VACUUM deletes the files no version of the last `retention_days` references (`jobs.io.delta_maintenance`);
5. a checkpoint of the current version, then the log entries older than the log retention are deleted.

Deleting rows and compacting are commits like any other: older versions still hold what they replaced, and
`VERSION AS OF` reaches them for `retention_days`. A dry run computes what would be deleted and changes nothing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from jobs.config import BULKY_RETENTION_DAYS, RETENTION_DAYS
from jobs.context import RunContext, StepResult
from jobs.io import delta_maintenance as delta
from jobs.io.lake import Lake, failures_named
from jobs.tables.expiry import Expired, expired
from planner.errors import InputError
from schemas import TABLES

MAX_DAYS = 36_500  # a century: more is surely a typo, and timedelta arithmetic stays far from its limits


@dataclass(frozen=True)
class TableUpkeep:
    """What maintenance did (or, in a dry run, would do) to one table."""

    table: str
    files_before: int
    files_after: int
    bytes_before: int
    bytes_after: int
    live_files_before: int
    live_files_after: int
    rows_deleted: int
    files_vacuumed: int
    retention_raised: dict[str, str]


def check_days(name: str, value: object) -> int:
    """A whole number of days from 0 to MAX_DAYS, or an InputError naming the parameter."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_DAYS:
        raise InputError(f"{name}: expected a whole number of days from 0 to {MAX_DAYS}, got {value!r}")
    return value


def run(
    ctx: RunContext,
    *,
    retention_days: int = RETENTION_DAYS,
    bulky_retention_days: int = BULKY_RETENTION_DAYS,
    dry_run: bool = False,
    now: datetime | None = None,
) -> StepResult:
    """Maintain every table of the lake; a row per table (files, bytes, rows deleted: `TableUpkeep`), and the table."""
    keep = timedelta(days=check_days("retention_days", retention_days))
    bulky = timedelta(days=check_days("bulky_retention_days", bulky_retention_days))
    lake = ctx.lake
    with lake.lock():
        doomed = expired(lake, (now or datetime.now(UTC)) - bulky)
        rows = tuple(asdict(upkeep(lake, name, doomed, keep, dry_run=dry_run)) for name in TABLES)
    return StepResult(rows, format_report(rows, dry_run=dry_run))


def upkeep(lake: Lake, name: str, doomed: Expired, keep: timedelta, *, dry_run: bool) -> TableUpkeep:
    """One table's maintenance (the caller holds the lake lock); a failure names the table and its cause."""
    with failures_named(f"lake {lake.root}: maintaining table {name}"):
        before = delta.footprint(lake, name)
        raised = delta.retention_to_raise(lake.table(name), keep)
        predicate = doomed.predicate(name)
        if dry_run:
            # VACUUM's list as the table stands: files the deletion and compaction would free are not counted.
            # (Raising the retention first would change nothing: above the table's own, the checks are on anyway.)
            vacuumed = delta.vacuum(lake, name, keep, dry_run=True)
            return TableUpkeep(name, *_pairs(before, before), doomed.count(lake, name), len(vacuumed), raised)
    with lake.committing(name):
        delta.raise_retention(lake, name, raised)
        deleted = delta.delete_rows(lake, name, predicate) if predicate else 0
        delta.compact(lake, name)
        vacuumed = delta.vacuum(lake, name, keep, dry_run=False)
        delta.checkpoint_and_clean_log(lake, name)
        after = delta.footprint(lake, name)
    return TableUpkeep(name, *_pairs(before, after), deleted, len(vacuumed), raised)


def _pairs(before: delta.Footprint, after: delta.Footprint) -> tuple[int, int, int, int, int, int]:
    return before.files, after.files, before.bytes, after.bytes, before.live_files, after.live_files


def format_report(rows: Sequence[Mapping[str, Any]], *, dry_run: bool = False) -> str:
    """One line per table (files, bytes and live files before -> after, rows deleted) and a total."""
    total = {key: sum(r[key] for r in rows) for key in rows[0] if key not in ("table", "retention_raised")}
    lines = [_line(r["table"], r) for r in rows] + [_line("total", total)]
    if raised := sorted({f"{p} = {v}" for r in rows for p, v in r["retention_raised"].items()}):
        lines.append(("would raise " if dry_run else "raised ") + "; ".join(raised) + " (time travel reaches as far)")
    if dry_run:
        lines.append("dry run: nothing was changed (after = before; rows and files are what would be deleted)")
    return "\n".join(lines)


def _line(name: str, r: Mapping[str, Any]) -> str:
    return (
        f"{name:<22} files {r['files_before']:>7,} -> {r['files_after']:<7,} "
        f"bytes {format_bytes(r['bytes_before']):>9} -> {format_bytes(r['bytes_after']):<9} "
        f"live files {r['live_files_before']:>6,} -> {r['live_files_after']:<6,} "
        f"rows deleted {r['rows_deleted']:>9,}  files vacuumed {r['files_vacuumed']:>7,}"
    )


def format_bytes(n: int) -> str:
    """Bytes in the largest unit that keeps a number of at least 1 (decimal units, as `ls -h --si`)."""
    size, unit = float(n), "B"
    for bigger in ("kB", "MB", "GB", "TB"):
        if size < 1000:
            break
        size, unit = size / 1000, bigger
    return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
