"""The kernel versions the model can be, and the rules each has (the registry lives in
the core, crates/core/src/versions.rs; docs/versions.md explains it)."""

from __future__ import annotations

import json
import textwrap

from . import _core
from ._core import ScenarioError
from .term import printable


def registry() -> dict:
    """{"versions": [{name, source, default}], "rules": [{name, commit, what, kind, at,
    versions}]}, versions oldest first."""
    return json.loads(_core.versions_json())


def names() -> list[str]:
    return [v["name"] for v in registry()["versions"]]


def rules_in_force(norm: dict) -> dict[str, bool]:
    """Every rule of the registry, on or off in the validated scenario `norm`: a rule as
    its kernel.version has it unless kernel.rules sets it, a switch as its [variants] has
    it (the core fills a switch from the version)."""
    kernel = norm["kernel"]
    version, chosen = kernel["version"], kernel.get("rules") or {}
    out = {}
    for r in registry()["rules"]:
        if r["kind"] == "switch":
            out[r["name"]] = bool(norm["variants"].get(r["name"]))
        else:
            out[r["name"]] = bool(chosen.get(r["name"], version in r["versions"]))
    return out


def differing_rules(norm_a: dict, norm_b: dict) -> list[dict]:
    """The rules that differ between two validated scenarios (an A/B's sides), in the
    registry's order: {name, kind, commit, what, a, b}."""
    a, b = rules_in_force(norm_a), rules_in_force(norm_b)
    return [
        {"name": r["name"], "kind": r["kind"], "commit": r["commit"], "what": r["what"], "a": a[r["name"]], "b": b[r["name"]]}
        for r in registry()["rules"]
        if a[r["name"]] != b[r["name"]]
    ]


def format_differing_rules(rows: list[dict]) -> list[str]:
    """The lines a comparison prints about the rules its sides differ in (none: no lines)."""
    if not rows:
        return []
    w = max(len(r["name"]) for r in rows)
    yes = lambda x: "yes" if x else "-"
    lines = ["## kernel rules that differ between the sides (`reclaimsim versions VERSION` lists them all)",
             f"{'rule':<{w}} {'kind':<11} {'A':>3} {'B':>3}  commit"]
    for r in rows:
        lines.append(f"{r['name']:<{w}} {r['kind']:<11} {yes(r['a']):>3} {yes(r['b']):>3}  {r['commit']}")
    return lines


def model_of_kernel(scenario: dict, release: str, notes: list, version: str | None = None) -> dict:
    """The scenario as the model of the kernel `release` (`uname -r` of the host or the
    guest) runs it: a copy with kernel.version set to the modeled version that stands for
    that kernel (the same one, else the nearest lower one, else the oldest), so that the
    simulator beside a real kernel has that kernel's rules and version defaults. `version`
    (--kernel-version: a custom kernel whose release string does not say) is taken as
    the kernel's own. Says in `notes` what it chose when that is not the scenario's own
    version."""
    if version is not None:
        if version not in names():
            raise ScenarioError(f"--kernel-version {version!r}: allowed {', '.join(names())}")
        found = (version, True)
    else:
        found = _core.version_of_release(release)
    release = printable(release)
    if version is not None:
        release += " by --kernel-version"
    oldest = names()[0]
    version, exact = found if found else (oldest, False)
    d = json.loads(json.dumps(scenario))
    kernel = d.setdefault("kernel", {})
    asked = kernel.get("version")
    asked = None if asked is None else str(asked)
    kernel["version"] = version
    if found is None:
        why = f"the kernel {release} is older than every modeled version: the model runs as {oldest}, its oldest"
    elif not exact:
        why = f"the kernel {release} is not a modeled version: the model runs as {version}, the nearest lower one"
    else:
        why = f"the model runs as {version}, the kernel's version ({release})"
    if not exact or asked != version:
        if asked is not None and asked != version:
            why += f", not the scenario's kernel.version {asked}"
        notes.append(why)
    return d


def format_versions(version: str | None = None) -> str:
    """Without `version`: the versions and, per rule, which have it. With one: the rules
    in force on it and those it lacks."""
    reg = registry()
    vs = [v["name"] for v in reg["versions"]]
    if version is None:
        lines = ["kernel versions (kernel.version):"]
        for v in reg["versions"]:
            lines.append(f"  {v['name']:<5} {v['source']}{'  (default)' if v['default'] else ''}")
        lines.append("")
        w = max(len(r["name"]) for r in reg["rules"]) + 1
        head = f"{'rule':<{w}} {'kind':<11} " + " ".join(f"{v:>5}" for v in vs)
        lines += [head, "-" * len(head)]
        for r in reg["rules"]:
            marks = " ".join(f"{'yes' if v in r['versions'] else '-':>5}" for v in vs)
            lines.append(f"{r['name']:<{w}} {r['kind']:<11} {marks}")
        lines.append("")
        lines.append("`reclaimsim versions VERSION` shows a version's rules with their commits.")
        return "\n".join(lines)
    if version not in vs:
        raise ValueError(f"version {version!r}: not a modeled kernel version; allowed: {', '.join(vs)}")
    src = next(v["source"] for v in reg["versions"] if v["name"] == version)
    out = [f"kernel {version} ({src})", ""]
    for title, pick in [
        ("rules in force", lambda r: version in r["versions"]),
        ("rules it lacks (the other form runs)", lambda r: version not in r["versions"]),
    ]:
        rows = [r for r in reg["rules"] if pick(r)]
        out.append(f"{title}:")
        for r in rows or [{"name": "(none)", "commit": "", "what": "", "kind": "", "at": "", "versions": []}]:
            out.append(f"  {r['name']}")
            for part in (r["commit"], r["what"]):
                if part:
                    out += textwrap.wrap(part, 88, initial_indent="      ", subsequent_indent="      ")
        out.append("")
    out.append("Set one rule alone with --set kernel.rules.NAME=true|false.")
    return "\n".join(out)
