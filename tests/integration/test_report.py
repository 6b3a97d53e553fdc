"""The HTML report over a lake built by the real pipeline, checked as data and opened in a real headless Chromium.

The browser is Debian's chromium driven over the Chrome DevTools Protocol on 127.0.0.1; screenshots are kept in
tests/artifacts/report/.
"""

from __future__ import annotations

import base64
import importlib
import itertools
import json
import shutil
import subprocess
import tempfile
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from deltalake import DeltaTable
from deltalake.exceptions import TableNotFoundError
from processes import stop_tree

from jobs import pipeline
from jobs.config import Config
from jobs.context import RunContext
from jobs.io.lake import Lake, rows_table
from jobs.report import collect, figures, render_generation, write, write_reports
from jobs.report.arrow_batch import BATCHED, PLAN_COLUMNS, projected, streamed
from jobs.report.html import MOVES_SHOWN
from jobs.report.page_content import PARTITIONS_SHOWN, collect_many, history
from jobs.report.reader import indexed
from jobs.report.write import NAME_MAX, folder_name
from jobs.steps import gate, ingest, plan, publish
from planner.errors import InputError

pytestmark = pytest.mark.spark

DEMO = Path(__file__).resolve().parents[2] / "jobs" / "demo" / "data"
ARTIFACTS = Path(__file__).resolve().parents[1] / "artifacts" / "report"
CHROMIUM = Path("/usr/bin/chromium")
T0 = datetime(2026, 11, 21, 2, 0, tzinfo=UTC)
ODD = "ops/<script>alert(1)</script> & 'q' \"d\" 100%.."
ODD_MEMBERS = ["<b>m1</b>", "m&2"]
ODD_GROUP = {
    "group_id": ODD,
    "captured_at": "2026-11-21T02:00:09Z",
    "state": "Stable",
    "protocol": "range",
    "generation": 2,
    "topics": {"odd-events": 4},
    "members": [
        {"member_id": ODD_MEMBERS[0], "topics": ["odd-events"], "assignment": [["odd-events", p] for p in range(4)]},
        {"member_id": ODD_MEMBERS[1], "topics": ["odd-events"], "assignment": []},
    ],
    "offsets": [{"topic": "odd-events", "partition": 3, "committed": 5, "end": 905}],
}


@pytest.fixture(scope="module")
def built(spark, tmp_path_factory) -> tuple[Lake, Path]:
    """The demo files plus a group with an awkward id; key samples with a hot key (what-if 12, 16); run-2 rejected."""
    root = tmp_path_factory.mktemp("report")
    files = root / "snapshots"
    shutil.copytree(DEMO, files)
    (files / "odd.json").write_text(json.dumps(ODD_GROUP))
    lake = Lake(root / "lake")
    lake.create_all()
    keys = [f"tenant-{i % 7}".encode() for i in range(200)] + [b"hot"] * 300 + [b"\xff\x00bin"] * 40
    samples = [
        {"sample_id": "run-1", "topic": "clicks", "partition": 0, "offset": i, "key": k, "value_size": 10}
        | {"timestamp": T0, "weight": 3.0}
        for i, k in enumerate(keys)
    ]
    lake.merge("key_samples", rows_table("key_samples", samples))
    # One cooperative candidate: its moves are what the page shows in two rounds (revoke, then assign).
    strategies = ("cooperative-sticky",)
    config = Config(lake=str(lake.root), snapshots=str(files), what_if="12,16", strategies=strategies)
    pipeline.run(config, "run-1", spark=spark)
    # run-2: the same groups, with one inventory partition dropped from every candidate before the gate.
    ctx = RunContext.create(config, "run-2", trigger="scheduled", spark=spark)
    ingest.run(ctx, received_at=T0)
    ids = plan.run(ctx).by_group("generation_id")
    DeltaTable(lake.path("plans")).delete(
        f"group_id = 'inventory' AND generation_id = {ids['inventory']} AND topic = 'stock' AND partition = 5"
    )
    gate.run(ctx)
    publish.run(ctx)
    out = root / "reports"
    write_reports(lake.read_arrow, out)
    return lake, out


def rows(lake: Lake, name: str, **equal: Any) -> list[dict[str, Any]]:
    return [r for r in lake.read_arrow(name).to_pylist() if all(r[k] == v for k, v in equal.items())]


def generations(lake: Lake) -> list[tuple[str, int]]:
    return sorted((r["group_id"], r["generation_id"]) for r in lake.read_arrow("generations").to_pylist())


def expected_marks(lake: Lake, group: str, generation: int) -> dict[str, list[int]]:
    """Marks each chart must draw, counted from the lake's tables directly: partitions, members, counts."""
    gen = rows(lake, "generations", group_id=group, generation_id=generation)[0]
    snapshot = rows(lake, "snapshots", group_id=group, snapshot_id=gen["snapshot_id"])
    members = {r["member_id"] for r in snapshot if r["member_id"]}
    topics = sorted({t for r in snapshot for t in r["topics"]})
    counts = {r["topic"]: r["partition_count"] for r in rows(lake, "topic_partitions", snapshot_id=gen["snapshot_id"])}
    strategies = {r["strategy"] for r in rows(lake, "plan_metrics", group_id=group, generation_id=generation)}
    marks = {
        "chart-load": [counts[t] for t in topics],
        "chart-members": [len(members)] * (1 + len(strategies)),
        "chart-lag": [len(members)] * 2,
    }
    skew = [r for r in rows(lake, "key_skew", run_id=gen["run_id"]) if r["topic"] in topics]
    for i, topic in enumerate(sorted({r["topic"] for r in skew})):
        marks[f"chart-what-if-{i}"] = sorted({r["partition_count"] for r in skew if r["topic"] == topic})
    return marks


def test_every_generation_has_a_page_every_group_an_index_and_plotly_is_shipped_once(built):
    lake, out = built
    pages = {p.relative_to(out).as_posix() for p in out.rglob("*.html")}
    groups = sorted({g for g, _ in generations(lake)})
    assert pages == {
        "index.html",
        *(f"{folder_name(g)}/index.html" for g in groups),
        *(f"{folder_name(g)}/generation-{n}.html" for g, n in generations(lake)),
    }
    assert [p.relative_to(out).as_posix() for p in out.rglob("*.js")] == ["plotly.min.js"]
    for page in out.rglob("*/*.html"):
        text = page.read_text()
        assert '<script charset="utf-8" src="../plotly.min.js"></script>' in text
        assert "https://" not in text and "http://" not in text  # works offline: nothing loaded from a network
    assert len(groups) == 6 and ODD in groups


def test_group_folders_are_percent_encoded_unique_and_safe():
    ids = [ODD, "", ".", "..", "a/b", "a%2Fb", "index.html", "plotly.min.js", "ß", "x" * 300, "x" * 299 + "y"]
    names = [folder_name(g) for g in ids]
    assert len(set(names)) == len(ids)
    for group, name in zip(ids, names, strict=True):
        assert "/" not in name and name not in {".", ".."} and len(name.encode()) <= NAME_MAX
        assert name.startswith("x") or unquote(name) == (group or "%")
    assert folder_name("payments") == "payments" and folder_name("a b") == "a%20b"


def test_collect_reads_loads_members_moves_lag_and_the_gate_from_the_lake(built):
    lake, _ = built
    report = collect(lake.read_arrow, "clickstream-etl", 1)
    measured = {r["partition"]: r["load"] for r in rows(lake, "key_skew", run_id="run-1", topic="clicks", current=True)}
    assert {p["partition"]: p["load"] for p in report.partitions.to_pylist()} == measured
    assert set(report.partitions.column("source").to_pylist()) == {"key skew"}
    assert max(measured.values()) == 3.0 * (300 + 28)  # the hot key and tenant-6 share a partition
    assert list(report.what_if) == ["clicks"]
    assert Counter(report.what_if["clicks"].column("partition_count").to_pylist()) == {10: 10, 12: 12, 16: 16}
    assert [k["key"] for k in report.hot_keys[:2]] == ["hot", "0xff0062696e"]  # binary keys shown as hex
    chosen = report.chosen_strategy
    plans = rows(lake, "plans", group_id="clickstream-etl", generation_id=1, strategy=chosen)
    assert sorted((m["partition"], m["member"]) for m in report.moves.to_pylist() if m["member"]) == sorted(
        (r["partition"], r["member"]) for r in plans if r["moved"]
    )
    after = [m for m in report.members if m["assignment"] == chosen]
    assert all(m["chosen"] for m in after) and sum(m["partitions"] for m in after) == 10
    assert {m["member"]: m["load"] for m in after} == {
        m["member"]: sum(measured[r["partition"]] for r in plans if r["member"] == m["member"]) for m in after
    }
    lag = rows(lake, "partition_offsets", group_id="clickstream-etl", snapshot_id="run-1")
    assert sum(m["today"] for m in report.lag) == sum(r["end_offset"] - r["committed"] for r in lag) == 4000

    payments = collect(lake.read_arrow, "payments", 1)  # cooperative-sticky: revoke first, assign next round
    assert payments.chosen_strategy == "cooperative-sticky"
    assert set(payments.partitions.column("source").to_pylist()) == {"plan weight"}  # the plan step's own loads
    moved = payments.moves.to_pylist()
    revoked = [(m["action"], m["partition"], m["previous_member"]) for m in moved if m["round"] == 1]
    assigned = [(m["action"], m["partition"], m["previous_member"]) for m in moved if m["round"] == 2]
    assert revoked and [("assign", *m[1:]) for m in revoked] == assigned
    assert all(m["member"] is None for m in moved if m["round"] == 1)

    inventory = collect(lake.read_arrow, "inventory", 2)
    assert inventory.status == "rejected"
    failed = [g for g in inventory.gate if not g["success"]]
    assert [g["expectation"] for g in failed] == ["expect_column_values_to_not_be_null(member)"]
    assert '"partition": 5' in failed[0]["details"]


def test_the_indexed_reader_answers_as_the_lake_does(built):
    lake, _ = built
    cached = indexed(lake.read_arrow)
    for group, generation in generations(lake):
        assert collect(lake.read_arrow, group, generation) == collect(cached, group, generation)
        assert history(lake.read_arrow, group) == history(cached, group)
    with pytest.raises(InputError, match="group 'payments' has no generation 9"):
        collect(cached, "payments", 9)


def test_a_batch_gathers_each_generation_as_it_alone_would(built):
    lake, _ = built
    pairs = generations(lake)
    assert len({g for g, _ in pairs}) < len(pairs)  # a group with two generations in one batch
    batch = collect_many(indexed(projected(lake.read_arrow), read_through=BATCHED), pairs)
    assert batch == [collect(lake.read_arrow, group, generation) for group, generation in pairs]


def test_the_report_reads_of_a_batch_only_its_rows_and_the_columns_it_uses(built):
    lake, _ = built
    read = projected(lake.read_arrow)
    plans = read("plans", [("group_id", "in", ["payments"]), ("generation_id", "in", [1])])
    assert set(plans.column_names) == set(PLAN_COLUMNS) and pa.types.is_dictionary(plans.schema.field("member").type)
    every = lake.read_arrow("plans").select(plans.column_names)
    mine = every.filter(pc.and_(pc.equal(every["group_id"], "payments"), pc.equal(every["generation_id"], 1)))
    assert plans.num_rows and plans.cast(every.schema).equals(mine)
    assert read("snapshots", None).column_names == ["snapshot_id", "group_id", "member_id", "assignment"]


@pytest.mark.parametrize("streaming", [True, False], ids=["lake-batches", "whole-tables"])
def test_pages_are_the_same_however_the_generations_are_batched(built, tmp_path, streaming):
    lake, _ = built
    together = write_reports(projected(lake.read_arrow), tmp_path / "together")  # one batch: read from the lake
    scan = streamed(lake.read_batches) if streaming else None
    # One generation per batch (the tables regrouped by batch), rendered here.
    alone = write_reports(projected(lake.read_arrow), tmp_path / "alone", scan=scan, batch_rows=1, workers=1)
    assert [p.relative_to(tmp_path / "alone") for p in alone] == [
        p.relative_to(tmp_path / "together") for p in together
    ]
    assert all(a.read_bytes() == t.read_bytes() for a, t in zip(alone, together, strict=True))


def test_pages_are_the_same_when_member_loads_are_tallied_a_few_rows_at_a_time(built, tmp_path, monkeypatch):
    lake, _ = built
    whole = write_reports(projected(lake.read_arrow), tmp_path / "whole")
    monkeypatch.setattr(importlib.import_module("jobs.report.arrow_batch"), "TALLY_ROWS", 3)
    chunked = write_reports(projected(lake.read_arrow), tmp_path / "chunked")
    assert all(c.read_bytes() == w.read_bytes() for c, w in zip(chunked, whole, strict=True))


def test_every_figure_is_a_valid_plotly_figure(built):
    import plotly.graph_objects as go

    lake, _ = built
    for group, generation in generations(lake):
        report = collect(lake.read_arrow, group, generation)
        charts = [figures.partition_load(report), figures.member_load(report), figures.member_lag(report)]
        charts += [figures.what_if(report, t) for t in report.what_if]
        for chart in charts:
            go.Figure(chart)  # raises on any property plotly does not know
    go.Figure(figures.history(history(lake.read_arrow, "payments")))


def test_ids_are_escaped_everywhere(built):
    lake, out = built
    page = (out / folder_name(ODD) / "generation-1.html").read_text()
    assert "<script>alert" not in page and "<b>m1</b>" not in page
    assert "ops/&lt;script&gt;alert(1)&lt;/script&gt; &amp; &#x27;q&#x27; &quot;d&quot; 100%.." in page
    top = (out / "index.html").read_text()
    assert f"href='{folder_name(ODD).replace('%', '%25')}/index.html'" in top


def test_columns_other_engineers_add_are_shown_and_missing_ones_skipped(built):
    lake, _ = built
    extra = {"migration_readiness": "ready", "approval": '{"by": "ops <on-call>", "at": "2026-11-21"}'}

    def read(name: str, filters: Any = None) -> pa.Table:
        if name.startswith("key_skew") or name == "partition_offsets":
            raise TableNotFoundError(f"no table {name}")  # an older lake without these tables
        table = lake.read_arrow(name, filters)
        if name == "generations":
            for column, value in {**extra, "changes": '{"members": {"added": ["c-9"]}}'}.items():
                table = table.append_column(column, pa.array([value] * table.num_rows))
        if name == "plans":
            table = table.drop_columns(["phase", "weight"])
        return table

    report = collect(read, "payments", 1)
    assert {k: report.extras.get(k) for k in extra} == {
        "migration_readiness": "ready",
        "approval": {"by": "ops <on-call>", "at": "2026-11-21"},
    }
    assert report.changes == {"members": {"added": ["c-9"]}}
    assert set(report.partitions.column("source").to_pylist()) == {"uniform"}
    assert {m["today"] for m in report.lag} == {0}
    assert set(report.moves.column("action").to_pylist()) == {"move"}  # without phases every move is in one round
    page = render_generation(report)
    assert "migration_readiness" in page and "ops &lt;on-call&gt;" in page and "c-9" in page
    assert "Hot keys" not in page and "Partitioner fingerprint" not in page


def test_reports_for_one_group_or_one_generation(built, tmp_path):
    lake, _ = built
    written = write_reports(lake.read_arrow, tmp_path, group="payments", generation=1)
    assert [p.relative_to(tmp_path).as_posix() for p in written] == [
        "payments/generation-1.html",
        "payments/index.html",
        "index.html",
    ]
    with pytest.raises(InputError, match="no generation of group 'nobody'"):
        write_reports(lake.read_arrow, tmp_path, group="nobody")
    with pytest.raises(InputError, match="group 'payments' has no generation 7"):
        write_reports(lake.read_arrow, tmp_path, group="payments", generation=7)


MARKS_JS = """[...document.querySelectorAll('.js-plotly-plot')].map(gd => ({
  id: gd.id,
  data: gd.data.map(t => t.x.length),
  drawn: [...gd.querySelectorAll('.cartesianlayer .trace')].map(t => t.querySelectorAll('.point').length),
  ticks: [...gd.querySelectorAll('.xtick text')].map(t => t.textContent)}))"""


@pytest.mark.skipif(not CHROMIUM.exists(), reason="Debian's chromium is not installed (apt-get install chromium)")
def test_pages_render_in_chromium_without_errors_and_draw_one_mark_per_partition_and_member(built):
    lake, out = built
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    ignore = ARTIFACTS.parent / ".gitignore"
    if not ignore.exists():
        ignore.write_text("*\n")  # screenshots are test artefacts, never committed
    browser = Browser()
    try:
        for group, generation in generations(lake):
            page = out / folder_name(group) / f"generation-{generation}.html"
            browser.open(page.as_uri())
            assert browser.errors() == [], page
            charts = {c["id"]: c for c in browser.evaluate(MARKS_JS)}
            expected = expected_marks(lake, group, generation)
            assert {k: v["data"] for k, v in charts.items()} == expected, (group, generation)
            assert all(c["drawn"] == c["data"] for c in charts.values()), (group, generation)
            assert browser.evaluate("document.querySelector('h1').firstChild.textContent.trim()") == group
            if group == ODD:
                assert set(ODD_MEMBERS) <= set(charts["chart-members"]["ticks"])  # shown literally, not as markup
            if (group, generation) in {("clickstream-etl", 1), ("inventory", 2), (ODD, 1)}:
                browser.screenshot(ARTIFACTS / f"{folder_name(group)}-generation-{generation}.png")
        for group in sorted({g for g, _ in generations(lake)}):
            browser.open((out / folder_name(group) / "index.html").as_uri())
            assert browser.errors() == []
            n = len(rows(lake, "generations", group_id=group))
            assert [(c["data"], c["drawn"]) for c in browser.evaluate(MARKS_JS)] == [([n, n], [n, n])]
        browser.open((out / "index.html").as_uri())
        assert browser.errors() == []
        links = browser.evaluate("[...document.querySelectorAll('td a')].map(a => decodeURIComponent(a.href))")
        assert [unquote(link.rsplit("/", 2)[1]) for link in links] == sorted({g for g, _ in generations(lake)})
        browser.screenshot(ARTIFACTS / "index.png")
    finally:
        browser.close()
    assert browser.process.poll() is not None


WIDE = {"wide-a": 1800, "wide-b": 1200}  # 3,000 partitions: over PARTITIONS_SHOWN
WIDE_MEMBERS = ["w0", "w1", "w2"]
WIDE_WHAT_IF = 2400  # wide-b measured at today's 1,200 and at 2,400 (over the cap too)


def wide_tables() -> dict[str, pa.Table]:
    """A lake of one group over PARTITIONS_SHOWN partitions: today on w0/w1, a plan over w0-w2, skew of wide-b."""
    tps = [(t, p) for t, n in WIDE.items() for p in range(n)]
    weight = {tp: float(1 + (tp[1] * 7919 + len(tp[0])) % 997) for tp in tps}
    held = {m: [{"topic": t, "partition": p} for t, p in tps if p % 2 == i] for i, m in enumerate(WIDE_MEMBERS[:2])}
    snapshot = {"snapshot_id": "s-1", "group_id": "wide"}
    plans = [
        {"generation_id": 1, "group_id": "wide", "strategy": "range", "topic": t, "partition": p}
        | {"member": WIDE_MEMBERS[p % 3], "previous_member": WIDE_MEMBERS[p % 2], "weight": weight[(t, p)]}
        | {"moved": p % 3 != p % 2}
        for t, p in tps
    ]
    skew = [
        {"run_id": "r-1", "topic": "wide-b", "partitioner": "murmur2", "partition_count": n, "partition": p}
        | {"current": n == WIDE["wide-b"], "messages": float(1 + (p * 31) % 500)}
        for n in (WIDE["wide-b"], WIDE_WHAT_IF)
        for p in range(n)
    ]
    generation = {"group_id": "wide", "generation_id": 1, "created_at": T0, "trigger": "manual", "run_id": "r-1"}
    generation |= {"snapshot_id": "s-1", "chosen_strategy": "range", "status": "approved", "parameters": "{}"}
    return {
        "generations": rows_table("generations", [generation]),
        "snapshots": rows_table(
            "snapshots", [snapshot | {"member_id": m, "assignment": held.get(m, [])} for m in WIDE_MEMBERS]
        ),
        "plans": rows_table("plans", plans),
        "plan_metrics": rows_table(
            "plan_metrics", [{"generation_id": 1, "group_id": "wide", "strategy": "range", "chosen": True}]
        ),
        "partition_offsets": rows_table(
            "partition_offsets",
            [snapshot | {"topic": t, "partition": p, "committed": 0, "end_offset": 10} for t, p in tps],
        ),
        "key_skew": rows_table("key_skew", skew),
    }


def heaviest_per_topic(loads: dict[tuple[str, int], float]) -> list[int]:
    """Bars per topic the load chart must draw: the PARTITIONS_SHOWN heaviest (ties by topic, partition)."""
    shown = sorted(loads, key=lambda tp: (-loads[tp], tp))[:PARTITIONS_SHOWN]
    return [sum(1 for t, _ in shown if t == topic) for topic in sorted(WIDE)]


def test_a_group_over_the_cap_draws_its_heaviest_partitions_and_notes_the_rest(tmp_path):
    tables = wide_tables()

    def read(name: str, filters: Any = None) -> pa.Table:
        if name not in tables:
            raise TableNotFoundError(f"no table {name}")
        return tables[name]

    report = collect(indexed(read), "wide", 1)
    assert report.partitions.num_rows == sum(WIDE.values()) == 3000
    loads = {(p["topic"], p["partition"]): p["load"] for p in report.partitions.to_pylist()}
    chart = figures.partition_load(report)
    assert [len(trace["x"]) for trace in chart["data"]] == heaviest_per_topic(loads)
    assert min(min(trace["y"]) for trace in chart["data"]) >= sorted(loads.values())[-PARTITIONS_SHOWN]
    # Per-member sections count every partition, not only the charted ones.
    after = [m for m in report.members if m["chosen"]]
    assert sum(m["partitions"] for m in after) == 3000 and sum(m["load"] for m in after) == sum(loads.values())
    assert {m["member"]: m["today"] for m in report.lag} == {"w0": 15000.0, "w1": 15000.0, "w2": 0.0}

    written = write_reports(read, tmp_path)
    page = (tmp_path / "wide" / "generation-1.html").read_text()
    total = sum(loads.values())
    assert f"1,000 more partitions not shown; total load {total:,.0f} over all 3,000." in page
    assert "400 more partitions at 2,400 not shown" in page
    assert f"{report.moves.num_rows - MOVES_SHOWN:,} more not shown." in page
    if not CHROMIUM.exists():
        return
    browser = Browser()
    try:
        browser.open(written[0].as_uri())
        assert browser.errors() == []
        charts = {c["id"]: c for c in browser.evaluate(MARKS_JS)}
        assert {k: v["data"] for k, v in charts.items()} == {
            "chart-load": heaviest_per_topic(loads),
            "chart-what-if-0": [WIDE["wide-b"], PARTITIONS_SHOWN],
            "chart-members": [3, 3],
            "chart-lag": [3, 3],
        }
        assert all(c["drawn"] == c["data"] for c in charts.values())
    finally:
        browser.close()


class Browser:
    """One headless Chromium page driven over the DevTools protocol; records console errors and failed loads."""

    FLAGS = (
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--remote-debugging-address=127.0.0.1",
        "--remote-debugging-port=0",
    )

    def __init__(self, width: int = 1280, height: int = 900) -> None:
        from websockets.sync.client import connect

        self.profile = tempfile.TemporaryDirectory(prefix="chromium-")
        self.process = subprocess.Popen(
            [str(CHROMIUM), *self.FLAGS, f"--user-data-dir={self.profile.name}", "about:blank"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,  # its own process group: stop_tree ends it whole
        )
        self.events: list[dict[str, Any]] = []
        self.ids = itertools.count(1)
        port_file = Path(self.profile.name) / "DevToolsActivePort"  # the port chromium chose, then its path
        deadline = time.monotonic() + 60
        while len(words := port_file.read_text().split() if port_file.exists() else []) != 2:
            if time.monotonic() > deadline or self.process.poll() is not None:
                self.close()
                raise RuntimeError("chromium did not open its DevTools port")
            time.sleep(0.05)
        port, path = words
        self.socket = connect(f"ws://127.0.0.1:{port}{path}", max_size=None, open_timeout=30)
        target = self.send("Target.createTarget", url="about:blank")["targetId"]
        self.session = self.send("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        for domain in ("Page", "Runtime", "Log"):
            self.send(f"{domain}.enable", page=True)
        size = {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False}
        self.send("Emulation.setDeviceMetricsOverride", page=True, **size)

    def send(self, method: str, *, page: bool = False, **params: Any) -> dict[str, Any]:
        """One DevTools command (to the page's session when `page`); events arriving meanwhile are kept."""
        message: dict[str, Any] = {"id": next(self.ids), "method": method, "params": params}
        if page:
            message["sessionId"] = self.session
        self.socket.send(json.dumps(message))
        while True:
            reply = self._receive()
            if reply.get("id") == message["id"]:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})

    def open(self, url: str) -> None:
        """Navigate and wait for the load event (inline plotly scripts have run by then)."""
        self.events.clear()
        self.send("Page.navigate", page=True, url=url)
        while not any(e["method"] == "Page.loadEventFired" for e in self.events):
            self._receive()

    def evaluate(self, expression: str) -> Any:
        result = self.send("Runtime.evaluate", page=True, expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in result:
            raise RuntimeError(result["exceptionDetails"])
        return result["result"].get("value")

    def errors(self) -> list[str]:
        """Console errors, uncaught exceptions and failed loads (a missing plotly.min.js shows here) of this page."""
        out = []
        for event in self.events:
            params = event.get("params", {})
            if event["method"] == "Runtime.consoleAPICalled" and params["type"] in ("error", "assert"):
                out.append(" ".join(str(a.get("value", a.get("description"))) for a in params["args"]))
            elif event["method"] == "Runtime.exceptionThrown":
                out.append(json.dumps(params["exceptionDetails"]))
            elif event["method"] == "Log.entryAdded" and params["entry"]["level"] == "error":
                out.append(f"{params['entry']['text']} {params['entry'].get('url', '')}")
        return out

    def screenshot(self, path: Path) -> None:
        """The whole page as PNG."""
        size = self.send("Page.getLayoutMetrics", page=True)["cssContentSize"]
        clip = {"x": 0, "y": 0, "width": size["width"], "height": size["height"], "scale": 1}
        shot = self.send("Page.captureScreenshot", page=True, format="png", captureBeyondViewport=True, clip=clip)
        path.write_bytes(base64.b64decode(shot["data"]))

    def close(self) -> None:
        """Close the socket, stop chromium and every process it forked, then remove the profile (once none of them
        can still be writing it)."""
        if hasattr(self, "socket"):
            self.socket.close()
        stop_tree(self.process, grace=10.0)
        self.profile.cleanup()

    def _receive(self) -> dict[str, Any]:
        message = json.loads(self.socket.recv(timeout=60))
        if "method" in message:
            self.events.append(message)
        return message


def test_a_full_disk_is_one_line_naming_the_file(built, tmp_path):
    from planner.errors import SourceError

    lake, _ = built
    (tmp_path / "plotly.min.js").symlink_to("/dev/full")  # every write to it fails with ENOSPC
    with pytest.raises(SourceError) as full:
        write_reports(lake.read_arrow, tmp_path, group="payments", generation=1)
    said = str(full.value)
    assert said.startswith(f"report pages in {tmp_path}: No space left on device") and "\n" not in said
    assert said.endswith("; the lake is committed, `rebalance report` writes them")


def test_pages_rendered_by_worker_processes_are_the_pages_rendered_here(built, tmp_path):
    lake, _ = built
    read, scan = projected(lake.read_arrow), streamed(lake.read_batches)
    assert len(list(write.batches(read, generations(lake), batch_rows=1))) > 2  # more batches than workers
    here = write_reports(read, tmp_path / "here", scan=scan, batch_rows=1, workers=1)
    there = write_reports(read, tmp_path / "workers", scan=scan, batch_rows=1, workers=2)
    assert [p.relative_to(tmp_path / "workers") for p in there] == [p.relative_to(tmp_path / "here") for p in here]
    assert all(t.read_bytes() == h.read_bytes() for t, h in zip(there, here, strict=True))


def test_batches_for_workers_are_split_in_parts_keeping_the_order(built):
    lake, _ = built
    read, pairs = projected(lake.read_arrow), generations(lake)
    assert len(list(write.batches(read, pairs))) == 1
    parts = list(write.batches(read, pairs, parts=3))
    assert len(parts) > 1 and [pair for part in parts for pair in part] == pairs


def test_a_page_a_worker_cannot_write_is_the_same_one_line_error(built, tmp_path):
    from planner.errors import SourceError

    lake, _ = built
    group, generation = generations(lake)[-1]
    (tmp_path / folder_name(group)).mkdir()
    (tmp_path / folder_name(group) / f"generation-{generation}.html").symlink_to("/dev/full")  # writes fail: ENOSPC
    with pytest.raises(SourceError) as full:
        write_reports(projected(lake.read_arrow), tmp_path, batch_rows=1, workers=2)
    said = str(full.value)
    assert said.startswith(f"report pages in {tmp_path}: No space left on device") and "\n" not in said


def regrouped_by_page(lake: Lake, tmp_path: Path) -> tuple[Any, list[list[tuple[str, int]]], Any]:
    """What `RenderWorkers.render` takes for a batch per page: the indexed read, the batches, the regrouped tables."""
    from jobs.report.regroup import regroup

    read = indexed(projected(lake.read_arrow), read_through=BATCHED)
    found = {(g["group_id"], g["generation_id"]): g for g in lake.read_arrow("generations").to_pylist()}
    chunks = [[pair] for pair in generations(lake)]
    (tmp_path / "regrouped").mkdir()
    regrouped = regroup(streamed(lake.read_batches), [[found[p] for p in c] for c in chunks], tmp_path / "regrouped")
    return read, chunks, regrouped


def test_a_worker_that_dies_fails_the_report_in_one_line_and_every_worker_is_reaped(built, tmp_path):
    from jobs.report.workers import RenderWorkers
    from planner.errors import SourceError

    read, chunks, regrouped = regrouped_by_page(built[0], tmp_path)
    with pytest.raises(SourceError) as ended, RenderWorkers(2) as pool:
        pool.processes[1].kill()
        pool.processes[1].wait()
        pool.render(read, regrouped, chunks, tmp_path, iter(()))
    assert str(ended.value) == f"report worker process {pool.processes[1].pid} ended (exit code -9)"
    assert all(p.poll() is not None for p in pool.processes)


def test_worker_processes_render_without_pandas(built, tmp_path):
    # Their imports are the report's start-up on every core: pandas alone was 0.2-0.5 s of each, for nothing.
    from jobs.report.workers import RenderWorkers

    read, chunks, regrouped = regrouped_by_page(built[0], tmp_path)
    for [(group, _)] in chunks:
        (tmp_path / "pages" / folder_name(group)).mkdir(parents=True, exist_ok=True)
    with RenderWorkers(2) as pool:
        pages = pool.render(read, regrouped, chunks, tmp_path / "pages", iter(()))
        mapped = [Path(f"/proc/{p.pid}/maps").read_text() for p in pool.processes]
    assert len(pages) == len(chunks)
    assert all("/pyarrow/" in m for m in mapped)  # what a library's import maps, seen
    assert not any("/pandas/" in m for m in mapped)


@pytest.mark.parametrize("parts", [2, 3, 7])
def test_a_tables_shares_read_in_turn_are_its_rows_in_order(built, parts):
    lake, _ = built
    files = len(lake.table("plans").file_uris())
    whole = lake.read_batches("plans", decode=False).read_all()
    shares = [lake.read_batches("plans", decode=False, share=(k, parts)).read_all() for k in range(parts)]
    assert files >= 2 and [s.num_rows > 0 for s in shares].count(True) == min(files, parts)
    assert pa.concat_tables(shares).to_pylist() == whole.to_pylist()
