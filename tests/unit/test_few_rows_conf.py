"""A small run's query runs interpreted, unless the environment's Spark settings say otherwise: they come last."""

from __future__ import annotations

from jobs.io.spark import ONE_GROUP_CONF, few_rows_conf


def test_interpreted_unless_the_environment_sets_it() -> None:
    assert few_rows_conf({}) == ONE_GROUP_CONF
    given = {"REBALANCE_SPARK_CONF": "spark.sql.codegen.wholeStage=true,spark.sql.shuffle.partitions=4"}
    assert few_rows_conf(given) == {"spark.sql.codegen.factoryMode": "NO_CODEGEN"}
