"""Write the reports: `<out>/<group>/generation-<N>.html`, `<out>/<group>/index.html` and `<out>/index.html`.

Group ids may hold any character, so each group's folder name is its id percent-encoded (letters, digits, `-`
and `_` kept, everything else as `%XX` of its UTF-8 bytes): one id, one name, never `.`/`..`, never a clash with
`index.html` or `plotly.min.js`. plotly.js is copied once per output directory and shared by every page.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import string
from collections.abc import Mapping
from pathlib import Path
from urllib.parse import quote

import plotly

from jobs.report import html
from jobs.report.collect import collect, groups, history
from jobs.report.reader import Read, indexed
from planner.errors import InputError

KEPT = frozenset(string.ascii_letters + string.digits + "-_")
NAME_MAX = 200  # bytes; file systems allow 255 per name
PLOTLY_JS = Path(plotly.__file__).parent / "package_data" / "plotly.min.js"


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
    group: str | None = None,
    generation: int | None = None,
    only: Mapping[str, int] | None = None,
) -> list[Path]:
    """Write every generation's page (or only `group` / `generation`, or the `only` {group: generation} pages of
    one run), the group indexes and the top index.

    `read` has the shape of `Lake.read_arrow`; each table is read once. Returns the HTML files written.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    read = indexed(read)
    every = groups(read)
    names = [g["group_id"] for g in every]
    if group is not None and group not in names:
        raise InputError(f"group: the lake has no generation of group {group!r}")
    _plotly(out)
    written = []
    chosen = [group] if group is not None else [g for g in names if only is None or g in only]
    for group_id in chosen:
        if only is not None:
            generation = only[group_id]
        folder = out / folder_name(group_id)
        folder.mkdir(exist_ok=True)
        past = history(read, group_id)
        ids = [g["generation_id"] for g in past]
        if generation is not None:
            if generation not in ids:
                if group is not None:
                    raise InputError(f"generation: group {group_id!r} has no generation {generation}")
                continue
            ids = [generation]
        for n in ids:
            written.append(_write(folder / f"generation-{n}.html", html.render_generation(collect(read, group_id, n))))
        written.append(_write(folder / "index.html", html.render_index(group_id, past)))
    links = {g: quote(folder_name(g)) + "/index.html" for g in names}
    written.append(_write(out / "index.html", html.render_groups(every, links)))
    return written


def _plotly(out: Path) -> None:
    """Copy plotly.js into the output directory unless the same file is already there."""
    target = out / "plotly.min.js"
    if not target.exists() or target.stat().st_size != PLOTLY_JS.stat().st_size:
        shutil.copyfile(PLOTLY_JS, target)


def _write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path
