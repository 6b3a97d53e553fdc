"""Assignment history over Spark SQL: every lake table as a view, plus `assignment_history`."""

from __future__ import annotations

from pyspark.sql import SparkSession

from jobs.config import Config
from jobs.io.lake import Lake
from jobs.io.spark import get_spark

# The chosen candidate of every generation, partition by partition: "what was group G assigned last Tuesday".
ASSIGNMENT_HISTORY = """
SELECT g.group_id, g.generation_id, g.created_at, g.trigger, g.run_id, g.status, p.strategy,
       p.topic, p.partition, p.member, p.previous_member, p.moved, p.phase, p.weight
FROM generations g
JOIN plans p ON p.group_id = g.group_id AND p.generation_id = g.generation_id AND p.strategy = g.chosen_strategy
"""


def register(spark: SparkSession, config: Config) -> list[str]:
    """Register the lake's tables and the history view in `spark`; returns the view names."""
    names = Lake(config.lake).register_views(spark)
    spark.sql(ASSIGNMENT_HISTORY).createOrReplaceTempView("assignment_history")
    return [*names, "assignment_history"]


def query(config: Config, sql: str, limit: int = 100, spark: SparkSession | None = None) -> str:
    """Run one Spark SQL statement over the lake and format its first `limit` rows as a text table."""
    session = spark or get_spark(config.spark_master)
    register(session, config)
    return text_table(session, sql, limit)


def text_table(spark: SparkSession, sql: str, limit: int = 100) -> str:
    """Run SQL over views already registered and format its first `limit` rows as a text table."""
    frame = spark.sql(sql).limit(limit).toPandas()
    return frame.to_string(index=False) if len(frame) else f"(no rows; columns: {', '.join(frame.columns)})"
