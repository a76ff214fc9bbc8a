"""Helpers of the scripts that print kernel patches (rotation_cost_patch.py,
memcg_iter_patch.py): find a function of a kernel source file by its first line, edit it
by patterns, and print a unified diff for `patch -p1`. Every failure prints one line and
exits 2; nothing is printed on stdout then."""

import difflib
import re
import sys
from pathlib import Path


def fail(msg: str) -> None:
    print(f"error: {msg}", file=sys.stderr)
    sys.exit(2)


def read_lines(source: Path, path: str) -> list[str]:
    f = source / path
    try:
        text = f.read_text()
    except OSError as e:
        fail(f"{f}: cannot read: {e.strerror or e}")
    if not text.endswith("\n"):
        fail(f"{f}: does not end with a newline")
    return text.splitlines(keepends=True)


def function_spans(lines: list[str], start: re.Pattern, path: str) -> list[tuple[int, int]]:
    """[first, end) of each function whose definition matches START (a stub under another
    configuration is a second one): up to its closing brace, the first line that is
    exactly "}"."""
    spans = []
    for first in (i for i, l in enumerate(lines) if start.match(l)):
        end = next((i + 1 for i in range(first, len(lines)) if lines[i].rstrip("\n") == "}"), None)
        if end is None:
            fail(f"{path}: no closing brace after line {first + 1}")
        spans.append((first, end))
    if not spans:
        fail(f"{path}: the function {start.pattern[1:]!r}... not found (another kernel version?)")
    return spans


def function_span(lines: list[str], start: re.Pattern, path: str) -> tuple[int, int]:
    """The one function whose definition matches START."""
    spans = function_spans(lines, start, path)
    if len(spans) != 1:
        fail(f"{path}: the function {start.pattern[1:]!r}... found {len(spans)} times, expected once (another kernel version?)")
    return spans[0]


def replace_in_function(lines: list[str], path: str, start: re.Pattern, pats: list[re.Pattern], repl) -> list[str]:
    """LINES with the one run of consecutive lines matching PATS inside the function that
    starts with START (any of them, if a stub shares its first line) replaced by
    repl(matches)."""
    hits = []
    for lo, hi in function_spans(lines, start, path):
        for i in range(lo, hi - len(pats) + 1):
            ms = [p.match(lines[i + k]) for k, p in enumerate(pats)]
            if all(ms):
                hits.append((i, ms))
    if len(hits) != 1:
        want = " / ".join(p.pattern for p in pats)
        fail(f"{path}: {want!r} found {len(hits)} times in {start.pattern[1:]!r}..., expected once (another kernel version?)")
    i, ms = hits[0]
    return lines[:i] + repl(ms) + lines[i + len(pats):]


def replace_function(lines: list[str], path: str, start: re.Pattern, must_have: list[str], body: str) -> list[str]:
    """LINES with the whole function that starts with START replaced by BODY; the old one
    must contain each string of MUST_HAVE (the form the replacement was written for)."""
    lo, hi = function_span(lines, start, path)
    old = "".join(lines[lo:hi])
    for s in must_have:
        if s not in old:
            fail(f"{path}: {start.pattern[1:]!r}... has no {s!r}: not the form this patch replaces (another kernel version?)")
    return lines[:lo] + body.splitlines(keepends=True) + lines[hi:]


def origin(source: Path) -> str:
    """What a patch was made from: the Debian package and version of a tree
    `reclaimsim kernel-build debian` fetched, else the tree's absolute path (not the path
    as typed, so the same tree gives the same bytes, and kernel-build the same cache key)."""
    marker = source / ".reclaimsim-source"
    return marker.read_text().strip() if marker.is_file() else str(source.resolve())


def source_arg(argv: list[str], doc: str, usage: str) -> Path:
    if argv[:1] in (["-h"], ["--help"]):
        print(doc.strip())
        sys.exit(0)
    if len(argv) != 1:
        fail(f"usage: {usage} SOURCE_DIR > FILE (SOURCE_DIR: a kernel source tree)")
    source = Path(argv[0])
    if not source.is_dir():
        fail(f"source directory {source}: does not exist or is not a directory")
    return source


def diff(path: str, old: list[str], new: list[str]) -> list[str]:
    return list(difflib.unified_diff(old, new, f"a/{path}", f"b/{path}"))
