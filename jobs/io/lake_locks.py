"""The lake's locks: an fcntl.flock for a local lake, a lease object for a lake on S3; one interface for both.

A `Lake` takes its lake lock around every commit and read-modify-write (generation ids, statuses), and a run lock
for a run's whole life. Both kinds are shared within a process (a count of holders) and make threads take turns.

On S3 a lock is a small object created only if absent (`If-None-Match: *`, the conditional write S3 and compatible
stores serve since 2024): of two processes on any hosts exactly one creates it. The holder renews it every quarter
of its term (`If-Match` on its own version) and deletes it when done; a holder that died stops renewing, and once
the term has passed the next process deletes the stale lease (again only if unchanged) and takes it. Terms are
compared with the wall clock of the hosts, as every lease is: keep them in sync (NTP) to within the term.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import threading
import time
from pathlib import Path
from typing import Any, Protocol

log = logging.getLogger(__name__)

LEASE_TERM = 60.0  # seconds a lease outlives its holder's last renewal


class Lock(Protocol):
    """What the lake needs of a lock: shared acquire/release, a note saying who holds it, turn-taking threads."""

    threads: threading.RLock

    def acquire(self, blocking: bool = True) -> bool: ...
    def release(self) -> None: ...
    def note(self, text: str) -> None: ...
    def holder(self) -> str: ...


class FileLock:
    """An fcntl.flock on one file or directory (none for an empty path), taken once per process however many
    holders share it.

    `threads` lets the lake lock make threads of one process take turns; the count lets nested and shared holders
    (a step inside a locked block, two contexts of one run) release it only when the last one is done.
    """

    def __init__(self, path: str) -> None:
        self.path = path
        self.threads = threading.RLock()
        self._guard = threading.Lock()
        self._fd: int | None = None
        self._holders = 0

    def acquire(self, blocking: bool = True) -> bool:
        with self._guard:
            if self._holders == 0 and self.path:
                fd = os.open(self.path, os.O_RDONLY if os.path.isdir(self.path) else os.O_RDWR | os.O_CREAT, 0o644)
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB))
                except BlockingIOError:
                    os.close(fd)
                    return False
                except BaseException:
                    os.close(fd)
                    raise
                self._fd = fd
            self._holders += 1
            return True

    def release(self) -> None:
        with self._guard:
            self._holders -= 1
            if self._holders == 0 and self._fd is not None:
                os.close(self._fd)  # closing the only descriptor drops the flock
                self._fd = None

    def note(self, text: str) -> None:
        """Record who holds the lock in the lock file, for the message of whoever waits for it (best effort: a
        full disk fails the run's first commit, with that cause, not this note)."""
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.ftruncate(self._fd, 0)
                os.pwrite(self._fd, text.encode(), 0)

    def holder(self) -> str:
        try:
            return Path(self.path).read_text() or "holder unknown"
        except OSError:
            return "holder unknown"


class ObjectLease:
    """A lease on one object key of a bucket (see the module's docstring), shared like `FileLock`."""

    def __init__(self, client: Any, bucket: str, key: str, term: float = LEASE_TERM) -> None:
        self.client, self.bucket, self.key, self.term = client, bucket, key, term
        self.threads = threading.RLock()
        self._guard = threading.Lock()
        self._holders = 0
        self._etag = ""
        self._text = f"pid {os.getpid()}"
        self._stop = threading.Event()
        self._renewer: threading.Thread | None = None

    def acquire(self, blocking: bool = True) -> bool:
        with self._guard:
            if self._holders == 0:
                if not self._take(blocking):
                    return False
                self._stop.clear()
                self._renewer = threading.Thread(target=self._renew, name=f"lease {self.key}", daemon=True)
                self._renewer.start()
            self._holders += 1
            return True

    def release(self) -> None:
        with self._guard:
            self._holders -= 1
            if self._holders == 0:
                self._stop.set()
                if self._renewer is not None:
                    self._renewer.join()
                with contextlib.suppress(Exception):  # already broken as stale: nothing of ours to delete
                    self.client.delete_object(Bucket=self.bucket, Key=self.key, IfMatch=self._etag)

    def note(self, text: str) -> None:
        """Say who holds the lease; written with the next renewal."""
        self._text = text

    def holder(self) -> str:
        held = self._read()
        return str(held[0].get("holder") or "holder unknown") if held else "holder unknown"

    def _body(self) -> bytes:
        return json.dumps({"holder": self._text, "expires": time.time() + self.term}).encode()

    def _take(self, blocking: bool) -> bool:
        """Create the lease object; wait while another holder renews it; break it once its term has passed."""
        from botocore.exceptions import ClientError

        delay = 0.05
        while True:
            try:
                answer = self.client.put_object(Bucket=self.bucket, Key=self.key, Body=self._body(), IfNoneMatch="*")
                self._etag = answer["ETag"]
                return True
            except ClientError as e:
                if _status(e) not in (409, 412):  # 409: a concurrent conditional write to the same key
                    raise
            held = self._read()
            if held and held[0].get("expires", 0) < time.time():
                log.warning(
                    "breaking the stale lease %s of %s (not renewed in its term)", self.key, held[0].get("holder")
                )
                with contextlib.suppress(ClientError):
                    self.client.delete_object(Bucket=self.bucket, Key=self.key, IfMatch=held[1])
                continue
            if not blocking:
                return False
            if held:
                time.sleep(delay)
                delay = min(delay * 2, 1.0)

    def _read(self) -> tuple[dict[str, Any], str] | None:
        """The lease's content and version, or None when there is none."""
        from botocore.exceptions import ClientError

        try:
            answer = self.client.get_object(Bucket=self.bucket, Key=self.key)
            return json.loads(answer["Body"].read() or b"{}"), answer["ETag"]
        except ClientError as e:
            if _status(e) == 404:
                return None
            raise
        except ValueError:
            return {}, ""

    def _renew(self) -> None:
        """Extend the term every quarter of it, only if the lease is still ours (same version)."""
        while not self._stop.wait(self.term / 4):
            try:
                answer = self.client.put_object(Bucket=self.bucket, Key=self.key, Body=self._body(), IfMatch=self._etag)
                self._etag = answer["ETag"]
            except Exception as e:  # noqa: BLE001 (a renewal failure is logged; the next one tries again)
                log.error("renewing the lease %s failed: %s", self.key, e)


def _status(error: Any) -> int:
    return int(error.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0))


_LOCKS: dict[str, Lock] = {}
_LOCKS_GUARD = threading.Lock()


def file_lock(path: str) -> FileLock:
    """The process's one `FileLock` for `path` (two descriptors of one process would block each other)."""
    with _LOCKS_GUARD:
        lock = _LOCKS.setdefault(path, FileLock(path))
    assert isinstance(lock, FileLock)
    return lock


def object_lease(client: Any, bucket: str, key: str) -> ObjectLease:
    """The process's one `ObjectLease` for s3://bucket/key."""
    with _LOCKS_GUARD:
        lock = _LOCKS.setdefault(f"s3://{bucket}/{key}", ObjectLease(client, bucket, key))
    assert isinstance(lock, ObjectLease)
    return lock
