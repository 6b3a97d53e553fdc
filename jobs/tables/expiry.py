"""Which rows of the lake's bulky tables have outlived the bulky retention, and what is kept whatever its age.

Bulky tables hold a row per partition (or per sampled record, per member and strategy) of every run: they are
where a lake grows. Their rows are dated by the generation or the run they belong to, never by a timestamp
inside them (a snapshot file's `captured_at` or a record's `timestamp` says nothing about when the lake got it):

| table | dated by |
|---|---|
| plans, plan_diffs, partition_loads | their generation's `generations.created_at` |
| topic_partitions, partition_offsets | their snapshot (a run id): the newest `created_at` of its generations |
| key_samples | their sample set (a run id), as a snapshot |
| key_skew, key_skew_hot_keys | their run: as a snapshot, or the run's `key_skew_summary.computed_at` |

Every other table is small (a row per generation, strategy, expectation, group member or rejected input) and is
kept whole: `generations`, `plan_metrics`, `gate_results`, `migration_readiness`, `snapshots`, `quarantine`,
`key_skew_summary`, `key_skew_fingerprint`. So the history of every generation (who, when, which strategy, the
verdict, the metrics) outlives its partition-level rows.

Kept whatever their age, because the pipeline and the commands still work from them:
- per group, its newest generation, its newest approved one (`export`, `verify`, the planned assignor) and its
  newest approved one of an observed snapshot (what `export` picks); every generation not yet decided
  (candidate, gated);
- the runs and snapshots of those generations, each group's newest snapshot (the next run's `changes` and
  throughput compare with it, `what-if` starts from it), the newest key-sample set (`rebalance skew`'s default) and
  each topic's newest key-skew run;
- rows whose generation or run has no date in the lake.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, cast

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from jobs.io.delta_maintenance import data_files
from jobs.io.lake import Lake
from schemas.status import GenerationStatus as S
from schemas.tables import WHAT_IF_SOURCE

GENERATION = "generation"  # rows keyed by (group_id, generation_id)
BULKY: dict[str, str] = {
    "plans": GENERATION,
    "plan_diffs": GENERATION,
    "partition_loads": GENERATION,
    "topic_partitions": "snapshot_id",
    "partition_offsets": "snapshot_id",
    "key_samples": "sample_id",
    "key_skew": "run_id",
    "key_skew_hot_keys": "run_id",
}
"""Bulky table -> how its rows are dated: by generation, or by the run id in the named column."""

UNDECIDED = frozenset({S.CANDIDATE.value, S.GATED.value})


@dataclass(frozen=True)
class Expired:
    """The generations and runs whose bulky rows go."""

    generations: Mapping[str, Sequence[int]]  # group -> generation ids, ascending
    runs: frozenset[str]  # run, snapshot and sample-set ids

    def predicate(self, table: str) -> str | None:
        """The SQL condition (delta-rs `delete`) matching the table's expired rows; None when none can match."""
        if BULKY.get(table) == GENERATION:
            terms = [
                f"(`group_id` = {_literal(group)} AND ({_ranges('generation_id', ids)}))"
                for group, ids in sorted(self.generations.items())
                if ids
            ]
            return " OR ".join(terms) or None
        if (column := BULKY.get(table)) and self.runs:
            return f"`{column}` IN ({', '.join(_literal(r) for r in sorted(self.runs))})"
        return None

    def count(self, lake: Lake, table: str) -> int:
        """How many of the table's current rows the predicate matches, read file by file and batch by batch from
        the key columns alone (a dry run's figure: a real run takes the count DELETE reports)."""
        kind = BULKY.get(table)
        if kind is None or self.predicate(table) is None:
            return 0
        columns = ["group_id", "generation_id"] if kind == GENERATION else [kind]
        match = self._generation_rows() if kind == GENERATION else self._run_rows(kind)
        return sum(
            match(batch)
            for path in data_files(lake, table)
            for batch in pq.ParquetFile(path, filesystem=lake.fs).iter_batches(batch_size=1 << 16, columns=columns)
        )

    def _generation_rows(self) -> Callable[[pa.RecordBatch], int]:
        """Rows of a batch in the expired generations: (group code, generation id) packed into one int64 each,
        groups coded once per distinct name through the batch's dictionary."""
        codes = {group: code for code, group in enumerate(sorted(self.generations))}
        expired = np.sort([codes[g] << 32 | i for g, ids in self.generations.items() for i in ids])

        def match(batch: pa.RecordBatch) -> int:
            groups = pc.dictionary_encode(_strings(batch.column("group_id")))
            known = np.array([codes.get(g, -1) for g in groups.dictionary.to_pylist()], dtype=np.int64)
            code = known[groups.indices.to_numpy(zero_copy_only=False)] if len(known) else np.empty(0, np.int64)
            ids = batch.column("generation_id").to_numpy(zero_copy_only=False).astype(np.int64)
            return int(np.count_nonzero((code >= 0) & np.isin(code << 32 | ids, expired)))

        return match

    def _run_rows(self, column: str) -> Callable[[pa.RecordBatch], int]:
        runs = pa.array(sorted(self.runs), pa.string())
        return lambda batch: int(pc.sum(pc.is_in(_strings(batch.column(column)), runs)).as_py() or 0)


def expired(lake: Lake, cutoff: datetime) -> Expired:
    """The generations created before `cutoff` and the runs last used before it, less everything kept."""
    generations = lake.generations()
    snapshots = _snapshot_ids(lake)
    skew_runs = _skew_runs(lake)
    kept = kept_generations(generations, {s["snapshot_id"] for s in snapshots if s["source"] == WHAT_IF_SOURCE})
    old: dict[str, list[int]] = {}
    for g in sorted(generations, key=lambda g: (g["group_id"], g["generation_id"])):
        if g["created_at"] is not None and g["created_at"] < cutoff and (g["group_id"], g["generation_id"]) not in kept:
            old.setdefault(g["group_id"], []).append(g["generation_id"])
    used = run_ages(generations, skew_runs)
    keep_runs = kept_runs([g for g in generations if (g["group_id"], g["generation_id"]) in kept], snapshots)
    keep_runs |= _newest_by(skew_runs, "topic", "computed_at", "run_id") | _newest_sample_set(lake)
    runs = frozenset(r for r, at in used.items() if at < cutoff and r not in keep_runs)
    return Expired(old, runs)


def kept_generations(generations: Iterable[Mapping[str, Any]], what_if: set[str]) -> set[tuple[str, int]]:
    """(group, generation) pairs whose rows stay: each group's newest, newest approved and newest approved of an
    observed snapshot, and every generation not yet decided."""
    newest: dict[tuple[str, str], int] = {}
    kept: set[tuple[str, int]] = set()
    for g in generations:
        key = (g["group_id"], g["generation_id"])
        kinds = ["any"]
        if g["status"] == S.APPROVED.value:
            kinds += ["approved"] + (["observed"] if g["snapshot_id"] not in what_if else [])
        for kind in kinds:
            newest[(g["group_id"], kind)] = max(newest.get((g["group_id"], kind), key[1]), key[1])
        if g["status"] in UNDECIDED:
            kept.add(key)
    return kept | {(group, generation) for (group, _), generation in newest.items()}


def kept_runs(generations: Iterable[Mapping[str, Any]], snapshots: Sequence[Mapping[str, Any]]) -> set[str]:
    """The runs and snapshots of the kept generations, and each group's newest snapshot (observed, and any)."""
    runs = {g[c] for g in generations for c in ("run_id", "snapshot_id") if g[c]}
    observed = [s for s in snapshots if s["source"] != WHAT_IF_SOURCE]
    return (
        runs
        | _newest_by(observed, "group_id", "captured_at", "snapshot_id")
        | _newest_by(snapshots, "group_id", "captured_at", "snapshot_id")
    )


def run_ages(generations: Iterable[Mapping[str, Any]], skew_runs: Iterable[Mapping[str, Any]]) -> dict[str, datetime]:
    """Run (snapshot, sample-set) id -> the last time the lake used it: the newest `created_at` of a generation it
    ran or was planned from, or its key-skew `computed_at`, whichever is later. Runs not in the map have no date."""
    used: dict[str, datetime] = {}
    dated = [(g[c], g["created_at"]) for g in generations for c in ("run_id", "snapshot_id")]
    dated += [(s["run_id"], s["computed_at"]) for s in skew_runs]
    for run, at in dated:
        if run and at is not None:
            used[run] = max(used.get(run, at), at)
    return used


def _snapshot_ids(lake: Lake) -> list[dict[str, Any]]:
    """One row per (group, snapshot): its source and first capture time."""
    rows = lake.read_arrow("snapshots", columns=("snapshot_id", "group_id", "captured_at", "source"))
    grouped = rows.group_by(["group_id", "snapshot_id", "source"]).aggregate([("captured_at", "min")])
    return cast(
        "list[dict[str, Any]]", grouped.rename_columns(["group_id", "snapshot_id", "source", "captured_at"]).to_pylist()
    )


def _skew_runs(lake: Lake) -> list[dict[str, Any]]:
    """One row per (key-skew run, topic): when it was computed."""
    rows = lake.read_arrow("key_skew_summary", columns=("run_id", "computed_at", "topic"))
    grouped = rows.group_by(["run_id", "topic"]).aggregate([("computed_at", "max")])
    return cast("list[dict[str, Any]]", grouped.rename_columns(["run_id", "topic", "computed_at"]).to_pylist())


def _newest_sample_set(lake: Lake) -> set[str]:
    """The sample set holding the newest record (the one `rebalance skew` measures by default), read batch by
    batch: the table holds a row per sampled record."""
    newest: dict[str, Any] = {}
    for path in data_files(lake, "key_samples"):
        file = pq.ParquetFile(path, filesystem=lake.fs)
        for batch in file.iter_batches(batch_size=1 << 16, columns=["sample_id", "timestamp"]):
            ids = pa.table({"sample_id": _strings(batch.column("sample_id")), "timestamp": batch.column("timestamp")})
            sets = ids.group_by("sample_id").aggregate([("timestamp", "max")])
            for sample_id, at in zip(sets["sample_id"].to_pylist(), sets["timestamp_max"].to_pylist(), strict=True):
                before = newest.get(sample_id)
                newest[sample_id] = at if before is None or (at is not None and at > before) else before
    return _newest_by([{"sample_id": k, "timestamp": v} for k, v in newest.items()], None, "timestamp", "sample_id")


def _newest_by(rows: Iterable[Mapping[str, Any]], within: str | None, time: str, ident: str) -> set[str]:
    """The id of the newest row (by time, then id; no time sorts first) per value of `within` (or of all rows)."""
    newest: dict[Any, tuple[bool, Any, str]] = {}
    for r in rows:
        rank = (r[time] is not None, r[time], r[ident])
        key = r[within] if within else None
        if key not in newest or _later(rank, newest[key]):
            newest[key] = rank
    return {rank[2] for rank in newest.values()}


def _later(a: tuple[bool, Any, str], b: tuple[bool, Any, str]) -> bool:
    """a sorts after b: a time after none, then later times, then greater ids."""
    if a[0] != b[0]:
        return a[0]
    if a[0] and a[1] != b[1]:
        return bool(a[1] > b[1])
    return a[2] > b[2]


def _strings(column: pa.Array) -> pa.Array:
    """A string column as plain strings: files delta-rs writes hold string views, which some kernels do not take."""
    return column.cast(pa.string())


def _ranges(column: str, ids: Sequence[int]) -> str:
    """`column` in the ascending ids, as BETWEEN terms over their contiguous runs."""
    terms, start = [], 0
    for i in range(1, len(ids) + 1):
        if i == len(ids) or ids[i] != ids[i - 1] + 1:
            low, high = ids[start], ids[i - 1]
            terms.append(f"`{column}` = {low}" if low == high else f"`{column}` BETWEEN {low} AND {high}")
            start = i
    return " OR ".join(terms)


def _literal(text: str) -> str:
    """A SQL string literal (quotes doubled)."""
    return "'" + text.replace("'", "''") + "'"
