"""Java .properties files, read as java.util.Properties.load reads them.

Kafka's server.properties is one, so an operator's file works unchanged:
`#` and `!` comments, `key=value`, `key: value` and `key value`, a backslash at
the end of a line continuing it (the next line's leading whitespace dropped),
and the escapes \\t \\n \\r \\f \\uXXXX (any other escaped character stands for
itself, so `\\=` and `\\:` put separators into keys).

One difference: files are read as UTF-8, not ISO-8859-1; ASCII files (all of
Kafka's) and \\uXXXX escapes read the same either way.
"""

from __future__ import annotations

import re
from pathlib import Path

_WHITESPACE = " \t\f"
_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}
_UNESCAPES = {v: k for k, v in _ESCAPES.items()}
_HEX4 = re.compile(r"[0-9a-fA-F]{4}")
# Not str.splitlines(): that also breaks at \f, which .properties treats as whitespace.
_LINE_BREAK = re.compile(r"\r\n|\r|\n")


class PropertiesSyntaxError(ValueError):
    """A malformed \\uXXXX escape: the only thing Properties.load refuses."""

    def __init__(self, line: int, key: str, text: str) -> None:
        self.line = line
        self.key = key
        self.text = text
        super().__init__(f"line {line}: malformed \\uxxxx encoding in {text!r}")


def load_properties(path: Path) -> dict[str, str]:
    return parse_properties(path.read_text(encoding="utf-8"))


def parse_properties(text: str) -> dict[str, str]:
    """Keys to values in file order; a repeated key keeps its last value."""
    props: dict[str, str] = {}
    for line_number, logical in _logical_lines(text):
        raw_key, raw_value = _split(logical)
        try:
            key = _unescape(raw_key)
            props[key] = _unescape(raw_value)
        except ValueError:
            raise PropertiesSyntaxError(line_number, raw_key, logical) from None
    return props


def _logical_lines(text: str) -> list[tuple[int, str]]:
    """(first line number, text) of each logical line, comments and blanks dropped."""
    return [(start + 1, line) for start, _, line in _logical_spans(_LINE_BREAK.split(text))]


def _logical_spans(natural: list[str]) -> list[tuple[int, int, str]]:
    """(first, past-the-last natural line index, text) of each logical line of `natural`."""
    lines: list[tuple[int, int, str]] = []
    i = 0
    while i < len(natural):
        start = i
        line = natural[i].lstrip(_WHITESPACE)
        i += 1
        if not line or line[0] in "#!":
            continue
        # An odd number of trailing backslashes escapes the line break.
        while _trailing_backslashes(line) % 2 == 1:
            line = line[:-1]
            if i == len(natural):
                break
            continuation = natural[i].lstrip(_WHITESPACE)
            i += 1
            if not continuation:  # Properties.load ends the logical line at an empty one
                break
            line += continuation
        lines.append((start, i, line))
    return lines


def _trailing_backslashes(line: str) -> int:
    return len(line) - len(line.rstrip("\\"))


def _split(line: str) -> tuple[str, str]:
    """The key ends at the first unescaped '=', ':' or whitespace; whitespace and at
    most one '=' or ':' separate it from the value."""
    i = 0
    while i < len(line):
        c = line[i]
        if c == "\\":
            i += 2
            continue
        if c in "=:" or c in _WHITESPACE:
            break
        i += 1
    key = line[:i]
    j = i
    separator_seen = False
    while j < len(line):
        c = line[j]
        if c in _WHITESPACE:
            j += 1
        elif c in "=:" and not separator_seen:
            separator_seen = True
            j += 1
        else:
            break
    return key, line[j:]


def _unescape(text: str) -> str:
    if "\\" not in text:
        return text
    out: list[str] = []
    i = 0
    while i < len(text):
        c = text[i]
        i += 1
        if c != "\\":
            out.append(c)
            continue
        if i == len(text):  # a dangling backslash at the end of the file: dropped
            break
        c = text[i]
        i += 1
        if c == "u":
            digits = text[i : i + 4]
            if not _HEX4.fullmatch(digits):
                raise ValueError("malformed \\uxxxx encoding")
            out.append(chr(int(digits, 16)))
            i += 4
        else:
            out.append(_ESCAPES.get(c, c))
    return "".join(out)


def format_properties(props: dict[str, str]) -> str:
    """`key=value` lines that parse_properties (and Java) reads back as `props`, as Properties.store escapes."""
    return "".join(f"{_escape(key, is_key=True)}={_escape(value, is_key=False)}\n" for key, value in props.items())


def update_properties(text: str, changes: dict[str, str]) -> str:
    """`text` (a .properties file) with the keys of `changes` set to their values, everything else as it was:
    comments, order, blank lines and the spelling of untouched entries. A changed key's entry is rewritten in
    place (each one, if it repeats); a key the file does not have is appended."""
    natural = _LINE_BREAK.split(text)
    if natural and natural[-1] == "":
        natural.pop()  # the file's final line break
    replaced: dict[int, tuple[int, str]] = {}  # first natural line -> (past its last, the new line)
    seen: set[str] = set()
    for start, end, line in _logical_spans(natural):
        key = _unescape(_split(line)[0])
        if key in changes:
            replaced[start] = (end, format_properties({key: changes[key]}).rstrip("\n"))
            seen.add(key)
    out: list[str] = []
    i = 0
    while i < len(natural):
        if i in replaced:
            i, new_line = replaced[i]
            out.append(new_line)
            continue
        out.append(natural[i])
        i += 1
    out += [format_properties({key: value}).rstrip("\n") for key, value in changes.items() if key not in seen]
    return "".join(line + "\n" for line in out)


def _escape(text: str, is_key: bool) -> str:
    out = []
    for i, c in enumerate(text):
        # Separators and blanks would end a key; at a value's start, blanks would be dropped.
        if c == "\\" or (c in "#!=: " and (is_key or i == 0)):
            out.append("\\" + c)
        elif c in _UNESCAPES:
            out.append("\\" + _UNESCAPES[c])
        else:
            out.append(c)
    return "".join(out)
