"""Text bound for a terminal: ids from Kafka, a reviewer's comment, a query's cells are untrusted, so nothing the
command prints may move the cursor, recolour, retitle the window or reorder what follows it.

One rule, applied where text leaves the process (`rebalance` wraps its stdout and stderr in `SafeWriter`): C0 and C1
control characters (newline and tab aside) and Unicode's bidirectional controls are printed as escapes (`\\x1b`,
`\\u202e`). Long ids are shortened where they are formatted (`short`), as report folder names are.
"""

from __future__ import annotations

import hashlib
import io
import re
from typing import TextIO

# C0 but newline and tab, DEL and C1; the bidi embeddings, overrides, isolates and marks (Unicode UAX #9).
UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
CHUNK = 1 << 20  # bytes checked at a time by `is_safe_ascii`: NumPy's temporaries stay in cache
ID_MAX = 120  # characters of an id printed whole


def safe(text: str) -> str:
    """The text with every control and bidi character written as an escape."""
    return UNSAFE.sub(lambda m: f"\\x{ord(m[0]):02x}" if ord(m[0]) < 0x100 else f"\\u{ord(m[0]):04x}", text)


def short(text: str, limit: int = ID_MAX) -> str:
    """An id as printed: whole up to `limit` characters, else its head and a hash of the whole (still unique)."""
    if len(text) <= limit:
        return text
    return f"{text[: limit - 16]}...~{hashlib.sha1(text.encode()).hexdigest()[:12]}"


class SafeWriter(io.TextIOBase):
    """A text stream that writes `safe` text to the stream it wraps (a terminal, a pipe, a test's capture)."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream

    def write(self, text: str) -> int:
        self.stream.write(safe(text))
        return len(text)

    def flush(self) -> None:
        self.stream.flush()

    def isatty(self) -> bool:
        return self.stream.isatty()

    def fileno(self) -> int:
        return self.stream.fileno()

    @property
    def encoding(self) -> str:  # type: ignore[override]  # TextIOBase declares it as a plain attribute
        return getattr(self.stream, "encoding", "utf-8")

    @property
    def buffer(self) -> SafeBuffer:
        """The bytes layer, when the wrapped stream has one: UTF-8 written there passes the same rule, and goes
        through unchanged (one scan, no decoding) when there is nothing to escape, as for `assign`'s JSON."""
        if not hasattr(self.stream, "buffer"):
            raise AttributeError("buffer")
        return SafeBuffer(self)


class SafeBuffer:
    """The byte stream under a SafeWriter: `write` takes UTF-8 and writes what `SafeWriter.write` would."""

    def __init__(self, writer: SafeWriter) -> None:
        self.writer = writer

    def write(self, data: bytes) -> int:
        if is_safe_ascii(data):
            self.writer.stream.flush()  # what was written as text first stays first
            self.writer.stream.buffer.write(data)
        else:
            self.writer.write(data.decode("utf-8"))
        return len(data)

    def flush(self) -> None:
        self.writer.flush()


def is_safe_ascii(data: bytes) -> bool:
    """True when `data` is ASCII and `safe` leaves it as it is: no C0 control but tab and newline, no DEL. Checked
    with NumPy a chunk at a time (the command that writes bytes, `assign`, has NumPy loaded already)."""
    if not data.isascii():
        return False
    import numpy as np

    raw = np.frombuffer(data, dtype=np.uint8)
    for start in range(0, len(raw), CHUNK):
        chunk = raw[start : start + CHUNK]
        control = chunk[chunk < 0x20]
        if ((control != ord("\t")) & (control != ord("\n"))).any() or (chunk == 0x7F).any():
            return False
    return True
