"""Snapshot files read as documents (`read_documents`), or cut into pieces (`pieces_of`) that ingest's worker
processes read apart (`read_piece`): each document judged on its own (`schemas.rules`) and the valid ones' rows
built (`jobs.io.snapshot_rows`). What depends on the documents before it (a topic's partition count across groups,
a group seen twice, a capture time ahead of receipt) is left to ingest's own process, which takes the pieces in
order; so a piece carries, per document, its bytes as received, its errors and the fields those checks read.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import pyarrow as pa

from jobs.io.input_files import open_input
from jobs.io.snapshot_rows import OffsetColumns, SnapshotColumns
from planner.errors import InputError
from planner.gc_pause import gc_paused
from schemas.reader import documents_of_lines, json_lines_of, json_lines_pieces, read_json_documents
from schemas.rules import Limits, document_errors

# What ingest's checks across documents read of a valid one (jobs.steps.ingest `Snapshot.accepts`).
ACROSS_FIELDS = ("group_id", "topics", "captured_at", "topic_ids")


@dataclass(frozen=True)
class RawDocument:
    """One group's document as received (bytes exactly as read, or text), or an unreadable input (`doc` None,
    `error` set)."""

    source: str
    raw: str | bytes
    doc: Any = None
    error: str | None = None


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


@dataclass(frozen=True)
class Piece:
    """Part of a snapshot file: a JSON-lines file's lines from byte `start` to byte `end`, the first being line
    `first`; or, with `start` None, the whole file as `read_documents` reads it."""

    path: Path
    listed_from: Path | None
    start: int | None = None
    end: int = 0
    first: int = 1


def pieces_of(path: Path, listed_from: Path | None, size: int) -> list[Piece] | RawDocument:
    """The file's pieces of about `size` bytes (a JSON-lines file cut at line starts, else the whole file), or the
    error of a file that is not read at all (as `read_documents` gives it)."""
    try:
        opened = open_input(path, listed_from)
    except InputError as e:
        return RawDocument(str(path), b"", error=str(e))
    with opened as file:
        cuts = json_lines_pieces(file, size)
    if cuts is None:
        return [Piece(path, listed_from)]
    return [Piece(path, listed_from, start, end, first) for first, start, end in cuts]


def piece_documents(piece: Piece) -> Iterator[RawDocument]:
    """The piece's documents, each as `read_documents` gives it."""
    if piece.start is None:
        yield from read_documents(piece.path, piece.listed_from)
        return
    try:
        opened = open_input(piece.path, piece.listed_from)
    except InputError as e:  # gone or changed since it was cut: named as any unreadable file
        yield RawDocument(str(piece.path), b"", error=str(e))
        return
    with opened as file:
        for d in documents_of_lines(file, str(piece.path), piece.start, piece.end, piece.first):
            yield RawDocument(d.where, d.raw, doc=d.doc, error=d.error)


@dataclass(frozen=True)
class Verdict:
    """A document of a piece as judged on its own: its errors (refused) or the fields the checks across documents
    read (`fields`), with the number of `snapshots` and `partition_offsets` rows it holds in the piece's tables."""

    source: str
    raw: str | bytes
    errors: list[str]
    fields: dict[str, Any] | None = None
    member_rows: int = 0
    offset_rows: int = 0


@dataclass
class PieceRows:
    """A piece read: a verdict per document in order, and the rows of the valid ones, in the same order."""

    verdicts: list[Verdict] = field(default_factory=list)
    snapshots: pa.Table | None = None
    offsets: pa.Table | None = None


def read_piece(piece: Piece, snapshot_id: str, received_at: datetime, limits: Limits) -> PieceRows:
    """Read, check and build the rows of a piece's documents, as ingest does for one snapshot of files."""
    members, offsets = SnapshotColumns(snapshot_id, received_at, "file"), OffsetColumns()
    rows = PieceRows()
    with gc_paused():
        for raw in piece_documents(piece):
            errors = [raw.error] if raw.error else document_errors(raw.doc, limits)
            if errors:
                rows.verdicts.append(Verdict(raw.source, raw.raw, errors))
                continue
            doc = raw.doc
            members.add(doc)
            offsets.add(doc)
            fields = {name: doc[name] for name in ACROSS_FIELDS if name in doc}
            member_rows, offset_rows = len(doc["members"]) or 1, len(doc.get("offsets") or ())
            rows.verdicts.append(Verdict(raw.source, raw.raw, [], fields, member_rows, offset_rows))
    rows.snapshots, rows.offsets = members.table(), offsets.table(snapshot_id)
    return rows
