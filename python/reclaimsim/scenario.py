"""Loading scenarios: a TOML path, a built-in name, or a dict; plus --set overrides."""

from __future__ import annotations

import copy
import datetime
import itertools
import json
import math
import re
import tomllib
from importlib import resources
from pathlib import Path
from typing import Any, Callable, Iterable

from . import _core
from ._core import ScenarioError
from .result import Result
from .term import printable


class TomlFloat(float):
    """A TOML float that keeps the text it was written as: `6.10` and `6.1` are one float,
    but as a kernel version they are two kernels (`version_text`)."""

    def __new__(cls, text: str):
        x = super().__new__(cls, text)
        x.text = text
        return x

    def __reduce__(self):  # copies and pickles keep the text
        return (TomlFloat, (self.text,))


def toml_loads(text: str) -> dict:
    """tomllib.loads, its floats TomlFloats."""
    return tomllib.loads(text, parse_float=TomlFloat)


def version_text(v: Any) -> Any:
    """A kernel version as written: `--set kernel.version=6.12` and an unquoted `version =
    6.12` give a float, and `6.10` would read as 6.1; the text goes to the core, which
    knows the versions."""
    return v.text if isinstance(v, TomlFloat) else v


def _version_as_text(data: dict) -> None:
    """version_text of a scenario's (or an A/B side's) kernel version, wherever it is
    given: [kernel] version, a side's `kernel.version`, [compare]'s sides."""
    k = data.get("kernel")
    if isinstance(k, dict) and "version" in k:
        k["version"] = version_text(k["version"])
    if "kernel.version" in data:
        data["kernel.version"] = version_text(data["kernel.version"])
    spec = data.get("compare")
    for side in ("a", "b"):
        if isinstance(spec, dict) and isinstance(spec.get(side), dict):
            _version_as_text(spec[side])


def _builtin_dir():
    return resources.files("reclaimsim") / "scenarios"


def builtin_scenarios() -> list[tuple[str, str]]:
    """(name, description) of every built-in scenario, sorted by name."""
    out = []
    for f in sorted(_builtin_dir().iterdir(), key=lambda p: p.name):
        if f.name.endswith(".toml"):
            data = tomllib.loads(f.read_text())
            out.append((f.name[:-5], data.get("description", "")))
    return out


def _parse_toml(text: str, origin: str) -> dict:
    try:
        return toml_loads(text)
    except tomllib.TOMLDecodeError as e:
        raise ScenarioError(f"{origin}: invalid TOML: {e}") from None
    except RecursionError:
        raise ScenarioError(f"{origin}: invalid TOML: nested too deeply") from None


class _DuplicateKey(Exception):
    pass


def _unique_keys(pairs: list) -> dict:
    """json.loads's object hook: a key given twice is refused (TOML refuses it too; JSON
    would keep the last silently)."""
    seen: dict = {}
    for k, v in pairs:
        if k in seen:
            raise _DuplicateKey(k)
        seen[k] = v
    return seen


def _parse_json(text: str, origin: str) -> dict:
    try:
        data = json.loads(text, object_pairs_hook=_unique_keys)
    except _DuplicateKey as e:
        raise ScenarioError(f"{origin}: invalid JSON: key {quoted(str(e.args[0]))} given twice in one object") from None
    except json.JSONDecodeError as e:
        raise ScenarioError(f"{origin}: invalid JSON: {e}") from None
    except RecursionError:
        raise ScenarioError(f"{origin}: invalid JSON: nested too deeply") from None
    if not isinstance(data, dict):
        raise ScenarioError(f"{origin}: a JSON scenario is an object, not {type(data).__name__}")
    return data


def _read_text(p: Path) -> str:
    try:
        raw = p.read_bytes()
    except OSError as e:
        raise ScenarioError(f"{p}: cannot read: {e.strerror or e}") from None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ScenarioError(
            f"{p}: not a TOML scenario: byte 0x{raw[e.start]:02x} at offset {e.start} is not UTF-8 text"
        ) from None


def load_scenario(
    scenario: str | Path | dict, overrides: Iterable[str] = (), full_scale: bool = False
) -> dict:
    """Resolve a scenario (a TOML file, a JSON file such as `reclaimsim validate` prints, a
    built-in name or a dict) and apply `key=value` overrides.

    With `full_scale`, first apply the scenario's `[compare].full_scale` overrides (a seed
    experiment scaled down to run in seconds, taken back to the seed's size). The result
    holds only values JSON can carry (checked here, naming the field), and a `[compare]`
    table, if any, of the fields `compare` reads (see `compare_table`).
    """
    written = False  # a person's TOML, whose durations need units (JSON's are ns)
    if isinstance(scenario, dict):
        check_values(scenario, [])  # before deepcopy, which recurses
        data = copy.deepcopy(scenario)
    else:
        s = str(scenario)
        p = Path(s)
        if not s:
            raise ScenarioError("scenario '': give a TOML file or a built-in name (`reclaimsim scenarios`)")
        if p.is_dir():
            raise ScenarioError(f"scenario {s!r} is a directory; give a TOML file or a built-in name")
        if p.is_file():
            if p.suffix == ".json":  # e.g. what `reclaimsim validate` prints
                data = _parse_json(_read_text(p), s)
            else:
                data = _parse_toml(_read_text(p), s)
                written = True
            _resolve_paths(data, p.parent)
        else:
            f = _builtin_dir() / f"{s}.toml"
            if not f.is_file():
                names = ", ".join(n for n, _ in builtin_scenarios())
                raise ScenarioError(
                    f"scenario {s!r}: no such file and no built-in of that name; built-ins: {names}"
                )
            data = _parse_toml(f.read_text(), f"built-in {s}")
            written = True
        check_values(data, [])
    if full_scale:
        fs = compare_table(data).get("full_scale")
        if fs is None:
            raise ScenarioError("--full-scale: this scenario runs at its full scale already (no [compare].full_scale)")
        _apply_full_scale(data, fs)
    for o in overrides:
        apply_override(data, o)  # each value checked as check_values does
    fs = compare_table(data).get("full_scale")
    if fs and not full_scale:
        # Applied to a copy: a path that does not exist is refused whether or not they
        # are used.
        _apply_full_scale(copy.deepcopy(data), fs)
    _version_as_text(data)
    _check_trace_paths(data)
    if written:
        _core.check_units_json(json.dumps(data))
    return data


def _apply_full_scale(data: dict, fs: list[str]) -> None:
    for i, o in enumerate(fs):
        apply_override(data, o, f"scenario.compare.full_scale[{i}] = {quoted(o)}")


def _check_trace_paths(data: dict) -> None:
    """Refuse a trace workload's path that exists but is not a regular file (a
    directory, a device, a FIFO), as --costs does: the core would call it missing."""
    for i, w in enumerate(data.get("workload") if isinstance(data.get("workload"), list) else []):
        if isinstance(w, dict) and w.get("type") == "trace" and isinstance(w.get("path"), str) and w["path"]:
            p = Path(w["path"])
            if p.exists() and not p.is_file():
                what = "is a directory" if p.is_dir() else "not a regular file"
                raise ScenarioError(f"scenario.workload[{i}].path: {json.dumps(w['path'])}: {what}; expected a trace file")


# The [compare] table: field -> (what it must be, check).
_COMPARE_FIELDS: dict[str, tuple[str, Callable[[Any], bool]]] = {
    "a": ("a table of variant switches (NAME = value)", lambda v: isinstance(v, dict)),
    "b": ("a table of variant switches (NAME = value)", lambda v: isinstance(v, dict)),
    "seeds": ("an integer from 1 to 1000", lambda v: type(v) is int and 1 <= v <= 1000),
    "metrics": (
        "a list of metric names (see `reclaimsim compare --help`)",
        lambda v: isinstance(v, list) and all(isinstance(x, str) and x for x in v),
    ),
    "full_scale": (
        'a list of "KEY=VALUE" overrides',
        lambda v: isinstance(v, list) and all(isinstance(x, str) for x in v),
    ),
}


def shortened(data: dict, duration_ns: int) -> dict:
    """A copy of the normalized scenario `data` cut to `duration_ns` of virtual time (at
    least 1 ns), for a probe run: without its warmup (which must stay shorter than the
    run), with each memory.reclaim and lru_gen schedule kept as one write due at once, and
    each workload that would start at or after the cut starting in its last nanosecond (a
    start must fall within the run), so that the probe's result has every section and
    workload the full run has."""
    d = copy.deepcopy(data)
    cut = max(int(duration_ns), 1)
    d["duration"] = cut
    d.pop("warmup", None)
    for key in ("reclaim", "lru_gen"):
        for entry in d.get(key) or []:
            entry["at"], entry["times"] = 0, 1
    for w in d.get("workload") or []:
        if w.get("start", 0) >= cut:  # normalized: nanoseconds
            w["start"] = cut - 1
    return d


def compare_table(data: dict) -> dict:
    """The scenario's `[compare]` table (empty when it has none), checked field by field:
    `a` and `b` (variant switch tables), `seeds`, `metrics` and `full_scale`."""
    spec = data.get("compare")
    if spec is None:
        return {}
    if not isinstance(spec, dict):
        raise ScenarioError(
            f"scenario.compare = {brief(spec)}: expected a table with fields {', '.join(_COMPARE_FIELDS)}"
        )
    for k, v in spec.items():
        if k not in _COMPARE_FIELDS:
            raise ScenarioError(f"scenario.compare.{k}: unknown field; allowed: {', '.join(_COMPARE_FIELDS)}")
        what, ok = _COMPARE_FIELDS[k]
        if not ok(v):
            raise ScenarioError(f"scenario.compare.{k} = {brief(v)}: expected {what}")
    for i, o in enumerate(spec.get("full_scale", [])):
        origin = f"scenario.compare.full_scale[{i}] = {quoted(o)}"
        if "=" not in o:
            raise ScenarioError(f'{origin}: expected "KEY=VALUE", e.g. "machine.cpus=64"')
        parse_key(o.partition("=")[0], origin)
    return spec


def brief(v: Any) -> str:
    """A value as JSON, cut to about 60 characters (for a message)."""
    s = json.dumps(v, default=str)
    return s if len(s) <= 60 else s[:57] + "..."


# How deep a scenario's tables and arrays may nest (a real one nests a few levels): deeper
# input is refused, naming the field, before anything recursive (json, the core) sees it.
MAX_DEPTH = 64


def value_problem(v: Any, limit: int = MAX_DEPTH) -> tuple[list, str | None, str] | None:
    """The first value inside `v` that no scenario field takes and JSON cannot carry
    (a TOML date or time, NaN or an infinity, anything but a string, number, boolean,
    array or table) or nesting deeper than `limit` levels: (its path inside `v`, the
    value as shown, what is wrong), or None. Iterative: any depth is safe."""
    if not _has_problem(v, limit):
        return None
    # Found: walk again in order, keeping paths, to name the first one.
    stack: list[tuple[Any, list]] = [(v, [])]
    while stack:
        x, p = stack.pop()
        if isinstance(x, (dict, list, tuple)):
            for k in x if isinstance(x, dict) else ():
                if isinstance(k, str) and _CONTROL.search(k):
                    return p, printable(repr(k)), _CONTROL_WHAT + " (in a key)"
            items = list(x.items()) if isinstance(x, dict) else list(enumerate(x))
            if items and len(p) >= limit:
                return p, None, f"nested too deeply (more than {MAX_DEPTH} levels of tables and arrays)"
            stack.extend((y, p + [k]) for k, y in reversed(items))
        else:
            what = _leaf_problem(x)
            if what:
                return p, *what
    return None


def _has_problem(v: Any, limit: int) -> bool:
    """Whether value_problem finds anything: one pass without paths (a scenario of a
    million cgroups is walked in about a second)."""
    stack = [(v, 0)]
    pop, extend = stack.pop, stack.extend
    while stack:
        x, d = pop()
        t = type(x)
        if t is str:
            if _CONTROL.search(x):
                return True
            continue
        if t is int or t is bool or x is None:
            continue
        if t is dict or t is list or t is tuple:
            if x:
                if d >= limit:
                    return True
                if t is dict and any(type(k) is not str or _CONTROL.search(k) for k in x):
                    return True
                extend(zip(x.values() if t is dict else x, itertools.repeat(d + 1)))
        elif isinstance(x, (dict, list, tuple)):
            return True  # a subclass: let the slow walk judge it
        elif _leaf_problem(x):
            return True
    return False


# Control characters (C0, DEL, C1, line and paragraph separators): no scenario or grid
# string holds one (an escape sequence in a name would reach the terminal raw).
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")
_CONTROL_WHAT = "control characters (escapes, line breaks, NUL) are not allowed; names, paths and values are printable text"


def _leaf_problem(x: Any) -> tuple[str, str] | None:
    """(the value as shown, what is wrong) of a value that is no table or array, or None."""
    if isinstance(x, str):
        return (printable(repr(x)[:60]), _CONTROL_WHAT) if _CONTROL.search(x) else None
    if isinstance(x, (datetime.date, datetime.time)):
        return x.isoformat(), (
            "a TOML date or time; no scenario field takes one "
            '(durations are numbers of ns or strings such as "30s")'
        )
    if isinstance(x, float) and not math.isfinite(x):
        return str(x), "not a finite number"
    if not (x is None or isinstance(x, (str, int, float, bool))):
        return repr(x)[:60], "not a TOML value (a string, number, boolean, array or table)"
    return None


def check_values(v: Any, path: list) -> None:
    """Refuse, naming the field, values a scenario never takes and JSON cannot carry:
    TOML dates and times, NaN and infinities; and nesting deeper than MAX_DEPTH."""
    bad = value_problem(v, MAX_DEPTH - len(path))
    if bad is None:
        return
    sub, shown, what = bad
    where = _fmt_path(path + sub)
    raise ScenarioError(f"{where}: {what}" if shown is None else f"{where} = {shown}: {what}")


def _resolve_paths(data: dict, base: Path) -> None:
    """Trace workloads' relative paths and a relative `costs_profile` are relative to the
    scenario file's directory."""
    cp = data.get("costs_profile")
    if isinstance(cp, str) and cp and not Path(cp).is_absolute():
        data["costs_profile"] = str(base / cp)
    for w in data.get("workload", []) if isinstance(data.get("workload"), list) else []:
        if isinstance(w, dict) and w.get("type") == "trace" and isinstance(w.get("path"), str):
            if not Path(w["path"]).is_absolute():
                w["path"] = str(base / w["path"])


def parse_value(v: str) -> Any:
    """A `--set` value: a TOML value, else the text itself as a string."""
    try:
        doc = toml_loads(f"v = {v}")
    except tomllib.TOMLDecodeError:
        return v
    except RecursionError:
        raise ScenarioError(f"value {quoted(v)}: invalid TOML: nested too deeply") from None
    # More than one key: the text held a newline and more TOML after the value.
    return doc["v"] if list(doc) == ["v"] else v


def quoted(text: str, n: int = 60) -> str:
    """repr(text), cut to about n characters (a refusal stays one readable line)."""
    return repr(text) if len(text) <= n else f"{text[:n]!r}... ({len(text)} characters)"


_INDEX = re.compile(r"[0-9]+")
_COMPONENT = re.compile(r"([^\[\]]+)((?:\[[^\[\]]*\])*)")


def parse_key(key: str, origin: str) -> list[str | int]:
    """The parts of a `--set` key: `cgroup[1].memory.max` -> ["cgroup", 1, "memory",
    "max"]. A component is NAME or NAME[INDEX]... with INDEX ASCII digits; anything else
    (an empty component, an unbalanced or empty bracket, text after a bracket) is
    refused, the message starting with `origin`."""
    parts: list[str | int] = []
    for tok in key.strip().split("."):
        if not tok:
            raise ScenarioError(f"{origin}: empty key component")
        m = _COMPONENT.fullmatch(tok)
        if m is None:
            raise ScenarioError(
                f"{origin}: key component {quoted(tok)} is malformed (unbalanced brackets or text after one); "
                "expected NAME or NAME[INDEX], e.g. cgroup[1]"
            )
        parts.append(m[1])
        for idx in re.findall(r"\[([^\[\]]*)\]", m[2]):
            if not _INDEX.fullmatch(idx):
                raise ScenarioError(f"{origin}: index {quoted(idx)} is not a number (digits 0-9)")
            if len(idx.lstrip("0")) > 18:
                raise ScenarioError(f"{origin}: index {quoted(idx)} is too large")
            parts.append(int(idx))
        if len(parts) > MAX_DEPTH:
            raise ScenarioError(f"{origin}: key nested too deeply (more than {MAX_DEPTH} levels)")
    return parts


def apply_override(data: dict, expr: str, origin: str | None = None) -> None:
    """Apply one `path=value` override in place.

    Paths are dotted keys; list items are `name[i]` (e.g. `cgroup[1].memory.max=1G`,
    `workload[0].size=128M`, `machine.cpus=64`). The value is parsed as a TOML value,
    falling back to a string. A path through a missing key is an error naming it; so is a
    malformed key, and a value no scenario field takes (a TOML date, NaN). Errors start
    with `origin` (default: `--set 'EXPR'`).
    """
    origin = origin or f"--set {quoted(expr)}"
    if "=" not in expr:
        raise ScenarioError(f"{origin}: expected KEY=VALUE, e.g. machine.cpus=64")
    key, _, raw = expr.partition("=")
    parts = parse_key(key, origin)
    try:
        value = parse_value(raw.strip())
        check_values(value, parts)
    except ScenarioError as e:
        raise ScenarioError(f"{origin}: {e}") from None
    cur: Any = data
    for i, p in enumerate(parts[:-1]):
        where = _fmt_path(parts[: i + 1])
        if isinstance(p, int):
            if not isinstance(cur, list) or p >= len(cur):
                n = len(cur) if isinstance(cur, list) else 0
                raise ScenarioError(f"{origin}: {where} does not exist ({n} items)")
            cur = cur[p]
        else:
            if not isinstance(cur, dict):
                raise ScenarioError(f"{origin}: {where} is not a table")
            if p not in cur:
                nxt = parts[i + 1]
                cur[p] = [] if isinstance(nxt, int) else {}
                if isinstance(nxt, int):
                    raise ScenarioError(
                        f"{origin}: {where} does not exist; keys here: {', '.join(sorted(k for k in cur if k != p))}"
                    )
            cur = cur[p]
    last = parts[-1]
    if isinstance(last, int):
        if not isinstance(cur, list) or last >= len(cur):
            raise ScenarioError(f"{origin}: {_fmt_path(parts)} does not exist")
        cur[last] = value
    elif isinstance(cur, dict):
        cur[last] = value
    else:
        raise ScenarioError(f"{origin}: {_fmt_path(parts[:-1])} is not a table")


def _fmt_path(parts: list) -> str:
    s = "scenario"
    for i, p in enumerate(parts):
        if i == 12 and len(parts) > 16:  # a path nested too deeply: its start
            return f"{s}..."
        s += f"[{p}]" if isinstance(p, int) else f".{p}"
    return s


# ---------------------------------------------------------------------------------------
# A/B sides: variant switches and fields applied to a scenario (compare, sweep's variant
# sets, kernel-compare's model sides)


def parse_switches(text: str | None) -> dict:
    """`rotation_cost=false,lru_add_dead_filter=true` -> a side's table. Names without a
    dot or an index are variant switches; others are scenario fields by their `--set`
    path (`kernel.lru=mglru`, `kernel.lru_gen.enabled=3`)."""
    out: dict[str, Any] = {}
    if not text:
        return out
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        if "=" not in part:
            raise ScenarioError(f"switch {part!r}: expected NAME=VALUE, e.g. rotation_cost=false")
        k, _, v = part.partition("=")
        if k.strip() in out:
            raise ScenarioError(f"switch {quoted(part)}: {k.strip()} is given twice")
        try:
            out[k.strip()] = parse_value(v.strip())
        except ScenarioError as e:
            raise ScenarioError(f"switch {quoted(part)}: {e}") from None
    for k, v in out.items():
        check_values(v, _side_path(k))
    _version_as_text(out)
    return out


def _side_path(k: str) -> list:
    """Where a side's entry goes, for messages: a switch under [variants], else the
    scenario field of that --set path."""
    return [k] if "." in k or "[" in k else ["variants", k]


def _flatten(v: dict, prefix: str = "") -> dict:
    """A side's table with nested tables turned into dotted paths."""
    out = {}
    for k, x in v.items():
        if isinstance(x, dict) and k != "variants":
            out.update(_flatten(x, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = x
    return out


def toml_literal(x: Any) -> str:
    """A value as the TOML text of a `--set` override (apply_override parses it back)."""
    if isinstance(x, bool):
        return "true" if x else "false"
    if isinstance(x, TomlFloat):
        return x.text
    if isinstance(x, (int, float)):
        return repr(x)
    return json.dumps(x)


def apply_side(data: dict, side: dict) -> dict:
    """The scenario of one side: variant switches merged into the scenario's own
    [variants] (as written: a switch it leaves out takes its default from the side's
    kernel.version when the core validates the side), other entries set as scenario
    fields by their `--set` paths."""
    d = json.loads(json.dumps(data))
    variants = d.get("variants", {})
    switches = {}
    for k, x in _flatten(side).items():
        check_values(x, _side_path(k))
        if "." in k or "[" in k:
            apply_override(d, f"{k}={toml_literal(x)}")
        else:
            switches[k] = x
    d["variants"] = {**variants, **switches}
    _version_as_text(d)
    return d


def run(
    scenario: str | Path | dict,
    *,
    seed: int | None = None,
    overrides: Iterable[str] = (),
    progress: Callable[[int, int], None] | None = None,
    full_scale: bool = False,
    max_memory: int | None = None,
) -> Result:
    """Run a scenario and return its Result (same data as `reclaimsim run --json`).
    A run whose estimated memory is above `max_memory` bytes (default: what
    this process may take: MemAvailable, its memory cgroup's headroom, ulimit -v) is refused with a ScenarioError."""
    data = load_scenario(scenario, overrides, full_scale)
    if seed is not None:
        data["seed"] = seed
    text = _core.run_json(json.dumps(data), progress, max_memory)
    return Result(text)
