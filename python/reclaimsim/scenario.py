"""Loading scenarios: a TOML path, a built-in name, or a dict; plus --set overrides."""

from __future__ import annotations

import copy
import datetime
import json
import math
import tomllib
from importlib import resources
from pathlib import Path
from typing import Any, Callable, Iterable

from . import _core
from ._core import ScenarioError
from .result import Result


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
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise ScenarioError(f"{origin}: invalid TOML: {e}") from None
    except RecursionError:
        raise ScenarioError(f"{origin}: invalid TOML: nested too deeply") from None


def _parse_json(text: str, origin: str) -> dict:
    try:
        data = json.loads(text)
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
    if isinstance(scenario, dict):
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
            _resolve_paths(data, p.parent)
        else:
            f = _builtin_dir() / f"{s}.toml"
            if not f.is_file():
                names = ", ".join(n for n, _ in builtin_scenarios())
                raise ScenarioError(
                    f"scenario {s!r}: no such file and no built-in of that name; built-ins: {names}"
                )
            data = _parse_toml(f.read_text(), f"built-in {s}")
    if full_scale:
        fs = compare_table(data).get("full_scale")
        if fs is None:
            raise ScenarioError("--full-scale: this scenario runs at its full scale already (no [compare].full_scale)")
        for o in fs:
            apply_override(data, o)
    for o in overrides:
        apply_override(data, o)
    _check_values(data, [])
    compare_table(data)
    return data


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
    run), and with each memory.reclaim and lru_gen schedule kept as one write due at once,
    so that the probe's result has their sections."""
    d = copy.deepcopy(data)
    d["duration"] = max(int(duration_ns), 1)
    d.pop("warmup", None)
    for key in ("reclaim", "lru_gen"):
        for entry in d.get(key) or []:
            entry["at"], entry["times"] = 0, 1
    return d


def compare_table(data: dict) -> dict:
    """The scenario's `[compare]` table (empty when it has none), checked field by field:
    `a` and `b` (variant switch tables), `seeds`, `metrics` and `full_scale`."""
    spec = data.get("compare")
    if spec is None:
        return {}
    if not isinstance(spec, dict):
        raise ScenarioError(
            f"scenario.compare = {_show(spec)}: expected a table with fields {', '.join(_COMPARE_FIELDS)}"
        )
    for k, v in spec.items():
        if k not in _COMPARE_FIELDS:
            raise ScenarioError(f"scenario.compare.{k}: unknown field; allowed: {', '.join(_COMPARE_FIELDS)}")
        what, ok = _COMPARE_FIELDS[k]
        if not ok(v):
            raise ScenarioError(f"scenario.compare.{k} = {_show(v)}: expected {what}")
    return spec


def _show(v: Any) -> str:
    s = json.dumps(v, default=str)
    return s if len(s) <= 60 else s[:57] + "..."


def _check_values(v: Any, path: list) -> None:
    """Refuse, naming the field, values a scenario never takes and JSON cannot carry:
    TOML dates and times, NaN and infinities."""
    if isinstance(v, dict):
        for k, x in v.items():
            _check_values(x, path + [k])
    elif isinstance(v, list):
        for i, x in enumerate(v):
            _check_values(x, path + [i])
    elif isinstance(v, (datetime.date, datetime.time)):
        raise ScenarioError(
            f"{_fmt_path(path)} = {v.isoformat()}: a TOML date or time; no scenario field takes one "
            '(durations are numbers of ns or strings such as "30s")'
        )
    elif isinstance(v, float) and not math.isfinite(v):
        raise ScenarioError(f"{_fmt_path(path)} = {v}: not a finite number")


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


def _parse_value(v: str) -> Any:
    try:
        return tomllib.loads(f"v = {v}")["v"]
    except tomllib.TOMLDecodeError:
        return v


def apply_override(data: dict, expr: str) -> None:
    """Apply one `path=value` override in place.

    Paths are dotted keys; list items are `name[i]` (e.g. `cgroup[1].memory.max=1G`,
    `workload[0].size=128M`, `machine.cpus=64`). The value is parsed as a TOML value,
    falling back to a string. A path through a missing key is an error naming it.
    """
    if "=" not in expr:
        raise ScenarioError(f"--set {expr!r}: expected KEY=VALUE, e.g. machine.cpus=64")
    key, _, raw = expr.partition("=")
    parts: list[str | int] = []
    for tok in key.strip().split("."):
        if not tok:
            raise ScenarioError(f"--set {expr!r}: empty key component")
        name, _, rest = tok.partition("[")
        parts.append(name)
        while rest:
            idx, _, rest = rest.partition("]")
            if not idx.isdigit():
                raise ScenarioError(f"--set {expr!r}: index {idx!r} is not a number")
            parts.append(int(idx))
            rest = rest.lstrip("[")
    cur: Any = data
    for i, p in enumerate(parts[:-1]):
        where = _fmt_path(parts[: i + 1])
        if isinstance(p, int):
            if not isinstance(cur, list) or p >= len(cur):
                n = len(cur) if isinstance(cur, list) else 0
                raise ScenarioError(f"--set {expr!r}: {where} does not exist ({n} items)")
            cur = cur[p]
        else:
            if not isinstance(cur, dict):
                raise ScenarioError(f"--set {expr!r}: {where} is not a table")
            if p not in cur:
                nxt = parts[i + 1]
                cur[p] = [] if isinstance(nxt, int) else {}
                if isinstance(nxt, int):
                    raise ScenarioError(
                        f"--set {expr!r}: {where} does not exist; keys here: {', '.join(sorted(k for k in cur if k != p))}"
                    )
            cur = cur[p]
    last = parts[-1]
    value = _parse_value(raw.strip())
    if isinstance(last, int):
        if not isinstance(cur, list) or last >= len(cur):
            raise ScenarioError(f"--set {expr!r}: {_fmt_path(parts)} does not exist")
        cur[last] = value
    elif isinstance(cur, dict):
        cur[last] = value
    else:
        raise ScenarioError(f"--set {expr!r}: {_fmt_path(parts[:-1])} is not a table")


def _fmt_path(parts: list) -> str:
    s = "scenario"
    for p in parts:
        s += f"[{p}]" if isinstance(p, int) else f".{p}"
    return s


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
    A run whose estimated memory is above `max_memory` bytes (default: the machine's
    available memory) is refused with a ScenarioError."""
    data = load_scenario(scenario, overrides, full_scale)
    if seed is not None:
        data["seed"] = seed
    text = _core.run_json(json.dumps(data), progress, max_memory)
    return Result(text)
