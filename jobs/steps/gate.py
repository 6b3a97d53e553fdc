"""Quality gate: Great Expectations validates the chosen candidate plans; results go to `gate_results`.

One validation covers every group of the run, so the gate costs one Spark pass however many groups there are,
and nothing the size of a plan reaches the driver. GX first gives each expectation's verdict alone (result format
BOOLEAN_ONLY, the fewest Spark jobs); only when one fails does GX count again (SUMMARY, the failed ones alone) and a
Spark query split its unexpected rows by generation (counts, and the first rows of each as the details). A failure
that cannot be split that way (an expectation type the split does not know, or a total that disagrees with GX's
count) fails every generation of the run.
"""

from __future__ import annotations

import json
import operator
import os
from collections.abc import Iterable, Mapping, Sequence
from functools import reduce
from threading import Thread
from typing import TYPE_CHECKING, Any, cast

import pyarrow as pa
from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import from_arrow_schema

from jobs.context import RunContext, StepResult
from jobs.io.delta_files import files_with_generations
from jobs.io.lake import Lake, rows_table
from jobs.io.spark import local_frame
from planner.errors import SourceError
from schemas.quality import PLAN_KEY, PLAN_SUITE
from schemas.tables import PLANS

if TYPE_CHECKING:
    import pandas as pd

CHOSEN = pa.schema([("generation_id", pa.int64()), ("group_id", pa.string()), ("strategy", pa.string())])
DETAIL_ROWS = 20  # failing rows kept per generation and expectation in gate_results.details


def plan_check(candidates: DataFrame, snapshot: DataFrame, partitions: DataFrame, chosen: DataFrame) -> DataFrame:
    """The frame the suite validates: the chosen candidates' plan rows outer-joined with the partitions each group
    must cover (`chosen`: generation_id, group_id, strategy)."""
    # Ingest stores each member's topics sorted and distinct, and one row per member: no duplicates to drop.
    subscriptions = snapshot.select("group_id", F.col("member_id").alias("member"), F.explode("topics").alias("topic"))
    required = (
        partitions.select("topic", "partition")
        .join(F.broadcast(subscriptions.select("group_id", "topic").distinct()), "topic")
        .join(F.broadcast(chosen), "group_id")
        .withColumn("expected", F.lit(True))
    )
    candidate = candidates.join(
        subscriptions.withColumn("subscribed", F.lit(True)), ["group_id", "member", "topic"], "left"
    ).withColumn("subscribed", F.coalesce("subscribed", F.lit(False)))
    return (
        candidate.join(required, PLAN_KEY, "full")
        .withColumn("expected", F.coalesce("expected", F.lit(False)))
        .select(*PLAN_KEY, "member", "subscribed", "expected")
    )


SUMMARY = {
    "result_format": "SUMMARY",
    "unexpected_index_column_names": PLAN_KEY,
    "partial_unexpected_count": DETAIL_ROWS,
}


def import_great_expectations() -> None:
    """Import Great Expectations (seconds of module loading), with its usage analytics off."""
    os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")
    import great_expectations.expectations  # noqa: F401


def import_in_background() -> Thread:
    """Import Great Expectations on a thread of its own, started here. pyspark's loggers, which its import would
    make on that thread while this one makes others, are made first, here (`jobs.io.spark.prepare_logs`)."""
    from jobs.io.spark import prepare_logs

    prepare_logs()
    importing = Thread(target=import_great_expectations, name="gx-import", daemon=True)
    importing.start()
    return importing


def validate(
    frame: DataFrame | pd.DataFrame, suite: Mapping[str, Any] = PLAN_SUITE, result_format: Mapping[str, Any] = SUMMARY
) -> list[dict[str, Any]]:
    """Run the suite with Great Expectations on a Spark or a pandas frame (GX's engine of that name); one result
    per expectation: verdict and, unless the result format is BOOLEAN_ONLY, the unexpected count and the first
    unexpected rows (DETAIL_ROWS of them, whichever generations they belong to)."""
    import_great_expectations()
    import great_expectations as gx
    import great_expectations.expectations as gxe
    from great_expectations.core.expectation_suite import ExpectationSuite
    from great_expectations.data_context.types.base import ProgressBarsConfig

    context = gx.get_context(mode="ephemeral")
    context.variables.progress_bars = ProgressBarsConfig(globally=False, metric_calculations=False)
    sources = context.data_sources
    batch = (
        (sources.add_spark("lake") if isinstance(frame, DataFrame) else sources.add_pandas("lake"))
        .add_dataframe_asset("plan_check")
        .add_batch_definition_whole_dataframe("run")
    )
    expectations = []
    for spec in suite["expectations"]:
        cls = next(c for c in vars(gxe).values() if getattr(c, "expectation_type", None) == spec["type"])
        expectations.append(cls(**spec["kwargs"]))
    gx_suite = context.suites.add(ExpectationSuite(name=suite["name"], expectations=expectations))
    definition = context.validation_definitions.add(
        gx.ValidationDefinition(name=suite["name"], data=batch, suite=gx_suite)
    )
    outcome = definition.run(
        batch_parameters={"dataframe": frame},
        result_format=dict(result_format),
    )
    rows = []
    for r in outcome.results:
        config = r.expectation_config
        if config is None:  # GX attaches it to every result of a suite run; without it the row would name nothing
            raise SourceError("Great Expectations returned a validation result without its expectation")
        rows.append(
            {
                "expectation": _name(config.type, config.kwargs),
                "type": config.type,
                "kwargs": dict(config.kwargs),
                "success": bool(r.success),
                "element_count": r.result.get("element_count"),
                "unexpected_count": r.result.get("unexpected_count") or 0,
                "unexpected": r.result.get("partial_unexpected_index_list") or [],
            }
        )
    return rows


def run(ctx: RunContext) -> StepResult:
    """Gate every generation planned by `ctx.run_id` and write `gate_results`; a row per group: passed."""
    spark, lake, run_id = ctx.spark, ctx.lake, ctx.run_id
    generations = lake.generations([("run_id", "=", run_id)])
    if not generations:
        return StepResult()
    snapshot = lake.scan(spark, "snapshots", "snapshot_id", [run_id])
    partitions = lake.scan(spark, "topic_partitions", "snapshot_id", [run_id])
    chosen = local_frame(
        spark, [(g["generation_id"], g["group_id"], g["chosen_strategy"]) for g in generations], CHOSEN
    )
    check = plan_check(chosen_plans(spark, lake, generations), snapshot, partitions, chosen)
    # Great Expectations takes seconds to import, and the frame seconds to build: one while the other runs.
    importing = import_in_background()
    if len(generations) == 1:
        # One group's chosen plan: its rows come to this process once and GX validates them there (its pandas
        # engine), where over Spark it would run a job per metric (a round trip each, over Spark Connect).
        here = check.toArrow().to_pandas()
        importing.join()
        results, failing = _validate_and_split(here, check)
    else:
        frame = check.persist()
        try:
            frame.count()
            importing.join()
            results, failing = _validate_and_split(frame, frame)
        finally:
            frame.unpersist()
    rows, passed = [], {}
    for g in generations:
        key = (g["generation_id"], g["group_id"])
        for r in results:
            count, details = failing[r["expectation"]].get(key, (0, [])) if r["expectation"] in failing else (0, [])
            rows.append(
                {
                    "generation_id": key[0],
                    "group_id": key[1],
                    "suite": PLAN_SUITE["name"],
                    "expectation": r["expectation"],
                    "success": count == 0,
                    "observed_value": f"{count} unexpected rows",
                    "details": json.dumps(details, default=str),
                }
            )
        passed[g["group_id"]] = all(row["success"] for row in rows[-len(results) :]) if results else True
    lake.merge("gate_results", rows_table("gate_results", rows))
    return StepResult(tuple({"group_id": g, "passed": ok} for g, ok in sorted(passed.items())))


def _validate_and_split(
    checked: DataFrame | pd.DataFrame, frame: DataFrame
) -> tuple[list[dict[str, Any]], dict[str, dict[tuple[int, str], tuple[int, list[dict[str, Any]]]]]]:
    """The suite's verdicts on `checked` (the plan-check rows, in Spark or in this process), and each failed
    expectation's unexpected rows split by generation over `frame` (the same rows in Spark)."""
    results = validate(checked, result_format={"result_format": "BOOLEAN_ONLY"})
    failed = {r["expectation"] for r in results if not r["success"]}
    # Only a failure needs counting: GX counts again, on the failed expectations alone, for the split to match.
    counted = validate(checked, suite_of(failed)) if failed else []
    return results, {r["expectation"]: unexpected_by_generation(frame, r) for r in counted}


def run_plans(spark: SparkSession, lake: Lake, generations: Mapping[str, int]) -> DataFrame:
    """The plan rows of these generations {group: id}, every candidate's."""
    wanted = local_frame(spark, list(generations.items()), CHOSEN.remove(CHOSEN.get_field_index("strategy")))
    plans = plan_files(spark, lake, generations.values())
    return plans.join(F.broadcast(wanted), ["group_id", "generation_id"]).select(*PLANS.schema.names)


def chosen_plans(spark: SparkSession, lake: Lake, generations: Sequence[Mapping[str, Any]]) -> DataFrame:
    """The plan rows of each generation's chosen candidate; the strategy filter reaches the Parquet reader, which
    skips other candidates' row groups."""
    chosen = [(g["group_id"], g["generation_id"], g["chosen_strategy"]) for g in generations if g["chosen_strategy"]]
    wanted = local_frame(spark, [(i, g, s) for g, i, s in chosen], CHOSEN)
    return (
        plan_files(spark, lake, [g["generation_id"] for g in generations])
        .where(F.col("strategy").isin(sorted({s for _, _, s in chosen})))
        .join(F.broadcast(wanted), ["group_id", "generation_id", "strategy"])
        .select(*PLANS.schema.names)
    )


def plan_files(spark: SparkSession, lake: Lake, generation_ids: Iterable[int]) -> DataFrame:
    """The `plans` rows of the files whose statistics may hold these generation ids (and other rows they hold)."""
    files = files_with_generations(lake, PLANS.name, generation_ids)
    schema = from_arrow_schema(PLANS.schema)
    return lake.attach(spark).read.schema(schema).parquet(*files) if files else local_frame(spark, [], PLANS.schema)


def unexpected_by_generation(
    frame: DataFrame, result: Mapping[str, Any]
) -> dict[tuple[int, str], tuple[int, list[dict[str, Any]]]]:
    """A failed expectation's unexpected rows split by (generation_id, group_id): count and the first rows.

    The condition restates the expectation's own rule on the same frame; when it is unknown, or its total
    disagrees with Great Expectations' unexpected count, every generation of the frame is charged with GX's count
    and GX's first rows, so a failure is never waved through.
    """
    condition = unexpected_condition(result["type"], result["kwargs"])
    if condition is not None:
        columns = [*PLAN_KEY, *_domain(result["kwargs"])]
        bad = frame.withColumn("unexpected", condition).where("unexpected")  # a window cannot sit in a WHERE
        per = Window.partitionBy("generation_id", "group_id")
        rows = (
            bad.select(*columns)
            .withColumn("n", F.count("*").over(per))
            .withColumn("rank", F.row_number().over(per.orderBy(*PLAN_KEY)))
            .where(F.col("rank") <= DETAIL_ROWS)
            .collect()
        )
        split: dict[tuple[int, str], tuple[int, list[dict[str, Any]]]] = {}
        for r in sorted(rows, key=lambda r: (r["generation_id"], r["group_id"], r["rank"])):
            count, details = split.setdefault((r["generation_id"], r["group_id"]), (r["n"], []))
            details.append({c: r[c] for c in columns})
        if sum(count for count, _ in split.values()) == result["unexpected_count"]:
            return split
    everyone = frame.select("generation_id", "group_id").distinct().collect()
    return {(r["generation_id"], r["group_id"]): (result["unexpected_count"], result["unexpected"]) for r in everyone}


def unexpected_condition(kind: str, kwargs: Mapping[str, Any]) -> Column | None:
    """The rows an expectation of the suite counts as unexpected, as a Spark condition (None: a type not known).

    As Great Expectations reads them: a set or null check ignores nothing but itself (a null is not outside a
    set); compound uniqueness flags every row of a repeated combination, skipping rows whose columns are all null.
    """
    if kind == "expect_column_values_to_not_be_null":
        return F.col(kwargs["column"]).isNull()
    if kind == "expect_column_values_to_be_in_set":
        column = F.col(kwargs["column"])
        return column.isNotNull() & ~column.isin(list(kwargs["value_set"]))
    if kind == "expect_compound_columns_to_be_unique":
        columns = list(kwargs["column_list"])
        present = reduce(operator.or_, [F.col(c).isNotNull() for c in columns])
        return present & (F.count(F.lit(1)).over(Window.partitionBy(*columns)) > 1)
    return None


def _domain(kwargs: Mapping[str, Any]) -> Sequence[str]:
    """The checked columns not already among the plan key."""
    columns = [kwargs["column"]] if "column" in kwargs else list(kwargs.get("column_list") or [])
    return [c for c in columns if c not in PLAN_KEY]


def suite_of(expectations: set[str]) -> dict[str, Any]:
    """The plan suite holding only the named expectations."""
    specs = cast(list[Mapping[str, Any]], PLAN_SUITE["expectations"])
    return PLAN_SUITE | {"expectations": [e for e in specs if _name(e["type"], e["kwargs"]) in expectations]}


def _name(kind: str, kwargs: Mapping[str, Any]) -> str:
    """A readable, unique expectation label such as `expect_column_values_to_not_be_null(member)`."""
    target = kwargs.get("column") or ",".join(kwargs.get("column_list") or [])
    return f"{kind}({target})"
