"""Untrusted text made safe to show (gemma4_t4/core/untrusted.py): controls and invisible formatting escaped, the
rest (any script, emoji, newlines and tabs) kept as it is."""

from __future__ import annotations

import dataclasses

import pytest

from gemma4_t4.core.untrusted import defang, defang_all, quoted


@pytest.mark.parametrize("text,shown", [
    ("\x1b[2Jclear", "\\x1b[2Jclear"),          # ANSI: clear the screen
    ("\x1b]0;title\x07", "\\x1b]0;title\\x07"),  # OSC: set the terminal's title
    ("abc\u202edcba", "abc\\u202edcba"),         # right-to-left override
    ("a\u2066b\u2069", "a\\u2066b\\u2069"),       # bidi isolates
    ("zero\u200bwidth\ufeff", "zero\\u200bwidth\\ufeff"),
    ("line\u2028sep", "line\\u2028sep"),
    ("\x9bC1", "\\x9bC1"),                       # a C1 control (CSI)
])
def test_controls_and_invisible_formatting_are_escaped(text, shown):
    assert defang(text) == shown


def test_ordinary_text_is_kept():
    text = "Ünïcode 中文 עברית 🙂\nnext line\tand a tab"
    assert defang(text) == text


def test_quoted_is_one_datum_and_everything_is_walked():
    assert quoted('say "hi"\nthen\x1b') == '"say \\"hi\\"\\nthen\\x1b"'

    @dataclasses.dataclass
    class Result:
        target: str
        models: list

    walked = defang_all(Result("t\x1b", [{"id": "m\u202e"}]))
    assert walked == Result("t\\x1b", [{"id": "m\\u202e"}])
