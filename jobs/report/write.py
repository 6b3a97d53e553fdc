"""Write the reports: `<out>/<group>/generation-<N>.html`, `<out>/<group>/index.html` and `<out>/index.html`.

Group ids may hold any character, so each group's folder name is its id percent-encoded (letters, digits, `-`
and `_` kept, everything else as `%XX` of its UTF-8 bytes): one id, one name, never `.`/`..`, never a clash with
`index.html` or `plotly.min.js`. plotly.js is copied once per output directory and shared by every page.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import string
import tempfile
from collections import defaultdict
from collections.abc import Iterator, Mapping
from pathlib import Path
from urllib.parse import quote

import plotly
import pyarrow as pa

from jobs.report import html
from jobs.report.arrow_batch import BATCHED, Rows, rows
from jobs.report.page_content import collect_many, groups, histories
from jobs.report.reader import Read, Scan, indexed, whole
from jobs.report.regroup import regroup
from jobs.report.workers import RenderWorkers, worker_count
from planner.errors import InputError, SourceError

KEPT = frozenset(string.ascii_letters + string.digits + "-_")
NAME_MAX = 200  # bytes; file systems allow 255 per name
PLOTLY_JS = Path(plotly.__file__).parent / "package_data" / "plotly.min.js"
BATCH_PLAN_ROWS = 500_000
"""Plan rows (partitions x candidates, as plan_metrics counts them) of the pages gathered at once: their
per-partition rows are read and held together (about 100 bytes a plan row), the batch's lookups one read each (of
its own files: `regroup`)."""
BATCHES_PER_WORKER = 4
"""Batches per worker at least (smaller ones when there would be fewer), so the workers end closer together: five
batches on two workers take three batches' time, 60% of the work; eight take half."""


def folder_name(group_id: str) -> str:
    """A file-system-safe, unique folder name for a group id (percent-encoding; hashed tail when very long)."""
    name = "".join(c if c in KEPT else "".join(f"%{b:02X}" for b in c.encode()) for c in group_id) or "%"
    if len(name) > NAME_MAX:
        # '~' never comes out of the encoding above, so a shortened name cannot equal a plain one.
        name = name[: NAME_MAX - 41] + "~" + hashlib.sha1(group_id.encode()).hexdigest()
    return name


def write_reports(
    read: Read,
    out_dir: str | os.PathLike[str],
    *,
    scan: Scan | None = None,
    group: str | None = None,
    generation: int | None = None,
    only: Mapping[str, int] | None = None,
    batch_rows: int = BATCH_PLAN_ROWS,
    workers: int | None = None,
) -> list[Path]:
    """Write every generation's page (or only `group` / `generation`, or the `only` {group: generation} pages of
    one run), the group indexes and the top index.

    `read` has the shape of `Lake.read_arrow`: generations and plan metrics are read once; the other tables
    (BATCHED) once per batch of pages, with the batch's groups, snapshots and runs as filters, those with a row per
    partition from the batch's own file when there are several batches (`regroup`: `scan`, of `Lake.read_batches`'s
    shape, reads each once; without it, `read` reads each whole). Several batches are rendered by `workers` worker
    processes (default: one per core, `jobs.report.workers`), one batch in this process. Returns the HTML files written.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    read = indexed(read, read_through=BATCHED)
    every = groups(read)
    names = [g["group_id"] for g in every]
    if group is not None and group not in names:
        raise InputError(f"group: the lake has no generation of group {group!r}")
    chosen = [group] if group is not None else [g for g in names if only is None or g in only]
    past = histories(read, chosen)
    pages = _pages(past, group, generation, only)
    try:
        _plotly(out)
        for group_id in pages:
            (out / folder_name(group_id)).mkdir(exist_ok=True)
        indexes = _indexes(out, every, {g: past[g] for g in pages})
        pairs = [(g, n) for g, ids in pages.items() for n in ids]
        done = _generation_pages(read, scan or whole(read), out, pairs, past, (batch_rows, workers), indexes)
        for _ in indexes:  # those the workers left to write
            pass
        written = []
        for group_id, ids in pages.items():
            written += [done[(group_id, n)] for n in ids]
            written.append(out / folder_name(group_id) / "index.html")
        written.append(out / "index.html")
    except OSError as e:  # a full disk, a read-only or vanished directory: the pages, not the lake, are at stake
        where = f" ({e.filename})" if e.filename else ""
        raise SourceError(
            f"report pages in {out}: {e.strerror or e}{where}; the lake is committed, `rebalance report` writes them"
        ) from None
    return written


def _generation_pages(
    read: Read,
    scan: Scan,
    out: Path,
    pairs: list[tuple[str, int]],
    past: Mapping[str, Rows],
    split: tuple[int, int | None],
    meanwhile: Iterator[None],
) -> dict[tuple[str, int], Path]:
    """Write the generation pages of each batch; returns (group, generation) -> page. One batch is rendered here
    from `read` (regrouping would only copy its rows, a worker's start cost more than it saves); several from their
    own files of the per-partition tables (`regroup`), by worker processes when there are two or more to run, this
    process meanwhile taking `meanwhile`'s steps. `split`: the batches' plan rows at most, the workers asked for."""
    batch_rows, workers = split
    size = plan_rows(read, pairs)
    chunks = list(batches_of(pairs, size, batch_rows))
    if len(chunks) <= 1:
        return render_batch(read, chunks[0], out) if chunks else {}
    count = worker_count(workers, len(chunks))
    if count > 1:
        chunks = list(batches_of(pairs, size, batch_rows, parts=count * BATCHES_PER_WORKER))
    found = {(g["group_id"], g["generation_id"]): g for generations in past.values() for g in generations}
    with (
        tempfile.TemporaryDirectory(prefix="rebalance-report-") as tmp,
        # Started before the regrouping, so their imports overlap it.
        RenderWorkers(count) if count > 1 else contextlib.nullcontext() as pool,
    ):
        regrouped = regroup(scan, [[found[pair] for pair in chunk] for chunk in chunks], Path(tmp))
        if pool is not None:
            return pool.render(read, regrouped, chunks, out, meanwhile)
        done: dict[tuple[str, int], Path] = {}
        for number, chunk in enumerate(chunks):
            done |= render_batch(regrouped.read(number, read), chunk, out)
        return done


def render_batch(read: Read, batch: list[tuple[str, int]], out: Path) -> dict[tuple[str, int], Path]:
    """Gather, render and write the pages of one batch of (group, generation) pairs; returns pair -> page."""
    done = {}
    for report in collect_many(read, batch):
        page = out / folder_name(report.group_id) / f"generation-{report.generation_id}.html"
        done[(report.group_id, report.generation_id)] = _write(page, html.render_generation(report))
    # mimalloc keeps the batch's freed pages for itself; handed back, the next batch does not add to the peak.
    pa.default_memory_pool().release_unused()
    return done


def _indexes(out: Path, every: Rows, past: Mapping[str, Rows]) -> Iterator[None]:
    """Write the index page of each group in `past`, a step each, then the index of `every` group (steps taken
    while workers render, `RenderWorkers.render`)."""
    for group_id, generations in past.items():
        _write(out / folder_name(group_id) / "index.html", html.render_index(group_id, generations))
        yield
    links = {g["group_id"]: quote(folder_name(g["group_id"])) + "/index.html" for g in every}
    _write(out / "index.html", html.render_groups(every, links))
    yield


def _pages(
    past: Mapping[str, Rows], group: str | None, generation: int | None, only: Mapping[str, int] | None
) -> dict[str, list[int]]:
    """The generations whose pages to write, per group (newest first): all, `generation` or the group's `only` one;
    a group without it is left out (InputError when it is the one `group` asked for)."""
    pages = {}
    for group_id, generations in past.items():
        ids = [g["generation_id"] for g in generations]
        wanted = only[group_id] if only is not None else generation
        if wanted is not None and wanted not in ids:
            if group is not None:
                raise InputError(f"generation: group {group_id!r} has no generation {wanted}")
            continue
        pages[group_id] = ids if wanted is None else [wanted]
    return pages


def batches(
    read: Read, pairs: list[tuple[str, int]], batch_rows: int = BATCH_PLAN_ROWS, parts: int = 1
) -> Iterator[list[tuple[str, int]]]:
    """`pairs` (group, generation) in order, in batches of about `batch_rows` plan rows (`batches_of`)."""
    return batches_of(pairs, plan_rows(read, pairs), batch_rows, parts)


def plan_rows(read: Read, pairs: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
    """Each (group, generation)'s plan rows, as plan_metrics counts them (partitions x candidates)."""
    lookup = [("group_id", "in", sorted({g for g, _ in pairs}))]
    size: dict[tuple[str, int], int] = defaultdict(int)
    for m in rows(read, "plan_metrics", lookup, ("group_id", "generation_id", "partitions")):
        size[(m["group_id"], m["generation_id"])] += m.get("partitions") or 0
    return size


def batches_of(
    pairs: list[tuple[str, int]], size: Mapping[tuple[str, int], int], batch_rows: int, parts: int = 1
) -> Iterator[list[tuple[str, int]]]:
    """`pairs` in order, in batches of about `batch_rows` plan rows (`size`), or of 1/`parts` of all their plan rows
    when that is fewer (a larger pair alone)."""
    limit = min(batch_rows, -(-sum(size.get(pair, 0) for pair in pairs) // parts))
    batch: list[tuple[str, int]] = []
    held = 0
    for pair in pairs:
        if batch and held + size.get(pair, 0) > limit:
            yield batch
            batch, held = [], 0
        batch.append(pair)
        held += size.get(pair, 0)
    if batch:
        yield batch


def _plotly(out: Path) -> None:
    """Copy plotly.js into the output directory unless the same file is already there."""
    target = out / "plotly.min.js"
    if not target.exists() or target.stat().st_size != PLOTLY_JS.stat().st_size:
        shutil.copyfile(PLOTLY_JS, target)


def _write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path
