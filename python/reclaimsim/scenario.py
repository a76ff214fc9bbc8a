"""Loading scenarios: a TOML path, a built-in name, or a dict; plus --set overrides."""

from __future__ import annotations

import copy
import json
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


def load_scenario(
    scenario: str | Path | dict, overrides: Iterable[str] = (), full_scale: bool = False
) -> dict:
    """Resolve a scenario (path, built-in name or dict) and apply `key=value` overrides.

    With `full_scale`, first apply the scenario's `[compare].full_scale` overrides (a seed
    experiment scaled down to run in seconds, taken back to the seed's size).
    """
    if isinstance(scenario, dict):
        data = copy.deepcopy(scenario)
    else:
        s = str(scenario)
        p = Path(s)
        if p.is_file():
            data = _parse_toml(p.read_text(), s)
            _resolve_trace_paths(data, p.parent)
        else:
            f = _builtin_dir() / f"{s}.toml"
            if not f.is_file():
                names = ", ".join(n for n, _ in builtin_scenarios())
                raise ScenarioError(
                    f"scenario {s!r}: no such file and no built-in of that name; built-ins: {names}"
                )
            data = _parse_toml(f.read_text(), f"built-in {s}")
    if full_scale:
        fs = (data.get("compare") or {}).get("full_scale")
        if fs is None:
            raise ScenarioError("--full-scale: this scenario runs at its full scale already (no [compare].full_scale)")
        for o in fs:
            apply_override(data, o)
    for o in overrides:
        apply_override(data, o)
    return data


def _resolve_trace_paths(data: dict, base: Path) -> None:
    """Trace workloads' relative paths are relative to the scenario file's directory."""
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
) -> Result:
    """Run a scenario and return its Result (same data as `reclaimsim run --json`)."""
    data = load_scenario(scenario, overrides, full_scale)
    if seed is not None:
        data["seed"] = seed
    text = _core.run_json(json.dumps(data), progress)
    return Result(text)
