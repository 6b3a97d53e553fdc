"""Modules kept out of a process, or of one import, as if they were not installed: a library that imports optional
integrations when it finds them (Great Expectations' SQL, S3 and Spark ones; Arrow's pandas) then runs without
them, and the process never pays their loading."""

from __future__ import annotations

import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

# Arrow asks whether a list it converts holds pandas objects by importing pandas on its first conversion (0.2-0.4 s
# of a process's CPU, 50 MB): worker processes that make no pandas object (ingest's, the report's) keep it out.
ARROW_ONLY = ("pandas",)


class NotInstalled:
    """An import finder that finds `names` (and their submodules) as Python finds a module that is not installed.
    (Arrow's compiled import does not honour `sys.modules[name] = None`, Python's usual mark.)"""

    def __init__(self, names: Sequence[str]) -> None:
        self.names = tuple(names)

    def find_spec(self, name: str, path: object = None, target: object = None) -> None:
        if any(name == kept or name.startswith(kept + ".") for kept in self.names):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)


@contextmanager
def kept_out(names: Sequence[str]) -> Iterator[None]:
    """Keep `names` out of the imports made inside the block (a module already loaded stays usable)."""
    finder = NotInstalled(names)
    sys.meta_path.insert(0, finder)
    try:
        yield
    finally:
        sys.meta_path.remove(finder)
