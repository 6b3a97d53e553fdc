"""Assignment history over Spark SQL: every lake table as a view, plus `assignment_history`."""

from __future__ import annotations

from pyspark.sql import SparkSession

from jobs.context import RunContext
from jobs.io.lake import Lake
from planner.errors import InputError

# The chosen candidate of every generation, partition by partition: "what was group G assigned last Tuesday".
ASSIGNMENT_HISTORY = """
SELECT g.group_id, g.generation_id, g.created_at, g.trigger, g.run_id, g.status, p.strategy,
       p.topic, p.partition, p.member, p.previous_member, p.moved, p.phase, p.weight
FROM generations g
JOIN plans p ON p.group_id = g.group_id AND p.generation_id = g.generation_id AND p.strategy = g.chosen_strategy
"""


def register(spark: SparkSession, lake: Lake) -> list[str]:
    """Register the lake's tables and the history view in `spark`; returns the view names."""
    names = lake.register_views(spark)
    spark.sql(ASSIGNMENT_HISTORY).createOrReplaceTempView("assignment_history")
    return [*names, "assignment_history"]


def query(ctx: RunContext, sql: str, limit: int = 100) -> str:
    """Run one Spark SQL statement over the lake and format its first `limit` rows as a text table."""
    register(ctx.spark, ctx.lake)
    return text_table(ctx.spark, sql, limit)


def text_table(spark: SparkSession, sql: str, limit: int = 100) -> str:
    """Run SQL over views already registered and format its first `limit` rows as a text table."""
    from pyspark.errors import AnalysisException, ParseException

    try:
        frame = spark.sql(sql).limit(limit).toPandas()
    except (ParseException, AnalysisException) as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise InputError(f"the query is not valid Spark SQL: {first}") from None
    return frame.to_string(index=False) if len(frame) else f"(no rows; columns: {', '.join(frame.columns)})"
