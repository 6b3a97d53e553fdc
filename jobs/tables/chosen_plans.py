"""The plan rows of each group's chosen candidate, read in one scan of the plans table: the gate checks them, the
signals weigh their members' loads."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pyarrow as pa

from jobs.io.lake import Lake
from schemas.tables import PLANS

ENCODED = pa.dictionary(pa.int32(), pa.string())


def chosen_plans(lake: Lake, chosen: Mapping[str, tuple[int, str]], columns: Sequence[str]) -> pa.Table:
    """`columns` of the plan rows of each group's generation and chosen strategy (`chosen`: group -> both), strings
    dictionary-encoded with one dictionary per column (Arrow's group-by does not unify differing ones), in the
    table's order. Every file of `plans` holds all strategies of many groups: one scan of the generations' rows keeps
    each batch's chosen ones by their dictionaries' codes, and only those are held (one read per strategy scanned
    every file five times and decoded every strategy's strings for the filter: 8.8 s of CPU for 10,000 groups)."""
    read = [*dict.fromkeys(["group_id", "generation_id", "strategy", *columns])]
    plain = PLANS.schema.empty_table().select(list(columns)).schema
    schema = pa.schema([f.with_type(ENCODED) if pa.types.is_string(f.type) else f for f in plain])
    if not chosen:
        return schema.empty_table()
    ids = sorted({generation for generation, _ in chosen.values()})
    reader = lake.read_batches("plans", [("generation_id", "in", ids)], read, decode=False)
    kept = [b.filter(_chosen_rows(b, chosen)).select(list(columns)) for b in reader]
    return pa.Table.from_batches([b for b in kept if b.num_rows], schema).unify_dictionaries()


def _chosen_rows(batch: pa.RecordBatch, chosen: Mapping[str, tuple[int, str]]) -> pa.Array:
    """Which of a batch's plan rows are of their group's generation and chosen strategy, compared by codes: each code
    of the batch's group dictionary gets its chosen generation and the chosen strategy's code in the batch's strategy
    dictionary (-1: none), then every row is compared with its group's."""
    groups, strategies = batch.column("group_id"), batch.column("strategy")
    code_of = {s: i for i, s in enumerate(strategies.dictionary.to_pylist())}
    choice = [chosen.get(g, (-1, "")) for g in groups.dictionary.to_pylist()]
    generation_of = np.array([n for n, _ in choice], dtype=np.int64)
    strategy_of = np.array([code_of.get(s, -1) for _, s in choice], dtype=np.int64)
    group = groups.indices.to_numpy(zero_copy_only=False)
    generation = batch.column("generation_id").to_numpy(zero_copy_only=False)
    strategy = strategies.indices.to_numpy(zero_copy_only=False)
    return pa.array((generation == generation_of[group]) & (strategy == strategy_of[group]))
