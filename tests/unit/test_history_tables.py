"""`rebalance sql` registers the tables a statement names: every lake table or view its words name, in any case."""

from __future__ import annotations

from jobs.cli.history import HISTORY_VIEW, named
from schemas import TABLES

EVERY = [*TABLES, HISTORY_VIEW]


def test_the_tables_a_statement_names_in_any_case_or_quoting() -> None:
    joined = "SELECT * FROM Generations g JOIN `plan_metrics` m USING (group_id)"
    assert named(joined) == ["plan_metrics", "generations"]
    assert named("SELECT count(*) FROM plans VERSION AS OF 3") == ["plans"]
    assert named("DESCRIBE HISTORY generations") == ["generations"]


def test_a_longer_name_is_not_its_parts() -> None:
    assert named("SELECT topic, partitions FROM topic_partitions") == ["topic_partitions"]
    assert named("SELECT * FROM key_skew_summary") == ["key_skew_summary"]


def test_the_history_view_brings_the_tables_it_reads() -> None:
    assert named("SELECT * FROM assignment_history WHERE group_id = 'payments'") == [
        "generations",
        "plans",
        HISTORY_VIEW,
    ]


def test_a_statement_naming_no_table_registers_them_all() -> None:
    assert named("SHOW TABLES") == EVERY
    assert named("SELECT 1") == EVERY
