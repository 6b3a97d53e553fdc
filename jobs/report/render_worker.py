"""A report's worker process (`jobs.report.workers`): renders the batches of pages it is sent.

Run as `python -m jobs.report.render_worker`. Each request on its stdin is a pickled ("batch", number, pairs,
regrouped directory, schemas, output directory); it writes the batch's pages (`write.render_batch`), asking the
parent for every lookup of a table not regrouped (("read", name, filters), answered ("table", rows) or ("missing",
why)), and replies ("pages", [(group, generation, path)]) or ("error", exception): an OSError or one of the
project's errors as it was raised (the parent raises it as an in-process report would), any other as a one-line
SourceError (its traceback goes to stderr). It ends when its stdin closes.
"""

from __future__ import annotations

import pickle
import traceback
from pathlib import Path
from typing import IO, Any

from deltalake.exceptions import TableNotFoundError

from jobs.io.not_installed import ARROW_ONLY
from jobs.io.worker_process import serve_pipes
from jobs.report.reader import Filters
from jobs.report.regroup import Regrouped
from jobs.report.write import render_batch
from planner.errors import RebalanceError, SourceError


def serve(requests: IO[bytes], replies: IO[bytes]) -> None:
    """Render each batch requested until `requests` ends."""

    def send(message: tuple[Any, ...]) -> None:
        pickle.dump(message, replies, protocol=pickle.HIGHEST_PROTOCOL)
        replies.flush()

    def parent_read(name: str, filters: Filters = None) -> Any:
        send(("read", name, filters))
        kind, answer = pickle.load(requests)
        if kind == "missing":
            raise TableNotFoundError(answer)
        return answer

    while True:
        try:
            _, number, pairs, directory, schemas, out = pickle.load(requests)
        except EOFError:
            return
        try:
            pages = render_batch(Regrouped(directory, schemas).read(number, parent_read), pairs, Path(out))
            reply: tuple[Any, ...] = (
                "pages",
                [(group, generation, str(page)) for (group, generation), page in pages.items()],
            )
        except (OSError, RebalanceError) as e:
            reply = ("error", e)
        except Exception as e:  # reported to the report step, which fails with it; the traceback is for the log
            traceback.print_exc()
            reply = ("error", SourceError("report worker: " + " ".join(f"{type(e).__name__}: {e}".split())))
        send(reply)


def main() -> None:
    """Serve on the pipes (`jobs.io.worker_process.serve_pipes`), without pandas (`ARROW_ONLY`)."""
    serve_pipes(serve, kept_out=ARROW_ONLY)


if __name__ == "__main__":
    main()
