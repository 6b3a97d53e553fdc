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

import os
import pickle
import signal
import subprocess
import sys
import traceback
from datetime import datetime
from types import TracebackType
from typing import IO, Any

from jobs.io.snapshot_pieces import Piece, PieceRows, read_piece
from planner.errors import SourceError
from schemas.rules import Limits

STOP_TIMEOUT_S = 5.0  # an idle worker exits at once when its stdin closes
# Arrow asks whether a list it converts holds pandas objects by importing pandas on its first conversion (0.2-0.4 s
# of a worker's CPU, 50 MB): a worker makes no pandas object, so pandas is kept out, as if it were not installed.
NOT_NEEDED = ("pandas",)


class IngestWorkers:
    """Started worker processes (they import at once); a piece sent to worker i comes back from it in order."""

    def __init__(self, count: int) -> None:
        # stderr is this process's own: a failure's traceback reaches the same terminal or task log.
        self.processes = [
            subprocess.Popen(
                [sys.executable, "-m", "jobs.io.ingest_worker"], stdin=subprocess.PIPE, stdout=subprocess.PIPE
            )
            for _ in range(count)
        ]

    def __enter__(self) -> IngestWorkers:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None) -> None:
        self.close(kill=kind is not None)

    def send(self, worker: int, piece: Piece, snapshot_id: str, received_at: datetime, limits: Limits) -> None:
        """Ask worker `worker` to read `piece`."""
        process = self.processes[worker]
        assert process.stdin is not None
        try:
            pickle.dump((piece, snapshot_id, received_at, limits), process.stdin)
            process.stdin.flush()
        except BrokenPipeError:
            raise self._ended(worker) from None

    def receive(self, worker: int) -> PieceRows:
        """The rows of the oldest piece sent to worker `worker`."""
        process = self.processes[worker]
        assert process.stdout is not None
        try:
            kind, answer = pickle.load(process.stdout)
        except (EOFError, pickle.UnpicklingError):
            raise self._ended(worker) from None
        if kind == "error":
            raise SourceError(f"ingest's worker process: {answer}")
        rows: PieceRows = answer
        return rows

    def _ended(self, worker: int) -> SourceError:
        code = self.processes[worker].wait()
        return SourceError(f"ingest's worker process {worker + 1} of {len(self.processes)} ended (exit code {code})")

    def close(self, kill: bool = False) -> None:
        """End every worker: stdin closed, then reaped (killed at once when `kill`, or when one has not ended within
        STOP_TIMEOUT_S: a step that failed does not wait for pieces no one will read)."""
        for process in self.processes:
            if kill:
                process.kill()
            if process.stdin is not None:
                try:
                    process.stdin.close()
                except BrokenPipeError:  # a worker that died: a request left unsent in the buffer
                    pass
        for process in self.processes:
            try:
                process.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
            if process.stdout is not None:
                process.stdout.close()


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


class _NotInstalled:
    """An import finder that finds NOT_NEEDED as Python finds a package that is not installed. (Arrow's compiled
    import does not honour `sys.modules[name] = None`, Python's usual mark.)"""

    @staticmethod
    def find_spec(name: str, path: object = None, target: object = None) -> None:
        if name.partition(".")[0] in NOT_NEEDED:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)


def main() -> None:
    """Serve on stdin and the stdout pipe; anything else written to stdout goes to stderr."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches ingest's process too, which ends this one
    sys.meta_path.insert(0, _NotInstalled)
    replies = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    serve(sys.stdin.buffer, replies)
    sys.stderr.flush()
    os._exit(0)  # every reply is flushed; the interpreter's tear-down would only free what the OS frees


if __name__ == "__main__":
    main()
