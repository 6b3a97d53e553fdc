"""The report's charts as plotly figure dicts: plain JSON that plotly.js draws in the page.

Dicts rather than `plotly.graph_objects`: building and validating a graph object costs about 5 ms a figure, most
of the time of a thousand reports; the tests validate every figure with `plotly.graph_objects.Figure` instead.
Every label that carries an id is HTML-escaped (plotly.js reads a small set of tags and entities in labels).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from html import escape
from typing import Any

import numpy as np

from jobs.report.arrow_batch import distinct
from jobs.report.page_content import PARTITIONS_SHOWN, TODAY, GenerationReport, heaviest

Figure = dict[str, Any]

PALETTE = ["#4c78a8", "#f58518", "#54a24b", "#b279a2", "#e45756", "#72b7b2", "#9d755d", "#eeca3b", "#ff9da6"]
TODAY_COLOR = "#9aa0a6"
CHOSEN_OUTLINE = "#1f2328"
AXIS = {"gridcolor": "#eaeef2", "zerolinecolor": "#d0d7de", "automargin": True}


def layout(height: int, **extra: Any) -> dict[str, Any]:
    """The shared look: system font, light grid, legend above the plot."""
    return {
        "height": height,
        "margin": {"l": 60, "r": 20, "t": 30, "b": 40},
        "font": {"family": "system-ui, -apple-system, Segoe UI, Roboto, sans-serif", "size": 12, "color": "#1f2328"},
        "paper_bgcolor": "#ffffff",
        "plot_bgcolor": "#ffffff",
        "legend": {"orientation": "h", "y": 1.02, "yanchor": "bottom", "x": 0, "xanchor": "left"},
        "hoverlabel": {"align": "left"},
        **extra,
    }


def partition_load(report: GenerationReport) -> Figure:
    """Today's load per partition, one bar per partition (Kafka's `topic-partition` label), one trace per topic.

    Beyond PARTITIONS_SHOWN partitions only the heaviest are drawn (the page notes the rest).
    """
    shown = heaviest(report.partitions, PARTITIONS_SHOWN)  # sorted by topic, then partition
    values = {c: shown.column(c).to_pylist() for c in ("topic", "partition", "load", "owner", "member", "source")}
    labels = {v: _label(v) for v in {*values["owner"], *values["member"]}}  # a few members, many partitions
    owners, members = map(labels.__getitem__, values["owner"]), map(labels.__getitem__, values["member"])
    custom = list(map(list, zip(owners, members, values["source"], strict=True)))
    data = []
    for i, (topic, start, end) in enumerate(_runs(values["topic"])):
        prefix = escape(topic) + "-"  # escaping the topic alone: digits and '-' need none
        data.append(
            {
                "type": "bar",
                "name": escape(topic),
                "x": [prefix + str(p) for p in values["partition"][start:end]],
                "y": values["load"][start:end],
                "customdata": custom[start:end],
                "hovertemplate": "%{x}<br>load %{y:,.0f} (%{customdata[2]})<br>owner today %{customdata[0]}"
                "<br>after the plan %{customdata[1]}<extra></extra>",
                "marker": {"color": PALETTE[i % len(PALETTE)]},
            }
        )
    axis_x = {**AXIS, "type": "category", "title": {"text": "partition"}}
    return {"data": data, "layout": layout(360, xaxis=axis_x, yaxis={**AXIS, "title": {"text": "load"}})}


def what_if(report: GenerationReport, topic: str) -> Figure:
    """Per-partition load of one topic at each measured partition count: one row of bars per count.

    Beyond PARTITIONS_SHOWN partitions at a count only the heaviest are drawn (the page notes the rest).
    """
    mine = report.what_if[topic]
    counts = sorted(distinct(mine, "partition_count"))
    gap, n = 0.06, len(counts)
    height = (1 - gap * (n - 1)) / n
    data, axes = [], {}
    at = mine.column("partition_count").to_numpy()
    for i, count in enumerate(counts):
        part = heaviest(mine.take(np.flatnonzero(at == count)), PARTITIONS_SHOWN)
        today = bool(part.column("current")[0].as_py())
        suffix = "" if i == 0 else str(i + 1)
        top = 1 - i * (height + gap)
        label = f"{count} partitions" + (" (today)" if today else "")
        data.append(
            {
                "type": "bar",
                "name": label,
                "x": part.column("partition").to_pylist(),
                "y": part.column("load").to_pylist(),
                "xaxis": f"x{suffix}",
                "yaxis": f"y{suffix}",
                "hovertemplate": f"{count} partitions<br>partition %{{x}}: %{{y:,.0f}} messages<extra></extra>",
                "marker": {"color": TODAY_COLOR if today else PALETTE[i % len(PALETTE)]},
            }
        )
        axes[f"xaxis{suffix}"] = {**AXIS, "anchor": f"y{suffix}"} | ({"dtick": 1} if count <= 48 else {})
        axes[f"yaxis{suffix}"] = {
            **AXIS,
            "anchor": f"x{suffix}",
            "domain": [max(top - height, 0), top],
            "title": {"text": f"{count}" + (" (today)" if today else "")},
        }
    return {"data": data, "layout": layout(90 + 130 * n, showlegend=False, **axes)}


def member_load(report: GenerationReport) -> Figure:
    """Load per member today and under every candidate, the chosen candidate outlined."""
    by_assignment: dict[str, list[dict[str, Any]]] = {}
    for r in report.members:
        by_assignment.setdefault(r["assignment"], []).append(r)
    labels = {m: _label(m) for m in {r["member"] for r in report.members}}  # each member under every assignment
    data = []
    for i, (assignment, rows) in enumerate(by_assignment.items()):
        chosen = any(r["chosen"] for r in rows)
        color = TODAY_COLOR if assignment == TODAY else PALETTE[(i - 1) % len(PALETTE)]
        data.append(
            {
                "type": "bar",
                "name": escape(assignment) + (" \u2605 chosen" if chosen else ""),
                "x": [labels[r["member"]] for r in rows],
                "y": [r["load"] for r in rows],
                "customdata": [r["partitions"] for r in rows],
                "hovertemplate": "%{x}<br>load %{y:,.0f} over %{customdata} partitions<extra>"
                + escape(assignment)
                + "</extra>",
                "marker": {
                    "color": color,
                    "opacity": 1.0 if chosen or assignment == TODAY else 0.55,
                    "line": {"color": CHOSEN_OUTLINE, "width": 2 if chosen else 0},
                },
            }
        )
    axis_x = {**AXIS, "type": "category", "title": {"text": "member"}}
    return {
        "data": data,
        "layout": layout(380, barmode="group", xaxis=axis_x, yaxis={**AXIS, "title": {"text": "load"}}),
    }


def member_lag(report: GenerationReport) -> Figure:
    """Consumer lag per member today and after the chosen plan moves partitions (the lag moves with them)."""
    x = [_label(r["member"]) for r in report.lag]
    data = [
        {
            "type": "bar",
            "name": "today",
            "x": x,
            "y": [r["today"] for r in report.lag],
            "marker": {"color": TODAY_COLOR},
        },
        {
            "type": "bar",
            "name": f"after {escape(report.chosen_strategy or 'the plan')}",
            "x": x,
            "y": [r["after"] for r in report.lag],
            "marker": {"color": PALETTE[0]},
        },
    ]
    for trace in data:
        trace["hovertemplate"] = "%{x}<br>lag %{y:,.0f} messages<extra>%{fullData.name}</extra>"
    axis_x = {**AXIS, "type": "category", "title": {"text": "member"}}
    return {
        "data": data,
        "layout": layout(340, barmode="group", xaxis=axis_x, yaxis={**AXIS, "title": {"text": "lag (messages)"}}),
    }


def history(generations: list[dict[str, Any]]) -> Figure:
    """Per generation of a group: partitions moved (bars) and the chosen plan's max/mean load (line)."""
    rows = sorted(generations, key=lambda g: g["generation_id"])
    x = [str(g["generation_id"]) for g in rows]
    data = [
        {
            "type": "bar",
            "name": "partitions moved",
            "x": x,
            "y": [g.get("partitions_moved") for g in rows],
            "marker": {"color": PALETTE[0]},
            "hovertemplate": "generation %{x}<br>%{y} partitions moved<extra></extra>",
        },
        {
            "type": "scatter",
            "mode": "lines+markers",
            "name": "max / mean load",
            "x": x,
            "y": [g.get("max_mean_load") for g in rows],
            "yaxis": "y2",
            "marker": {"color": PALETTE[1], "size": 8},
            "hovertemplate": "generation %{x}<br>max/mean %{y:.3f}<extra></extra>",
        },
    ]
    return {
        "data": data,
        "layout": layout(
            320,
            xaxis={**AXIS, "type": "category", "title": {"text": "generation"}},
            yaxis={**AXIS, "title": {"text": "partitions moved"}, "rangemode": "tozero"},
            yaxis2={
                **AXIS,
                "title": {"text": "max / mean"},
                "overlaying": "y",
                "side": "right",
                "showgrid": False,
                "rangemode": "tozero",
            },
        ),
    }


def _runs(values: list[Any]) -> Iterator[tuple[Any, int, int]]:
    """(value, start, end) of each run of equal values in a list."""
    start = 0
    for value, run in itertools.groupby(values):
        end = start + len(list(run))
        yield value, start, end
        start = end


def _label(value: Any) -> str:
    """An id as a chart label: escaped, and a dash for nobody."""
    return "\u2014" if value is None else escape(str(value))
