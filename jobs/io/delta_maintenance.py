"""Delta table upkeep with delta-rs: compaction, VACUUM, checkpoints, log clean-up, retention and file footprints.

delta-rs commits every table of the lake, so it also maintains them: one engine writes the log (docs/architecture.md).
Each function acts on one table directory and is called under the lake lock (`jobs.steps.maintain`); none changes
the table's protocol (reader 1 / writer 2, `jobs.io.lake.PROTOCOL`): compaction, VACUUM and checkpoints are
plain actions of that protocol, and the retention settings are table properties.

Delta's documented rules this relies on (delta.io, "Table utility commands" and "Table properties"):
- VACUUM deletes data files that no version inside the retention references any more; files of the current
  version are never deleted, and time travel to a version needs both its log entries and its data files;
- `delta.deletedFileRetentionDuration` (default `interval 1 week`) is how long removed files are kept, and
  `delta.logRetentionDuration` (default `interval 30 days`) how long log entries are; a checkpoint drops removals
  older than the first, and log clean-up drops entries older than the second (never one a later version needs).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import timedelta
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.fs as pa_fs
from deltalake import DeltaTable

from jobs.io.lake import Lake

FILE_RETENTION = "delta.deletedFileRetentionDuration"
LOG_RETENTION = "delta.logRetentionDuration"
DEFAULTS = {FILE_RETENTION: timedelta(weeks=1), LOG_RETENTION: timedelta(days=30)}  # Delta's own defaults

_INTERVAL = re.compile(r"\s*interval\s+(\d+)\s+([a-z]+?)s?\s*", re.IGNORECASE)
_UNITS = {
    "microsecond": timedelta(microseconds=1),
    "millisecond": timedelta(milliseconds=1),
    "second": timedelta(seconds=1),
    "minute": timedelta(minutes=1),
    "hour": timedelta(hours=1),
    "day": timedelta(days=1),
    "week": timedelta(weeks=1),
}


@dataclass(frozen=True)
class Footprint:
    """What a table occupies: every file under its directory (data files, live or not, and its log), their bytes,
    and the data files its current version references (what a reader opens)."""

    files: int
    bytes: int
    live_files: int


def footprint(lake: Lake, name: str) -> Footprint:
    """The table's files in storage now and the data files of its current version."""
    found = lake.fs.get_file_info(pa_fs.FileSelector(name, recursive=True))
    stored = [i for i in found if i.type == pa_fs.FileType.File]
    live = pa.table(lake.table(name).get_add_actions()).num_rows
    return Footprint(len(stored), sum(i.size or 0 for i in stored), live)


def retention(table: DeltaTable, prop: str) -> timedelta:
    """A retention property of the table (`interval N unit`, as Delta writes them), or Delta's default."""
    value = table.metadata().configuration.get(prop)
    found = _INTERVAL.fullmatch(value) if value else None
    if found is None or found[2].lower() not in _UNITS:
        return DEFAULTS[prop]
    return int(found[1]) * _UNITS[found[2].lower()]


def retention_to_raise(table: DeltaTable, keep: timedelta) -> dict[str, str]:
    """The retention properties below `keep`, each set to `keep` in whole days: raised, never lowered.

    Time travel to a version N days back needs its removed files and its log entries; a table that keeps either
    for less would lose them at its next checkpoint or log clean-up, whatever VACUUM is told.
    """
    days = -(-keep // timedelta(days=1))  # whole days, rounded up
    return {prop: f"interval {days} days" for prop in (FILE_RETENTION, LOG_RETENTION) if retention(table, prop) < keep}


def raise_retention(lake: Lake, name: str, properties: dict[str, str]) -> None:
    """Set the retention properties (one metadata commit; the protocol stays as it is)."""
    if properties:
        lake.table(name).alter.set_table_properties(properties)


def delete_rows(lake: Lake, name: str, predicate: str) -> int:
    """Delete the rows matching a SQL predicate (one commit, none when nothing matches; files holding them are
    rewritten without them, as writer 2 has no deletion vectors); returns how many rows went."""
    before = row_count(lake, name)
    metrics = lake.table(name).delete(predicate)
    deleted = metrics.get("num_deleted_rows")
    return int(deleted) if deleted is not None else before - row_count(lake, name)


def compact(lake: Lake, name: str) -> int:
    """OPTIMIZE by bin-packing (delta-rs `optimize.compact`, target `delta.targetFileSize` or 100 MB): small files
    rewritten into few, in their order, as one commit whose actions carry dataChange=false (the rows are the same);
    returns the files it removed from the current version."""
    metrics = lake.table(name).optimize.compact()
    return int(metrics.get("numFilesRemoved") or 0)


def vacuum(lake: Lake, name: str, keep: timedelta, *, dry_run: bool) -> list[str]:
    """VACUUM: delete the files that no version within `keep` references; returns them (only lists with `dry_run`).

    At the table's own retention or more, Delta's checks stay on and the vacuum is "full": data files no commit
    mentions (left by a run that died before committing) are deleted too once older than `keep`. Below it, the
    check is waived as asked (`enforce_retention_duration=False`) and the vacuum is "lite": only files a commit
    removed, never files no commit mentions yet, which may be a running plan step's output waiting for its commit
    (`jobs.io.delta_files`): the lake lock covers commits, not the writing of the files a commit will add.
    """
    table = lake.table(name)
    default = retention(table, FILE_RETENTION)
    return table.vacuum(
        retention_hours=int(keep / timedelta(hours=1)),
        dry_run=dry_run,
        enforce_retention_duration=keep >= default,
        full=keep >= default,
    )


def checkpoint_and_clean_log(lake: Lake, name: str) -> bool:
    """Write a checkpoint of the current version, then delete log entries older than `delta.logRetentionDuration`
    that no version inside it needs (delta-rs keeps every entry after the newest checkpoint older than that).

    A table whose version is its newest checkpoint's, or 0, gets none: readers already start from there. Returns
    whether a checkpoint was written.
    """
    table = lake.table(name)
    if table.version() <= last_checkpoint(lake, name):
        return False
    table.create_checkpoint()
    table.cleanup_metadata()
    return True


def last_checkpoint(lake: Lake, name: str) -> int:
    """The version of the table's newest checkpoint (`_delta_log/_last_checkpoint`), 0 when it has none."""
    try:
        with lake.fs.open_input_stream(f"{name}/_delta_log/_last_checkpoint") as stream:
            return int(json.loads(stream.read())["version"])
    except (OSError, ValueError, KeyError, TypeError):
        return 0


def row_count(lake: Lake, name: str) -> int:
    """Rows of the current version, from the file statistics (a file without them is counted as 0)."""
    actions = pa.table(lake.table(name).get_add_actions(flatten=True))
    if "num_records" not in actions.column_names:
        return 0
    return int(sum(n or 0 for n in actions.column("num_records").to_pylist()))


def data_files(lake: Lake, name: str) -> list[str]:
    """The data files of the table's current version, as paths in `lake.fs`."""
    actions = pa.table(lake.table(name).get_add_actions()).column("path").to_pylist()
    return [f"{name}/{unquote(path)}" for path in actions]


def protocol(lake: Lake, name: str) -> tuple[int, int]:
    """(min reader version, min writer version) of the table."""
    p = lake.table(name).protocol()
    return p.min_reader_version, p.min_writer_version
