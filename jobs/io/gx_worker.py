"""Great Expectations in a process of its own, for a what-if: GX's import (seconds of Python module loading) runs
on the machine's other core while the what-if's process starts its Spark session and plans, instead of taking
turns with them on that process's GIL; the gate then sends the worker each frame to validate.

The worker is this module run as `python -m jobs.io.gx_worker`: it imports GX, then answers requests read from
its stdin, each a pickled (frame, suite, result format), with a pickled reply on its stdout: ("rows", the results
of `jobs.io.gx.validate`) or ("error", the failure in one line; its traceback went to stderr). It ends when its
stdin closes. Pickle is safe here: both ends are this program, on a pair of pipes no one else holds.
"""

from __future__ import annotations

import gc
import pickle
import sys
import traceback
from collections.abc import Mapping
from typing import IO, TYPE_CHECKING, Any

from jobs.io.not_installed import NotInstalled
from jobs.io.worker_process import serve_pipes, start, stop
from planner.errors import SourceError

if TYPE_CHECKING:
    import pandas as pd

STOP_TIMEOUT_S = 1.0  # an idle worker exits at once when its stdin closes; one still importing GX is killed
# The worker runs GX's pandas engine alone: it keeps all of Spark out of GX's import, beside what any process keeps
# out (`jobs.io.gx.NOT_NEEDED`).
NOT_FOR_PANDAS = ("pyspark",)


class GxWorker:
    """A started worker process (it imports GX at once); `validate` waits for that import on first use."""

    def __init__(self) -> None:
        self.process = start("jobs.io.gx_worker")  # GX's warnings reach this process's stderr too

    def validate(
        self, frame: pd.DataFrame, suite: Mapping[str, Any], result_format: Mapping[str, Any]
    ) -> list[dict[str, Any]]:
        """`jobs.io.gx.validate` of `frame`, run by the worker."""
        assert self.process.stdin is not None and self.process.stdout is not None
        try:
            pickle.dump((frame, dict(suite), dict(result_format)), self.process.stdin)
            self.process.stdin.flush()
            kind, answer = pickle.load(self.process.stdout)
        except (BrokenPipeError, EOFError) as e:
            raise SourceError(f"Great Expectations' worker process ended (exit code {self.process.wait()})") from e
        if kind == "error":
            raise SourceError(f"Great Expectations' worker process: {answer}")
        return list(answer)

    def close(self) -> None:
        """End the worker (its stdin closes, it exits); killed if it has not within STOP_TIMEOUT_S: it holds nothing
        to finish, and a what-if that failed before its gate ends without waiting for GX's import."""
        stop([self.process], STOP_TIMEOUT_S)
        if self.process.stdout is not None:
            self.process.stdout.close()


def serve(requests: IO[bytes], replies: IO[bytes]) -> None:
    """Import GX, then validate each request until `requests` ends."""
    from jobs.io.gx import validate

    import_for_pandas_engine()
    while True:
        try:
            frame, suite, result_format = pickle.load(requests)
        except EOFError:
            return
        try:
            reply: tuple[str, Any] = ("rows", validate(frame, suite, result_format))
        except Exception as e:  # reported to the gate, which fails with it; the traceback is for the log
            traceback.print_exc()
            reply = ("error", " ".join(f"{type(e).__name__}: {e}".split()))  # one line, as the CLI prints errors
        pickle.dump(reply, replies)
        replies.flush()


def import_for_pandas_engine() -> None:
    """Import GX as its pandas engine needs it (`jobs.io.gx.import_great_expectations`), without NOT_FOR_PANDAS."""
    from jobs.io.gx import import_great_expectations

    sys.meta_path.insert(0, NotInstalled(NOT_FOR_PANDAS))
    # GX's import makes 300,000 objects that live as long as this process: with the collector off meanwhile (its
    # passes over them took 0.2 s of CPU) and the objects frozen after, no collection walks them again.
    gc.disable()
    import_great_expectations()
    gc.freeze()
    gc.enable()


def main() -> None:
    """Serve on the pipes (`jobs.io.worker_process.serve_pipes`)."""
    serve_pipes(serve)


if __name__ == "__main__":
    main()
