"""Quality gate: Great Expectations validates the chosen candidate plans; results go to `gate_results`.

One validation covers every group of the run, so the gate costs one Spark pass however many groups there are,
and nothing the size of a plan reaches the driver: GX reports each expectation's verdict and unexpected count
(result format SUMMARY), and only for an expectation that fails does a Spark query split its unexpected rows by
generation (counts, and the first rows of each as the details). A failure that cannot be split that way (an
expectation type the split does not know, or counts that disagree with GX's) fails every generation of the run.
"""

from __future__ import annotations

import json
import operator
import os
from collections.abc import Mapping, Sequence
from functools import reduce
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import from_arrow_schema

from jobs.context import RunContext
from jobs.io.delta_files import files_with_generations
from jobs.io.lake import Lake, rows_table
from planner.errors import SourceError
from schemas.quality import PLAN_KEY, PLAN_SUITE
from schemas.tables import PLANS

DETAIL_ROWS = 20  # failing rows kept per generation and expectation in gate_results.details


def plan_check(plans: DataFrame, snapshot: DataFrame, partitions: DataFrame, chosen: DataFrame) -> DataFrame:
    """The frame the suite validates: chosen plan rows outer-joined with the partitions each group must cover."""
    subscriptions = snapshot.select(
        "group_id", F.col("member_id").alias("member"), F.explode("topics").alias("topic")
    ).distinct()
    required = (
        subscriptions.select("group_id", "topic")
        .distinct()
        .join(partitions.select("topic", "partition"), "topic")
        .join(chosen, "group_id")
        .withColumn("expected", F.lit(True))
    )
    candidate = (
        plans.join(chosen, ["generation_id", "group_id", "strategy"])
        .join(subscriptions.withColumn("subscribed", F.lit(True)), ["group_id", "member", "topic"], "left")
        .withColumn("subscribed", F.coalesce("subscribed", F.lit(False)))
    )
    return (
        candidate.join(required, PLAN_KEY, "full")
        .withColumn("expected", F.coalesce("expected", F.lit(False)))
        .select(*PLAN_KEY, "member", "subscribed", "expected")
    )


def validate(frame: DataFrame, suite: Mapping[str, Any] = PLAN_SUITE) -> list[dict[str, Any]]:
    """Run the suite with Great Expectations; one result per expectation: verdict, unexpected count, and the
    first unexpected rows (DETAIL_ROWS of them, whichever generations they belong to)."""
    os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")
    import great_expectations as gx
    import great_expectations.expectations as gxe
    from great_expectations.core.expectation_suite import ExpectationSuite
    from great_expectations.data_context.types.base import ProgressBarsConfig

    context = gx.get_context(mode="ephemeral")
    context.variables.progress_bars = ProgressBarsConfig(globally=False, metric_calculations=False)
    batch = (
        context.data_sources.add_spark("lake")
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
        result_format={
            "result_format": "SUMMARY",
            "unexpected_index_column_names": PLAN_KEY,
            "partial_unexpected_count": DETAIL_ROWS,
        },
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


def run(ctx: RunContext) -> dict[str, bool]:
    """Gate every generation planned by `ctx.run_id`; returns group -> passed and writes `gate_results`."""
    spark, lake, run_id = ctx.spark, ctx.lake, ctx.run_id
    generations = lake.read_arrow("generations", [("run_id", "=", run_id)]).to_pylist()
    if not generations:
        return {}
    snapshot = lake.read(spark, "snapshots").where(F.col("snapshot_id") == run_id)
    partitions = lake.read(spark, "topic_partitions").where(F.col("snapshot_id") == run_id)
    chosen = spark.createDataFrame(
        [(g["generation_id"], g["group_id"], g["chosen_strategy"]) for g in generations],
        "generation_id bigint, group_id string, strategy string",
    )
    frame = plan_check(
        run_plans(spark, lake, {g["group_id"]: g["generation_id"] for g in generations}), snapshot, partitions, chosen
    ).persist()
    try:
        results = validate(frame)
        failing = {r["expectation"]: unexpected_by_generation(frame, r) for r in results if not r["success"]}
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
    return passed


def run_plans(spark: SparkSession, lake: Lake, generations: Mapping[str, int]) -> DataFrame:
    """The plan rows of these generations {group: id}, read only from the files whose statistics allow them."""
    files = files_with_generations(lake.path(PLANS.name), generations.values())
    schema = from_arrow_schema(PLANS.schema)
    plans = spark.read.schema(schema).parquet(*files) if files else spark.createDataFrame([], schema)
    wanted = spark.createDataFrame(list(generations.items()), "group_id string, generation_id bigint")
    return plans.join(F.broadcast(wanted), ["group_id", "generation_id"]).select(*PLANS.schema.names)


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


def _name(kind: str, kwargs: Mapping[str, Any]) -> str:
    """A readable, unique expectation label such as `expect_column_values_to_not_be_null(member)`."""
    target = kwargs.get("column") or ",".join(kwargs.get("column_list") or [])
    return f"{kind}({target})"
