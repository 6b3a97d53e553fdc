"""History as Delta through `rebalance sql`: time travel and table history read; only queries pass the parser check,
Delta's own writing statements (DELETE, UPDATE, MERGE, OPTIMIZE, VACUUM, RESTORE) included."""

from __future__ import annotations

from pathlib import Path

import pytest
from deltalake import DeltaTable

from jobs import pipeline
from jobs.cli import history
from jobs.config import Config
from jobs.context import RunContext
from planner.errors import InputError
from schemas import TABLES

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


LAKE_TABLES = [*TABLES, history.HISTORY_VIEW]


def unregister_all(ctx: RunContext) -> None:
    """No table or view of the lake in the session's catalog."""
    for name in LAKE_TABLES:
        ctx.spark.sql(
            f"DROP VIEW IF EXISTS `{name}`" if name == history.HISTORY_VIEW else f"DROP TABLE IF EXISTS `{name}`"
        )


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


def test_a_query_registers_the_tables_it_names_and_reaches_any_other_through_a_second_try(
    planned: RunContext,
) -> None:
    unregister_all(planned)  # the tests before may have registered them in this session's catalog
    assert history.query(planned, "SELECT count(*) AS n FROM Plans").split()[-1] != "0"
    assert [t for t in LAKE_TABLES if planned.spark.catalog.tableExists(t)] == ["plans"]
    # A table the statement reaches without naming it: every table is registered, and the query runs again.
    assert history.query(planned, "SELECT count(*) AS n FROM IDENTIFIER('gener' || 'ations')").split()[-1] == "5"
    assert all(planned.spark.catalog.tableExists(t) for t in LAKE_TABLES)
    with pytest.raises(InputError, match="TABLE_OR_VIEW_NOT_FOUND.*`generation`"):  # not one of the lake's
        history.query(planned, "SELECT count(*) FROM generation")


def test_several_statements_run_in_turn_after_one_registration_of_all_they_name(planned: RunContext) -> None:
    unregister_all(planned)
    statements = ["SELECT count(*) AS n FROM generations", "SELECT count(*) AS n FROM plan_metrics WHERE chosen"]
    results = history.queries(planned.spark, planned.lake, statements)
    assert next(results).split() == ["n", "5"]  # run before the next statement is read
    assert {t for t in LAKE_TABLES if planned.spark.catalog.tableExists(t)} == {"generations", "plan_metrics"}
    assert next(results).split() == ["n", "5"]  # one chosen candidate a group
    assert list(results) == []
    with pytest.raises(InputError, match="not valid Spark SQL"):  # a bad statement after a good one: its error
        list(history.queries(planned.spark, planned.lake, ["SELECT 1", "SELEC 2"]))


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


REFUSED = [
    ("SELECT reflect('org.apache.hadoop.fs.FileUtil', 'chmod', '{lake}/generations/_delta_log', '000')", "reflect()"),
    ("SELECT java_method('java.lang.System', 'setProperty', 'user.dir', '/')", "java_method()"),
    ("SELECT try_reflect('java.lang.System', 'getProperty', 'user.home')", "try_reflect()"),
    ("SELECT IDENTIFIER('java_method')('java.lang.System', 'getenv', 'HOME')", "java_method()"),
    ("SELECT group_id FROM generations WHERE REFLECT('java.lang.Thread', 'sleep', 1L) IS NULL", "reflect()"),
    ("SELECT TRANSFORM(group_id) USING 'touch {lake}/pwned' AS (x) FROM generations", "run programs"),
    ("SELECT count(*) FROM text.`/etc/hostname`", "TABLE_OR_VIEW_NOT_FOUND"),
    ("SELECT * FROM parquet.`{lake}/plans`", "TABLE_OR_VIEW_NOT_FOUND"),
    ("SELECT * FROM delta.`{lake}/plans`", "TABLE_OR_VIEW_NOT_FOUND"),
    ("DESCRIBE HISTORY delta.`{lake}/plans`", "takes a table name"),
    ("DESCRIBE HISTORY '{lake}/plans'", "takes a table name"),
]


@pytest.mark.parametrize(("sql", "said"), REFUSED)
def test_queries_with_side_effects_or_files_outside_the_lake_are_refused(
    planned: RunContext, sql: str, said: str
) -> None:
    log = Path(planned.lake.path("generations")) / "_delta_log"
    mode = log.stat().st_mode
    with pytest.raises(InputError, match="nothing was run|not valid Spark SQL") as refused:
        history.query(planned, sql.format(lake=planned.lake.root))
    assert said in str(refused.value) and "\n" not in str(refused.value)
    assert log.stat().st_mode == mode and not (Path(planned.lake.root) / "pwned").exists()
    # The setting that keeps paths out is the query's alone: the session reads paths again afterwards.
    assert planned.spark.conf.get("spark.sql.runSQLOnFiles") == "true"


@pytest.mark.parametrize(
    ("sql", "said"),
    [
        ("SELECT raise_error('boom')", "the query failed: [USER_RAISED_EXCEPTION] boom"),
        ("SELECT assert_true(count(*) < 0) FROM generations", "the query failed: [USER_RAISED_EXCEPTION]"),
        ("SELECT 1/0", "Spark could not plan the query"),
        ("SELECT 1 / (count(*) - count(*)) FROM generations", "the query failed: [DIVIDE_BY_ZERO]"),
    ],
)
def test_a_query_that_fails_while_it_runs_is_one_line_with_the_reason(planned: RunContext, sql: str, said: str):
    with pytest.raises(InputError) as failed:
        history.query(planned, sql)
    assert str(failed.value).startswith(said) and "\n" not in str(failed.value)
