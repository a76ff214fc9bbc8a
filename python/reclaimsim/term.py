"""Text from outside reclaimsim on the way to a terminal.

A kernel image's version string, a guest's messages, perf's symbol names or a file's
contents can hold control characters: an escape sequence (a window title, a cleared
screen, a moved cursor), a line break that splits one-line errors. `printable` escapes them
where such text enters reclaimsim, so that a report or an error line shows it as text.
Scenario names are refused at validation instead (the core's scenario checks)."""

from __future__ import annotations

import unicodedata

# Escapes for the common controls; any other becomes \xNN, \uNNNN.
_SHORT = {"\n": "\\n", "\r": "\\r", "\t": "\\t", "\x1b": "\\x1b", "\0": "\\0"}


def printable(s: str) -> str:
    """`s` with every control character (C0, DEL, C1) and line or paragraph separator
    escaped, everything else as it is."""
    if s.isprintable():
        return s
    out = []
    for c in s:
        if unicodedata.category(c) in ("Cc", "Zl", "Zp"):
            out.append(_SHORT.get(c) or (f"\\x{ord(c):02x}" if ord(c) < 0x100 else f"\\u{ord(c):04x}"))
        else:
            out.append(c)
    return "".join(out)


def one_line(msg: str) -> str:
    """A message as one line, its control characters escaped (it may quote a file, a
    kernel's string or an argument)."""
    return printable("; ".join(line.strip() for line in str(msg).strip().splitlines() if line.strip()))
