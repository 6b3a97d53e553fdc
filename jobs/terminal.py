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
