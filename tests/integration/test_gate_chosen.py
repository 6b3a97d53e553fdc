"""The gate reads the chosen candidates' plan rows alone: each generation's chosen strategy, of this run's
generations, across files whose dictionaries differ."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from jobs.io.lake import Lake, rows_table
from jobs.steps.gate import CHOSEN, chosen_plans, decoded
from schemas.quality import PLAN_KEY

STRATEGIES = ("range", "sticky", "balanced-load")


def plan_rows(groups: list[tuple[str, int]], partitions: int) -> list[dict[str, Any]]:
    """Every strategy's rows for each (group, generation): partition p to member m<p % 2>."""
    return [
        {
            "generation_id": generation,
            "group_id": group,
            "strategy": strategy,
            "topic": f"t-{group}",
            "partition": p,
            "member": f"{group}-{strategy}-m{p % 2}",
            "previous_member": None,
            "moved": False,
            "phase": "assign",
            "weight": 1.0,
        }
        for group, generation in groups
        for strategy in STRATEGIES
        for p in range(partitions)
    ]


def test_the_chosen_strategy_of_each_generation_of_the_run_and_nothing_else(tmp_path: Path) -> None:
    lake = Lake(str(tmp_path / "lake"))
    lake.create_all()
    # Two files with different groups (so different dictionaries); generation 1 of a and b is an earlier run's.
    first = plan_rows([("a", 1), ("b", 1), ("a", 2)], 3)
    second = plan_rows([("b", 2), ("c", 2), ("d", 1)], 4)
    lake.append("plans", rows_table("plans", first))
    lake.append("plans", rows_table("plans", second))
    chosen = {("a", 2): "sticky", ("b", 2): "balanced-load", ("c", 2): None, ("d", 1): "range"}
    frame = rows_table(
        "generations", [{"group_id": g, "generation_id": n, "chosen_strategy": s} for (g, n), s in chosen.items()]
    )
    table = frame.select(["generation_id", "group_id", "chosen_strategy"]).rename_columns(CHOSEN.names).cast(CHOSEN)

    found = decoded(chosen_plans(lake, table)).sort_by([(c, "ascending") for c in PLAN_KEY])

    expected = sorted(
        (r for r in first + second if chosen.get((r["group_id"], r["generation_id"])) == r["strategy"]),
        key=lambda r: tuple(r[c] for c in PLAN_KEY),
    )
    assert found.to_pylist() == [{c: r[c] for c in [*PLAN_KEY, "member"]} for r in expected]
    assert {(r["group_id"], r["strategy"]) for r in found.to_pylist()} == {
        ("a", "sticky"),
        ("b", "balanced-load"),
        ("d", "range"),
    }


def test_no_chosen_strategy_reads_no_rows(tmp_path: Path) -> None:
    lake = Lake(str(tmp_path / "lake"))
    lake.create_all()
    lake.append("plans", rows_table("plans", plan_rows([("a", 1)], 2)))
    none = CHOSEN.empty_table().cast(CHOSEN)
    assert chosen_plans(lake, none).num_rows == 0
    only_null = rows_table("generations", [{"group_id": "a", "generation_id": 1, "chosen_strategy": None}])
    table = only_null.select(["generation_id", "group_id", "chosen_strategy"]).rename_columns(CHOSEN.names)
    assert chosen_plans(lake, table.cast(CHOSEN)).num_rows == 0
