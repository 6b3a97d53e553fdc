"""Review: a person approves or rejects the generations the gate passed while approval is on (status gated).

`run` is the step: what the reviewer sees (each gated generation's report page, written by the report step before
it, and a plan summary). `record` writes the decision, who made it, when and why on the generations, and an approval
supersedes the group's older approved generations: the `record_review` step after Airflow's approval task
(`jobs.airflow.tasks`) and `rebalance review` both end there.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, Literal

from jobs.context import RunContext, StepResult
from jobs.io.lake import columns, rows_table
from jobs.report.write import folder_name
from jobs.tables.lifecycle import SETTLED_COLUMNS, settle
from planner.errors import InputError
from schemas.rows import Generation
from schemas.status import GenerationStatus as S

Decision = Literal["approve", "reject"]
DECISIONS: dict[str, S] = {"approve": S.APPROVED, "reject": S.REJECTED}
REVIEW_COLUMNS = [*SETTLED_COLUMNS, "reviewed_by", "reviewed_at", "review_comment"]


def run(ctx: RunContext) -> StepResult:
    """What the reviewer of run `ctx.run_id` sees; nothing when nothing of it awaits review.

    Records each gated generation's report page on the generation; a row per group (the chosen strategy, max and mean
    load, max/mean, partitions moved and the page's path) and the Markdown summary as the text.
    """
    lake = ctx.lake
    gated = [r for r in lake.generations([("run_id", "=", ctx.run_id)]) if r["status"] == S.GATED]
    if not gated:
        return StepResult()
    for g in gated:
        g["report_path"] = str(ctx.reports_dir / folder_name(g["group_id"]) / f"generation-{g['generation_id']}.html")
    with lake.lock():
        lake.update("generations", rows_table("generations", gated), ["report_path"])
    chosen = {
        (m["group_id"], m["generation_id"]): m
        for m in lake.read_arrow(
            "plan_metrics", [("generation_id", "in", [g["generation_id"] for g in gated])]
        ).to_pylist()
        if m["chosen"]
    }
    summary = [_summary(g, chosen.get((g["group_id"], g["generation_id"]), {})) for g in gated]
    summary.sort(key=lambda s: s["group_id"])
    return StepResult(tuple(summary), markdown(ctx.run_id, summary))


def record(
    ctx: RunContext,
    decision: Decision,
    reviewer: str,
    comment: str = "",
    *,
    group: str | None = None,
    generation: int | None = None,
    reviewed_at: datetime | None = None,
) -> StepResult:
    """Record `decision` on the gated generations of `ctx.run_id`, or on generation `generation` of `group`.

    A row per generation recorded (none when the run has nothing gated: its review was recorded already).
    Naming a generation that is not gated is an InputError: only a gated generation awaits review.
    """
    if decision not in DECISIONS:
        raise InputError(f"decision: expected approve or reject, got {decision!r}")
    if not reviewer.strip():
        raise InputError("reviewer: empty; a review records who made it")
    lake, status = ctx.lake, DECISIONS[decision]
    when = reviewed_at or datetime.now(UTC)
    with lake.lock():
        rows = _selected(ctx, group, generation)
        recorded: list[Generation] = [
            {
                **r,
                "status": status.value,
                "status_reason": f"{status} by {reviewer}",
                "status_at": when,
                "reviewed_by": reviewer,
                "reviewed_at": when,
                "review_comment": comment or None,
            }
            for r in rows
        ]
        lake.update("generations", rows_table("generations", recorded), REVIEW_COLUMNS)
        settle(lake, [r["group_id"] for r in recorded], when)
    done = tuple(columns(r, ("group_id", "generation_id", "status", "status_reason")) for r in recorded)
    return StepResult(
        done, "\n".join(f"generation {r['generation_id']} of group {r['group_id']}: {r['status_reason']}" for r in done)
    )


def _selected(ctx: RunContext, group: str | None, generation: int | None) -> list[Generation]:
    """The generations a review applies to: one named by group and generation, else the run's gated ones."""
    if group is None:
        rows = ctx.lake.generations([("run_id", "=", ctx.run_id)])
        return [r for r in rows if r["status"] == S.GATED]
    if generation is None:
        raise InputError(f"generation: required with group {group!r}")
    rows = ctx.lake.read_arrow("generations", [("group_id", "=", group), ("generation_id", "=", generation)])
    if not rows.num_rows:
        raise InputError(f"generation: group {group!r} has no generation {generation}")
    (row,) = rows.to_pylist()
    if row["status"] != S.GATED:
        raise InputError(
            f"generation: generation {generation} of group {group!r} is {row['status']}, not gated: "
            "only a generation that passed the gate with approval on awaits review"
        )
    return [row]


def _summary(generation: Generation, metrics: dict[str, Any]) -> dict[str, Any]:
    return {
        "group_id": generation["group_id"],
        "generation_id": generation["generation_id"],
        "strategy": generation["chosen_strategy"],
        "max_load": metrics.get("max_load"),
        "mean_load": metrics.get("mean_load"),
        "max_mean_load": metrics.get("max_mean_load"),
        "moves": metrics.get("partitions_moved"),
        "report_path": generation["report_path"],
    }


def markdown(run_id: str, summary: list[dict[str, Any]]) -> str:
    """The reviewer's summary as a Markdown table (Airflow renders the approval body as Markdown)."""
    lines = [
        f"Run `{run_id}`: {len(summary)} generation(s) passed the gate and await review. "
        "Approve approves them all; Reject rejects them all.",
        "",
        "| group | generation | strategy | max load | mean load | max/mean | moves | report |",
        "|---|---:|---|---:|---:|---:|---:|---|",
    ]
    for s in summary:
        cells = [
            _cell(s["group_id"]),
            str(s["generation_id"]),
            _cell(s["strategy"] or "-"),
            _number(s["max_load"]),
            _number(s["mean_load"]),
            _number(s["max_mean_load"], 3),
            "-" if s["moves"] is None else str(s["moves"]),
            f"`{_cell(s['report_path'])}`",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _number(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _cell(text: str) -> str:
    """Text safe inside a Markdown table cell: pipes, backticks and line breaks would end or break it."""
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("`", "'").replace("\n", " ")
