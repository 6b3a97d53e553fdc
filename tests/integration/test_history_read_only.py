"""History as Delta through `rebalance sql`: time travel and table history read; only queries pass the parser check,
Delta's own writing statements (DELETE, UPDATE, MERGE, OPTIMIZE, VACUUM, RESTORE) included."""

from __future__ import annotations

from pathlib import Path

import pytest
from deltalake import DeltaTable

from jobs import pipeline
from jobs.config import Config
from jobs.context import RunContext
from jobs.steps import history
from planner.errors import InputError

pytestmark = pytest.mark.spark

DEMO = Path(__file__).resolve().parents[2] / "jobs" / "demo" / "data"

QUERIES = [
    "SELECT group_id, status FROM generations",
    "WITH g AS (SELECT * FROM generations) SELECT count(*) FROM g",
    "SELECT 1 UNION SELECT 2",
    "TABLE generations",
    "VALUES (1)",
    "SHOW TABLES",
    "SHOW COLUMNS IN generations",
    "DESCRIBE generations",
    "EXPLAIN SELECT * FROM plans",
    "SELECT count(*) FROM generations VERSION AS OF 1",
    "DESCRIBE HISTORY generations",
    "DESCRIBE DETAIL plans",
]
WRITES = [
    "INSERT OVERWRITE TABLE generations SELECT * FROM generations LIMIT 1",
    "INSERT INTO plans SELECT * FROM plans",
    "INSERT OVERWRITE DIRECTORY '{lake}/plans' USING parquet SELECT 1",
    "DROP VIEW generations",
    "CREATE TABLE copy AS SELECT * FROM generations",
    "CREATE TEMPORARY VIEW generations AS SELECT 1",
    "CACHE TABLE generations",
    "SET spark.sql.shuffle.partitions=1",
    "ADD JAR /tmp/x.jar",
    "REFRESH TABLE generations",
    "DELETE FROM generations",
    "UPDATE generations SET status = 'approved'",
    "MERGE INTO generations t USING generations s ON t.group_id = s.group_id WHEN MATCHED THEN DELETE",
    "OPTIMIZE generations",
    "VACUUM generations RETAIN 0 HOURS",
    "RESTORE TABLE generations TO VERSION AS OF 0",
    "ALTER TABLE generations SET TBLPROPERTIES ('delta.appendOnly' = 'true')",
    "CONVERT TO DELTA parquet.`{lake}/plans`",
]


@pytest.fixture(scope="module")
def planned(spark, tmp_path_factory) -> RunContext:
    lake = tmp_path_factory.mktemp("history") / "lake"
    config = Config(lake=str(lake), snapshots=str(DEMO), strategies=("range",))
    pipeline.run(config, "run-1", spark=spark)
    return RunContext.create(config, "history", spark=spark)


@pytest.mark.parametrize("sql", QUERIES)
def test_queries_run(planned: RunContext, sql: str) -> None:
    assert history.query(planned, sql)


@pytest.mark.parametrize("sql", WRITES)
def test_anything_else_is_refused_and_touches_nothing(planned: RunContext, sql: str) -> None:
    before = DeltaTable(planned.lake.path("generations")).to_pyarrow_table().num_rows
    with pytest.raises(InputError, match="only queries are allowed"):
        history.query(planned, sql.format(lake=planned.lake.root))
    assert DeltaTable(planned.lake.path("generations")).to_pyarrow_table().num_rows == before == 5
    assert history.query(planned, "SELECT count(*) AS n FROM plans").split()[-1] != "0"


def test_a_malformed_statement_is_an_input_error(planned: RunContext) -> None:
    with pytest.raises(InputError, match="not valid Spark SQL"):
        history.query(planned, "SELEC group_id FROM generations")


def test_every_table_is_delta_with_its_versions_and_history(planned: RunContext) -> None:
    history.register(planned.spark, planned.lake)
    for name in ("generations", "plans", "snapshots"):
        versions = DeltaTable(planned.lake.path(name)).version()
        first = planned.spark.sql(f"SELECT count(*) AS n FROM {name} VERSION AS OF 0").collect()[0].n
        now = planned.spark.sql(f"SELECT count(*) AS n FROM {name}").collect()[0].n
        logged = planned.spark.sql(f"DESCRIBE HISTORY {name}").orderBy("version").collect()
        assert len(logged) == versions + 1 and first <= now
        at = logged[-1].timestamp  # the latest commit's time: TIMESTAMP AS OF it reads today's rows
        sql = f"SELECT count(*) AS n FROM {name} TIMESTAMP AS OF '{at.isoformat(sep=' ')}'"
        assert history.query(planned, sql).split()[-1] == str(now)
