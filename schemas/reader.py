"""Strict JSON reading of group documents: one object, an array of objects, or JSON lines, from raw bytes.

Everything a JSON parser would let through but a group must not hold is refused here, before any rule runs:
bytes that are not UTF-8, nesting deeper than `MAX_DEPTH` (measured by a linear scan *before* the recursive
parser runs), duplicate object keys, NaN / Infinity / numbers that overflow a double, integer literals longer
than any Kafka integer, and lone UTF-16 surrogates (`"\\ud800"`), which no UTF-8 writer downstream can store.

Every error is an `InputError` naming the source, the line or array index, and the JSON path. A problem
inside one JSON line or one array element is kept on that `Document` (its `error`), so ingest can quarantine
just that group with its raw bytes and go on; only an input that cannot be split into documents at all (not
UTF-8, not JSON, too deep, empty) raises. An input that can only be JSON lines is read a line at a time
(`json_lines_of`), so a large file never has to be held, decoded or parsed whole.
"""

from __future__ import annotations

import io
import json
import math
import re
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any, BinaryIO

import numpy as np

from planner.errors import InputError

try:  # parses a JSON line 5x faster than json with the hooks below; a Spark worker without it reads with json
    import msgspec
except ImportError:
    msgspec = None  # type: ignore[assignment]

MAX_DEPTH = 64  # a snapshot array needs 6 levels ([ { members [ { owned [ [); far below Python's recursion limit
MAX_INT_DIGITS = 32  # int64 needs 19 digits; longer literals are refused before Python converts them

_BOM = b"\xef\xbb\xbf"
_WHITESPACE = re.compile(r"[ \t\n\r]*")  # JSON's insignificant whitespace (RFC 8259 section 2)
_ESCAPED_SURROGATE = re.compile(r"\\u[dD][89a-fA-F]")  # the only way a surrogate gets past strict UTF-8
_SURROGATE = re.compile("[\ud800-\udfff]")
_DIGITS_AS_ZERO = bytes.maketrans(b"0123456789", b"0" * 10)
_LONG_DIGIT_RUN = b"0" * (MAX_INT_DIGITS + 1)  # in the input mapped through _DIGITS_AS_ZERO: a too-long literal
_NOT_STRUCTURE = bytes(sorted(set(range(256)) - set(b'"[]{}')))  # what `_structure` deletes
_SPACED_KEY_END = re.compile(rb'"[ \t\n\r]+:')  # a key's closing quote, whitespace, then its colon
_SPACED_QUOTES = (b'" ', b'"\t', b'"\n', b'"\r')
_BRACKET_STEP = np.zeros(256, dtype=np.int8)
_BRACKET_STEP[[0x5B, 0x7B]] = 1
_BRACKET_STEP[[0x5D, 0x7D]] = -1


@dataclass(frozen=True)
class Document:
    """One group as read: the parsed object (`doc`) or why it was refused (`error`), and its bytes as received."""

    source: str  # the input's name, e.g. a file path
    raw: bytes  # this document's bytes exactly as received (one line, one array element, or the whole input)
    doc: Any = None
    error: str | None = None  # InputError message naming source, line / index and JSON path
    line: int | None = None  # 1-based line of a JSON-lines input
    index: int | None = None  # position in a top-level array

    @property
    def where(self) -> str:
        """`source`, `source:line` or `source[index]`: the name a message or quarantine row should carry."""
        if self.line is not None:
            return f"{self.source}:{self.line}"
        if self.index is not None:
            return f"{self.source}[{self.index}]"
        return self.source

    def value(self) -> Any:
        """The parsed object; raises the InputError this document was refused with."""
        if self.error is not None:
            raise InputError(self.error)
        return self.doc


def read_json_documents(data: bytes, source: str) -> list[Document]:
    """Split `data` into group documents; raises InputError when it cannot be split at all."""
    if (documents := json_lines_of(io.BytesIO(data), source)) is not None:
        return list(documents)
    try:
        return _read_whole(data, source)
    except InputError:
        if not _line_shaped(io.BytesIO(data)):
            raise
    return list(documents_of_lines(io.BytesIO(data), source))


def json_lines_of(stream: BinaryIO, source: str) -> Iterator[Document] | None:
    """The documents of a seekable input that can only be JSON lines, parsed one line at a time as they are asked
    for (only that line and its document are held); None when it might be one value (read it whole then).

    An input shaped as JSON lines whose first object ends on its line (or whose first line is not UTF-8 or too
    deep) cannot be read whole: whatever follows that object on the next line is extra data. So this is what
    `read_json_documents` has always come to for it, without first reading, decoding and scanning it all.
    """
    if not (_line_shaped(stream) and _first_value_ends_on_its_line(stream)):
        return None
    return documents_of_lines(stream, source)


def read_groups(data: bytes, source: str) -> list[Any]:
    """Every document of `data`, or the first InputError: for callers that take all groups or none (`assign`)."""
    return [d.value() for d in read_json_documents(data, source)]


# --- the whole input -------------------------------------------------------------------------------------------


def _read_whole(data: bytes, source: str) -> list[Document]:
    start = len(_BOM) if data.startswith(_BOM) else 0  # RFC 8259 section 8.1: a parser may ignore a BOM
    text = _decode(data, source, start)
    if not text.strip():
        raise InputError(f"no groups in {source}")
    _check_depth(data, source)
    decoder = _Decoder(data)
    pos = _skip_whitespace(text, 0)
    if text[pos] != "[":
        doc = decoder.decode(text, pos, source)
        if not isinstance(doc, dict):
            raise InputError(f"{source}: expected a JSON object (one group) or an array of them, got {_kind(doc)}")
        return [_checked(Document(source, data, doc), decoder.marked, text)]
    documents = []
    for index, (doc, begin, end, marked) in enumerate(decoder.array(text, pos, source)):
        element = text[begin:end]
        item = Document(source, element.encode("utf-8"), doc, index=index)
        if not isinstance(doc, dict):
            item = _refused(item, f"expected a JSON object (one group), got {_kind(doc)}")
        documents.append(_checked(item, marked, element))
    if not documents:
        raise InputError(f"no groups in {source}")
    return documents


def _decode(data: bytes, where: str, start: int = 0, file_offset: int = 0) -> str:
    try:
        return data[start:].decode("utf-8")
    except UnicodeDecodeError as e:
        at = file_offset + start + e.start
        raise InputError(
            f"{where}: not UTF-8 text: byte 0x{data[start + e.start]:02x} at byte offset {at} ({e.reason})"
        ) from None


def _check_depth(data: bytes, where: str, file_offset: int = 0) -> None:
    """Refuse nesting deeper than MAX_DEPTH before the (recursive) parser sees it; linear in len(data)."""
    if nesting_depth(_structure(data))[0] <= MAX_DEPTH:
        return
    depth, at = nesting_depth(data)
    raise InputError(
        f"{where}: JSON nested deeper than {MAX_DEPTH} levels (reaches {depth} at byte offset {file_offset + at})"
    )


def _structure(data: bytes) -> bytes:
    """The bytes `nesting_depth` reads, with the same depth but not its offsets (a tenth of a group's bytes, taken
    with C-level passes): escaped backslashes and escaped quotes dropped, so that every quote left opens or closes
    a string, then everything but quotes and brackets, then empty strings."""
    if b"\\" in data:
        data = data.replace(b"\\\\", b"").replace(b'\\"', b"")
    return data.translate(None, _NOT_STRUCTURE).replace(b'""', b"")


def nesting_depth(data: bytes) -> tuple[int, int]:
    """Deepest `[` / `{` nesting outside strings, and the byte offset where it is first reached.

    Vectorized: brackets inside strings are those after an odd number of unescaped quotes; a quote is escaped
    when an odd run of backslashes precedes it. Agrees with any JSON parser up to the first syntax error, so
    a parser never nests deeper than this on the same bytes.
    """
    if not data:
        return 0, 0
    raw = np.frombuffer(data, dtype=np.uint8)
    quotes = np.flatnonzero(raw == 0x22)
    after_backslash = quotes[(quotes > 0) & (raw[quotes - 1] == 0x5C)]
    escaped = [q for q in after_backslash.tolist() if _backslashes_before(data, q) % 2]
    if escaped:
        quotes = np.setdiff1d(quotes, np.asarray(escaped, dtype=quotes.dtype), assume_unique=True)
    step = _BRACKET_STEP[raw]  # +1 for [ and {, -1 for ] and }, 0 elsewhere
    brackets = np.flatnonzero(step)
    step = step[brackets].astype(np.int32)
    step[np.searchsorted(quotes, brackets) % 2 == 1] = 0  # inside a string
    if not len(step):
        return 0, 0
    depth = np.cumsum(step)
    deepest = int(np.argmax(depth))
    return max(int(depth[deepest]), 0), int(brackets[deepest])


def _backslashes_before(data: bytes, pos: int) -> int:
    n = 0
    while pos - n - 1 >= 0 and data[pos - n - 1] == 0x5C:
        n += 1
    return n


# --- JSON lines ------------------------------------------------------------------------------------------------


def _lines(
    stream: BinaryIO, start: int = 0, end: int | None = None, first: int = 1
) -> Iterator[tuple[int, int, bytes]]:
    """(line number, byte offset, bytes without the newline) of each non-blank line from byte `start` (a line's
    start, line number `first`) to byte `end` (a line's start too) or the input's end."""
    stream.seek(start)
    offset = start
    for number, line in enumerate(stream, first):
        if end is not None and offset >= end:
            return
        if line.strip():
            yield number, offset, line.removesuffix(b"\n")
        offset += len(line)


def _line_shaped(stream: BinaryIO) -> bool:
    """JSON lines: two or more non-blank lines, each starting with `{` (`_line_starts`)."""
    return _line_starts(stream, sys.maxsize) is not None


def _line_starts(stream: BinaryIO, size: int) -> list[tuple[int, int]] | None:
    """(line number, byte offset) of the first line and of each line starting `size` bytes or more after the last
    one listed, for an input shaped as JSON lines (two or more non-blank lines, each starting with `{`); None for
    any other. A pretty-printed object never has that shape (its inner lines start with a key or a bracket), so it
    keeps its whole-input error."""
    starts, count = [(1, 0)], 0
    for number, offset, line in _lines(stream):
        if not line.removeprefix(_BOM).lstrip(b" \t\r").startswith(b"{"):
            return None
        if offset - starts[-1][1] >= size:
            starts.append((number, offset))
        count += 1
    return starts if count >= 2 else None


def json_lines_pieces(stream: BinaryIO, size: int) -> list[tuple[int, int, int]] | None:
    """An input that can only be JSON lines (as `json_lines_of` decides) cut at line starts into pieces of about
    `size` bytes, each (first line number, start byte, end byte), for `documents_of_lines` to read apart; None
    when it might be one value. One pass over the lines, holding one at a time."""
    starts = _line_starts(stream, size)
    if starts is None or not _first_value_ends_on_its_line(stream):
        return None
    stream.seek(0, io.SEEK_END)
    ends = [start for _, start in starts[1:]] + [stream.tell()]
    return [(number, start, end) for (number, start), end in zip(starts, ends, strict=True)]


def documents_of_lines(
    stream: BinaryIO, source: str, start: int = 0, end: int | None = None, first: int = 1
) -> Iterator[Document]:
    """The documents of a JSON-lines input, or of its piece (`json_lines_pieces`), parsed one line at a time."""
    return (_read_line(line, number, offset, source) for number, offset, line in _lines(stream, start, end, first))


def _first_value_ends_on_its_line(stream: BinaryIO) -> bool:
    """Whether the input's first non-blank line holds a whole JSON value, or is not UTF-8 or too deep to parse."""
    number, _, line = next(_lines(stream))
    start = len(_BOM) if number == 1 and line.startswith(_BOM) else 0
    try:
        text = line[start:].decode("utf-8")
    except UnicodeDecodeError:
        return True  # then the whole input is not UTF-8 either
    if nesting_depth(line)[0] > MAX_DEPTH:
        return True  # nor shallow enough
    try:
        _Decoder(line).value_at(text, _skip_whitespace(text, 0), "")
    except InputError:
        return False
    return True


def _read_line(line: bytes, number: int, offset: int, source: str) -> Document:
    where = f"{source}:{number}"
    start = len(_BOM) if number == 1 and line.startswith(_BOM) else 0
    try:
        text = _decode(line, where, start, offset)
        _check_depth(line, where, offset)
        if (plain := _plain_object(line[start:])) is not None:
            return Document(source, line, plain, line=number)
        decoder = _Decoder(line)
        doc = decoder.decode(text, _skip_whitespace(text, 0), where)
    except InputError as e:
        return Document(source, line, error=str(e), line=number)
    document = Document(source, line, doc, line=number)
    if not isinstance(doc, dict):
        return _refused(document, f"expected a JSON object (one group), got {_kind(doc)}")
    return _checked(document, decoder.marked, text)


# --- parsing ---------------------------------------------------------------------------------------------------


def _plain_object(data: bytes) -> dict[str, Any] | None:
    """The JSON object `data` holds when msgspec reads it as `_Decoder` would, marking nothing; else None, and
    `_Decoder` reads it (and names what it refuses). That is when it holds no escape (so no lone surrogate), no
    digit run too long for a Kafka integer, no number beyond a double (`_finite`: the value `_Decoder` makes), no
    NaN or Infinity (not JSON to msgspec) and no repeated key: the text is the object's compact encoding, or each
    key of the text is a key of the object (without escapes a key ends at the only `"` before its colon, in the
    text and in the encoding)."""
    if msgspec is None or b"\\" in data or _LONG_DIGIT_RUN in data.translate(_DIGITS_AS_ZERO):
        return None
    try:
        doc = _PLAIN.decode(data)
    except (msgspec.DecodeError, UnicodeDecodeError):
        return None
    if not isinstance(doc, dict):
        return None
    compact = msgspec.json.encode(doc)
    if compact == data:  # written compact (json.dumps' separators=(",", ":"), msgspec): every key is in `doc`
        return doc
    spaced = any(end in data for end in _SPACED_QUOTES)  # a quote then whitespace: look for spaced key ends
    keys = data.count(b'":') + (len(_SPACED_KEY_END.findall(data)) if spaced else 0)
    return doc if keys == compact.count(b'":') else None


def _finite(text: str) -> float:
    """A float literal as `_Decoder` reads it; one beyond a double is not plain."""
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"number {text} is outside the range of a double")
    return value


_PLAIN = msgspec.json.Decoder(float_hook=_finite) if msgspec is not None else None


class _Invalid:
    """Stands in the parsed tree for a value JSON allows but a group must not hold; found again by `_problem`."""

    def __init__(self, reason: str) -> None:
        self.reason = reason


class _DuplicateKeys(dict[str, Any]):
    """An object that named `key` twice; Python's json would silently keep the last value."""

    key: str = ""


class _Decoder:
    """json.JSONDecoder with hooks that mark refused values instead of raising, so each document is judged alone."""

    def __init__(self, data: bytes) -> None:
        """A decoder for `data`: integers go through `_int` only when it holds a digit run too long for one."""
        self.marked = False
        self.json = json.JSONDecoder(
            object_pairs_hook=self._object,
            parse_constant=self._constant,
            parse_float=self._float,
            parse_int=self._int if _LONG_DIGIT_RUN in data.translate(_DIGITS_AS_ZERO) else None,
        )

    def _constant(self, text: str) -> _Invalid:
        self.marked = True
        return _Invalid(f"{text} is not a JSON number (RFC 8259 section 6)")

    def _object(self, pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        obj = dict(pairs)
        if len(obj) == len(pairs):
            return obj
        self.marked = True
        marked = _DuplicateKeys(obj)
        marked.key = _first_repeated(k for k, _ in pairs)
        return marked

    def _float(self, text: str) -> float | _Invalid:
        value = float(text)
        if math.isfinite(value):
            return value
        self.marked = True
        return _Invalid(f"number {_shorten(text)} is outside the range of a double")

    def _int(self, text: str) -> int | _Invalid:
        if len(text.lstrip("-")) <= MAX_INT_DIGITS:
            return int(text)
        self.marked = True
        return _Invalid(f"integer of {len(text.lstrip('-'))} digits is outside every Kafka integer type")

    def value_at(self, text: str, pos: int, where: str) -> tuple[Any, int]:
        """The JSON value starting at `pos` and the index just after it."""
        try:
            return self.json.raw_decode(text, pos)
        except json.JSONDecodeError as e:
            raise InputError(f"{where}: invalid JSON at line {e.lineno} column {e.colno}: {e.msg}") from None
        except RecursionError:  # unreachable after _check_depth; kept so a parser change cannot crash a run
            raise InputError(f"{where}: JSON nested too deeply") from None

    def decode(self, text: str, pos: int, where: str) -> Any:
        """The one value at `pos`; nothing but whitespace may follow it."""
        value, end = self.value_at(text, pos, where)
        _expect_end(text, end, where, "the value")
        return value

    def array(self, text: str, pos: int, where: str) -> list[tuple[Any, int, int, bool]]:
        """(value, start, end, marked) of each element of the top-level array opening at `pos`; `marked`: the
        element holds a refused value."""
        items: list[tuple[Any, int, int, bool]] = []
        pos = _skip_whitespace(text, pos + 1)
        if text.startswith("]", pos):
            _expect_end(text, pos + 1, where, "the array")
            return items
        while True:
            self.marked = False
            value, end = self.value_at(text, pos, where)
            items.append((value, pos, end, self.marked))
            pos = _skip_whitespace(text, end)
            if text.startswith(",", pos):
                pos = _skip_whitespace(text, pos + 1)
            elif text.startswith("]", pos):
                _expect_end(text, pos + 1, where, "the array")
                return items
            else:
                raise InputError(f"{where}: invalid JSON at {_line_column(text, pos)}: expected ',' or ']'")


def _skip_whitespace(text: str, pos: int) -> int:
    """Index of the first character at or after `pos` that is not JSON whitespace."""
    match = _WHITESPACE.match(text, pos)
    return match.end() if match else pos  # the pattern matches the empty string, so always a match


def _first_repeated(keys: Iterable[str]) -> str:
    """The first key seen twice (the caller knows there is one)."""
    seen: set[str] = set()
    for key in keys:
        if key in seen:
            return key
        seen.add(key)
    raise ValueError("no repeated key")


def _expect_end(text: str, pos: int, where: str, what: str) -> None:
    end = _skip_whitespace(text, pos)
    if end != len(text):
        raise InputError(f"{where}: invalid JSON at {_line_column(text, end)}: extra data after {what}")


def _line_column(text: str, pos: int) -> str:
    line = text.count("\n", 0, pos) + 1
    column = pos - text.rfind("\n", 0, pos)
    return f"line {line} column {column}"


# --- what the parser let through ------------------------------------------------------------------------------


def _checked(document: Document, marked: bool, text: str) -> Document:
    """The document, or the document refused for the first marked value or lone surrogate it holds (`text`: its
    JSON text, `marked`: the decoder marked a value in it)."""
    if (
        document.error is None
        and (marked or _ESCAPED_SURROGATE.search(text))
        and (problem := _problem(document.doc)) is not None
    ):
        return _refused(document, problem)
    return document


def _refused(document: Document, reason: str) -> Document:
    return Document(document.source, document.raw, None, f"{document.where}: {reason}", document.line, document.index)


def _problem(value: Any) -> str | None:
    """`path: reason` of the first duplicate key, refused number or lone surrogate, in document order."""
    stack: list[tuple[Any, tuple[str | int, ...]]] = [(value, ())]
    while stack:
        item, path = stack.pop()
        if isinstance(item, _Invalid):
            return f"{json_path(path)}: {item.reason}"
        if isinstance(item, _DuplicateKeys):
            return f"{json_path(path)}: duplicate key {item.key!r}"
        if isinstance(item, str) and _SURROGATE.search(item):
            return f"{json_path(path)}: lone UTF-16 surrogate in string {_shorten(repr(item))}"
        if isinstance(item, dict):
            for key in item:
                if _SURROGATE.search(key):
                    return f"{json_path(path)}: lone UTF-16 surrogate in key {_shorten(repr(key))}"
            stack.extend((v, (*path, k)) for k, v in reversed(item.items()))
        elif isinstance(item, list):
            stack.extend((v, (*path, i)) for i, v in reversed(list(enumerate(item))))
    return None


def json_path(parts: tuple[str | int, ...] | list[str | int]) -> str:
    """`members[2].owned[0]` from path parts; `(document)` for the root. Unprintable keys are shown quoted."""
    text = ""
    for part in parts:
        if isinstance(part, int):
            text += f"[{part}]"
        elif not part.isprintable() or not part:
            text += f"[{part!r}]"
        else:
            text += f".{part}" if text else part
    return text or "(document)"


def _kind(value: Any) -> str:
    names = {list: "an array", str: "a string", bool: "a boolean", type(None): "null", dict: "an object"}
    return names.get(type(value), "a number")


def _shorten(text: str, limit: int = 80) -> str:
    return text if len(text) <= limit else f"{text[: limit - 3]}..."
