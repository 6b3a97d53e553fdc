"""Opening the files a user points the pipeline at: regular files only, and never a way out of a listed directory.

A snapshot directory or glob is a listing of someone else's files. What would hang, abort or leak is refused with
the file and the reason, before a byte is read: a FIFO or device (reading one waits forever for a writer), a
directory, a symbolic link loop, a symbolic link from a listed directory to a file outside it (`/etc/shadow` would
otherwise be read and kept in quarantine). A link inside the directory is followed: Kubernetes mounts a ConfigMap's
files as links into a hidden folder beside them. A file named by its own path is the user's choice and is followed
wherever it points.
"""

from __future__ import annotations

import errno
import glob
import os
import stat
from pathlib import Path
from typing import BinaryIO

from planner.errors import InputError

SUFFIXES = (".json", ".jsonl", ".ndjson")
KINDS = {stat.S_IFIFO: "a FIFO", stat.S_IFDIR: "a directory", stat.S_IFCHR: "a device", stat.S_IFBLK: "a device"}


def listed(pattern: str) -> list[tuple[Path, Path | None]]:
    """(file, the directory it was listed from) for a directory's *.json / *.jsonl / *.ndjson or a glob's matches,
    sorted; (file, None) for a path naming one file."""
    path = Path(pattern)
    if path.is_dir():
        return sorted((p, path) for p in path.iterdir() if p.suffix in SUFFIXES)
    if not glob.has_magic(pattern):
        return [(path, None)] if os.path.lexists(path) else []
    return sorted((Path(p), Path(p).parent) for p in glob.glob(pattern))


def open_input(path: Path, listed_from: Path | None = None) -> BinaryIO:
    """The file opened for reading, or an InputError naming it and why it is not read."""
    if listed_from is not None and path.is_symlink():
        target = Path(os.path.realpath(path))
        if not target.is_relative_to(os.path.realpath(listed_from)):
            raise InputError(f"{path}: a symbolic link to {target}, outside {listed_from}: not read")
    try:
        # Non-blocking, so that opening a FIFO cannot wait for a writer; the kind is checked on what was opened.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as e:
        reason = "a symbolic link loop" if e.errno == errno.ELOOP else e.strerror or str(e)
        raise InputError(f"{path}: {reason}: not read") from None
    kind = stat.S_IFMT(os.fstat(fd).st_mode)
    if kind != stat.S_IFREG:
        os.close(fd)
        raise InputError(f"{path}: {KINDS.get(kind, 'not a regular file')}: not read")
    return os.fdopen(fd, "rb")


def read_input(path: Path, listed_from: Path | None = None) -> bytes:
    """The whole file, or an InputError naming it and why it could not be read."""
    with open_input(path, listed_from) as file:
        try:
            return file.read()
        except OSError as e:
            raise InputError(f"{path}: {e.strerror or e}") from None
