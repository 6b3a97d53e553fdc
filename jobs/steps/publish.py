"""Publish: a generation becomes approved when its gate passed, rejected otherwise; prints the run's report."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from jobs.context import RunContext
from jobs.io.lake import rows_table


def run(ctx: RunContext) -> list[dict[str, Any]]:
    """Set the status and gate summary of every generation of `ctx.run_id`; returns the report rows."""
    lake, run_id = ctx.lake, ctx.run_id
    generations = lake.read_arrow("generations", [("run_id", "=", run_id)]).to_pylist()
    ids = [g["generation_id"] for g in generations]
    results: dict[tuple[int, str], list[dict[str, Any]]] = defaultdict(list)
    for r in lake.read_arrow("gate_results", [("generation_id", "in", ids)]).to_pylist():
        results[(r["generation_id"], r["group_id"])].append(r)
    report = []
    with lake.lock():
        for g in generations:
            checks = results.get((g["generation_id"], g["group_id"]), [])
            failed = sorted(r["expectation"] for r in checks if not r["success"])
            status = "approved" if checks and not failed else "rejected"
            summary = (
                f"{len(checks) - len(failed)}/{len(checks)} expectations passed"
                + (f"; failed: {', '.join(failed)}" if failed else "")
                if checks
                else "not gated"
            )
            report.append({**g, "status": status, "gate_summary": summary})
        lake.update("generations", rows_table("generations", report), ["status", "gate_summary"])
    return sorted(report, key=lambda r: r["group_id"])


def format_report(report: list[dict[str, Any]]) -> str:
    """The run's generations as a small text table."""
    lines = [f"{'group':<24} {'generation':>10}  {'strategy':<20} {'status':<9} gate"]
    lines += [
        f"{r['group_id']:<24} {r['generation_id']:>10}  {r['chosen_strategy'] or '-':<20} {r['status']:<9} "
        f"{r['gate_summary']}"
        for r in report
    ]
    return "\n".join(lines)
