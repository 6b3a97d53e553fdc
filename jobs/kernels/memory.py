"""Memory back to the OS between pieces of work, for long-lived processes: Spark's reused Python workers and the
driver of `rebalance run`."""

from __future__ import annotations

import ctypes

import pyarrow as pa


def release_memory() -> None:
    """Hand freed memory back to the OS: Arrow's pool and glibc's heap keep what a group's peak needed (in workers
    glibc's trim threshold is raised for speed, `jobs.io.spark.MALLOC_ENV`), and the next step would start from it."""
    pa.default_memory_pool().release_unused()
    libc = ctypes.CDLL(None)
    if hasattr(libc, "malloc_trim"):
        libc.malloc_trim(0)
