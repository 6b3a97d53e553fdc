"""Assignment history over Spark SQL: every lake table as a view, plus `assignment_history`."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from pyspark.sql import SparkSession

from jobs.context import RunContext
from jobs.io.lake import Lake
from planner.errors import InputError

if TYPE_CHECKING:
    import pandas as pd

# The chosen candidate of every generation, partition by partition: "what was group G assigned last Tuesday".
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


def check_read_only(spark: SparkSession, sql: str) -> None:
    """Refuse any statement but a query, deciding on the root of the plan Spark's own parser makes of it.

    `EXPLAIN EXTENDED` parses the statement without running it (on classic Spark and Spark Connect alike); its
    parsed logical plan's root node names what the statement is: `'Project`, `CTE` ... for queries,
    `'InsertIntoStatement`, `'InsertIntoDir`, `'DropView`, `SetCommand` ... for anything that writes or changes state.
    """
    from pyspark.errors import AnalysisException, ParseException

    if delta := DELTA_STATEMENTS.match(sql):
        raise InputError(
            f"only queries are allowed (SELECT, WITH, SHOW, DESCRIBE, EXPLAIN): {delta.group(1).upper()} is Delta "
            "Lake's maintenance statement, which would change the lake; nothing was run"
        )
    try:
        text = spark.sql(f"EXPLAIN EXTENDED {sql}").collect()[0][0]
    except (ParseException, AnalysisException) as e:
        raise InputError(f"the query is not valid Spark SQL: {_first_line(e)}") from None
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


def _first_line(error: Exception) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


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

    check_read_only(spark, sql)
    try:
        frame: pd.DataFrame = spark.sql(sql).limit(limit).toPandas()
    except (ParseException, AnalysisException) as e:
        raise InputError(f"the query is not valid Spark SQL: {_first_line(e)}") from None
    return frame.to_string(index=False) if len(frame) else f"(no rows; columns: {', '.join(frame.columns)})"
