"""Ingest's worker processes: each reads pieces of snapshot files (`jobs.io.snapshot_pieces.read_piece`: decode,
check, build rows) on a core of its own, while ingest's process takes their pieces in order.

A worker is this module run as `python -m jobs.io.ingest_worker`, a new interpreter that imports the readers, the
rules and the row builders and nothing of the lake, of Spark or of the parent's state (a forked copy of a parent
that holds a started JVM's threads and gigabytes of rows is not what a reader needs). It answers requests read
from its stdin, each a pickled (piece, snapshot id, received at, limits), with a pickled reply on its stdout:
("rows", the `PieceRows`) or ("error", the failure in one line; its traceback went to stderr); it ends when its
stdin closes. Pickle is safe here: both ends are this program, on pipes no one else holds.
"""

from __future__ import annotations

import contextlib
import fcntl
import pickle
import queue
import subprocess
import threading
import traceback
from collections import deque
from datetime import datetime
from types import TracebackType
from typing import IO, Any

from jobs.io.not_installed import ARROW_ONLY
from jobs.io.snapshot_pieces import Piece, PieceRows, read_piece
from jobs.io.worker_process import reap, serve_pipes, start, stop
from planner.errors import SourceError
from schemas.rules import Limits

STOP_TIMEOUT_S = 5.0  # an idle worker exits at once when its stdin closes
PIECES_AHEAD = 2  # pieces sent to a worker and not yet read: it never waits for its next
# A reply pipe's buffer: a piece's reply (a few MB) crosses a 64 KB pipe in dozens of turns of the two processes, each
# waiting for the scheduler on a busy machine; 1 MB (Linux's default ceiling, /proc/sys/fs/pipe-max-size) takes few.
PIPE_BYTES = 1 << 20


class IngestWorkers:
    """Started worker processes (they import at once). A piece goes to the worker with the fewest pieces waiting
    (at most PIECES_AHEAD); a thread per worker takes each reply off its pipe as soon as it is written, so a worker
    goes on with its next piece while ingest waits for an earlier piece of another's."""

    def __init__(self, count: int) -> None:
        self.processes: list[subprocess.Popen[bytes]] = []
        self.readers: list[threading.Thread] = []
        try:
            for _ in range(count):
                self.processes.append(start("jobs.io.ingest_worker"))
        except OSError as e:  # no process left behind: those started are ended
            self.close(kill=True)
            raise SourceError(f"ingest's worker processes could not start: {e.strerror or e}") from None
        self.waiting: list[deque[int]] = [deque() for _ in self.processes]  # each worker's pieces, by number
        self.replies: queue.SimpleQueue[tuple[int, tuple[str, Any] | None]] = queue.SimpleQueue()
        self.done: dict[int, PieceRows] = {}  # pieces read, by number, until taken
        self.sent = 0
        self.readers = [
            threading.Thread(target=self._read, args=(worker,), name=f"ingest-worker-{worker + 1}", daemon=True)
            for worker in range(count)
        ]
        for reader in self.readers:
            reader.start()

    def __enter__(self) -> IngestWorkers:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None) -> None:
        self.close(kill=kind is not None)

    def room(self) -> bool:
        """Whether a worker has fewer than PIECES_AHEAD pieces waiting."""
        return any(len(waiting) < PIECES_AHEAD for waiting in self.waiting)

    def send(self, piece: Piece, snapshot_id: str, received_at: datetime, limits: Limits) -> int:
        """Ask the worker with the fewest pieces waiting to read `piece`; the piece's number (0, 1, ...)."""
        worker = min(range(len(self.processes)), key=lambda w: len(self.waiting[w]))
        stdin = self.processes[worker].stdin
        assert stdin is not None
        try:
            pickle.dump((piece, snapshot_id, received_at, limits), stdin)
            stdin.flush()
        except BrokenPipeError:
            raise self._ended(worker) from None
        self.waiting[worker].append(self.sent)
        self.sent += 1
        return self.sent - 1

    def rows(self, number: int) -> PieceRows | None:
        """Piece `number`'s rows once read (handed over once), else None."""
        return self.done.pop(number, None)

    def wait(self) -> None:
        """Wait for the next reply of any worker; a worker that failed or ended raises (one line)."""
        worker, reply = self.replies.get()
        if reply is None:
            raise self._ended(worker)
        kind, answer = reply
        if kind == "error":
            raise SourceError(f"ingest's worker process: {answer}")
        self.done[self.waiting[worker].popleft()] = answer

    def _read(self, worker: int) -> None:
        """Take the worker's replies off its pipe until it ends (then None)."""
        stdout = self.processes[worker].stdout
        assert stdout is not None
        _widen(stdout)
        while True:
            try:
                reply = pickle.load(stdout)
            except (EOFError, pickle.UnpicklingError, OSError):  # the pipe ended, or mid-reply: the worker did
                self.replies.put((worker, None))
                return
            except Exception as e:  # a reply this process cannot take: the step fails with it, never waits
                self.replies.put((worker, ("error", " ".join(f"its reply: {type(e).__name__}: {e}".split()))))
                return
            self.replies.put((worker, reply))

    def _ended(self, worker: int) -> SourceError:
        """The error of a worker that ended; one whose pipe ended but is still running is killed first."""
        code = reap(self.processes[worker], STOP_TIMEOUT_S)
        return SourceError(f"ingest's worker process {worker + 1} of {len(self.processes)} ended (exit code {code})")

    def close(self, kill: bool = False) -> None:
        """End every worker: stdin closed, then reaped (killed at once when `kill`, or when one has not ended within
        STOP_TIMEOUT_S: a step that failed does not wait for pieces no one will read)."""
        stop(self.processes, STOP_TIMEOUT_S, kill=kill)
        for reader in self.readers:
            reader.join()  # at its pipe's end: the worker is gone
        for process in self.processes:
            if process.stdout is not None:
                process.stdout.close()


def _widen(pipe: IO[bytes]) -> None:
    """Make the pipe's buffer PIPE_BYTES where the system allows (Linux; the default size elsewhere or over a
    lower ceiling)."""
    if (set_size := getattr(fcntl, "F_SETPIPE_SZ", None)) is not None:
        with contextlib.suppress(OSError):
            fcntl.fcntl(pipe.fileno(), set_size, PIPE_BYTES)


def serve(requests: IO[bytes], replies: IO[bytes]) -> None:
    """Read each requested piece until `requests` ends."""
    import pyarrow as pa

    while True:
        try:
            piece, snapshot_id, received_at, limits = pickle.load(requests)
        except EOFError:
            return
        try:
            reply: tuple[str, Any] = ("rows", read_piece(piece, snapshot_id, received_at, limits))
        except Exception as e:  # reported to ingest, which fails with it; the traceback is for the log
            traceback.print_exc()
            reply = ("error", " ".join(f"{type(e).__name__}: {e}".split()))  # one line, as the CLI prints errors
        pickle.dump(reply, replies, protocol=pickle.HIGHEST_PROTOCOL)
        replies.flush()
        del reply
        pa.default_memory_pool().release_unused()  # the piece's rows are sent: its pages go back, not kept idle


def main() -> None:
    """Serve on the pipes (`jobs.io.worker_process.serve_pipes`), without pandas (`ARROW_ONLY`)."""
    serve_pipes(serve, kept_out=ARROW_ONLY)


if __name__ == "__main__":
    main()
