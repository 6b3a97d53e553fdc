"""What the protocol codecs share on the wire: the error a malformed message raises, and a cursor over one message.

`planner.protocol` (the classic consumer protocol: int16-length strings, int32-count arrays) and
`planner.kip848_protocol` (KIP-848's flexible messages: varint lengths, tagged fields) each read with a subclass
of `WireReader` that adds its encoding's strings and arrays.
"""

from __future__ import annotations

import struct

from planner.errors import InputError

__all__ = ["ProtocolError", "WireReader"]


class ProtocolError(InputError):
    """Bytes that are not a valid consumer-protocol message: says what was expected at which byte offset."""


class WireReader:
    """A cursor over one message; every failure names what was expected and the byte offset it was expected at."""

    def __init__(self, data: bytes, what: str) -> None:
        self.data = memoryview(bytes(data))
        self.pos = 0
        self.what = what

    def fail(self, expected: str, at: int | None = None) -> ProtocolError:
        """The error for `expected` missing at byte offset `at` (default: where the cursor is)."""
        return ProtocolError(f"{self.what}: expected {expected} at byte offset {self.pos if at is None else at}")

    def take(self, n: int, expected: str) -> bytes:
        """The next `n` bytes; ProtocolError when fewer are left."""
        if n > len(self.data) - self.pos:
            raise self.fail(f"{expected} ({n} bytes, {len(self.data) - self.pos} left)")
        chunk = self.data[self.pos : self.pos + n].tobytes()
        self.pos += n
        return chunk

    def fixed(self, fmt: str, expected: str) -> int:
        """One fixed-size integer in `struct` format `fmt` (big-endian, as Kafka writes them)."""
        value: int = struct.unpack(fmt, self.take(struct.calcsize(fmt), expected))[0]
        return value
