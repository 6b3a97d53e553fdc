"""The report's charts as plotly figure dicts: plain JSON that plotly.js draws in the page.

Dicts rather than `plotly.graph_objects`: building and validating a graph object costs about 5 ms a figure, most
of the time of a thousand reports; the tests validate every figure with `plotly.graph_objects.Figure` instead.
Every label that carries an id is HTML-escaped (plotly.js reads a small set of tags and entities in labels).
"""

from __future__ import annotations

from html import escape
from typing import Any

import pandas as pd

from jobs.report.collect import TODAY, GenerationReport

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
    """Today's load per partition, one bar per partition (Kafka's `topic-partition` label), one trace per topic."""
    data = []
    for i, (topic, rows) in enumerate(report.partitions.groupby("topic", sort=True)):
        data.append(
            {
                "type": "bar",
                "name": escape(topic),
                "x": [escape(f"{topic}-{p}") for p in rows["partition"]],
                "y": rows["load"].tolist(),
                "customdata": [
                    [_label(o), _label(m), s]
                    for o, m, s in zip(rows["owner"], rows["member"], rows["source"], strict=True)
                ],
                "hovertemplate": "%{x}<br>load %{y:,.0f} (%{customdata[2]})<br>owner today %{customdata[0]}"
                "<br>after the plan %{customdata[1]}<extra></extra>",
                "marker": {"color": PALETTE[i % len(PALETTE)]},
            }
        )
    axis_x = {**AXIS, "type": "category", "title": {"text": "partition"}}
    return {"data": data, "layout": layout(360, xaxis=axis_x, yaxis={**AXIS, "title": {"text": "load"}})}


def what_if(report: GenerationReport, topic: str) -> Figure:
    """Per-partition load of one topic at each measured partition count: one row of bars per count."""
    rows = report.what_if[report.what_if["topic"] == topic]
    counts = sorted(rows["partition_count"].unique(), key=int)
    gap, n = 0.06, len(counts)
    height = (1 - gap * (n - 1)) / n
    data, axes = [], {}
    for i, count in enumerate(counts):
        part = rows[rows["partition_count"] == count]
        today = bool(part["current"].iloc[0])
        suffix = "" if i == 0 else str(i + 1)
        top = 1 - i * (height + gap)
        data.append(
            {
                "type": "bar",
                "name": f"{int(count)} partitions" + (" (today)" if today else ""),
                "x": part["partition"].astype(int).tolist(),
                "y": part["load"].tolist(),
                "xaxis": f"x{suffix}",
                "yaxis": f"y{suffix}",
                "hovertemplate": f"{int(count)} partitions<br>partition %{{x}}: %{{y:,.0f}} messages<extra></extra>",
                "marker": {"color": TODAY_COLOR if today else PALETTE[i % len(PALETTE)]},
            }
        )
        axes[f"xaxis{suffix}"] = {**AXIS, "anchor": f"y{suffix}"} | ({"dtick": 1} if count <= 48 else {})
        axes[f"yaxis{suffix}"] = {
            **AXIS,
            "anchor": f"x{suffix}",
            "domain": [max(top - height, 0), top],
            "title": {"text": f"{int(count)}" + (" (today)" if today else "")},
        }
    return {"data": data, "layout": layout(90 + 130 * n, showlegend=False, **axes)}


def member_load(report: GenerationReport) -> Figure:
    """Load per member today and under every candidate, the chosen candidate outlined."""
    data = []
    plans = report.members["plan"].drop_duplicates().tolist()
    for i, plan in enumerate(plans):
        rows = report.members[report.members["plan"] == plan]
        chosen = bool(rows["chosen"].any())
        color = TODAY_COLOR if plan == TODAY else PALETTE[(i - 1) % len(PALETTE)]
        data.append(
            {
                "type": "bar",
                "name": escape(plan) + (" \u2605 chosen" if chosen else ""),
                "x": [_label(m) for m in rows["member"]],
                "y": rows["load"].tolist(),
                "customdata": rows["partitions"].tolist(),
                "hovertemplate": "%{x}<br>load %{y:,.0f} over %{customdata} partitions<extra>"
                + escape(plan)
                + "</extra>",
                "marker": {
                    "color": color,
                    "opacity": 1.0 if chosen or plan == TODAY else 0.55,
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
    lag = report.lag
    x = [_label(m) for m in lag["member"]]
    data = [
        {"type": "bar", "name": "today", "x": x, "y": lag["today"].tolist(), "marker": {"color": TODAY_COLOR}},
        {
            "type": "bar",
            "name": f"after {escape(report.chosen_strategy or 'the plan')}",
            "x": x,
            "y": lag["after"].tolist(),
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


def history(generations: pd.DataFrame) -> Figure:
    """Per generation of a group: partitions moved (bars) and the chosen plan's max/mean load (line)."""
    rows = generations.sort_values("generation_id")
    x = [str(int(g)) for g in rows["generation_id"]]
    moved = rows["partitions_moved"] if "partitions_moved" in rows else pd.Series(dtype=float)
    balance = rows["max_mean_load"] if "max_mean_load" in rows else pd.Series(dtype=float)
    data = [
        {
            "type": "bar",
            "name": "partitions moved",
            "x": x,
            "y": [None if pd.isna(v) else float(v) for v in moved.reindex(rows.index)],
            "marker": {"color": PALETTE[0]},
            "hovertemplate": "generation %{x}<br>%{y} partitions moved<extra></extra>",
        },
        {
            "type": "scatter",
            "mode": "lines+markers",
            "name": "max / mean load",
            "x": x,
            "y": [None if pd.isna(v) else float(v) for v in balance.reindex(rows.index)],
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


def _label(value: Any) -> str:
    """An id as a chart label: escaped, and a dash for nobody."""
    return "\u2014" if value is None or (not isinstance(value, str) and pd.isna(value)) else escape(str(value))
