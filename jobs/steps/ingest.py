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
from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from itertools import chain, count, repeat
from operator import itemgetter
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from jobs.config import Config
from jobs.context import RunContext, StepResult
from jobs.io.input_files import listed, open_input
from jobs.io.lake import Lake, rows_table
from planner.errors import InputError
from planner.gc_pause import gc_paused
from schemas.reader import json_lines_of, read_json_documents
from schemas.rules import Limits, document_errors, parse_timestamp
from schemas.spec import TOPIC_PARTITION
from schemas.tables import PARTITION_OFFSETS, SNAPSHOTS, TOPIC_PARTITIONS


@dataclass(frozen=True)
class RawDocument:
    """One group's document as received (bytes exactly as read, or text), or an unreadable input (`doc` None,
    `error` set)."""

    source: str
    raw: str | bytes
    doc: Any = None
    error: str | None = None


@dataclass
class IngestResult:
    snapshot_id: str
    groups: list[str] = field(default_factory=list)
    quarantined: list[tuple[str, str]] = field(default_factory=list)


def snapshot_files(pattern: str) -> list[tuple[Path, Path | None]]:
    """(file, the directory it was listed from) for a path, a directory (its *.json and *.jsonl) or a glob, sorted."""
    return listed(pattern)


def read_documents(path: Path, listed_from: Path | None = None) -> Iterator[RawDocument]:
    """One JSON object, a JSON array of them, or JSON lines (`schemas.reader`); what cannot be read comes back as
    an error with the bytes exactly as received, a bad line or element on its own. JSON lines are read one line
    at a time, so a large file is never held whole. A file that is not read at all (`jobs.io.input_files`: a FIFO,
    a link out of its directory, a loop, no permission) comes back as an error with no bytes."""
    try:
        opened = open_input(path, listed_from)
    except InputError as e:
        yield RawDocument(str(path), b"", error=str(e))
        return
    with opened as file:
        if (lines := json_lines_of(file, str(path))) is not None:
            yield from (RawDocument(d.where, d.raw, doc=d.doc, error=d.error) for d in lines)
            return
        file.seek(0)
        data = file.read()
    try:
        documents = read_json_documents(data, str(path))
    except InputError as e:
        yield RawDocument(str(path), data, error=str(e))
        return
    for d in documents:
        yield RawDocument(d.where, d.raw, doc=d.doc, error=d.error)


def ingest_documents(
    lake: Lake,
    documents: Iterable[RawDocument],
    snapshot_id: str,
    run_id: str,
    received_at: datetime,
    source: str = "file",
) -> IngestResult:
    """Validate each document, write the valid groups of one snapshot and quarantine the rest (idempotent)."""
    snapshot = _Snapshot(snapshot_id, run_id, received_at, source)
    with gc_paused():
        for raw in documents:
            snapshot.take(raw)
    snapshot.write(lake)
    return snapshot.result


class _Snapshot:
    """A snapshot being ingested: its valid groups' rows, its quarantined input, the topics and groups seen."""

    def __init__(self, snapshot_id: str, run_id: str, received_at: datetime, source: str) -> None:
        self.run_id, self.received_at = run_id, received_at
        self.result = IngestResult(snapshot_id)
        self.members = SnapshotColumns(snapshot_id, received_at, source)
        self.offsets = OffsetColumns()
        self.quarantine: list[dict[str, Any]] = []
        self.counts: dict[str, tuple[int, str]] = {}  # topic -> (partition count, the group that gave it)
        self.topic_ids: dict[str, str] = {}  # topic -> Kafka topic id (Uuid, base64url), when the source gave it
        self.group_ids: set[str] = set()
        self.limits = Limits.from_env()

    def take(self, raw: RawDocument) -> None:
        """Add a document's group, or quarantine the document with every reason it is refused."""
        errors = [raw.error] if raw.error else document_errors(raw.doc, self.limits)
        if not errors:
            errors = (
                _conflicts(raw.doc, self.counts)
                or self._duplicate_group(raw.doc)
                or _from_the_future(raw.doc, self.received_at)
            )
        if errors:
            self._quarantine(raw, "; ".join(errors))
            return
        doc = raw.doc
        self.result.groups.append(doc["group_id"])
        self.group_ids.add(doc["group_id"])
        self.members.add(doc)
        self.offsets.add(doc)
        for topic, n in doc["topics"].items():
            self.counts[topic] = (n, doc["group_id"])
        self.topic_ids.update(doc.get("topic_ids") or {})

    def _duplicate_group(self, doc: Mapping[str, Any]) -> list[str]:
        """A group appears once per snapshot: a second document of it is rejected."""
        if doc["group_id"] in self.group_ids:
            return [f"group_id: group {doc['group_id']!r} appears twice in this snapshot"]
        return []

    def _quarantine(self, raw: RawDocument, reason: str) -> None:
        """Keep the document whole, its bytes as received, with the reason."""
        self.quarantine.append(
            {
                "ingest_id": hashlib.sha256(f"{self.run_id}\0{raw.source}".encode()).hexdigest()[:20],
                "run_id": self.run_id,
                "source": raw.source,
                "raw_payload": _text(raw.raw),
                "raw_bytes": raw.raw if isinstance(raw.raw, bytes) else raw.raw.encode(),
                "error": reason,
                "received_at": self.received_at,
            }
        )
        self.result.quarantined.append((raw.source, reason))

    def write(self, lake: Lake) -> None:
        """Commit the snapshot's tables, `snapshots` last: the snapshot is complete once its rows are there."""
        snapshot_id = self.result.snapshot_id
        offset_rows = self.offsets.table(snapshot_id)
        counts = {topic: n for topic, (n, _) in self.counts.items()}
        partitions = topic_partitions(counts, offset_rows, snapshot_id, self.topic_ids)
        _write_snapshot_rows(lake, "topic_partitions", partitions, snapshot_id)
        _write_snapshot_rows(lake, "partition_offsets", offset_rows, snapshot_id)
        lake.merge("quarantine", rows_table("quarantine", self.quarantine))
        _write_snapshot_rows(lake, "snapshots", self.members.table(), snapshot_id)


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
    files = pa.table(lake.table(name).get_add_actions(flatten=True))
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
    received_at = received_at or datetime.now(UTC)
    if documents is None:
        documents, source = configured_documents(ctx.config, ctx.lake, ctx.run_id, received_at)
    result = ingest_documents(
        ctx.lake, documents, snapshot_id=ctx.run_id, run_id=ctx.run_id, received_at=received_at, source=source or "file"
    )
    # The rows are written and gone, but Arrow's allocator keeps their pages (70 MB for a thousand groups) for the
    # rest of the run unless told to hand them back.
    pa.default_memory_pool().release_unused()
    return StepResult(
        tuple({"group_id": g} for g in result.groups),
        "\n".join(f"quarantined {source}: {reason}" for source, reason in result.quarantined),
        quarantined=tuple(result.quarantined),
    )


def configured_documents(
    config: Config, lake: Lake, run_id: str, received_at: datetime
) -> tuple[Iterable[RawDocument], str]:
    """The run's input: a Kafka pull (plus key samples of `sample_topics`) or the configured snapshot files."""
    from jobs.io import kafka_settings

    settings = kafka_settings.from_env()
    if settings is None:
        files = snapshot_files(config.snapshots)
        if not files:
            raise InputError(
                f"no snapshot files match {config.snapshots!r} (set REBALANCE_SNAPSHOTS, "
                "or REBALANCE_KAFKA_BOOTSTRAP_SERVERS to pull from Kafka)"
            )
        return (raw for path, within in files for raw in read_documents(path, within)), "file"
    from jobs.io import kafka_source

    # A Kafka pull is all or nothing: any failure raises before a row is written.
    docs = kafka_source.pull_snapshots(settings, group_pattern=config.group_pattern, captured_at=received_at)
    if config.sample_topics:
        lake.merge(
            "key_samples",
            kafka_source.sample_keys(settings, config.sample_topics, config.sample_records, sample_id=run_id),
        )
    origin = f"kafka://{settings.bootstrap_servers}"
    return [RawDocument(f"{origin}/{_printable(d['group_id'])}", json.dumps(d), doc=d) for d in docs], "kafka"


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
    captured = _parse_time(doc.get("captured_at"), received_at)
    if captured - received_at <= CLOCK_SKEW:
        return []
    return [f"captured_at: {doc['captured_at']} is after the snapshot was received ({received_at.isoformat()})"]


def _parse_time(text: str | None, default: datetime) -> datetime:
    """The document's capture time (validated by the rules, strict RFC 3339), or when it was received."""
    return parse_timestamp(text) if text else default


_NO_MEMBER = {"member_id": "", "topics": []}  # the one row of a group without members
_MEMBER_FIELDS = (
    "member_id",
    "client_id",
    "host",
    "group_instance_id",
    "rack",
    "member_epoch",
    "subscription_user_data",
    "topic_regex",
    "assignment_user_data",
)


class SnapshotColumns:
    """A snapshot's `snapshots` rows, gathered group by group: one per member, or one with member_id '' for a group
    without members. Member fields are kept as lists (a few per member); the [topic, partition] lists, a million
    pairs in a large group, as arrays of topic ids and partitions, each list sorted as Python sorts the pairs."""

    def __init__(self, snapshot_id: str, received_at: datetime, source: str) -> None:
        self.snapshot_id, self.received_at, self.source = snapshot_id, received_at, source
        self.topic_ids: dict[str, int] = defaultdict(count().__next__)  # a new topic takes the next id
        self.lists = {name: PartitionLists(self.topic_ids) for name in ("owned", "assignment", "target_assignment")}
        self.columns: dict[str, list[Any]] = {name: [] for name in SNAPSHOTS.schema.names if name not in self.lists}

    def add(self, doc: Mapping[str, Any]) -> None:
        """Append a valid group document's rows."""
        members = doc["members"] or [_NO_MEMBER]
        for name, value in self._group(doc).items():
            self.columns[name] += [value] * len(members)
        for name in _MEMBER_FIELDS:
            self.columns[name] += [m.get(name) for m in members]
        self.columns["strategies"] += [m.get("strategies") or [] for m in members]
        self.columns["topics"] += [sorted(set(m["topics"])) for m in members]
        self.lists["owned"].add([m.get("owned") or [] for m in members])
        self.lists["assignment"].add([m.get("assignment") or [] for m in members])
        self.lists["target_assignment"].add([m.get("target_assignment") for m in members])  # absent: null

    def _group(self, doc: Mapping[str, Any]) -> dict[str, Any]:
        """The fields every row of the group repeats."""
        return {
            "snapshot_id": self.snapshot_id,
            "group_id": doc["group_id"],
            "captured_at": _parse_time(doc.get("captured_at"), self.received_at),
            "source": doc.get("source", self.source),
            "state": doc.get("state", "Stable"),
            "protocol_type": doc.get("protocol_type", "consumer"),
            "protocol": doc.get("protocol"),
            "kafka_generation": doc.get("generation"),
            "group_type": doc.get("group_type", "classic"),  # classic unless the document says consumer (KIP-848)
            "state_reason": doc.get("state_reason"),
            "server_assignor": doc.get("server_assignor"),
            "group_epoch": doc.get("group_epoch"),
            "assignment_epoch": doc.get("assignment_epoch"),
        }

    def table(self) -> pa.Table:
        """The rows gathered so far."""
        names = pa.array(list(self.topic_ids), pa.string())  # by id: ids are given in insertion order
        lists = {name: partition_lists.array(names) for name, partition_lists in self.lists.items()}
        return pa.table({**self.columns, **lists}, schema=SNAPSHOTS.schema)


class PartitionLists:
    """Lists of [topic, partition] pairs, one per row (None: a null list), gathered group by group as flat arrays
    of topic ids (`topic_ids`, shared) and partitions, each list sorted by (topic name, partition)."""

    def __init__(self, topic_ids: dict[str, int]) -> None:
        self.topic_ids = topic_ids
        self.lengths: list[np.ndarray] = [np.zeros(0, np.int64)]
        self.topics: list[np.ndarray] = [np.zeros(0, np.int32)]
        self.partitions: list[np.ndarray] = [np.zeros(0, np.int32)]
        self.nulls: list[bool] = []

    def add(self, lists: list[list[list[Any]] | None]) -> None:
        """Append one group's lists: flattened, ranked by topic name, sorted by one lexsort."""
        lengths = np.fromiter(map(len, (pairs or () for pairs in lists)), np.int64, len(lists))
        flat = list(chain.from_iterable(pairs for pairs in lists if pairs))
        topics, partitions = zip(*flat, strict=True) if flat else ((), ())
        names = sorted(set(topics))
        rank = np.fromiter(map({name: i for i, name in enumerate(names)}.__getitem__, topics), np.int32, len(flat))
        partition = np.fromiter(partitions, np.int32, len(flat))
        order = np.lexsort((partition, rank, np.repeat(np.arange(len(lists)), lengths)))
        ids = np.fromiter(map(self.topic_ids.__getitem__, names), np.int32, len(names))
        self.lengths.append(lengths)
        self.topics.append(ids[rank[order]])
        self.partitions.append(partition[order])
        self.nulls += [pairs is None for pairs in lists]

    def array(self, names: pa.Array) -> pa.Array:
        """The lists as list<struct<topic, partition>>; `names` holds each topic id's name."""
        values = pa.StructArray.from_arrays(
            [names.take(np.concatenate(self.topics)), pa.array(np.concatenate(self.partitions))],
            fields=list(TOPIC_PARTITION),
        )
        offsets = pa.array(np.concatenate([[0], np.cumsum(np.concatenate(self.lengths))]), pa.int32())
        return pa.ListArray.from_arrays(
            offsets, values, mask=pa.array(self.nulls, pa.bool_()) if any(self.nulls) else None
        )


class OffsetColumns:
    """The snapshot's `partition_offsets` rows, gathered group by group (a group may have a million): groups and
    topics as ids, partitions as arrays, offsets as Arrow arrays (they may be null)."""

    def __init__(self) -> None:
        self.group_ids: list[str] = []
        self.sizes: list[int] = []
        self.topic_ids: dict[str, int] = defaultdict(count().__next__)  # a new topic takes the next id
        self.topics: list[np.ndarray] = [np.zeros(0, np.int32)]
        self.partitions: list[np.ndarray] = [np.zeros(0, np.int32)]
        self.committed: list[pa.Array] = []
        self.ends: list[pa.Array] = []

    def add(self, doc: Mapping[str, Any]) -> None:
        """Append a valid group document's offsets."""
        offsets = doc.get("offsets") or []
        self.group_ids.append(doc["group_id"])
        self.sizes.append(len(offsets))
        topics = map(self.topic_ids.__getitem__, map(itemgetter("topic"), offsets))
        self.topics.append(np.fromiter(topics, np.int32, len(offsets)))
        self.partitions.append(np.fromiter(map(itemgetter("partition"), offsets), np.int32, len(offsets)))
        self.committed.append(pa.array(list(map(dict.get, offsets, repeat("committed"))), pa.int64()))
        self.ends.append(pa.array(list(map(dict.get, offsets, repeat("end"))), pa.int64()))

    def table(self, snapshot_id: str) -> pa.Table:
        """The rows, lag = end - committed where both are known and committed is not negative (none committed)."""
        committed, end = pa.chunked_array(self.committed, pa.int64()), pa.chunked_array(self.ends, pa.int64())
        lag = pc.if_else(pc.greater_equal(committed, 0), pc.subtract(end, committed), pa.scalar(None, pa.int64()))
        group = np.repeat(np.arange(len(self.sizes)), self.sizes)
        columns = {
            "snapshot_id": pa.repeat(pa.scalar(snapshot_id, pa.string()), len(group)),
            "group_id": pa.array(self.group_ids, pa.string()).take(group),
            "topic": pa.array(list(self.topic_ids), pa.string()).take(np.concatenate(self.topics)),
            "partition": pa.array(np.concatenate(self.partitions)),
            "committed": committed,
            "end_offset": end,
            "lag": lag,
        }
        return pa.table(columns, schema=PARTITION_OFFSETS.schema)


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
