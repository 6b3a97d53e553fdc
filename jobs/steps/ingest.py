"""Ingest: snapshot documents (files or a Kafka pull) -> validated rows in the lake, bad input to quarantine.

One bad group never stops the others, and nothing is dropped: an invalid group is kept whole in `quarantine`
with a reason naming the field, and an unreadable file is quarantined byte for byte as it was read.

A snapshot becomes visible all at once: its `snapshots` rows are committed last, after `topic_partitions`,
`partition_offsets` and `quarantine`, and every reader finds snapshots through that table. A run stopped half-way
leaves rows no snapshot id in `snapshots` leads to; re-running its run id completes them.
"""

from __future__ import annotations

import hashlib
import json
from collections import deque
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from jobs.config import Config
from jobs.context import RunContext, StepResult
from jobs.io.ingest_worker import IngestWorkers
from jobs.io.input_files import listed
from jobs.io.lake import Lake, rows_table
from jobs.io.snapshot_pieces import Piece, PieceRows, RawDocument, piece_documents, pieces_of, read_documents
from jobs.io.snapshot_rows import OffsetColumns, SnapshotColumns, capture_time
from jobs.io.worker_process import cores
from planner.errors import InputError
from planner.gc_pause import gc_paused
from schemas.rules import Limits, document_errors
from schemas.tables import TOPIC_PARTITIONS

if TYPE_CHECKING:
    from jobs.io.kafka_settings import KafkaSettings


@dataclass
class IngestResult:
    snapshot_id: str
    groups: list[str] = field(default_factory=list)
    quarantined: list[tuple[str, str]] = field(default_factory=list)


def snapshot_files(pattern: str) -> list[tuple[Path, Path | None]]:
    """(file, the directory it was listed from) for a path, a directory (its *.json and *.jsonl) or a glob, sorted."""
    return listed(pattern)


def ingest_documents(
    lake: Lake,
    documents: Iterable[RawDocument],
    snapshot_id: str,
    run_id: str,
    received_at: datetime,
    source: str = "file",
) -> IngestResult:
    """Validate each document, write the valid groups of one snapshot and quarantine the rest (idempotent)."""
    snapshot = Snapshot(snapshot_id, run_id, received_at, source)
    snapshot.take_all(documents)
    snapshot.write(lake)
    return snapshot.result


# Inputs smaller than this are read in this process: below it, starting a worker (a new interpreter importing the
# readers, the rules and Arrow) costs more than it saves (bench/ingest_workers.py measures the crossover), and in
# `rebalance run` the JVM's start holds the other core for the first seconds of ingest (1,000 groups, 54 MB: 3 s).
MIN_BYTES_FOR_WORKERS = 64 << 20
PIECE_BYTES = (256 << 10, 4 << 20)  # a piece's least and largest size: small enough to balance the workers' loads
PIECES_HELD = 4  # pieces per worker sent or read and not yet taken, at most (their rows wait in memory)


def ingest_files(
    lake: Lake,
    files: Iterable[tuple[Path, Path | None]],
    snapshot_id: str,
    run_id: str,
    received_at: datetime,
    workers: int | IngestWorkers | None = None,
) -> IngestResult:
    """`ingest_documents` of snapshot files (path, the directory it was listed from), read by `read_files`."""
    snapshot = read_files(files, snapshot_id, run_id, received_at, workers)
    snapshot.write(lake)
    return snapshot.result


def read_files(
    files: Iterable[tuple[Path, Path | None]],
    snapshot_id: str,
    run_id: str,
    received_at: datetime,
    workers: int | IngestWorkers | None = None,
) -> Snapshot:
    """The snapshot of the files, as `ingest_documents` takes their documents (the same verdicts, rows and
    quarantine, in the same order), read by worker processes (`workers`: how many, 0 for none, or started ones,
    which this closes) or, by default, one per core when the files are large enough to repay their start."""
    files = list(files)
    size = sum(map(_size, files))
    chosen = workers is None
    if workers is None:
        workers = cores() if size >= MIN_BYTES_FOR_WORKERS else 0
    snapshot = Snapshot(snapshot_id, run_id, received_at, "file")
    if workers == 0:
        snapshot.take_all(raw for path, within in files for raw in read_documents(path, within))
        return snapshot
    count = workers if isinstance(workers, int) else len(workers.processes)
    units = list(_units(files, min(max(size // (16 * count), PIECE_BYTES[0]), PIECE_BYTES[1])))
    if chosen and sum(isinstance(unit, Piece) for unit in units) < 2:
        # One piece (a file of one large document, or an array): a worker would read it alone, then send its rows.
        snapshot.take_all(raw for unit in units for raw in _documents(unit))
        return snapshot
    with workers if isinstance(workers, IngestWorkers) else IngestWorkers(workers) as started, gc_paused():
        snapshot.take_pieces(iter(units), started)
    return snapshot


def _documents(unit: Piece | RawDocument) -> Iterator[RawDocument]:
    """A unit's documents: a piece's, or a file's error."""
    if isinstance(unit, RawDocument):
        yield unit
    else:
        yield from piece_documents(unit)


def _size(file: tuple[Path, Path | None]) -> int:
    """The file's size in bytes (0 when it cannot be told: then reading it fails, and says why)."""
    try:
        return file[0].stat().st_size
    except OSError:
        return 0


def _units(files: list[tuple[Path, Path | None]], piece_bytes: int) -> Iterator[Piece | RawDocument]:
    """The files' pieces in order, and each file that is not read at all as its error."""
    for path, within in files:
        pieces = pieces_of(path, within, piece_bytes)
        yield from [pieces] if isinstance(pieces, RawDocument) else pieces


class Snapshot:
    """A snapshot being ingested: its valid groups' rows, its quarantined input, the topics and groups seen."""

    def __init__(self, snapshot_id: str, run_id: str, received_at: datetime, source: str) -> None:
        self.run_id, self.received_at = run_id, received_at
        self.result = IngestResult(snapshot_id)
        self.members = SnapshotColumns(snapshot_id, received_at, source)
        self.offsets = OffsetColumns()
        self.pieces: list[tuple[pa.Table, pa.Table]] = []  # the rows taken from workers' pieces, in order
        self.quarantine: list[dict[str, Any]] = []
        self.counts: dict[str, tuple[int, str]] = {}  # topic -> (partition count, the group that gave it)
        self.topic_ids: dict[str, str] = {}  # topic -> Kafka topic id (Uuid, base64url), when the source gave it
        self.group_ids: set[str] = set()
        self.limits = Limits.from_env()

    def take_all(self, documents: Iterable[RawDocument]) -> None:
        """`take` each document, in order."""
        with gc_paused():
            for raw in documents:
                self.take(raw)

    def take(self, raw: RawDocument) -> None:
        """Add a document's group, or quarantine the document with every reason it is refused."""
        errors = [raw.error] if raw.error else document_errors(raw.doc, self.limits)
        if self.accepts(raw.source, raw.raw, errors, raw.doc):
            self.members.add(raw.doc)
            self.offsets.add(raw.doc)

    def take_pieces(self, units: Iterator[Piece | RawDocument], workers: IngestWorkers) -> None:
        """Take the units' documents in order: each piece read by a worker (sent ahead while a worker has room and
        fewer than PIECES_HELD per worker are held), a file's error here."""
        pending: deque[int | RawDocument] = deque()  # per unit in order: its piece's number, or the file's error
        held = PIECES_HELD * len(workers.processes)
        while True:
            while len(pending) < held and workers.room() and (unit := next(units, None)) is not None:
                if isinstance(unit, RawDocument):
                    pending.append(unit)
                else:
                    pending.append(workers.send(unit, self.result.snapshot_id, self.received_at, self.limits))
            if not pending:
                return
            head = pending[0]
            if isinstance(head, RawDocument):
                self.take(head)
            elif (rows := workers.rows(head)) is not None:
                self.take_rows(rows)
            else:
                workers.wait()
                continue
            pending.popleft()

    def take_rows(self, rows: PieceRows) -> None:
        """Take a piece's documents as `take` would have, keeping the rows of those accepted."""
        kept = np.array([self.accepts(v.source, v.raw, v.errors, v.fields) for v in rows.verdicts], dtype=bool)
        assert rows.snapshots is not None and rows.offsets is not None
        snapshots, offsets = rows.snapshots, rows.offsets
        if not kept.all():
            snapshots = snapshots.filter(np.repeat(kept, [v.member_rows for v in rows.verdicts]))
            offsets = offsets.filter(np.repeat(kept, [v.offset_rows for v in rows.verdicts]))
        self.pieces.append((snapshots, offsets))

    def accepts(self, source: str, raw: str | bytes, errors: list[str], doc: Any) -> bool:
        """Whether a document without `errors` of its own agrees with those taken before it: then its group is
        counted in, else the document is quarantined with every reason it is refused."""
        if not errors:
            errors = (
                _conflicts(doc, self.counts) or self._duplicate_group(doc) or _from_the_future(doc, self.received_at)
            )
        if errors:
            self._quarantine(source, raw, "; ".join(errors))
            return False
        self.result.groups.append(doc["group_id"])
        self.group_ids.add(doc["group_id"])
        for topic, n in doc["topics"].items():
            self.counts[topic] = (n, doc["group_id"])
        self.topic_ids.update(doc.get("topic_ids") or {})
        return True

    def _duplicate_group(self, doc: Mapping[str, Any]) -> list[str]:
        """A group appears once per snapshot: a second document of it is rejected."""
        if doc["group_id"] in self.group_ids:
            return [f"group_id: group {doc['group_id']!r} appears twice in this snapshot"]
        return []

    def _quarantine(self, source: str, raw: str | bytes, reason: str) -> None:
        """Keep the document whole, its bytes as received, with the reason."""
        self.quarantine.append(
            {
                "ingest_id": hashlib.sha256(f"{self.run_id}\0{source}".encode()).hexdigest()[:20],
                "run_id": self.run_id,
                "source": source,
                "raw_payload": _text(raw),
                "raw_bytes": raw if isinstance(raw, bytes) else raw.encode(),
                "error": reason,
                "received_at": self.received_at,
            }
        )
        self.result.quarantined.append((source, reason))

    def tables(self) -> Iterator[tuple[str, pa.Table]]:
        """The snapshot's rows by table, in the order they are committed (`snapshots` last), each built when asked
        for (after the tables before it are committed)."""
        snapshot_id = self.result.snapshot_id
        offsets = _joined([*(offsets for _, offsets in self.pieces), self.offsets.table(snapshot_id)])
        counts = {topic: n for topic, (n, _) in self.counts.items()}
        yield "topic_partitions", topic_partitions(counts, offsets, snapshot_id, self.topic_ids)
        yield "partition_offsets", offsets
        yield "quarantine", rows_table("quarantine", self.quarantine)
        yield "snapshots", _joined([*(members for members, _ in self.pieces), self.members.table()])

    def write(self, lake: Lake) -> None:
        """Commit the snapshot's tables, `snapshots` last: the snapshot is complete once its rows are there."""
        for name, rows in self.tables():
            if name == "quarantine":
                lake.merge(name, rows)
            else:
                _write_snapshot_rows(lake, name, rows, self.result.snapshot_id)


def _joined(tables: list[pa.Table]) -> pa.Table:
    """The tables' rows in order, as one table (the last, empty, when every one is)."""
    return pa.concat_tables(with_rows) if (with_rows := [t for t in tables if t.num_rows]) else tables[-1]


def _write_snapshot_rows(lake: Lake, name: str, rows: pa.Table, snapshot_id: str) -> None:
    """Write a snapshot's rows to table `name` in one commit: appended while the table holds none of the snapshot's
    rows (a run id's first ingest: a MERGE's join would take a hundred MB for a thousand groups' offsets), merged
    on the keys when a re-run of the run id finds some, so re-running never duplicates a row.

    Only the run holding the run id's lock writes its snapshot's rows, so no other process adds any in between.
    """
    if _may_hold(lake, name, snapshot_id):
        lake.merge(name, rows)
    else:
        lake.append(name, rows)


def _may_hold(lake: Lake, name: str, snapshot_id: str) -> bool:
    """Whether a data file of the table may hold rows of `snapshot_id`, by the Delta log's per-file statistics
    (bounds, perhaps truncated; a file without them may hold any)."""
    with lake.latest(name) as table:
        files = pa.table(table.get_add_actions(flatten=True))
    if not {"min.snapshot_id", "max.snapshot_id"} <= set(files.column_names):
        return bool(files.num_rows > 0)
    lows, highs = files.column("min.snapshot_id").to_pylist(), files.column("max.snapshot_id").to_pylist()
    return any(low is None or high is None or low <= snapshot_id <= high for low, high in zip(lows, highs, strict=True))


def run(
    ctx: RunContext,
    *,
    received_at: datetime | None = None,
    documents: Iterable[RawDocument] | None = None,
    source: str | None = None,
) -> StepResult:
    """Ingest snapshot `ctx.run_id`: given documents, else Kafka when bootstrap servers are configured, else files.

    A row per group ingested; the inputs quarantined, each named with the reason, also as text.
    """
    from jobs.io import kafka_settings

    received_at = received_at or datetime.now(UTC)
    run_id = ctx.run_id  # the snapshot's id too
    if documents is not None:
        result = ingest_documents(ctx.lake, documents, run_id, run_id, received_at, source or "file")
    elif (settings := kafka_settings.from_env()) is not None:
        documents = kafka_documents(settings, ctx.config, ctx.lake, run_id, received_at)
        result = ingest_documents(ctx.lake, documents, run_id, run_id, received_at, "kafka")
    else:
        result = ingest_files(ctx.lake, configured_files(ctx.config), run_id, run_id, received_at)
    # The rows are written and gone, but Arrow's allocator keeps their pages (70 MB for a thousand groups) for the
    # rest of the run unless told to hand them back.
    pa.default_memory_pool().release_unused()
    return StepResult(
        tuple({"group_id": g} for g in result.groups),
        "\n".join(f"quarantined {source}: {reason}" for source, reason in result.quarantined),
        quarantined=tuple(result.quarantined),
    )


def configured_files(config: Config) -> list[tuple[Path, Path | None]]:
    """The configured snapshot files, or an InputError when none match."""
    files = snapshot_files(config.snapshots)
    if not files:
        raise InputError(
            f"no snapshot files match {config.snapshots!r} (set REBALANCE_SNAPSHOTS, "
            "or REBALANCE_KAFKA_BOOTSTRAP_SERVERS to pull from Kafka)"
        )
    return files


def kafka_documents(
    settings: KafkaSettings, config: Config, lake: Lake, run_id: str, received_at: datetime
) -> list[RawDocument]:
    """A Kafka pull's documents (already decoded: they are taken in this process), plus key samples of
    `sample_topics` written to the lake."""
    from jobs.io import kafka_source

    # A Kafka pull is all or nothing: any failure raises before a row is written.
    docs = kafka_source.pull_snapshots(settings, group_pattern=config.group_pattern, captured_at=received_at)
    if config.sample_topics:
        lake.merge(
            "key_samples",
            kafka_source.sample_keys(settings, config.sample_topics, config.sample_records, sample_id=run_id),
        )
    origin = f"kafka://{settings.bootstrap_servers}"
    return [RawDocument(f"{origin}/{_printable(d['group_id'])}", json.dumps(d), doc=d) for d in docs]


def _printable(group_id: str) -> str:
    """A Kafka group id as it may be printed: control characters escaped (Kafka allows any text as a group id)."""
    return group_id if group_id.isprintable() else group_id.encode("unicode_escape").decode("ascii")


def _text(raw: str | bytes) -> str:
    """The payload as readable text (bytes that are not UTF-8 shown as \\x escapes; `raw_bytes` keeps them)."""
    return raw if isinstance(raw, str) else raw.decode("utf-8", "backslashreplace")


def _conflicts(doc: Mapping[str, Any], counts: Mapping[str, tuple[int, str]]) -> list[str]:
    """A topic has one partition count per snapshot: a group that disagrees with an earlier one is rejected."""
    return [
        f"topics.{t}: {n} partitions here, but {counts[t][0]} in group {counts[t][1]!r} of the same snapshot"
        for t, n in doc["topics"].items()
        if t in counts and counts[t][0] != n
    ]


CLOCK_SKEW = timedelta(days=1)  # how far a capture time may run ahead of its receipt (clocks, time zones)


def _from_the_future(doc: Mapping[str, Any], received_at: datetime) -> list[str]:
    """A capture time after the snapshot was received (beyond clock skew) cannot be true: it would also sort the
    snapshot after every real one and make it each group's "latest" for years."""
    captured = capture_time(doc.get("captured_at"), received_at)
    if captured - received_at <= CLOCK_SKEW:
        return []
    return [f"captured_at: {doc['captured_at']} is after the snapshot was received ({received_at.isoformat()})"]


def topic_partitions(
    counts: Mapping[str, int], offsets: pa.Table, snapshot_id: str, topic_ids: Mapping[str, str] | None = None
) -> pa.Table:
    """Every partition of every topic with its count, its end offset as the last group listing it gave it, and its
    topic's Kafka id when the source gave one (the server assignors order topics by id)."""
    topics = list(counts)
    sizes = np.array([counts[t] for t in topics], dtype=np.int64)
    start = np.concatenate([[0], np.cumsum(sizes)])
    topic_of = np.repeat(np.arange(len(topics), dtype=np.int32), sizes)
    partition = np.arange(start[-1]) - start[topic_of]
    known = offsets.select(["topic", "partition", "end_offset"]).filter(pc.is_valid(offsets.column("end_offset")))
    t = pc.index_in(known.column("topic"), value_set=pa.array(topics, pa.string())).to_numpy(zero_copy_only=False)
    at = start[t.astype(np.int64)] + known.column("partition").to_numpy().astype(np.int64)
    # The last listing of a partition wins: its first occurrence in the reversed order.
    ids, last = np.unique(at[::-1], return_index=True)
    end = np.zeros(len(partition), dtype=np.int64)
    end[ids] = known.column("end_offset").to_numpy()[::-1][last]
    missing = np.ones(len(partition), dtype=bool)
    missing[ids] = False
    columns = {
        "snapshot_id": pa.array([snapshot_id] * len(partition), pa.string()),
        "topic": pa.DictionaryArray.from_arrays(topic_of, pa.array(topics, pa.string())).cast(pa.string()),
        "partition": pa.array(partition.astype(np.int32)),
        "partition_count": pa.array(sizes[topic_of].astype(np.int32)),
        "end_offset": pa.array(end, mask=missing),
        "topic_id": pa.array([(topic_ids or {}).get(t) for t in topics], pa.string()).take(pa.array(topic_of)),
    }
    return pa.table(columns, schema=TOPIC_PARTITIONS.schema)
