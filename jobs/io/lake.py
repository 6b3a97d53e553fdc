"""The lake: Delta tables written and committed with delta-rs, read by Spark through Delta's connector.

The lake is a local directory or a prefix of an S3 bucket (`jobs.io.lake_store`): both engines reach either.
Processes share a lake safely: every commit and every read-modify-write (generation ids, statuses) is made under
the lake lock (`jobs.io.lake_locks`: an fcntl.flock on a local lake, a lease object on S3), so concurrent runs take
turns and each MERGE reads the table as the previous commit left it (delta-rs would otherwise fail one of two
MERGEs with "a concurrent transaction added new data"). Each Delta commit is itself atomic: a rename locally, a
conditional write on S3. A run also holds a lock on its run id for its whole life, so two runs given the same id
run one after the other instead of interleaving their rows. A lake that cannot be written (read-only, permission,
disk full, a missing bucket, refused credentials) raises a `SourceError` naming the cause.
"""

from __future__ import annotations

import errno
import functools
import hashlib
import logging
import operator
import os
import re
import sys
import tempfile
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from functools import cached_property
from pathlib import Path
from typing import Any, cast

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.fs as pa_fs
from deltalake import DeltaTable, write_deltalake
from deltalake import Schema as DeltaSchema
from deltalake.exceptions import DeltaError
from deltalake.table import TableMerger
from pyspark.sql import DataFrame, SparkSession

from jobs.io.lake_locks import FileLock, Lock, file_lock, object_lease
from jobs.io.lake_store import Store, parse_store
from planner.errors import SourceError
from schemas import TABLES, TableSpec
from schemas.rows import Generation

log = logging.getLogger(__name__)


# Every table stays at Delta's protocol (reader 1, writer 2, no table features), which both engines read and write:
# delta-rs commits most tables, Spark's connector reads them all and may append (docs/architecture.md, "The lake").
# Timestamps are UTC-aware (`schemas.spec.TS`), so no table needs the timestampNtz feature (writer 7).
PROTOCOL = {"delta.minReaderVersion": "1", "delta.minWriterVersion": "2"}


class Lake:
    """A directory (local, or a prefix of an S3 bucket) of Delta tables, one per `schemas.TABLES` entry."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.store: Store = parse_store(root)
        self.root = self.store.root
        self.store.check()
        self._configured: set[int] = set()
        self._configuring = threading.Lock()
        # Each table opened to commit through (`table`); what `_dataset` read last of each: the table, and its version's
        # dataset for a set of dictionary columns
        self._writing: dict[str, DeltaTable] = {}
        self._opened: dict[str, DeltaTable] = {}
        self._datasets: dict[tuple[str, int, tuple[str, ...]], ds.FileSystemDataset] = {}
        self._reading = threading.Lock()

    @property
    def local(self) -> Path | None:
        """The lake's directory when it is local."""
        return self.store.local

    def path(self, name: str) -> str:
        """Table `name`'s location, as delta-rs and messages name it."""
        return self.store.uri(name)

    def table(self, name: str) -> DeltaTable:
        """Table `name` at its latest version, to commit through under the lake lock (reads go through `latest`'s):
        opened once, then brought up to date with the commits made since, by any process (`_kept`)."""
        return self._kept(self._writing, name)

    def exists(self, name: str) -> bool:
        return DeltaTable.is_deltatable(self.path(name), storage_options=self.store.delta_options())

    @cached_property
    def fs(self) -> pa_fs.FileSystem:
        """An Arrow file system rooted at the lake: table files are `<table>/<file>` in it."""
        return self.store.filesystem()

    def create_all(self) -> None:
        """Create every missing table with its contract schema, and add the contract's newer columns to old tables.

        A table written before a column joined its contract gets that column (nullable, so old rows read null) by
        Delta schema evolution, under the lake lock so processes starting together add it once; rows are kept.
        """
        if self.local is not None:
            self.local.mkdir(parents=True, exist_ok=True)
        for spec in TABLES.values():
            if not self.exists(spec.name):
                DeltaTable.create(
                    self.path(spec.name),
                    schema=spec.schema,
                    mode="ignore",
                    partition_by=list(spec.partition_by) or None,
                    name=spec.name,
                    description=spec.description,
                    configuration=PROTOCOL,
                    storage_options=self.store.delta_options(),
                )
            elif self._lacks_columns(spec):
                with self.lock():
                    table = self.table(spec.name)
                    if missing := _missing_columns(spec, table):
                        table.alter.add_columns(DeltaSchema.from_arrow(pa.schema(missing)).fields)

    def append(self, name: str, data: pa.Table) -> None:
        """Append rows as one Delta commit."""
        if data.num_rows:
            with self.committing(name):
                write_deltalake(self.table(name), conform(TABLES[name], data), mode="append")

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
        """A block that makes one commit to table `name` (through `table`, or straight through delta-rs): under the
        lake lock (a MERGE inside reads the table as the last commit left it), refused up front when the table cannot
        be written, its IO failures named."""
        with self.lock():
            if self.local is not None and (reason := unwritable(self.local / name)):
                raise SourceError(f"lake {self.root}: cannot write table {name}: {reason}")
            with failures_named(f"lake {self.root}: writing table {name}"):
                try:
                    yield
                except BaseException:
                    self._writing.pop(name, None)  # opened afresh for the next commit, whatever this one left
                    raise

    def _on_keys(self, name: str, data: pa.Table) -> TableMerger:
        """A MERGE of `data` (alias s) into the table (alias t) matching on the table's keys."""
        spec = TABLES[name]
        predicate = " AND ".join(f"t.`{k}` = s.`{k}`" for k in spec.keys)
        return self.table(name).merge(conform(spec, data), predicate, source_alias="s", target_alias="t")

    def generations(self, filters: Sequence[tuple[str, str, object]] | None = None) -> list[Generation]:
        """The `generations` rows matching the (column, "=" or "in", value) terms, as typed rows."""
        return cast("list[Generation]", self.read_arrow("generations", filters).to_pylist())

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
        Read through Arrow's own file system: delta-rs's default (a Python file handler) gives Arrow's IO
        threads Python buffers, and one released by such a thread while the interpreter exits aborts the process
        ("terminate called without an active exception") after the command has done its work.
        """
        scan, schema = self._scanner(name, filters, columns, decode=decode, threads=True)
        return scan.to_table().cast(schema)

    def read_batches(
        self,
        name: str,
        filters: Sequence[tuple[str, str, object]] | None = None,
        columns: Sequence[str] | None = None,
        *,
        decode: bool = True,
        share: tuple[int, int] = (0, 1),
    ) -> pa.RecordBatchReader:
        """`read_arrow`'s rows a record batch at a time, in the same order: a table too large to hold whole, read
        once. Decoded on the calling thread: for a consumer slower than the scan, Arrow's threads would decode ahead
        without bound (10,000 groups' plans, written batch by batch elsewhere: 0.9 GB held, against 0.1).
        `share` (k, n): only the k-th of n runs of the table's files, so n readers, one per share, read the rows in
        turn, in order."""
        scan, schema = self._scanner(name, filters, columns, decode=decode, threads=False, share=share)
        return pa.RecordBatchReader.from_batches(schema, (batch.cast(schema) for batch in scan.to_batches()))

    def _scanner(
        self,
        name: str,
        filters: Sequence[tuple[str, str, object]] | None,
        columns: Sequence[str] | None,
        *,
        decode: bool,
        threads: bool,
        share: tuple[int, int] = (0, 1),
    ) -> tuple[ds.Scanner, pa.Schema]:
        """A scan of the table's current files (see `read_arrow`) and the schema its rows are cast to."""
        schema = TABLES[name].schema
        if columns is not None:
            schema = pa.schema([f for f in schema if f.name in columns])
        strings = [f.name for f in schema if pa.types.is_string(f.type)]
        dataset = self._dataset(name, tuple(strings))
        if share != (0, 1):
            part, parts = share
            fragments = list(dataset.get_fragments())
            mine = fragments[part * len(fragments) // parts : (part + 1) * len(fragments) // parts]
            dataset = ds.FileSystemDataset(mine, dataset.schema, dataset.format, dataset.filesystem)
        where = functools.reduce(operator.and_, [_term(*term) for term in filters]) if filters else None
        # One file and batch decoded ahead, not 4 x 16: a filtered read's transient memory about halves, same time.
        scan = dataset.scanner(
            columns=schema.names, filter=where, fragment_readahead=1, batch_readahead=1, use_threads=threads
        )
        if not decode:
            encoded = {column: pa.dictionary(pa.int32(), pa.string()) for column in strings}
            schema = pa.schema([f.with_type(encoded.get(f.name, f.type)) for f in schema])
        return scan, schema

    def _dataset(self, name: str, strings: tuple[str, ...]) -> ds.FileSystemDataset:
        """The table's latest version as an Arrow dataset, `strings` read as dictionaries. The table is opened once
        (its whole log read: 10-15 ms, more as its versions add up) and brought up to date on each read by the commits
        made since, by any process (a listing of its log from the version held: under 1 ms); a version's dataset is
        kept until the next commit (making it costs 4-8 ms). Under a lock: delta-rs's table is not for two threads
        at once."""
        with self._reading:
            table = self._kept(self._opened, name)
            key = (name, table.version(), strings)
            dataset = self._datasets.get(key)
            if dataset is None:
                options = ds.ParquetReadOptions(dictionary_columns=list(strings))
                files = pa_fs.SubTreeFileSystem(name, self.fs)
                dataset = table.to_pyarrow_dataset(filesystem=files, parquet_read_options=options)
                self._datasets = {k: v for k, v in self._datasets.items() if k[:2] == key[:2] or k[0] != name}
                self._datasets[key] = dataset
            return dataset

    @contextmanager
    def latest(self, name: str) -> Iterator[DeltaTable]:
        """Table `name` at its latest version, to read inside the block (its files, statistics, schema): the table
        `_dataset` keeps, brought up to date. Commit through `table`, never through this one."""
        with self._reading:
            yield self._kept(self._opened, name)

    def _lacks_columns(self, spec: TableSpec) -> bool:
        """Whether the table's latest version lacks a column of its contract."""
        with self.latest(spec.name) as table:
            return bool(_missing_columns(spec, table))

    def _kept(self, kept: dict[str, DeltaTable], name: str) -> DeltaTable:
        """Table `name` as `kept` holds it, brought up to date with the commits made since by any process (a listing
        of its log from the version held), or opened and kept (its whole log read)."""
        table = kept.get(name)
        if table is None:
            table = kept[name] = DeltaTable(self.path(name), storage_options=self.store.delta_options())
        else:
            table.update_incremental()
        return table

    def read(self, spark: SparkSession, name: str) -> DataFrame:
        """The table's current snapshot as a Spark DataFrame, read as Delta by the connector."""
        return self.attach(spark).read.format("delta").load(self.store.spark_uri(name))

    def scan(
        self, spark: SparkSession, name: str, key: str | None = None, values: Sequence[int | str] = ()
    ) -> DataFrame:
        """The table's current rows as a Spark DataFrame (with `key`, only the rows whose `key` is in `values`):
        delta-rs resolves the current snapshot from the log, Spark's Parquet reader reads its files, and the files'
        statistics skip those that cannot hold the values.

        The pipeline's steps read this way. The connector (`read`) rebuilds a table's state with Spark jobs the
        first time a JVM reads it: 1.5 s per table and 7 s for the first on 2 cores, against 0.2 and 1.6 s here,
        which is most of a what-if's time. Both read the same rows: the tables use no feature beyond Delta's
        protocol (1, 2) (no deletion vectors, no column mapping), so the current files are the current rows.
        """
        from pyspark.sql import functions as F
        from pyspark.sql.pandas.types import from_arrow_schema

        from jobs.io.delta_stats import current_files, files_holding
        from jobs.io.spark import local_frame

        schema = TABLES[name].schema
        with self.latest(name) as table:
            files = current_files(table) if key is None else files_holding(table, key, values)
        if not files:
            return local_frame(spark, [], schema)
        uris = [self.store.spark_uri(name, f) for f in files]
        frame = self.attach(spark).read.schema(from_arrow_schema(schema)).parquet(*uris)
        return frame if key is None else frame.where(F.col(key).isin(list(values)))

    def register_views(self, spark: SparkSession, names: Sequence[str] | None = None) -> list[str]:
        """Expose the named tables (every table by default) to Spark SQL as Delta tables of the session's catalog
        (so `VERSION AS OF`, `TIMESTAMP AS OF` and `DESCRIBE HISTORY` work on them); `rebalance sql` refuses any
        write to them. A name registered before (another lake in the same session) is dropped first: an external
        table, so its data stays. Each costs a read of the table's log (0.2-0.3 s on a warm driver)."""
        self.attach(spark)
        names = list(TABLES) if names is None else list(names)
        for name in names:
            spark.sql(f"DROP TABLE IF EXISTS `{name}`")
            spark.sql(f"CREATE TABLE `{name}` USING delta LOCATION '{self.store.spark_uri(name)}'")
        return names

    def attach(self, spark: SparkSession) -> SparkSession:
        """The session, given the settings its Hadoop file systems need to reach this lake (once per session).

        Set as session settings, which Spark copies into the Hadoop configuration of every read and write, so a
        session made elsewhere (a test's, a Spark Connect server's) reaches an S3 lake with this process's settings.
        """
        with self._configuring:
            if id(spark) not in self._configured:
                for key, value in self.store.spark_conf().items():
                    spark.conf.set(key, value)
                self._configured.add(id(spark))
        return spark

    @contextmanager
    def lock(self) -> Iterator[None]:
        """An exclusive lock over the lake, held for every commit and while generation ids are allocated.

        Other processes (on any host, for a lake on S3) wait their turn; within a process it is re-entrant (a step
        holding it commits through `merge`), and threads take turns. A local lake's lock is on its directory, so a
        read-only lake can be locked too.
        """
        lock = self._lake_lock()
        with lock.threads:
            lock.acquire()
            try:
                yield
            finally:
                lock.release()

    def run_lock(self, run_id: str) -> Lock:
        """Hold run `run_id` until the returned lock is released: another process holding it is waited for (and
        said so), so two runs given one id run one after the other. Shared within a process.

        A lake that cannot be written needs no run lock (nothing can be written): it gets none.
        """
        name = f".runs/{hashlib.sha256(run_id.encode()).hexdigest()[:32]}.lock"
        try:
            if self.local is None:
                lock: Lock = self._lease(name)
            else:
                (self.local / ".runs").mkdir(parents=True, exist_ok=True)
                lock = file_lock(str(self.local / name))
            if not lock.acquire(blocking=False):
                log.warning("run %r is running in another process (%s); waiting for it to end", run_id, lock.holder())
                lock.acquire()
            lock.note(f"pid {os.getpid()}")
        except OSError as e:
            if self.local is not None and unwritable(self.local):
                nothing = FileLock("")
                nothing.acquire()
                return nothing
            raise SourceError(f"lake {self.root}: locking run {run_id!r} failed: {_cause(e)}") from None
        return lock

    def _lake_lock(self) -> Lock:
        """The lake lock: a flock on a local lake's directory (so a read-only lake can be locked too), a lease
        object under an S3 one."""
        if self.local is None:
            return self._lease(".lake.lock")
        try:
            self.local.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise SourceError(f"lake {self.root}: cannot create it: {_cause(e)}") from None
        return file_lock(str(self.local))

    def _lease(self, name: str) -> Lock:
        """The lease object `name` under an S3 lake's prefix."""
        return object_lease(self.store.client, self.store.bucket, self.store.key(name))


def columns(row: Mapping[str, Any], names: Sequence[str]) -> dict[str, Any]:
    """The row narrowed to `names`, in their order (a typed row included)."""
    return {name: row[name] for name in names}


def rows_table(name: str, rows: Sequence[Mapping[str, Any]]) -> pa.Table:
    """Rows (dicts) as an Arrow table of the named table's schema."""
    return pa.Table.from_pylist(list(rows), schema=TABLES[name].schema)


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


def _term(column: str, op: str, value: object) -> pc.Expression:
    """A filter term: `=` or `in` (the lookups the pipeline makes by key)."""
    if op == "=":
        return pc.field(column) == value
    if op == "in":
        values = list(value)  # type: ignore[call-overload]
        # No values: no row matches (Arrow cannot type an empty value set against the column).
        return pc.field(column).isin(values) if values else pc.scalar(False)
    raise ValueError(f"unsupported filter operator {op!r}: use '=' or 'in'")
