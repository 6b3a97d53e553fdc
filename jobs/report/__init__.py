"""The report a person reads: one HTML page per generation, an index per group and one of groups (plotly charts)."""

from jobs.report.html import render_generation, render_index
from jobs.report.page_content import GenerationReport, collect
from jobs.report.write import write_reports

__all__ = ["GenerationReport", "collect", "render_generation", "render_index", "write_reports"]
