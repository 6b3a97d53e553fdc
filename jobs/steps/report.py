"""Report: the HTML pages of the run's generations (and the indexes), written next to the lake.

Pages go to `<lake>/reports/<group>/generation-<N>.html` unless `REBALANCE_REPORTS` names another directory; they
work offline (plotly.js is copied once into the directory).
"""

from __future__ import annotations

from pathlib import Path

from jobs.context import RunContext
from jobs.report import write_reports
from jobs.report.arrow_batch import projected
from jobs.report.write import folder_name


def reports_dir(ctx: RunContext) -> Path:
    """Where reports go: `REBALANCE_REPORTS`, else `<lake>/reports` for a local lake and `./reports` (in the working
    directory) for a lake on S3: pages are opened from a local disk."""
    if ctx.config.reports:
        return Path(ctx.config.reports)
    return ctx.lake.local / "reports" if ctx.lake.local else Path("reports").resolve()


def run(ctx: RunContext) -> dict[str, str]:
    """Write the page of every generation this run made; returns group -> path of its page."""
    made = {
        g["group_id"]: g["generation_id"]
        for g in ctx.lake.read_arrow("generations", [("run_id", "=", ctx.run_id)]).to_pylist()
    }
    if not made:
        return {}
    written = write_reports(projected(ctx.lake.read_arrow), reports_dir(ctx), only=made)
    pages = {p.parent.name + "/" + p.name: p for p in written}
    return {g: str(pages[f"{folder_name(g)}/generation-{n}.html"]) for g, n in sorted(made.items())}
