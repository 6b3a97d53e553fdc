"""Run `rebalance` with a fault injected at an exact point, as a real machine or broker would fail there.

    python fault_runner.py commit TABLE ARGS...        SIGKILL this process right after its first commit to TABLE
                                                       (a crash at that step), made by the lake's MERGE, update or
                                                       append, or by a step's own Delta transaction
    python fault_runner.py broker-at-poll PID ARGS...  SIGKILL process PID (the broker) when a consumer first
                                                       polls for records (mid-sampling)
    python fault_runner.py fill TABLE=FILE ARGS...     right after the first commit to TABLE, fill the disk with FILE
                                                       (the next write anywhere on it meets ENOSPC, as on a full disk)

ARGS are `rebalance`'s arguments.
"""

from __future__ import annotations

import functools
import os
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from deltalake import DeltaTable

from jobs import cli
from jobs.io.lake import Lake


def killed_after_commit(table: str, write: Callable[..., None]) -> Callable[..., None]:
    """`write`, then SIGKILL this process once it committed rows to `table`."""

    @functools.wraps(write)
    def wrapper(lake: Lake, name: str, data: Any, *args: Any) -> None:
        write(lake, name, data, *args)
        if name == table and data.num_rows:
            os.kill(os.getpid(), signal.SIGKILL)

    return wrapper


def killed_after_transaction(table: str, commit: Callable[..., None]) -> Callable[..., None]:
    """DeltaTable.create_write_transaction, then SIGKILL this process once it committed to `table`."""

    @functools.wraps(commit)
    def wrapper(delta: DeltaTable, *args: Any, **kwargs: Any) -> None:
        commit(delta, *args, **kwargs)
        if Path(delta.table_uri.removeprefix("file://")).name == table:
            os.kill(os.getpid(), signal.SIGKILL)

    return wrapper


def fill(filler: Path) -> None:
    """Write `filler` until its file system has no space left."""
    with open(filler, "wb", buffering=0) as f:
        try:
            while True:
                f.write(b"\0" * 65536)
        except OSError:
            pass
        try:
            while True:
                f.write(b"\0" * 512)
        except OSError:
            pass


def filled_after_commit(table: str, filler: Path, write: Callable[..., None]) -> Callable[..., None]:
    """`write`, then fill the disk once it committed rows to `table`."""

    @functools.wraps(write)
    def wrapper(lake: Lake, name: str, data: Any, *args: Any) -> None:
        write(lake, name, data, *args)
        if name == table and data.num_rows and not filler.exists():
            fill(filler)

    return wrapper


def filled_after_transaction(table: str, filler: Path, commit: Callable[..., None]) -> Callable[..., None]:
    """DeltaTable.create_write_transaction, then fill the disk once it committed to `table`."""

    @functools.wraps(commit)
    def wrapper(delta: DeltaTable, *args: Any, **kwargs: Any) -> None:
        commit(delta, *args, **kwargs)
        if Path(delta.table_uri.removeprefix("file://")).name == table and not filler.exists():
            fill(filler)

    return wrapper


def broker_killed_at_poll(pid: int, poll: Callable[..., Any]) -> Callable[..., Any]:
    """`poll`, but the broker process `pid` is killed before the first one."""

    alive = [pid]

    @functools.wraps(poll)
    def wrapper(consumer: Any, *args: Any, **kwargs: Any) -> Any:
        while alive:
            os.kill(alive.pop(), signal.SIGKILL)
        return poll(consumer, *args, **kwargs)

    return wrapper


if __name__ == "__main__":
    fault, where, *argv = sys.argv[1:]
    if fault == "commit":
        for method in ("append", "merge", "update"):
            setattr(Lake, method, killed_after_commit(where, getattr(Lake, method)))
        DeltaTable.create_write_transaction = killed_after_transaction(where, DeltaTable.create_write_transaction)
    elif fault == "fill":
        table, filler = where.split("=", 1)
        for method in ("append", "merge", "update"):
            setattr(Lake, method, filled_after_commit(table, Path(filler), getattr(Lake, method)))
        DeltaTable.create_write_transaction = filled_after_transaction(
            table, Path(filler), DeltaTable.create_write_transaction
        )
    elif fault == "broker-at-poll":
        from kafka import KafkaConsumer

        KafkaConsumer.poll = broker_killed_at_poll(int(where), KafkaConsumer.poll)
    else:
        sys.exit(f"unknown fault {fault!r}")
    sys.exit(cli.main(argv))
