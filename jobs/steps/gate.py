"""Quality gate: Great Expectations validates the chosen candidate plans; results go to `gate_results`.

The frame the suite validates (`plan_check`) is built in Arrow in this process from the run's files (delta-rs
resolves each table; one scan of the run's plan rows keeps only the chosen ones: a thousand groups' are half a million
rows) and GX validates it with its pandas engine (here, or in a what-if's worker process: `jobs.io.gx_worker`).
Groups go in batches of about BATCH_ROWS plan rows, each batch's check built and validated alone, so memory stays
bounded however many groups a run has (10,000 groups: 1.3 GB peak, 3.7 GB when built at once); a group's rows are
always in one batch, so every expectation, uniqueness too, sees each group whole. Over Spark the same suite cost a
job per metric (about 20 s for a thousand groups, most of it building the frame; 4 s now), and the gate needs no
JVM: an Airflow task gating a run starts none.
GX first gives each expectation's verdict alone (result format BOOLEAN_ONLY, the fewest passes); only
when one fails in a batch does GX count again (SUMMARY, the failed ones alone) and the batch's unexpected rows are
split by generation (counts, and the first rows of each as the details) by restating the expectation's rule. A
failure that cannot be split that way (an expectation type the split does not know, or a total that disagrees with
GX's count) fails every generation of the batch.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from threading import Thread
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from jobs.context import RunContext, StepResult
from jobs.io.gx import (
    DETAIL_ROWS,
    SUMMARY,
    Validate,
    expectation_name,
    import_great_expectations,
    validate,
)
from jobs.io.lake import Lake, rows_table
from jobs.tables.chosen_plans import chosen_plans as read_chosen_plans
from schemas.quality import PLAN_KEY, PLAN_SUITE
from schemas.rows import Generation

if TYPE_CHECKING:
    import pandas as pd

CHOSEN = pa.schema([("generation_id", pa.int64()), ("group_id", pa.string()), ("strategy", pa.string())])
# Plan rows checked at once: the check's joins and GX's pandas engine hold a few copies of a batch's rows.
BATCH_ROWS = 500_000
CHECKED = (*PLAN_KEY, "member", "subscribed", "expected")

Split = dict[tuple[int, str], tuple[int, list[dict[str, Any]]]]  # (generation, group) -> (count, first rows)


def chosen_frame(generations: Sequence[Generation]) -> pa.Table:
    """Each generation's chosen strategy (null when no candidate was chosen): generation_id, group_id, strategy."""
    return pa.Table.from_pylist(
        [
            {"generation_id": g["generation_id"], "group_id": g["group_id"], "strategy": g["chosen_strategy"]}
            for g in generations
        ],
        CHOSEN,
    )


def chosen_plans(lake: Lake, chosen: pa.Table) -> pa.Table:
    """The plan rows (PLAN_KEY and member) of each generation's chosen candidate (`chosen`: `chosen_frame`'s table),
    dictionary-encoded (`jobs.tables.chosen_plans`; a batch of groups is decoded when checked: `decoded`)."""
    chosen = chosen.filter(pc.is_valid(chosen.column("strategy")))
    wanted = {g: (n, s) for n, g, s in zip(*(chosen.column(c).to_pylist() for c in CHOSEN.names), strict=True)}
    return read_chosen_plans(lake, wanted, [*PLAN_KEY, "member"])


def decoded(table: pa.Table) -> pa.Table:
    """`table` with its dictionary-encoded columns as plain values."""
    return table.cast(
        pa.schema([f.with_type(f.type.value_type) if pa.types.is_dictionary(f.type) else f for f in table.schema])
    )


def plan_check(candidates: pa.Table, members: pa.Table, partitions: pa.Table, chosen: pa.Table) -> pa.Table:
    """The frame the suite validates: the chosen candidates' plan rows (`candidates`) full-outer-joined with the
    partitions each group must cover, sorted by PLAN_KEY. `members`: the snapshot's group_id, member_id, topics;
    `partitions`: its topic, partition; `chosen`: generation_id, group_id, strategy."""
    # Ingest stores each member's topics sorted and distinct, and one row per member: no duplicates to drop.
    topics = members.column("topics")
    owner = pc.list_parent_indices(topics)
    subscriptions = pa.table(
        {
            "group_id": pc.take(members.column("group_id"), owner),
            "member": pc.take(members.column("member_id"), owner),
            "topic": pc.list_flatten(topics),
        }
    )
    group_topics = subscriptions.group_by(["group_id", "topic"]).aggregate([])
    required = partitions.join(group_topics, "topic").join(chosen, "group_id")
    required = required.append_column("expected", pa.array(np.ones(required.num_rows, bool)))
    subscribed = subscriptions.append_column("subscribed", pa.array(np.ones(subscriptions.num_rows, bool)))
    candidate = candidates.join(subscribed, ["group_id", "member", "topic"], join_type="left outer")
    candidate = candidate.set_column(
        candidate.schema.get_field_index("subscribed"), "subscribed", pc.fill_null(candidate["subscribed"], False)
    )
    check = candidate.join(required, list(PLAN_KEY), join_type="full outer")
    check = check.set_column(
        check.schema.get_field_index("expected"), "expected", pc.fill_null(check["expected"], False)
    )
    return check.select(list(CHECKED)).sort_by([(c, "ascending") for c in PLAN_KEY])


def group_batches(candidates: pa.Table, chosen: pa.Table, limit: int) -> Iterator[list[str]]:
    """The run's groups (`chosen`'s) in batches of about `limit` plan rows at most (`candidates`' rows; a larger
    group alone), in group order: each batch's plan check is built and validated alone, so the joins' memory is a
    batch's (building 10,000 groups' check at once took 2.9 GB)."""
    sizes = dict(zip(*candidates.group_by("group_id").aggregate([([], "count_all")]).to_pydict().values(), strict=True))
    batch: list[str] = []
    rows = 0
    for group in sorted(set(chosen.column("group_id").to_pylist())):
        size = sizes.get(group, 0)
        if batch and rows + size > limit:
            yield batch
            batch, rows = [], 0
        batch.append(group)
        rows += size
    if batch:
        yield batch


def of_groups(table: pa.Table, groups: Sequence[str]) -> pa.Table:
    """The rows of `table` whose group_id is one of `groups`."""
    return table.filter(pc.is_in(table.column("group_id"), pa.array(groups, pa.string())))


def import_in_background() -> Thread:
    """Import Great Expectations on a thread of its own, started here. pyspark's loggers, which its import would
    make on that thread while this one makes others, are made first, here (`jobs.io.spark.prepare_logs`)."""
    from jobs.io.spark import prepare_logs

    prepare_logs()
    importing = Thread(target=import_great_expectations, name="gx-import", daemon=True)
    importing.start()
    return importing


def run(ctx: RunContext) -> StepResult:
    """Gate every generation planned by `ctx.run_id` and write `gate_results`; a row per group: passed."""
    lake, run_id = ctx.lake, ctx.run_id
    generations = lake.generations([("run_id", "=", run_id)])
    if not generations:
        return StepResult()
    # A what-if's worker process has imported GX already; otherwise the import (seconds of module loading) runs here
    # while the rows are read and joined.
    importing = import_in_background() if ctx.gx_worker is None else None
    chosen = chosen_frame(generations)
    members = lake.read_arrow("snapshots", [("snapshot_id", "=", run_id)], ["group_id", "member_id", "topics"])
    partitions = lake.read_arrow("topic_partitions", [("snapshot_id", "=", run_id)], ["topic", "partition"])
    candidates = chosen_plans(lake, chosen)
    if importing is not None:
        importing.join()
    check_with = validate if ctx.gx_worker is None else ctx.gx_worker.validate
    verdicts: dict[str, bool] = {}
    failing: dict[str, Split] = {}
    for groups in group_batches(candidates, chosen, BATCH_ROWS):
        check = plan_check(
            decoded(of_groups(candidates, groups)), of_groups(members, groups), partitions, of_groups(chosen, groups)
        )
        for name, ok, split in validate_batch(check, check_with):
            verdicts[name] = verdicts.get(name, True) and ok
            failing.setdefault(name, {}).update(split)
    rows, passed = [], {}
    for g in generations:
        key = (g["generation_id"], g["group_id"])
        for name in verdicts:
            count, details = failing.get(name, {}).get(key, (0, []))
            rows.append(
                {
                    "generation_id": key[0],
                    "group_id": key[1],
                    "suite": PLAN_SUITE["name"],
                    "expectation": name,
                    "success": count == 0,
                    "observed_value": f"{count} unexpected rows",
                    "details": json.dumps(details, default=str),
                }
            )
        passed[g["group_id"]] = all(row["success"] for row in rows[-len(verdicts) :])
    lake.merge("gate_results", rows_table("gate_results", rows))
    return StepResult(tuple({"group_id": g, "passed": ok} for g, ok in sorted(passed.items())))


def validate_batch(batch: pa.Table, check_with: Validate = validate) -> list[tuple[str, bool, Split]]:
    """The suite's verdict on one batch of whole groups, per expectation, with a failed one's unexpected rows split
    by generation (an empty split for one that passed); `check_with` runs GX (here, or in a worker process)."""
    frame = batch.to_pandas()
    results = check_with(frame, PLAN_SUITE, {"result_format": "BOOLEAN_ONLY"})
    failed = {r["expectation"] for r in results if not r["success"]}
    # Only a failure needs counting: GX counts again, on the failed expectations alone, for the split to match.
    counted = {r["expectation"]: r for r in check_with(frame, suite_of(failed), SUMMARY)} if failed else {}
    return [
        (
            r["expectation"],
            r["success"],
            unexpected_by_generation(batch, frame, counted[r["expectation"]]) if r["expectation"] in counted else {},
        )
        for r in results
    ]


def unexpected_by_generation(batch: pa.Table, frame: pd.DataFrame, result: Mapping[str, Any]) -> Split:
    """A failed expectation's unexpected rows split by (generation_id, group_id): count and the first rows (the
    batch is sorted by PLAN_KEY, so the first rows in order).

    The mask restates the expectation's own rule on the same rows; when it is unknown, or its total disagrees with
    Great Expectations' unexpected count, every generation of the batch is charged with GX's count and GX's first
    rows, so a failure is never waved through.
    """
    mask = unexpected_mask(frame, result["type"], result["kwargs"])
    if mask is not None and int(mask.sum()) == result["unexpected_count"]:
        columns = [*PLAN_KEY, *_domain(result["kwargs"])]
        bad = batch.select(columns).take(pa.array(np.flatnonzero(mask)))
        split: Split = {}
        for row in bad.to_pylist():
            count, details = split.get((row["generation_id"], row["group_id"]), (0, []))
            if len(details) < DETAIL_ROWS:
                details.append(row)
            split[(row["generation_id"], row["group_id"])] = (count + 1, details)
        return split
    everyone = set(zip(batch["generation_id"].to_pylist(), batch["group_id"].to_pylist(), strict=True))
    return {key: (result["unexpected_count"], list(result["unexpected"])) for key in sorted(everyone)}


def unexpected_mask(frame: pd.DataFrame, kind: str, kwargs: Mapping[str, Any]) -> np.ndarray | None:
    """The rows an expectation of the suite counts as unexpected (None: a type not known).

    As Great Expectations reads them: a set or null check ignores nothing but itself (a null is not outside a
    set); compound uniqueness flags every row of a repeated combination, skipping rows whose columns are all null.
    """
    if kind == "expect_column_values_to_not_be_null":
        return cast(np.ndarray, frame[kwargs["column"]].isna().to_numpy())
    if kind == "expect_column_values_to_be_in_set":
        column = frame[kwargs["column"]]
        return cast(np.ndarray, (column.notna() & ~column.isin(list(kwargs["value_set"]))).to_numpy())
    if kind == "expect_compound_columns_to_be_unique":
        columns = list(kwargs["column_list"])
        present = frame[columns].notna().any(axis=1)
        return cast(np.ndarray, (present & frame.duplicated(subset=columns, keep=False)).to_numpy())
    return None


def _domain(kwargs: Mapping[str, Any]) -> Sequence[str]:
    """The checked columns not already among the plan key."""
    columns = [kwargs["column"]] if "column" in kwargs else list(kwargs.get("column_list") or [])
    return [c for c in columns if c not in PLAN_KEY]


def suite_of(expectations: set[str]) -> dict[str, Any]:
    """The plan suite holding only the named expectations."""
    specs = cast(list[Mapping[str, Any]], PLAN_SUITE["expectations"])
    return PLAN_SUITE | {"expectations": [e for e in specs if expectation_name(e["type"], e["kwargs"]) in expectations]}
