"""Run `rebalance` with a fault injected at an exact point, as a real machine or broker would fail there.

    python fault_runner.py commit TABLE ARGS...        SIGKILL this process right after its first commit to TABLE
                                                       (a crash at that step), made by the lake's MERGE, update or
                                                       append, or by a step's own Delta transaction
    python fault_runner.py broker-at-poll PID ARGS...  SIGKILL process PID (the broker) when a consumer first
                                                       polls for records (mid-sampling)

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
    elif fault == "broker-at-poll":
        from kafka import KafkaConsumer

        KafkaConsumer.poll = broker_killed_at_poll(int(where), KafkaConsumer.poll)
    else:
        sys.exit(f"unknown fault {fault!r}")
    sys.exit(cli.main(argv))
