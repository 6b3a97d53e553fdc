"""The typed rows name their tables' columns: a column added to or renamed in a table shows up here."""

from __future__ import annotations

import typing

import pytest

from schemas.rows import Generation, PlanMetrics
from schemas.tables import GENERATIONS, PLAN_METRICS

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(("row", "table"), [(Generation, GENERATIONS), (PlanMetrics, PLAN_METRICS)])
def test_a_typed_row_has_its_tables_columns_in_order(row: type, table: object) -> None:
    assert list(typing.get_type_hints(row)) == table.schema.names  # type: ignore[attr-defined]


def test_the_nullable_columns_are_optional_in_the_row() -> None:
    hints = typing.get_type_hints(Generation)
    keys = set(GENERATIONS.keys)
    required = {"created_at", "trigger", "run_id", "parameters", "snapshot_id", "status"}
    for name, hint in hints.items():
        optional = type(None) in typing.get_args(hint)
        assert optional == (name not in keys | required), name
