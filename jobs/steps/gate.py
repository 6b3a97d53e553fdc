"""Quality gate: Great Expectations validates the chosen candidate plans; results go to `gate_results`.

One validation covers every group of the run (GX's unexpected-index lists say which group each failing row
belongs to), so the gate costs one Spark pass however many groups there are.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from jobs.context import RunContext
from jobs.io.lake import rows_table
from planner.errors import SourceError
from schemas.quality import PLAN_KEY, PLAN_SUITE


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
    """Run the suite with Great Expectations; one result per expectation with its unexpected rows."""
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
        result_format={"result_format": "COMPLETE", "unexpected_index_column_names": PLAN_KEY},
    )
    rows = []
    for r in outcome.results:
        config = r.expectation_config
        if config is None:  # GX attaches it to every result of a suite run; without it the row would name nothing
            raise SourceError("Great Expectations returned a validation result without its expectation")
        rows.append(
            {
                "expectation": _name(config.type, config.kwargs),
                "success": bool(r.success),
                "element_count": r.result.get("element_count"),
                "unexpected": r.result.get("unexpected_index_list") or [],
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
    ids = [g["generation_id"] for g in generations]
    plans = lake.read(spark, "plans").where(F.col("generation_id").isin(ids))
    results = validate(plan_check(plans, snapshot, partitions, chosen))
    rows, passed = [], {}
    for g in generations:
        key = (g["generation_id"], g["group_id"])
        for r in results:
            failing = [u for u in r["unexpected"] if (u.get("generation_id"), u.get("group_id")) == key]
            rows.append(
                {
                    "generation_id": key[0],
                    "group_id": key[1],
                    "suite": PLAN_SUITE["name"],
                    "expectation": r["expectation"],
                    "success": not failing,
                    "observed_value": f"{len(failing)} unexpected rows",
                    "details": json.dumps(failing[:20], default=str),
                }
            )
        passed[g["group_id"]] = all(row["success"] for row in rows if row["group_id"] == g["group_id"])
    lake.merge("gate_results", rows_table("gate_results", rows))
    return passed


def _name(kind: str, kwargs: Mapping[str, Any]) -> str:
    """A readable, unique expectation label such as `expect_column_values_to_not_be_null(member)`."""
    target = kwargs.get("column") or ",".join(kwargs.get("column_list") or [])
    return f"{kind}({target})"
