"""Untrusted text printed safely: escapes and bidi controls made visible, long ids shortened uniquely."""

from __future__ import annotations

import io

import pytest

from jobs.terminal import SafeWriter, safe, short

pytestmark = pytest.mark.unit


def test_control_and_bidi_characters_print_as_escapes():
    assert safe("ok\tline\n") == "ok\tline\n"
    assert safe("\x1b[2J\x1b]0;title\x07") == "\\x1b[2J\\x1b]0;title\\x07"
    assert safe("evil\u202etxt.exe\u2066x\u2069") == "evil\\u202etxt.exe\\u2066x\\u2069"
    assert safe("\x9b31m\rback\x7f") == "\\x9b31m\\x0dback\\x7f"
    assert safe("grüße, 注文, 🙂") == "grüße, 注文, 🙂"


def test_long_ids_are_shortened_with_a_hash_of_the_whole():
    assert short("payments") == "payments"
    long_a, long_b = "g" * 100_000, "g" * 99_999 + "h"
    assert len(short(long_a)) == 120 and short(long_a) != short(long_b)
    assert short(long_a).startswith("g" * 104 + "...~")


def test_the_writer_escapes_what_it_passes_on():
    out = io.StringIO()
    writer = SafeWriter(out)
    print("group \x1b[31mred\x1b[0m", file=writer)
    assert out.getvalue() == "group \\x1b[31mred\\x1b[0m\n"
