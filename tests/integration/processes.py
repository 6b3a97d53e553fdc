"""Stopping what a test started: a process, its process group and every process it forked, by PID."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time

import psutil


def stop_tree(proc: subprocess.Popen, grace: float = 20.0) -> None:
    """SIGTERM the process, its group (started with `start_new_session`) and each descendant, including those that
    left the group (Spark's JVM, Chromium's helpers); SIGKILL what is left after `grace` seconds.

    Returns once every one is gone or a zombie: a child that outlives its parent may still be writing files.
    """
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            tree = [psutil.Process(proc.pid), *psutil.Process(proc.pid).children(recursive=True)]
        except psutil.NoSuchProcess:
            tree = []
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, sig)
        for member in tree:
            with contextlib.suppress(psutil.NoSuchProcess):
                member.send_signal(sig)
        if _all_gone(tree, proc, grace):
            return


def _all_gone(tree: list[psutil.Process], root: subprocess.Popen, within: float) -> bool:
    """Whether every process of `tree` exits (or is left a zombie) and `root` is reaped within `within` seconds.
    `root` counts even when `tree` could not be listed (it was exiting as its children were read)."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if root.poll() is not None and all(_gone(member) for member in tree):
            return True
        time.sleep(0.05)
    return False


def _gone(member: psutil.Process) -> bool:
    try:
        return member.status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True
