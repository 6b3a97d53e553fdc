"""A process of the project starts NumPy's OpenBLAS with one thread, unless the environment gives a number."""

from __future__ import annotations

import os
import subprocess
import sys

SHOW = "import jobs, numpy, os; print(os.environ['OPENBLAS_NUM_THREADS'], open('/proc/self/status').read())"


def threads(environ: dict[str, str]) -> tuple[str, int]:
    """The setting and the thread count of a process that imported `jobs`, then NumPy."""
    out = subprocess.run([sys.executable, "-c", SHOW], env=environ, capture_output=True, text=True, check=True).stdout
    setting, status = out.split(" ", 1)
    (count,) = [line.split()[1] for line in status.splitlines() if line.startswith("Threads:")]
    return setting, int(count)


def test_one_blas_thread_unless_the_environment_says() -> None:
    environ = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    assert threads(environ) == ("1", 1)
    assert threads(environ | {"OPENBLAS_NUM_THREADS": "2"})[0] == "2"
