"""What `rebalance what-if` prints: the scenario's answer read back from the generation it published.

Per strategy: partitions moved, count spread and max/mean load under the plan, beside today's (the previous owners
of the same partitions, with the scenario's members and partition weights); the chosen strategy, the partitions it
moves, the generation's status and its report page. `--json` prints the same as one object.
"""

from __future__ import annotations

import json
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from jobs.io.lake import Lake
from jobs.terminal import short

SHOWN_MOVES = 20  # partitions listed in the text; --json lists them all


def answer(lake: Lake, published: dict[str, Any], report: str | None) -> dict[str, Any]:
    """The answer for one published generation row (`publish`'s report row) and its report page."""
    key = [("group_id", "=", published["group_id"]), ("generation_id", "=", published["generation_id"])]
    metrics = sorted(lake.read_arrow("plan_metrics", key).to_pylist(), key=lambda r: r["strategy"])
    chosen = next((m["strategy"] for m in metrics if m["chosen"]), None)
    # Today is the same for every candidate: the chosen one's rows (or any one's) are read, in Arrow.
    shown = [*key, ("strategy", "=", chosen or (metrics[0]["strategy"] if metrics else ""))]
    plans = lake.read_arrow(
        "plans", shown, columns=["topic", "partition", "member", "previous_member", "moved", "weight"]
    )
    diffs = lake.read_arrow("plan_diffs", shown, columns=["member", "partitions_before"])
    moved = plans.filter(pc.fill_null(plans.column("moved"), False)).sort_by(
        [("topic", "ascending"), ("partition", "ascending")]
    )
    return {
        "group_id": published["group_id"],
        "generation_id": published["generation_id"],
        "status": published["status"],
        "gate": published.get("gate_summary"),
        "today": _today(plans, diffs),
        "strategies": [
            {
                "strategy": m["strategy"],
                "chosen": bool(m["chosen"]),
                "partitions_moved": m["partitions_moved"],
                "count_spread": m["count_spread"],
                "max_load": m["max_load"],
                "mean_load": m["mean_load"],
                "max_mean_load": m["max_mean_load"],
            }
            for m in metrics
        ],
        "chosen": chosen,
        "moves": [
            {"topic": t, "partition": p, "from": f, "to": to}
            for t, p, f, to in zip(
                *(moved.column(c).to_pylist() for c in ("topic", "partition", "previous_member", "member")),
                strict=True,
            )
        ]
        if chosen
        else [],
        "report": report,
    }


def _today(plans: pa.Table, diffs: pa.Table) -> dict[str, Any]:
    """Today's balance over the scenario's members (a row each in the plan diffs): the partitions each holds today
    and their weights summed, against the mean weight per member (partitions held by no member of the scenario,
    new or of a leaving member, count in the mean and in no member's load)."""
    if diffs.num_rows == 0:
        return {"count_spread": None, "max_load": None, "mean_load": None, "max_mean_load": None}
    counts = pc.fill_null(diffs.column("partitions_before"), 0)
    held = plans.group_by("previous_member").aggregate([("weight", "sum")])
    members = pc.is_in(held.column("previous_member"), value_set=diffs.column("member"))
    loads = pc.fill_null(held.filter(members).column("weight_sum"), 0.0)
    mean = float(pc.sum(plans.column("weight")).as_py() or 0.0) / diffs.num_rows
    # A member holding nothing today weighs 0: the busiest is the larger of the members' sums and 0.
    top = max(float(pc.max(loads).as_py() or 0.0), 0.0)
    return {
        "count_spread": int(pc.max(counts).as_py()) - int(pc.min(counts).as_py()),
        "max_load": top,
        "mean_load": mean,
        "max_mean_load": top / mean if mean else None,
    }


def format_answer(result: dict[str, Any]) -> str:
    """The answer as text: a table of strategies against today, then the chosen plan's moves."""
    today = result["today"]
    lines = [
        f"what-if {short(result['group_id'])}: generation {result['generation_id']}, {result['status']}"
        + (f" ({result['gate']})" if result["gate"] else ""),
        f"  {'strategy':<26} {'moves':>6} {'count spread':>12} {'max load':>10} {'mean load':>10} {'max/mean':>8}",
        f"  {'today':<26} {'-':>6} {_num(today['count_spread']):>12} {_num(today['max_load']):>10} "
        f"{_num(today['mean_load']):>10} {_num(today['max_mean_load'], 3):>8}",
    ]
    for s in result["strategies"]:
        name = s["strategy"] + (" (chosen)" if s["chosen"] else "")
        lines.append(
            f"  {name:<26} {s['partitions_moved']:>6} {s['count_spread']:>12} {_num(s['max_load']):>10} "
            f"{_num(s['mean_load']):>10} {_num(s['max_mean_load'], 3):>8}"
        )
    moves = result["moves"]
    if result["chosen"]:
        lines.append(f"{result['chosen']} moves {len(moves)} partition(s)" + (":" if moves else ""))
        lines += [
            f"  {m['topic']}-{m['partition']}: {short(m['from'] or '(unowned)')} -> {short(m['to'])}"
            for m in moves[:SHOWN_MOVES]
        ]
        if len(moves) > SHOWN_MOVES:
            lines.append(f"  ... and {len(moves) - SHOWN_MOVES} more (--json lists them all)")
    if result["report"]:
        lines.append(f"report: {result['report']}")
    return "\n".join(lines)


def as_json(result: dict[str, Any]) -> str:
    return json.dumps(result, sort_keys=True)


def _num(value: float | int | None, digits: int = 1) -> str:
    if value is None:
        return "-"
    return str(value) if isinstance(value, int) else f"{value:,.{digits}f}"
