"""`rebalance sql`: the assignment history over Spark SQL, every lake table as a view plus `assignment_history`."""

from __future__ import annotations

import re
import warnings
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

from pyspark.sql import SparkSession

from jobs.context import RunContext
from jobs.io.lake import Lake
from jobs.io.spark import session_conf
from planner.errors import InputError
from schemas import TABLES

if TYPE_CHECKING:
    import pandas as pd

# The chosen candidate of every generation, partition by partition: "what was group G assigned last Tuesday".
HISTORY_VIEW = "assignment_history"
HISTORY_TABLES = ("generations", "plans")  # what the view reads
ASSIGNMENT_HISTORY = """
SELECT g.group_id, g.generation_id, g.created_at, g.trigger, g.run_id, g.status, p.strategy,
       p.topic, p.partition, p.member, p.previous_member, p.moved, p.phase, p.weight
FROM generations g
JOIN plans p ON p.group_id = g.group_id AND p.generation_id = g.generation_id AND p.strategy = g.chosen_strategy
"""


# Statements a history query may be: queries, and the SHOW / DESCRIBE / EXPLAIN commands that only read metadata.
READ_ONLY_COMMANDS = re.compile(r"(Show|Describe)\w*|ExplainCommand")
# Parsed-plan roots that change something (Spark's commands and DDL / DML statements): refused.
WRITING = re.compile(
    r"\w*(Command|Statement)|(Insert|Create|Drop|Alter|Cache|Uncache|Clear|Refresh|Analyze|Set|Reset|Use|Add|Truncate"
    r"|Delete|Update|Merge|Replace|Rename|Repair|Recover|Load|Comment|Append|Overwrite|Call|Declare|Execute)\w*"
)
# Delta Lake's own statements (its SQL extension parses them; Spark's EXPLAIN grammar does not): all of them write.
DELTA_STATEMENTS = re.compile(r"\s*(OPTIMIZE|VACUUM|RESTORE|CONVERT|REORG|GENERATE|FSCK|CLONE)\b", re.IGNORECASE)


# Functions a query may not call: they run any Java method in the driver or executors (change the JVM, the lake's
# files, anything the process may touch), though the statement is a SELECT.
REFLECTIVE = re.compile(r"(?<![\w`])'?(reflect|java_method|try_reflect)\(", re.IGNORECASE)
# Delta's history of a table named by path (`delta.`/path``, '/path'): a table outside the lake's.
HISTORY_BY_PATH = re.compile(r"\s*DESC(RIBE)?\s+HISTORY\s+(delta\s*\.|'|\")", re.IGNORECASE)
PLANNING_FAILED = "Error occurred during query planning"
# While a history query is checked and runs: no table named by a path (`text.`/etc/shadow``, `parquet.`/any/dir``).
HISTORY_CONF = {"spark.sql.runSQLOnFiles": "false"}


def check_read_only(spark: SparkSession, sql: str) -> None:
    """Refuse any statement but a query over the lake's tables, deciding on the plans Spark makes of it.

    `EXPLAIN EXTENDED` parses and analyses the statement without running it (on classic Spark and Spark Connect
    alike); its parsed logical plan's root node names what the statement is: `'Project`, `CTE` ... for queries,
    `'InsertIntoStatement`, `'InsertIntoDir`, `'DropView`, `SetCommand` ... for anything that writes or changes
    state. A query is refused too when it runs a program (`SELECT TRANSFORM ... USING`) or calls a reflective
    function, in its parsed or analysed plan (`IDENTIFIER('reflect')` only resolves in the latter). Tables named
    by path (`text.`/etc/passwd``) are off while a history query runs (`HISTORY_CONF`).
    """
    from pyspark.errors import AnalysisException, ParseException

    if delta := DELTA_STATEMENTS.match(sql):
        raise InputError(
            f"only queries are allowed (SELECT, WITH, SHOW, DESCRIBE, EXPLAIN): {delta.group(1).upper()} is Delta "
            "Lake's maintenance statement, which would change the lake; nothing was run"
        )
    if HISTORY_BY_PATH.match(sql):
        raise InputError("only the lake's tables can be queried: DESCRIBE HISTORY takes a table name; nothing was run")
    try:
        text = spark.sql(f"EXPLAIN EXTENDED {sql}").collect()[0][0]
    except (ParseException, AnalysisException) as e:
        raise InputError(f"the query is not valid Spark SQL: {first_line(e)}") from None
    if text.startswith(PLANNING_FAILED):
        # Spark failed while planning (e.g. `1/0` folded to a constant): it keeps the reason to itself here, and
        # an unplanned statement cannot be vouched for.
        raise InputError("Spark could not plan the query (a constant expression fails, such as 1/0); nothing was run")
    parsed = text.split("== Parsed Logical Plan ==", 1)[-1].strip()
    root = re.match(r"'?(\w+)", parsed)
    node = root.group(1) if root else ""
    if not node or parsed.startswith(("org.apache.spark", "Error")):
        raise InputError(f"the query is not valid Spark SQL: {parsed.splitlines()[0] if parsed else text}")
    if not READ_ONLY_COMMANDS.fullmatch(node) and WRITING.fullmatch(node):
        raise InputError(
            f"only queries are allowed (SELECT, WITH, SHOW, DESCRIBE, EXPLAIN): Spark parses this statement as "
            f"{node}, which would change the lake or the session; nothing was run"
        )
    plans = text.split("== Optimized Logical Plan ==", 1)[0]
    if "ScriptTransformation" in plans:
        raise InputError("queries may not run programs (SELECT TRANSFORM ... USING); nothing was run")
    if called := REFLECTIVE.search(plans):
        raise InputError(f"queries may not call {called.group(1).lower()}() (it runs Java methods); nothing was run")


def first_line(error: Exception) -> str:
    """The first line of an error's message that says something (Spark's wrappers end in a colon, the reason
    follows), terminal-safe."""
    from jobs.terminal import safe

    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    said = [line for line in lines if not line.endswith(":")] or lines
    return safe(said[0]) if said else type(error).__name__


def register(spark: SparkSession, lake: Lake, statements: str | None = None) -> list[str]:
    """Register the lake's tables and the history view in `spark`, or only those `statements` name (`named`);
    returns the names registered."""
    tables = named(statements) if statements is not None else [*TABLES, HISTORY_VIEW]
    names = lake.register_views(spark, [t for t in tables if t != HISTORY_VIEW])
    if HISTORY_VIEW in tables:
        spark.sql(ASSIGNMENT_HISTORY).createOrReplaceTempView(HISTORY_VIEW)
        names.append(HISTORY_VIEW)
    return names


def named(statements: str) -> list[str]:
    """The lake's tables and views whose names appear as words of `statements` (any case, quoted or not; the history
    view brings the two tables it reads), or all of them when none does (`SHOW TABLES`). Registering a table costs a
    read of its log, a query seldom reads more than a few of them, and a word that only looks like a table
    (in a string, a column) costs one needless registration at most."""
    words = {w.lower() for w in re.findall(r"\w+", statements)}
    tables = [t for t in (*TABLES, HISTORY_VIEW) if t in words]
    if HISTORY_VIEW in tables:
        tables = [*dict.fromkeys([*HISTORY_TABLES, *tables])]
    return tables or [*TABLES, HISTORY_VIEW]


def query(ctx: RunContext, sql: str, limit: int = 100) -> str:
    """Run one Spark SQL statement over the lake and format its first `limit` rows as a text table (`queries`)."""
    (text,) = queries(ctx.spark, ctx.lake, [sql], limit)
    return text


def queries(spark: SparkSession, lake: Lake, statements: Sequence[str], limit: int = 100) -> Iterator[str]:
    """Run Spark SQL statements over the lake in turn, in one session, each formatted as a text table of its first
    `limit` rows when it has run. The tables any of them names are registered once; one a statement reaches without
    naming it (`IDENTIFIER('gen' || 'erations')`) makes every table registered, and that statement runs again."""
    registered = register(spark, lake, "\n".join(statements))
    for sql in statements:
        try:
            yield text_table(spark, sql, limit)
            continue
        except TableNotRegistered as e:
            if e.name not in (*TABLES, HISTORY_VIEW) or e.name in registered:
                raise
        registered = register(spark, lake)
        yield text_table(spark, sql, limit)


class TableNotRegistered(InputError):
    """A query's table or view is not in the session's catalog; `name` is the last part of its name, lower case."""

    def __init__(self, message: str, name: str) -> None:
        super().__init__(message)
        self.name = name


def text_table(spark: SparkSession, sql: str, limit: int = 100) -> str:
    """Run SQL over views already registered and format its first `limit` rows as a text table."""
    from pyspark.errors import AnalysisException, ParseException, PySparkException

    with session_conf(spark, HISTORY_CONF):
        check_read_only(spark, sql)
        try:
            with warnings.catch_warnings():  # pyspark warns of a failed query before raising it: one line
                warnings.simplefilter("ignore", UserWarning)
                frame: pd.DataFrame = spark.sql(sql).limit(limit).toPandas()
        except (ParseException, AnalysisException) as e:
            message = f"the query is not valid Spark SQL: {first_line(e)}"
            if e.getCondition() == "TABLE_OR_VIEW_NOT_FOUND":
                missing = (e.getMessageParameters() or {}).get("relationName", "")
                raise TableNotRegistered(message, missing.rsplit(".", 1)[-1].strip("`").lower()) from None
            raise InputError(message) from None
        except PySparkException as e:  # raised while it ran: raise_error(), a division by zero, a failed cast
            raise InputError(f"the query failed: {first_line(e)}") from None
    return frame.to_string(index=False) if len(frame) else f"(no rows; columns: {', '.join(frame.columns)})"
