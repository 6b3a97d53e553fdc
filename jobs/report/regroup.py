"""A report's per-partition tables, each read once and laid out by batch of pages in a temporary directory.

Every file of these tables holds rows of many groups (the pipeline writes them from many tasks), so a lookup of one
batch's groups decodes the whole table: at 10,000 groups, 50 batches each scanning 25M plan rows, most of the
report's time. `regroup` scans each table once, for the keys of every batch at once, and appends each row to the
Parquet file of every batch holding its group (in scan order); a batch's lookups then read its own file, filtered by
their terms (`Regrouped.read`): the rows the lake gives the same lookup, in the same order. Texts are written as
plain strings and read back as dictionaries where the scan gave dictionaries: Parquet's writer keeps the last
dictionary it was given per file, which for a scan's would hold every batch's copy of a file's whole dictionary.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from deltalake.exceptions import TableNotFoundError

from jobs.report.arrow_batch import GROUP_KEYS, SNAPSHOT_KEYS, Rows, lookup_terms
from jobs.report.reader import Filters, Read, Scan, filtered

REGROUPED = {
    "plans": GROUP_KEYS,
    "gate_results": GROUP_KEYS,
    "snapshots": SNAPSHOT_KEYS,
    "partition_offsets": SNAPSHOT_KEYS,
}
"""The tables regrouped, each with the keys a batch looks it up by (the group first); the largest first."""
THREADS = 2  # scans regrouped at once
SHARES = {"plans": 2}  # a table's scans, each of a run of its files: the plans hold most of the rows


class Regrouped:
    """The regrouped tables: `<directory>/<table>/<batch number>.<share>.parquet`, and each table's schema."""

    def __init__(self, directory: Path, schemas: dict[str, pa.Schema]) -> None:
        self.directory = directory
        self.schemas = schemas

    def read(self, number: int, read: Read) -> Read:
        """A `read` for batch `number`'s lookups: its own files for a regrouped table (one per share of the
        table's scan that had rows of it, in share order), `read` for any other."""

        def lookup(name: str, filters: Filters = None) -> pa.Table:
            if name not in self.schemas:
                return read(name, filters)
            schema = self.schemas[name]
            pieces = sorted((self.directory / name).glob(f"{number}.*.parquet"), key=_share)
            if not pieces:
                return filtered(schema.empty_table(), filters)
            texts = [f.name for f in schema if pa.types.is_dictionary(f.type)]
            found = pa.concat_tables(pq.read_table(piece, read_dictionary=texts) for piece in pieces)
            return filtered(found.cast(schema), filters)

        return lookup


def _share(piece: Path) -> int:
    """The share number of a batch's file (`<number>.<share>.parquet`)."""
    return int(piece.suffixes[0][1:])


def regroup(scan: Scan, batches: Sequence[Rows], directory: Path) -> Regrouped:
    """Write the REGROUPED tables' rows of each batch (its `generations` rows) to the batch's files in `directory`;
    a table the lake lacks is left out (each batch's lookup finds it missing). The scans run side by side on THREADS
    threads (Arrow decodes, splits and encodes with the GIL released), the plans' in SHARES[plans] shares of its
    files, so that the plans, most of the rows, are not one thread's alone."""
    owners = _Owners(batches)
    terms = {name: lookup_terms([g for batch in batches for g in batch], keys) for name, keys in REGROUPED.items()}
    for name in REGROUPED:
        (directory / name).mkdir()
    scans = [(name, (k, SHARES.get(name, 1))) for name in REGROUPED for k in range(SHARES.get(name, 1))]
    with ThreadPoolExecutor(THREADS, thread_name_prefix="regroup") as pool:
        found = list(pool.map(lambda s: _regroup_share(scan, s[0], terms[s[0]], s[1], owners, directory), scans))
    schemas = {name: schema for (name, (k, _)), schema in zip(scans, found, strict=True) if k == 0 and schema}
    return Regrouped(directory, schemas)


def _regroup_share(
    scan: Scan, name: str, terms: Filters, share: tuple[int, int], owners: _Owners, directory: Path
) -> pa.Schema | None:
    """Regroup a share of table `name`'s scan (see `regroup`); the schema as scanned, None when the lake lacks the
    table."""
    try:
        reader = scan(name, terms, share)
    except TableNotFoundError:
        return None
    plain = pa.schema([f.with_type(f.type.value_type) if pa.types.is_dictionary(f.type) else f for f in reader.schema])
    writers: dict[int, pq.ParquetWriter] = {}
    try:
        for data in reader:
            for number, rows in owners.split(data.cast(plain)):
                if number not in writers:
                    path = directory / name / f"{number}.{share[0]}.parquet"
                    writers[number] = pq.ParquetWriter(path, plain)
                writers[number].write_batch(rows)
    finally:
        for writer in writers.values():
            writer.close()
    return reader.schema


class _Owners:
    """The batch numbers holding each group: usually one, two or more when a group's generations straddle batches."""

    def __init__(self, batches: Sequence[Rows]) -> None:
        holders: dict[str, list[int]] = {}
        for number, batch in enumerate(batches):
            for generation in batch:
                held = holders.setdefault(generation["group_id"], [])
                if number not in held:
                    held.append(number)
        self.groups = pa.array(list(holders), pa.string())
        counts = np.array([len(held) for held in holders.values()], dtype=np.int64)
        # One more entry, of no batch, for the rows of no group named (index -1).
        self.count = np.r_[counts, 0]
        self.start = np.r_[np.cumsum(counts) - counts, 0]
        self.numbers = np.array([n for held in holders.values() for n in held], dtype=np.int64)

    def split(self, data: pa.RecordBatch) -> Iterator[tuple[int, pa.RecordBatch]]:
        """`data`'s rows of each batch holding their group, by batch number, in `data`'s order."""
        at = pc.fill_null(pc.index_in(data.column("group_id"), value_set=self.groups), -1).to_numpy()
        count = self.count[at]
        row = np.repeat(np.arange(len(at)), count)
        # The k-th copy of a row goes to its group's k-th batch.
        copy = np.arange(len(row)) - np.repeat(np.cumsum(count) - count, count)
        number = self.numbers[np.repeat(self.start[at], count) + copy]
        order = np.argsort(number, kind="stable")
        row, number = row[order], number[order]
        bounds = np.flatnonzero(np.diff(number, prepend=-1, append=-1))
        for start, end in zip(bounds[:-1].tolist(), bounds[1:].tolist(), strict=True):
            first, last = int(row[start]), int(row[end - 1])
            # The pipeline writes a group's rows together: most batches' rows are one run, a slice copies nothing.
            contiguous = last - first == end - start - 1
            yield int(number[start]), data.slice(first, end - start) if contiguous else data.take(row[start:end])
