"""Worker processes that render a report's batches of pages on the machine's other cores.

Each worker is `python -m jobs.report.render_worker`, spawned (not forked: a fork would share the big parent's
pages, which a process tree's resident-size sum counts twice, and pyarrow's thread pools do not survive a fork). It
imports only what rendering needs and answers requests read from its stdin with replies on its stdout, both
pickled (safe: both ends are this program, on a pair of pipes no one else holds). A batch's request names its
pairs, the regrouped tables' directory (`jobs.report.regroup`: the batch's own files of the per-partition tables)
and the output directory; its lookups of any other table (generations, plan metrics, key skew: small ones, or
already filtered to the batch) come back to this process, which answers them from its `read`, so the worker reads
exactly what an in-process batch reads. A worker's failure is one line: its error, or that it ended.
"""

from __future__ import annotations

import pickle
import selectors
import subprocess
from collections import deque
from collections.abc import Iterator
from pathlib import Path
from types import TracebackType
from typing import IO, Any

from deltalake.exceptions import TableNotFoundError

from jobs.io.worker_process import cores, reap, start, stop
from jobs.report.reader import Read
from jobs.report.regroup import Regrouped
from planner.errors import SourceError

WORKERS_MAX = 4
"""Workers at most, whatever the cores: each holds a batch (about 100 bytes a plan row) and its imports."""
STOP_TIMEOUT_S = 5.0  # an idle worker exits at once when its stdin closes; one that has not is killed


WORKERS_FROM = 3
"""Batches (of BATCH_PLAN_ROWS) from which workers render them by default: with two, the workers' start (0.7 s of
CPU each) took what they saved (two cores, 400 groups: 2.6 s either way; 1,000 groups, five batches: 6.1 -> 4.7 s)."""


def worker_count(asked: int | None, batches: int) -> int:
    """Workers to start for `batches` batches: `asked`, or one per core this process may use (up to WORKERS_MAX)
    from WORKERS_FROM batches on, else none (1: the batches are rendered in this process)."""
    if asked is None and batches < WORKERS_FROM:
        return 1
    return min(asked if asked is not None else min(cores(), WORKERS_MAX), batches)


class RenderWorkers:
    """`count` started worker processes; a context manager that stops them on leaving (killed after a failure)."""

    def __init__(self, count: int) -> None:
        self.processes = [start("jobs.report.render_worker") for _ in range(count)]

    def __enter__(self) -> RenderWorkers:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None) -> None:
        self.close(kill=kind is not None)

    def render(
        self,
        read: Read,
        regrouped: Regrouped,
        chunks: list[list[tuple[str, int]]],
        out: Path,
        meanwhile: Iterator[None],
    ) -> dict[tuple[str, int], Path]:
        """Render every batch (`write.render_batch` of batch number n reading `regrouped.read(n, read)`), each by the
        next worker free, answering their lookups from `read`, and take a step of `meanwhile` whenever no worker
        waits for an answer (each step short: a worker's lookup waits for it); returns (group, generation) -> page."""
        waiting = deque(enumerate(chunks))
        done: dict[tuple[str, int], Path] = {}
        idle = True  # `meanwhile` has steps left
        with selectors.DefaultSelector() as selector:
            for process in self.processes:
                if waiting:
                    _send(process, ("batch", *waiting.popleft(), regrouped.directory, regrouped.schemas, out))
                    selector.register(_pipe(process.stdout), selectors.EVENT_READ, process)
            while selector.get_map():
                ready = selector.select(timeout=0 if idle else None)
                if not ready:
                    idle = next(meanwhile, False) is None  # False once it has no step left
                    continue
                for key, _ in ready:
                    process = key.data
                    kind, *answer = _receive(process)
                    if kind == "read":
                        _send(process, _lookup(read, *answer))
                        continue
                    if kind != "pages":
                        raise answer[0]
                    done |= {(group, generation): Path(page) for group, generation, page in answer[0]}
                    if waiting:
                        _send(process, ("batch", *waiting.popleft(), regrouped.directory, regrouped.schemas, out))
                    else:
                        selector.unregister(key.fileobj)
        return done

    def close(self, *, kill: bool = False) -> None:
        """End every worker: its stdin closes and it exits (killed at once when `kill`, or after STOP_TIMEOUT_S)."""
        stop(self.processes, STOP_TIMEOUT_S, kill=kill)
        for process in self.processes:
            _pipe(process.stdout).close()


def _lookup(read: Read, name: str, filters: Any) -> tuple[str, Any]:
    """A worker's lookup answered from `read`: ("table", rows), or ("missing", why) for a table the lake lacks."""
    try:
        return ("table", read(name, filters))
    except TableNotFoundError as e:
        return ("missing", str(e))


def _send(process: subprocess.Popen[bytes], message: tuple[Any, ...]) -> None:
    try:
        pickle.dump(message, _pipe(process.stdin), protocol=pickle.HIGHEST_PROTOCOL)
        _pipe(process.stdin).flush()
    except BrokenPipeError:
        raise _ended(process) from None


def _receive(process: subprocess.Popen[bytes]) -> tuple[Any, ...]:
    try:
        message: tuple[Any, ...] = pickle.load(_pipe(process.stdout))
    except (EOFError, pickle.UnpicklingError):
        raise _ended(process) from None
    return message


def _ended(process: subprocess.Popen[bytes]) -> SourceError:
    """The one-line error of a worker that ended mid-report (killed, out of memory, crashed)."""
    return SourceError(f"report worker process {process.pid} ended (exit code {reap(process, STOP_TIMEOUT_S)})")


def _pipe(stream: IO[bytes] | None) -> IO[bytes]:
    assert stream is not None  # every worker is started with both pipes
    return stream
