"""Report: the HTML pages of the run's generations (and the indexes), written next to the lake.

Pages go to `<lake>/reports/<group>/generation-<N>.html` unless `REBALANCE_REPORTS` names another directory
(`RunContext.reports_dir`); they work offline (plotly.js is copied once into the directory).
"""

from __future__ import annotations

from jobs.context import RunContext, StepResult
from jobs.report import write_reports
from jobs.report.arrow_batch import projected, streamed
from jobs.report.write import folder_name
from jobs.terminal import short


def run(ctx: RunContext) -> StepResult:
    """Write the page of every generation this run made; a row per group with the path of its page."""
    made = {g["group_id"]: g["generation_id"] for g in ctx.lake.generations([("run_id", "=", ctx.run_id)])}
    if not made:
        return StepResult()
    lake = ctx.lake
    written = write_reports(projected(lake.read_arrow), ctx.reports_dir, scan=streamed(lake.read_batches), only=made)
    pages = {p.parent.name + "/" + p.name: p for p in written}
    rows = tuple(
        {"group_id": g, "page": str(pages[f"{folder_name(g)}/generation-{n}.html"])} for g, n in sorted(made.items())
    )
    return StepResult(rows, "\n".join(f"report {short(r['group_id'])}: {r['page']}" for r in rows))
