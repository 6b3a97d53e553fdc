"""Publish: the gate's verdict becomes each generation's status; prints the run's report.

Approval off: a generation that passed the gate is approved, one that failed is rejected. Approval on (the DAGs'
`approval` param, `REBALANCE_APPROVAL` for `rebalance run`: the step table passes it as an argument): one that passed
is gated and waits for a reviewer (`jobs.steps.review`). Then older candidates of the same groups are abandoned and
older approvals superseded.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from jobs.context import RunContext, StepResult
from jobs.io.lake import columns, rows_table
from jobs.tables.lifecycle import SETTLED_COLUMNS, settle
from jobs.terminal import short
from schemas.rows import Generation
from schemas.status import GenerationStatus as S

REPORTED = ("group_id", "generation_id", "chosen_strategy", "status", "status_reason", "gate_summary")


def run(ctx: RunContext, *, approval: bool = False) -> StepResult:
    """Set the status and gate summary of every generation of `ctx.run_id`; a row per generation, and the table.

    With `approval`, one that passed the gate is gated for a reviewer instead of approved. A generation a reviewer
    already decided keeps that decision when its run is published again.
    """
    lake, run_id = ctx.lake, ctx.run_id
    generations = lake.generations([("run_id", "=", run_id)])
    ids = [g["generation_id"] for g in generations]
    results: dict[tuple[int, str], list[dict[str, Any]]] = defaultdict(list)
    for r in lake.read_arrow("gate_results", [("generation_id", "in", ids)]).to_pylist():
        results[(r["generation_id"], r["group_id"])].append(r)
    now = datetime.now(UTC)
    report, decided = [], []
    with lake.lock():
        for g in generations:
            if g["reviewed_at"] is not None:
                report.append(g)
                continue
            checks = results.get((g["generation_id"], g["group_id"]), [])
            failed = sorted(r["expectation"] for r in checks if not r["success"])
            if checks and not failed:
                status = S.GATED if approval else S.APPROVED
                reason = "gate passed; awaiting review" if approval else "gate passed"
            else:
                status, reason = S.REJECTED, f"gate failed: {', '.join(failed)}" if failed else "not gated"
            summary = (
                f"{len(checks) - len(failed)}/{len(checks)} expectations passed"
                + (f"; failed: {', '.join(failed)}" if failed else "")
                if checks
                else "not gated"
            )
            row: Generation = {
                **g,
                "status": status.value,
                "status_reason": reason,
                "status_at": now,
                "gate_summary": summary,
            }
            report.append(row)
            decided.append(row)
        lake.update("generations", rows_table("generations", decided), [*SETTLED_COLUMNS, "gate_summary"])
        settled = {(r["group_id"], r["generation_id"]): r for r in settle(lake, [g["group_id"] for g in report], now)}
    report = [settled.get((r["group_id"], r["generation_id"]), r) for r in report]
    rows = tuple(columns(r, REPORTED) for r in sorted(report, key=lambda r: r["group_id"]))
    return StepResult(rows, format_report(rows))


def format_report(report: Sequence[Mapping[str, Any]]) -> str:
    """The run's generations as a small text table."""
    lines = [f"{'group':<24} {'generation':>10}  {'strategy':<20} {'status':<10} gate"]
    lines += [
        f"{short(r['group_id']):<24} {r['generation_id']:>10}  {r['chosen_strategy'] or '-':<20} {r['status']:<10} "
        f"{r['gate_summary']}"
        for r in report
    ]
    return "\n".join(lines)
