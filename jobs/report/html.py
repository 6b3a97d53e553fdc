"""HTML pages: one per generation, one index per group, one index of groups.

Charts are plotly figures drawn by plotly.js, which every page loads from one `plotly.min.js` beside the group
folders (`plotly_src`), so a thousand pages do not carry a thousand copies and the pages work offline. Every id
and every value from the lake is escaped with `html.escape`.
"""

from __future__ import annotations

import json
import math
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime
from html import escape
from typing import Any

import msgspec
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from jobs.report import figures
from jobs.report.arrow_batch import Rows
from jobs.report.figures import Figure
from jobs.report.page_content import PARTITIONS_SHOWN, GenerationReport, key_text, parsed_json
from schemas.status import GenerationStatus

PLOTLY_SRC = "../plotly.min.js"
MOVES_SHOWN = 1000
DETAIL_ROWS_SHOWN = 50
JSON_COLUMNS = frozenset({"details"})
RUN_WIDE = frozenset({"changes", "weighted_topics"})
MEMO_KINDS = frozenset({str, int, float, bool, type(None), datetime})
"""Value types `_cells` formats once per distinct value (hashable, and equal only within a type or across numbers)."""
CHART_CONFIG = json.dumps({"displaylogo": False, "responsive": True})
PERCENT_COLUMNS = frozenset({"share", "keys_remapped_share", "traffic_remapped_share", "stickiness", "hot_key_share"})

CSS = """
:root { --fg:#1f2328; --muted:#59636e; --line:#d0d7de; --bg:#f6f8fa; --ok:#1a7f37; --bad:#cf222e; --warn:#9a6700; }
* { box-sizing: border-box; }
body { margin:0; font:14px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif; color:var(--fg);
       background:var(--bg); }
header { background:#fff; border-bottom:1px solid var(--line); padding:16px 0 20px; }
header > div { max-width:1200px; margin:0 auto; padding:0 32px; }
main { max-width:1200px; margin:0 auto; padding:8px 32px 48px; }
nav.crumbs { font-size:13px; color:var(--muted); margin-bottom:6px; }
nav.crumbs a { color:inherit; }
h1 { font-size:24px; margin:0 0 4px; word-break:break-all; }
h1 .gen { color:var(--muted); font-weight:400; }
h2 { font-size:18px; margin:0 0 4px; }
h3 { font-size:15px; margin:16px 0 4px; }
section { background:#fff; border:1px solid var(--line); border-radius:8px; padding:16px 20px; margin-top:16px; }
p.why { color:var(--muted); margin:0 0 10px; max-width:80ch; }
.badge { display:inline-block; padding:2px 10px; border-radius:12px; font-size:12px; font-weight:600;
         text-transform:uppercase; letter-spacing:.04em; vertical-align:middle; color:#fff; background:var(--muted);
         white-space:nowrap; }
.badge.approved { background:var(--ok); } .badge.rejected { background:var(--bad); }
.badge.candidate, .badge.gated { background:var(--warn); }
dl.meta { display:grid; grid-template-columns:repeat(auto-fill,minmax(220px,1fr)); gap:8px 24px; margin:12px 0 0; }
dl.meta div { min-width:0; }
dl.meta dt { font-size:12px; color:var(--muted); }
dl.meta dd { margin:0; overflow-wrap:anywhere; }
table { border-collapse:collapse; width:100%; font-size:13px; margin:6px 0; }
th, td { text-align:left; padding:5px 8px; border-bottom:1px solid #eaeef2; vertical-align:top; }
td { overflow-wrap:break-word; word-break:break-word; }
th { background:var(--bg); font-weight:600; white-space:nowrap; }
td.num, th.num { text-align:right; font-variant-numeric:tabular-nums; }
tr.chosen td { background:#ddf4ff; font-weight:600; }
tr.failed td { background:#ffebe9; }
code, pre { font:12px ui-monospace,SFMono-Regular,Menlo,monospace; }
pre { background:var(--bg); padding:8px; border-radius:6px; overflow:auto; max-height:320px; margin:4px 0; }
.note { color:var(--warn); }
.empty { color:var(--muted); font-style:italic; }
.chart { width:100%; }
a { color:#0969da; }
"""

TRIGGERS = {
    "scheduled": "the nightly planning run (Airflow schedule)",
    "manual": "a run started by hand (the CLI, a triggered DAG, or a what-if scenario)",
}


def render_generation(report: GenerationReport, *, plotly_src: str = PLOTLY_SRC) -> str:
    """One generation's page: header, then why, load, what-if, keys, candidates, moves, lag and the gate."""
    g = report.generation
    title = f"{report.group_id} \u00b7 generation {report.generation_id}"
    header = (
        _crumbs(
            [("../index.html", "All groups"), ("index.html", report.group_id)], f"generation {report.generation_id}"
        )
        + f"<h1>{escape(report.group_id)} <span class='gen'>generation {report.generation_id}</span> "
        + f"{_badge(report.status)}</h1>"
        + _meta(
            [
                ("Trigger", report.trigger),
                ("Created", g.get("created_at")),
                ("Chosen strategy", report.chosen_strategy),
                ("Gate", g.get("gate_summary")),
                ("Run", g.get("run_id")),
                ("Snapshot", g.get("snapshot_id")),
                *report.extras.items(),
            ]
        )
    )
    sections = [
        _trigger(report),
        _partitions(report),
        *_what_if(report),
        _hot_keys(report),
        _fingerprint(report),
        _candidates(report),
        _moves(report),
        _lag(report),
        _gate(report),
    ]
    return _page(title, header, sections, plotly_src)


def render_index(
    group_id: str,
    generations: Rows,
    *,
    plotly_src: str = PLOTLY_SRC,
    page: Callable[[int], str] = lambda n: f"generation-{n}.html",
) -> str:
    """A group's page: every generation (newest first, from `page_content.history`) with a link to its page."""
    header = _crumbs([("../index.html", "All groups")], group_id) + f"<h1>{escape(group_id)}</h1>"
    rows = [g | {"link": page(g["generation_id"])} for g in generations]
    table = _table(
        rows,
        [
            ("generation_id", "generation"),
            ("created_at", "created"),
            ("trigger", "trigger"),
            ("status", "status"),
            ("chosen_strategy", "chosen strategy"),
            ("max_mean_load", "max / mean load"),
            ("partitions_moved", "partitions moved"),
            ("gate_summary", "gate"),
        ],
        link=("generation_id", "link"),
        failed=[g.get("status") == GenerationStatus.REJECTED for g in rows],
    )
    chart = (
        _section(
            "history",
            "Balance and movement over time",
            "Each generation's chosen plan: partitions it moves (bars) and its max/mean member load (line; 1.0 is "
            "perfect balance).",
            _chart("chart-history", figures.history(generations)),
        )
        if generations
        else ""
    )
    generations_section = _section(
        "generations", "Generations", "Every planning run of this group; open one for its full report.", table
    )
    return _page(group_id, header, [chart, generations_section], plotly_src)


def render_groups(groups: Rows, links: Mapping[str, str]) -> str:
    """The top page: every group (from `page_content.groups`) with its latest generation, linked to the group's page."""
    rows = [g | {"link": links[g["group_id"]]} for g in groups]
    table = _table(
        rows,
        [
            ("group_id", "group"),
            ("generations", "generations"),
            ("generation_id", "latest"),
            ("created_at", "created"),
            ("status", "status"),
            ("chosen_strategy", "chosen strategy"),
            ("gate_summary", "gate"),
        ],
        link=("group_id", "link"),
        failed=[g.get("status") == GenerationStatus.REJECTED for g in rows],
    )
    header = "<h1>Rebalance plans</h1>" + _meta([("Groups", len(groups))])
    body = _section("groups", "Consumer groups", "The latest generation of every group the lake holds.", table)
    return _page("Rebalance plans", header, [body], plotly_src=None)


def _trigger(report: GenerationReport) -> str:
    """What started this planning run and what it was asked to do."""
    why = TRIGGERS.get(report.trigger, "")
    # weighted_topics covers the whole run; the load section names this group's sources.
    parameters = ((k.replace("_", " "), v) for k, v in report.parameters.items() if k not in RUN_WIDE)
    body = _meta([("Trigger", report.trigger), *parameters])
    if report.changes not in (None, "", [], {}):
        body += "<h3>Changes since the last generation</h3>" + _value(report.changes)
    text = f"This generation was planned by {escape(why)}." if why else "What started this planning run."
    return _section("trigger", "What triggered it", text, body)


def _partitions(report: GenerationReport) -> str:
    """Today's per-partition load chart, where the figures come from and what the chart leaves out."""
    if not report.partitions.num_rows:
        return _section("load", "Load per partition today", "", _empty("No partition was planned."))
    sources: dict[str, list[str]] = defaultdict(list)
    for source, topic in sorted(_tally(report.partitions, ["source", "topic"]), key=lambda st: st[1]):
        sources[source].append(topic)
    origin = "; ".join(f"{escape(s)}: {escape(', '.join(t))}" for s, t in sorted(sources.items()))
    run = escape(str(report.generation.get("run_id")))
    text = (
        f"Messages per partition, from the key-skew job of run <code>{run}</code> where it sampled the topic "
        "(keys hashed with the producers' partitioner), else the plan's partition weight, else 1 per partition. "
        f"Sources \u2014 {origin}."
    )
    total = pc.sum(report.partitions.column("load")).as_py() or 0.0
    notes = [*report.notes, *_not_shown(report.partitions.num_rows, total, "")]
    chart = _chart("chart-load", figures.partition_load(report))
    return _section("load", "Load per partition today", text, "".join(_note(n) for n in notes) + chart)


def _not_shown(partitions: int, total: float, where: str) -> list[str]:
    """The note under a chart capped at PARTITIONS_SHOWN bars: how many partitions and how much load it leaves out."""
    hidden = partitions - PARTITIONS_SHOWN
    if hidden <= 0:
        return []
    return [
        f"{hidden:,} more partitions{where} not shown; total load {total:,.0f} over all {partitions:,}. "
        f"The chart shows the {PARTITIONS_SHOWN:,} heaviest, so every partition not shown carries at most the "
        "lightest bar's load."
    ]


def _note(text: str) -> str:
    return f"<p class='note'>{escape(text)}</p>"


def _what_if(report: GenerationReport) -> list[str]:
    """One section per topic measured at other partition counts: load per partition and the skew summary."""
    out = []
    for i, (topic, measured) in enumerate(sorted(report.what_if.items())):
        counts = _per_count(measured)
        if len(counts) < 2:
            continue
        summary = [r for r in report.skew_summary if r["topic"] == topic]
        recommended = [r["partition_count"] for r in summary if r.get("recommended")]
        table = _table(
            summary,
            [
                ("partition_count", "partitions"),
                ("current", "today"),
                ("max_mean", "max / mean"),
                ("cv", "CV"),
                ("gini", "Gini"),
                ("keys_remapped_share", "keys remapped"),
                ("traffic_remapped_share", "traffic remapped"),
                ("recommended", "recommended"),
            ],
            chosen=[bool(r.get("recommended")) for r in summary],
        )
        text = (
            f"Topic <code>{escape(topic)}</code> measured with its sampled keys at today's partition count and at each "
            "what-if count. Kafka can add partitions but never remove them, and adding them remaps keys (partition = "
            "hash % count), so per-key order breaks once for the remapped keys."
            + (f" Recommended: {', '.join(str(c) for c in recommended)} partitions." if recommended else "")
        )
        notes = "".join(
            _note(text) for count, (n, total) in counts.items() for text in _not_shown(n, total, f" at {count:,}")
        )
        chart = _chart(f"chart-what-if-{i}", figures.what_if(report, topic))
        out.append(_section(f"what-if-{i}", f"What if {topic} had more partitions", text, notes + chart + table))
    return out


def _hot_keys(report: GenerationReport) -> str:
    """The hottest keys of each topic and where they land today."""
    if not report.hot_keys:
        return ""
    table = _table(
        report.hot_keys,
        [
            ("topic", "topic"),
            ("rank", "rank"),
            ("key", "key"),
            ("messages", "messages"),
            ("share", "share"),
            ("partition", "partition today"),
        ],
    )
    text = "The keys carrying most messages: one key always lands in one partition, so a hot key bounds the balance."
    return _section("hot-keys", "Hot keys", text, table)


def _fingerprint(report: GenerationReport) -> str:
    """Which producer partitioner explains the partitions the samples were read from."""
    if not report.fingerprint:
        return ""
    verdicts = [r for r in report.skew_summary if r.get("current")]
    lines = [
        f"<code>{escape(str(r['topic']))}</code>: {escape(str(r.get('fingerprint') or 'unknown'))} "
        + ("(Java-compatible)" if r.get("java_compatible") else "(not Java-compatible)")
        for r in verdicts
        if "fingerprint" in r
    ]
    table = _table(
        report.fingerprint,
        [
            ("topic", "topic"),
            ("partitioner", "partitioner"),
            ("share", "share explained"),
            ("observed_messages", "observed"),
            ("explained_messages", "explained"),
        ],
    )
    text = (
        "Share of sampled records each known partitioner puts in the partition they were read from; the best one "
        "is the producers' partitioner. Planning with another hash than the producers' misplaces the load."
    )
    verdict = f"<p>{'<br>'.join(lines)}</p>" if lines else ""
    return _section("fingerprint", "Partitioner fingerprint", text, verdict + table)


def _candidates(report: GenerationReport) -> str:
    """Every candidate strategy's balance and movement, and the member load chart."""
    if not report.candidates:
        return _section("candidates", "Candidates", "", _empty("No candidate was planned."))
    table = _table(report.candidates, None, chosen=[bool(c.get("chosen")) for c in report.candidates])
    text = (
        "Each assignor's plan for the same members and partitions. The chosen one has the lowest max/mean member "
        "load, then the fewest partitions moved, then the first name. Grey bars: the load each member carries today."
    )
    return _section(
        "candidates",
        "Candidates and load per member",
        text,
        table + _chart("chart-members", figures.member_load(report)),
    )


def _moves(report: GenerationReport) -> str:
    """The chosen plan's partition movements, by rebalance round (the first MOVES_SHOWN of them listed)."""
    moves = report.moves
    if not moves.num_rows:
        return _section("moves", "Partitions that move", "The chosen plan moves no partition.", "")
    steps = _tally(moves, ["round", "action"])
    cooperative = any(action == "revoke" for _, action in steps)
    text = (
        "Cooperative rebalancing (KIP-429): in round 1 the previous owners give up only the partitions that move, "
        "while every other partition keeps being consumed; round 2, the follow-up rebalance, assigns them."
        if cooperative
        else "Eager rebalancing: every member gives up its partitions when the rebalance starts; these partitions "
        "come back to another member than before."
    )
    hidden = moves.num_rows - MOVES_SHOWN
    more = f"<p class='empty'>{hidden:,} more not shown.</p>" if hidden > 0 else ""
    table = _table(
        moves.slice(0, MOVES_SHOWN).to_pylist(),
        [
            ("round", "round"),
            ("action", "action"),
            ("topic", "topic"),
            ("partition", "partition"),
            ("previous_member", "from"),
            ("member", "to"),
            ("load", "load"),
        ],
    )
    summary = ", ".join(f"round {r} {escape(a)}: {n}" for (r, a), n in sorted(steps.items()))
    return _section("moves", "Partitions that move", f"{text} ({summary}.)", table + more)


def _lag(report: GenerationReport) -> str:
    """Lag per member, today and after the chosen plan."""
    if not report.lag:
        return ""
    text = (
        "Messages not yet consumed (end offset \u2212 committed offset) summed over each member's partitions. A "
        "partition's backlog goes with it to its new owner."
    )
    return _section("lag", "Lag per member", text, _chart("chart-lag", figures.member_lag(report)))


def _gate(report: GenerationReport) -> str:
    """The gate's verdict and every failed expectation with its failing rows."""
    gate = report.gate
    verdict = f"<p>{_badge(report.status)} {escape(str(report.generation.get('gate_summary') or ''))}</p>"
    if not gate:
        return _section("gate", "Quality gate", "This generation was not gated.", verdict)
    failed = [r for r in gate if not r.get("success")]
    passed = [r for r in gate if r.get("success")]
    columns = [("expectation", "expectation"), ("observed_value", "observed"), ("details", "failing rows")]
    extra = [(c, c.replace("_", " ")) for c in gate[0] if c not in {"suite", "success", *dict(columns)}]
    body = verdict
    if failed:
        body += "<h3>Failed expectations</h3>" + _table(failed, columns + extra, failed=[True] * len(failed))
    if passed:
        body += (
            f"<details><summary>{len(passed)} passed expectation(s)</summary>"
            + _table(passed, [("expectation", "expectation"), ("observed_value", "observed")])
            + "</details>"
        )
    text = (
        "Great Expectations checks of the chosen plan: each partition once, every subscribed partition assigned, "
        "only to members subscribed to its topic. The generation is approved only when all pass."
    )
    return _section("gate", "Quality gate", text, body)


def _page(title: str, header: str, sections: Iterable[str], plotly_src: str | None) -> str:
    """The HTML document around a header and sections."""
    script = (
        "<script>window.PlotlyConfig = {MathJaxConfig: 'local'};</script>"
        f'<script charset="utf-8" src="{escape(plotly_src)}"></script>'
        if plotly_src
        else ""
    )
    return (
        "<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
        "<meta name='viewport' content='width=device-width, initial-scale=1'>"
        f"<title>{escape(title)}</title><style>{CSS}</style>{script}</head>\n"
        f"<body><header><div>{header}</div></header>\n<main>{''.join(sections)}</main></body></html>\n"
    )


def _section(anchor: str, title: str, text: str, body: str) -> str:
    why = f"<p class='why'>{text}</p>" if text else ""
    return f"<section id='{escape(anchor)}'><h2>{escape(title)}</h2>{why}{body}</section>\n"


def _chart(div_id: str, figure: Figure) -> str:
    """A plotly chart drawn by the page's plotly.js: the markup `plotly.io.to_html` makes, without its validation
    (see `figures`) and its JSON encoder class (same JSON, a third of a page's time spent converting it)."""
    data, layout = _script_json(figure["data"]), _script_json(figure["layout"])
    draw = f'Plotly.newPlot("{div_id}", {data}, {layout}, {CHART_CONFIG})'
    script = f'window.PLOTLYENV=window.PLOTLYENV || {{}};if (document.getElementById("{div_id}")) {{{draw}}};'
    return (
        f"<div class='chart'><div style=\"height:{figure['layout']['height']}px; width:100%;\">"
        f'<div id="{div_id}" class="plotly-graph-div" style="height:100%; width:100%;"></div>'
        f"<script>{script}</script></div></div>"
    )


def _script_json(value: Any) -> str:
    """JSON as plotly writes it into a page: compact, NaN and infinities as null, and no `<`, `>` or `/` (escaped)
    that could end the script element. msgspec encodes it (NaN and infinities as null already; 1,000 groups' pages:
    1.11 -> 0.33 s of CPU), the stdlib's encoder where msgspec cannot (a lone surrogate in a name from Kafka)."""
    try:
        text = msgspec.json.encode(value).decode()
    except (msgspec.EncodeError, TypeError, UnicodeEncodeError):
        text = json.dumps(value, separators=(",", ":"))
        if "NaN" in text or "Infinity" in text:  # maybe only inside a string; then re-encoding changes nothing
            text = json.dumps(json.loads(text, parse_constant=lambda _: None), separators=(",", ":"))
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("/", "\\u002f")


def _crumbs(links: list[tuple[str, str]], here: str) -> str:
    parts = [f"<a href='{escape(href)}'>{escape(text)}</a>" for href, text in links]
    return f"<nav class='crumbs'>{' / '.join([*parts, escape(here)])}</nav>"


def _badge(status: str) -> str:
    return f"<span class='badge {escape(status)}'>{escape(status)}</span>"


def _meta(items: Iterable[tuple[str, Any]]) -> str:
    cells = "".join(f"<div><dt>{escape(str(k))}</dt><dd>{_value(v)}</dd></div>" for k, v in items)
    return f"<dl class='meta'>{cells}</dl>"


def _empty(text: str) -> str:
    return f"<p class='empty'>{escape(text)}</p>"


def _table(
    records: Rows,
    columns: list[tuple[str, str]] | None,
    *,
    chosen: list[bool] | None = None,
    failed: list[bool] | None = None,
    link: tuple[str, str] | None = None,
) -> str:
    """Rows as an HTML table; `columns` picks and names columns (every column of the rows, as named, when None)."""
    present = dict.fromkeys(k for r in records for k in r)
    columns = [(c, h) for c, h in (columns or [(c, c.replace("_", " ")) for c in present]) if c in present]
    values = {c: [r.get(c) for r in records] for c, _ in columns}
    numeric = {c for c, _ in columns if _numeric(values[c])}
    head = "".join(f"<th class='num'>{escape(h)}</th>" if c in numeric else f"<th>{escape(h)}</th>" for c, h in columns)
    cells = {c: _cells(c, values[c]) for c, _ in columns}
    if link:
        targets = (escape(str(r[link[1]])) for r in records)
        cells[link[0]] = [f"<a href='{href}'>{cell}</a>" for href, cell in zip(targets, cells[link[0]], strict=True)]
    tds = [_tds(cells[c], c in numeric) for c, _ in columns]
    rows = []
    for i, row in enumerate(zip(*tds, strict=True)):
        css = "chosen" if chosen and chosen[i] else "failed" if failed and failed[i] else ""
        rows.append(f"<tr class='{css}'>{''.join(row)}</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"


def _tds(cells: list[str], numeric: bool) -> list[str]:
    """Cells as table cells, right-aligned when numeric."""
    opening = "<td class='num'>" if numeric else "<td>"
    return [f"{opening}{cell}</td>" for cell in cells]


def _cells(column: str, values: list[Any]) -> list[str]:
    """One column's cells; a value repeated down the column (a member, a topic, a round) is formatted once."""
    kinds = {type(v) for v in values}
    if kinds == {int}:  # partitions, counts: mostly distinct, formatted as `_value` does
        return [f"{v:,}" for v in values]
    if not kinds <= MEMO_KINDS:
        return [_cell(column, v) for v in values]
    # Keyed by value, or by (type, value) where 1, 1.0 and True (equal keys) could share a column.
    keys = values if len(kinds - {type(None)}) <= 1 else [(type(v), v) for v in values]
    done: dict[Any, str] = {}
    out = []
    for key, value in zip(keys, values, strict=True):
        cell = done.get(key)
        if cell is None:
            cell = done[key] = _cell(column, value)
        out.append(cell)
    return out


def _tally(data: pa.Table, by: list[str]) -> Counter[tuple[Any, ...]]:
    """Rows per distinct combination of the `by` columns' values."""
    return Counter(zip(*(data.column(c).to_pylist() for c in by), strict=True))


def _per_count(measured: pa.Table) -> dict[int, tuple[int, float]]:
    """Per measured partition count, in order: partitions with a known load and their total load."""
    counts = measured.column("partition_count").to_numpy()
    load = measured.column("load")
    known = pc.is_valid(load).to_numpy(zero_copy_only=False)
    found, at = np.unique(counts, return_inverse=True)
    n = np.bincount(at, weights=known, minlength=len(found))
    total = np.bincount(at, weights=pc.fill_null(load, 0.0).to_numpy(), minlength=len(found))
    return {int(c): (int(k), float(t)) for c, k, t in zip(found.tolist(), n.tolist(), total.tolist(), strict=True)}


def _numeric(values: Iterable[Any]) -> bool:
    """A column of numbers (and gaps) only: right-aligned."""
    seen = False
    for v in values:
        if _missing(v):
            continue
        if isinstance(v, bool) or not isinstance(v, int | float):
            return False
        seen = True
    return seen


def _cell(column: str, value: Any) -> str:
    """A table cell: statuses as badges, shares as percentages, JSON columns pretty-printed."""
    if column == "status" and isinstance(value, str):
        return _badge(value)
    if column in PERCENT_COLUMNS and isinstance(value, float) and not _missing(value):
        return f"{value:.1%}"
    return _value(parsed_json(value) if column in JSON_COLUMNS else value)


def _value(value: Any) -> str:
    """A lake value as escaped HTML: numbers grouped, times in UTC, JSON pretty-printed."""
    if _missing(value):
        return "\u2014"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:,.0f}" if value.is_integer() and abs(value) >= 1 else f"{value:,.3f}"
    if isinstance(value, datetime):
        stamp = value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
        return escape(stamp.strftime("%Y-%m-%d %H:%M:%S UTC"))
    if isinstance(value, list | tuple | dict):
        if not value:
            return "\u2014"
        if isinstance(value, list) and len(value) > DETAIL_ROWS_SHOWN:
            value = [*value[:DETAIL_ROWS_SHOWN], f"... {len(value) - DETAIL_ROWS_SHOWN} more"]
        if isinstance(value, list) and all(isinstance(v, str) for v in value):
            return escape(", ".join(value))
        return f"<pre>{escape(json.dumps(value, indent=1, default=str))}</pre>"
    if isinstance(value, bytes):
        return escape(key_text(value))
    return escape(str(value))


def _missing(value: Any) -> bool:
    """None or a float NaN (a null the lake wrote as NaN)."""
    return value is None or (isinstance(value, float) and math.isnan(value))
