"""Threads that import or start Spark never make another thread's loggers into pyspark's (which print JSON)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_importing_great_expectations_on_a_thread_swaps_no_logger_class_there() -> None:
    # Great Expectations imports pyspark's Connect logging, whose logger is made by PySparkLogger.getLogger: that
    # swaps logging's global logger class for a moment, so a logger the main thread made then would print JSON.
    code = textwrap.dedent(
        """
        import logging, threading
        from jobs.steps.gate import import_in_background

        swaps = []
        real = logging.setLoggerClass
        logging.setLoggerClass = lambda cls: (swaps.append(threading.current_thread().name), real(cls))
        import_in_background().join()
        print(sorted(set(swaps)))
        """
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() in ("[]", "['MainThread']")  # made on the calling thread, or before
