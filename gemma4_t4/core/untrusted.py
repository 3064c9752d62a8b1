"""Text the tools did not write (a model id, a server's error, a model's answer, a log line), made safe to show an
agent or a terminal: every control character but newline and tab, and every invisible formatting character
(Unicode's Cf: the bidirectional overrides and isolates such as U+202E, zero-width characters, the BOM) and line or
paragraph separator, is written out as its escape (`\\x1b`, `\\u202e`), so what a reader sees is what the text
holds. An ANSI escape cannot redraw a terminal and a right-to-left override cannot reorder what an agent reads.
`quoted` marks such text as data inside a message of the tools' own."""

from __future__ import annotations

import dataclasses
import unicodedata
from typing import Any

_KEPT = "\n\t"
# Control (Cc), format (Cf: bidi controls, zero-width, BOM), line and paragraph separators (Zl, Zp).
_ESCAPED_CATEGORIES = frozenset({"Cc", "Cf", "Zl", "Zp"})


def _escaped(char: str) -> str:
    if char in _KEPT or unicodedata.category(char) not in _ESCAPED_CATEGORIES:
        return char
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def defang(text: str) -> str:
    """TEXT with its control and invisible formatting characters escaped (newline and tab kept)."""
    if text.isprintable():  # str.isprintable is False for every escaped category (and for newline and tab)
        return text
    return "".join(map(_escaped, text))


def quoted(text: Any) -> str:
    """Untrusted TEXT inside a message: defanged, its quotes, newlines and tabs escaped too, in double quotes, so it
    reads as one datum, never as the message's own words."""
    escaped = defang(str(text)).replace('"', '\\"').replace("\n", "\\n").replace("\t", "\\t")
    return f'"{escaped}"'


def defang_all(value: Any) -> Any:
    """VALUE with every string in it defanged: dicts, lists, tuples and dataclasses walked (a dataclass copied)."""
    if isinstance(value, str):
        return defang(value)
    if isinstance(value, dict):  # a TypedDict result is a plain dict
        return {defang_all(k): defang_all(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(defang_all(v) for v in value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.replace(value, **{f.name: defang_all(getattr(value, f.name))
                                             for f in dataclasses.fields(value) if f.init})
    return value
