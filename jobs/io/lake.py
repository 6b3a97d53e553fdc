"""The lake: Delta tables written and committed with delta-rs, read by Spark through the snapshot's file list.

delta-rs needs no JVM jars, so this works on any machine; when the Spark session has the Delta connector the
same directories are also registered as Delta catalog tables (same protocol, same files).

Processes share a lake safely: every commit is made under the lake lock (fcntl.flock on the lake directory), so
concurrent runs take turns and each MERGE reads the table as the previous commit left it (delta-rs would otherwise
fail one of two MERGEs with "a concurrent transaction added new data"). A run also holds a lock on its run id for
its whole life, so two runs given the same id run one after the other instead of interleaving their rows. A lake
that cannot be written (read-only, permission, disk full) raises a `SourceError` naming the cause.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import functools
import hashlib
import logging
import operator
import os
import re
import sys
import tempfile
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.fs as pa_fs
from deltalake import DeltaTable, write_deltalake
from deltalake import Schema as DeltaSchema
from deltalake.exceptions import DeltaError
from deltalake.table import TableMerger
from pyspark.sql import DataFrame, SparkSession

from planner.errors import SourceError
from schemas import TABLES, TableSpec

log = logging.getLogger(__name__)


# Every table stays at Delta's protocol (reader 1, writer 2, no table features), which both engines read and write:
# delta-rs commits most tables, Spark's connector reads them all and may append (docs/architecture.md, "The lake").
# Timestamps are UTC-aware (`schemas.spec.TS`), so no table needs the timestampNtz feature (writer 7).
PROTOCOL = {"delta.minReaderVersion": "1", "delta.minWriterVersion": "2"}


class Lake:
    """A directory of Delta tables, one per `schemas.TABLES` entry."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root).resolve()

    def path(self, name: str) -> Path:
        return self.root / name

    def create_all(self) -> None:
        """Create every missing table with its contract schema, and add the contract's newer columns to old tables.

        A table written before a column joined its contract gets that column (nullable, so old rows read null) by
        Delta schema evolution, under the lake lock so processes starting together add it once; rows are kept.
        """
        self.root.mkdir(parents=True, exist_ok=True)
        for spec in TABLES.values():
            path = self.path(spec.name)
            if not DeltaTable.is_deltatable(str(path)):
                DeltaTable.create(
                    path,
                    schema=spec.schema,
                    mode="ignore",
                    partition_by=list(spec.partition_by) or None,
                    name=spec.name,
                    description=spec.description,
                    configuration=PROTOCOL,
                )
            elif _missing_columns(spec, DeltaTable(path)):
                with self.lock():
                    table = DeltaTable(path)
                    if missing := _missing_columns(spec, table):
                        table.alter.add_columns(DeltaSchema.from_arrow(pa.schema(missing)).fields)

    def append(self, name: str, data: pa.Table) -> None:
        """Append rows as one Delta commit."""
        if data.num_rows:
            with self.committing(name):
                write_deltalake(self.path(name), conform(TABLES[name], data), mode="append")

    def merge(self, name: str, data: pa.Table) -> None:
        """Upsert rows on the table's keys as one Delta commit: re-running a step never duplicates rows."""
        if data.num_rows:
            with self.committing(name):
                self._on_keys(name, data).when_matched_update_all().when_not_matched_insert_all().execute()

    def update(self, name: str, data: pa.Table, columns: list[str]) -> None:
        """Set `columns` of existing rows matched on the table's keys (other columns keep their values)."""
        if data.num_rows:
            with self.committing(name):
                self._on_keys(name, data).when_matched_update({f"`{c}`": f"s.`{c}`" for c in columns}).execute()

    @contextmanager
    def committing(self, name: str) -> Iterator[None]:
        """A block that makes one commit to table `name` (through this class or straight through delta-rs): under
        the lake lock (a MERGE inside reads the table afresh), refused up front when the table cannot be written,
        its IO failures named."""
        with self.lock():
            if reason := unwritable(self.path(name)):
                raise SourceError(f"lake {self.root}: cannot write table {name}: {reason}")
            with failures_named(f"lake {self.root}: writing table {name}"):
                yield

    def _on_keys(self, name: str, data: pa.Table) -> TableMerger:
        """A MERGE of `data` (alias s) into the table (alias t) matching on the table's keys."""
        spec = TABLES[name]
        predicate = " AND ".join(f"t.`{k}` = s.`{k}`" for k in spec.keys)
        return DeltaTable(self.path(name)).merge(conform(spec, data), predicate, source_alias="s", target_alias="t")

    def read_arrow(
        self,
        name: str,
        filters: Sequence[tuple[str, str, object]] | None = None,
        columns: Sequence[str] | None = None,
        *,
        decode: bool = True,
    ) -> pa.Table:
        """The table's current snapshot as Arrow, optionally filtered by (column, "=" or "in", value) terms and
        narrowed to `columns` (in the contract's order); `decode=False` leaves string columns as dictionaries.

        The terms filter inside the scan, batch by batch, and string columns stay dictionary-encoded until the rows
        are chosen: a lookup never holds the whole table as plain strings (a thousand groups' plans take 270 MB as
        plain strings, 110 MB as dictionaries, a few MB once filtered), and decoding fewer strings takes less CPU.
        Read through Arrow's own local file system: delta-rs's default (a Python file handler) gives Arrow's IO
        threads Python buffers, and one released by such a thread while the interpreter exits aborts the process
        ("terminate called without an active exception") after the command has done its work.
        """
        schema = TABLES[name].schema
        if columns is not None:
            schema = pa.schema([f for f in schema if f.name in columns])
        strings = [f.name for f in schema if pa.types.is_string(f.type)]
        local = pa_fs.SubTreeFileSystem(str(self.path(name)), pa_fs.LocalFileSystem())
        options = ds.ParquetReadOptions(dictionary_columns=strings)
        dataset = DeltaTable(self.path(name)).to_pyarrow_dataset(filesystem=local, parquet_read_options=options)
        where = functools.reduce(operator.and_, [_term(*term) for term in filters]) if filters else None
        # One file and batch decoded ahead, not 4 x 16: a filtered read's transient memory about halves, same time.
        scan = dataset.scanner(columns=schema.names, filter=where, fragment_readahead=1, batch_readahead=1)
        if not decode:
            encoded = {column: pa.dictionary(pa.int32(), pa.string()) for column in strings}
            schema = pa.schema([f.with_type(encoded.get(f.name, f.type)) for f in schema])
        return scan.to_table().cast(schema)

    def read(self, spark: SparkSession, name: str) -> DataFrame:
        """The table's current snapshot as a Spark DataFrame, read as Delta by the connector."""
        return spark.read.format("delta").load(str(self.path(name)))

    def register_views(self, spark: SparkSession) -> list[str]:
        """Expose every table to Spark SQL as a Delta table of the session's catalog (so `VERSION AS OF`,
        `TIMESTAMP AS OF` and `DESCRIBE HISTORY` work on it); `rebalance sql` refuses any write to them. A name
        registered before (another lake in the same session) is dropped first: an external table, so its data stays.
        """
        for name in TABLES:
            spark.sql(f"DROP TABLE IF EXISTS `{name}`")
            spark.sql(f"CREATE TABLE `{name}` USING delta LOCATION '{self.path(name)}'")
        return list(TABLES)

    @contextmanager
    def lock(self) -> Iterator[None]:
        """An exclusive lock over the lake, held for every commit and while generation ids are allocated.

        Other processes wait their turn; within a process it is re-entrant (a step holding it commits through
        `merge`), and threads take turns. The lock is on the lake directory, so a read-only lake can be locked too.
        """
        try:
            self.root.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise SourceError(f"lake {self.root}: cannot create it: {_cause(e)}") from None
        flock = _flock(str(self.root))
        with flock.threads:
            flock.acquire()
            try:
                yield
            finally:
                flock.release()

    def run_lock(self, run_id: str) -> FileLock:
        """Hold run `run_id` until the returned lock is released: another process holding it is waited for (and
        said so), so two runs given one id run one after the other. Shared within a process.

        A lake that cannot be written needs no run lock (nothing can be written): it gets none.
        """
        runs = self.root / ".runs"
        try:
            runs.mkdir(parents=True, exist_ok=True)
            flock = _flock(str(runs / f"{hashlib.sha256(run_id.encode()).hexdigest()[:32]}.lock"))
            if not flock.acquire(blocking=False):
                log.warning("run %r is running in another process (%s); waiting for it to end", run_id, flock.holder())
                flock.acquire()
            flock.note(f"pid {os.getpid()}")
        except OSError as e:
            if unwritable(self.root):
                nothing = FileLock("")
                nothing.acquire()
                return nothing
            raise SourceError(f"lake {self.root}: locking run {run_id!r} failed: {_cause(e)}") from None
        return flock


def rows_table(name: str, rows: list[dict[str, Any]]) -> pa.Table:
    """Rows (dicts) as an Arrow table of the named table's schema."""
    return pa.Table.from_pylist(rows, schema=TABLES[name].schema)


def conform(spec: TableSpec, data: pa.Table) -> pa.Table:
    """Select and cast the contract's columns in order; missing nullable columns become nulls."""
    columns = []
    for field in spec.schema:
        if field.name in data.column_names:
            columns.append(data.column(field.name).cast(field.type))
        elif field.nullable:
            columns.append(pa.nulls(data.num_rows, field.type))
        else:
            raise ValueError(f"{spec.name}: key column {field.name!r} is missing")
    return pa.Table.from_arrays(columns, schema=spec.schema)


def _missing_columns(spec: TableSpec, table: DeltaTable) -> list[pa.Field]:
    """The contract's columns that the stored table does not have yet, in contract order."""
    stored = set(table.schema().to_arrow().names)
    return [field for field in spec.schema if field.name not in stored]


def unwritable(path: Path) -> str | None:
    """Why nothing can be written under `path` (read-only file system, permission), or None when it can.

    Checked before delta-rs writes, which on a read-only file system panics in its IO runtime instead of failing.
    """
    while not path.exists() and path != path.parent:
        path = path.parent
    if os.access(path, os.W_OK | os.X_OK):
        return None
    code = errno.EROFS if os.statvfs(path).f_flag & os.ST_RDONLY else errno.EACCES
    return f"{_describe(code)} at {path}"


@contextmanager
def failures_named(action: str) -> Iterator[None]:
    """Turn delta-rs and file-system failures of `action` into one-line `SourceError`s naming the cause.

    After a failed write, delta-rs's object store panics in a worker thread (arrow-rs-object-store issue 810,
    BufWriter polled again after an error) and Rust prints that panic report on stderr, while the failure itself
    comes back as the exception named here. So stderr is held aside while `action` runs: passed on when it
    succeeds, logged at debug level when it fails.
    """
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as held:
        os.dup2(held.fileno(), 2)
        failed = False
        try:
            yield
        except (OSError, DeltaError) as e:
            failed = True
            raise SourceError(f"{action} failed: {_cause(e)}") from None
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            held.seek(0)
            if printed := held.read():
                if failed:
                    log.debug("%s: stderr of the failed write: %s", action, printed.decode(errors="replace"))
                else:
                    os.write(2, printed)


_OS_ERROR = re.compile(r"\(os error (\d+)\)")
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _cause(exc: BaseException) -> str:
    """The failure's cause: the errno it carries (delta-rs puts it in the text as "(os error N)"), else its text."""
    code = getattr(exc, "errno", None)
    if code is None and (found := _OS_ERROR.search(str(exc))):
        code = int(found[1])
    if code:
        return _describe(code)
    lines = [line.strip() for line in _ANSI.sub("", str(exc)).splitlines() if line.strip()]
    return " / ".join(lines) or type(exc).__name__


def _describe(code: int) -> str:
    return f"{os.strerror(code)} ({errno.errorcode.get(code, code)})"


class FileLock:
    """An fcntl.flock on one file or directory (none for an empty path), taken once per process however many
    holders share it.

    `threads` lets the lake lock make threads of one process take turns; the count lets nested and shared holders
    (a step inside a locked block, two contexts of one run) release it only when the last one is done.
    """

    def __init__(self, path: str) -> None:
        self.path = path
        self.threads = threading.RLock()
        self._guard = threading.Lock()
        self._fd: int | None = None
        self._holders = 0

    def acquire(self, blocking: bool = True) -> bool:
        with self._guard:
            if self._holders == 0 and self.path:
                fd = os.open(self.path, os.O_RDONLY if os.path.isdir(self.path) else os.O_RDWR | os.O_CREAT, 0o644)
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB))
                except BlockingIOError:
                    os.close(fd)
                    return False
                except BaseException:
                    os.close(fd)
                    raise
                self._fd = fd
            self._holders += 1
            return True

    def release(self) -> None:
        with self._guard:
            self._holders -= 1
            if self._holders == 0 and self._fd is not None:
                os.close(self._fd)  # closing the only descriptor drops the flock
                self._fd = None

    def note(self, text: str) -> None:
        """Record who holds the lock in the lock file, for the message of whoever waits for it (best effort: a
        full disk fails the run's first commit, with that cause, not this note)."""
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.ftruncate(self._fd, 0)
                os.pwrite(self._fd, text.encode(), 0)

    def holder(self) -> str:
        try:
            return Path(self.path).read_text() or "holder unknown"
        except OSError:
            return "holder unknown"


_FLOCKS: dict[str, FileLock] = {}
_FLOCKS_GUARD = threading.Lock()


def _flock(path: str) -> FileLock:
    """The process's one `FileLock` for `path` (two descriptors of one process would block each other)."""
    with _FLOCKS_GUARD:
        return _FLOCKS.setdefault(path, FileLock(path))


def _term(column: str, op: str, value: object) -> pc.Expression:
    """A filter term: `=` or `in` (the lookups the pipeline makes by key)."""
    if op == "=":
        return pc.field(column) == value
    if op == "in":
        return pc.field(column).isin(list(value))  # type: ignore[call-overload]
    raise ValueError(f"unsupported filter operator {op!r}: use '=' or 'in'")
