"""What the project's worker processes share (Great Expectations' for a what-if, ingest's, the report's): each is a
module run as `python -m`, answering pickled requests read from its stdin with pickled replies on a private copy of
its stdout, and it ends when its stdin closes."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Sequence
from typing import IO, NoReturn

from jobs.io.not_installed import NotInstalled


def start(module: str) -> subprocess.Popen[bytes]:
    """Start `python -m module` with pipes to its stdin and stdout; its stderr is this process's own, so a failure's
    traceback reaches the same terminal or task log."""
    return subprocess.Popen([sys.executable, "-m", module], stdin=subprocess.PIPE, stdout=subprocess.PIPE)


def cores() -> int:
    """The cores this process may run on: one worker each."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def serve_pipes(serve: Callable[[IO[bytes], IO[bytes]], None], *, kept_out: Sequence[str] = ()) -> NoReturn:
    """Run a worker's `serve` on its stdin and a private copy of its stdout (anything else written to stdout, by a
    library below it, goes to stderr), then end without the interpreter's tear-down: every reply is flushed, and
    freeing the modules would only be time the caller waits for. Ctrl-C is ignored: it reaches the caller's process
    too, which ends this one. `kept_out`: modules the worker never needs, imported by no one from here on
    (`jobs.io.not_installed`: e.g. ARROW_ONLY, the pandas Arrow would load)."""
    if kept_out:
        sys.meta_path.insert(0, NotInstalled(kept_out))
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    replies = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    serve(sys.stdin.buffer, replies)
    sys.stderr.flush()
    os._exit(0)


def stop(processes: Sequence[subprocess.Popen[bytes]], timeout: float, *, kill: bool = False) -> None:
    """End workers: each one's stdin closed (each killed first when `kill`), then each reaped, killed if it has not
    ended within `timeout` seconds."""
    for process in processes:
        if kill:
            process.kill()
        if process.stdin is not None:
            with contextlib.suppress(BrokenPipeError):  # a worker that died: a request left unsent in the buffer
                process.stdin.close()
    for process in processes:
        reap(process, timeout)


def reap(process: subprocess.Popen[bytes], timeout: float) -> int:
    """Wait for a worker to end, killing it if it has not within `timeout` seconds; its exit code."""
    try:
        return process.wait(timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        return process.wait()
