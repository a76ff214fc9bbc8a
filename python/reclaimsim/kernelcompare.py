"""`reclaimsim kernel-compare`: a patch's effect measured on two real kernels and in the
model, side by side.

Kernel A and kernel B (bzImages, e.g. from `kernel-build` without and with a patch) each
boot in a VM and run the scenario once per rep, interleaved (A, B, A, B, ...) so that a
drift of the host's speed falls on both. The simulator runs the scenario's `[compare]`
switch sets (or --a/--b), one run per rep with the memcg flush phase spread as kernel-run
does, each side as its kernel's version (from its release string: docs/versions.md). Each metric gets compare's columns twice, kernel then model: A mean +- std,
B mean +- std, %change, Welch's p and mark; the last column says whether the model's
A/B moves the way the kernels' does (both significant in the same direction, or both
not significant).
"""

from __future__ import annotations

import json
import time

from . import _core, vm
from ._core import ScenarioError
from .metrics import across_cgroup_counters
from .scenario import apply_side, compare_table, parse_switches
from .sidebyside import KernelRunError, simulate, why_not_comparable
from .stats import ALPHA, ab_row, fmt_num
from .versions import model_of_kernel


def _kernel(spec: str, progress) -> vm.Kernel:
    return vm.resolve_kernel(spec, progress)


def _model_version(spec: str) -> str | None:
    """The modeled version a kernel named on the command line runs the model as, known
    before anything is fetched: a pinned Debian kernel's, or a bzImage's from the release
    string in its header; None when it cannot be told."""
    from pathlib import Path

    if spec == "debian":
        spec = vm.debkernels.DEFAULT
    if spec in vm.debkernels.KERNELS:
        return vm.debkernels.KERNELS[spec].model_version
    p = Path(spec)
    release = vm.bzimage_release(p) if p.is_file() else None
    found = _core.version_of_release(release) if release else None
    return found[0] if found else None


def kernel_sides(norm: dict, nprocs: list[int], ka: vm.Kernel, kb: vm.Kernel, reps: int, accel, timeout: float, progress=None, after=None) -> tuple[dict, list[str]]:
    """The counters of each rep on each kernel, reps interleaved; `accel` is one
    accelerator for both kernels or a pair (A's, B's)."""
    runs: dict[str, list[dict]] = {"A": [], "B": []}
    how = []
    # Each kernel's accelerator is resolved (KVM probed, under auto) at its first boot
    # and kept for the others.
    pair = (accel, accel) if isinstance(accel, str) else accel
    chosen = {"A": pair[0], "B": pair[1]}
    took: list[float] = []
    for i in range(reps):
        for side, k in (("A", ka), ("B", kb)):
            if progress:
                left = 2 * reps - len(took)
                eta = f"; about {sum(took) / len(took) * left / 60:.0f} min left" if took else ""
                progress(f"rep {i + 1}/{reps}, kernel {side} ({k.release}): boot {len(took) + 1} of {2 * reps}{eta}")
            t0 = time.monotonic()
            doc = vm.run_in_vm(norm, nprocs, 1, k, chosen[side], timeout, progress, after)
            took.append(time.monotonic() - t0)
            chosen[side] = doc["accel"]
            r = doc["reps"][0]
            c = vm.rep_counters(r, norm)
            c["wall_s"] = r["wall_s"]
            c["_proactive"] = vm.has_proactive_counters(doc)
            if not runs[side] and doc["accel_how"] not in how:  # how its first boot chose
                how.append(doc["accel_how"])
            runs[side].append(c)
    return runs, how


def check_sides(scenario: dict, sa: dict, sb: dict, origins: tuple[str, str] = ("--a", "--b")) -> None:
    """Refuse a model side the simulator would not take (an unknown switch, a bad field)
    as model_sides would, but before any kernel is fetched or booted; `origins` say where
    each side came from."""
    _core.validate_json(json.dumps(scenario))
    for side, v, origin in (("A", sa, origins[0]), ("B", sb, origins[1])):
        try:
            _core.validate_json(json.dumps(apply_side(scenario, v)))
        except ScenarioError as e:
            raise ScenarioError(f"kernel-compare: model side {side} ({origin}): {e}") from None


def model_sides(
    scenario: dict, sa: dict, sb: dict, reps: int, fold: bool, progress=None,
    releases: tuple[str, str] | None = None, notes: list | None = None, profiles: tuple | None = None,
) -> dict:
    """The simulator's counters under switch sets `sa` and `sb`, `reps` runs each; with
    `releases` (kernel A's and B's), each side runs as its kernel's version
    (model_of_kernel), said in `notes`; with `profiles`, each with its kernel's guest's
    costs (vm.guest_costs)."""
    out = {}
    for i, (side, v) in enumerate((("A", sa), ("B", sb))):
        d = apply_side(scenario, v)
        if releases is not None:
            said: list = []
            d = model_of_kernel(d, releases[i], said)
            if notes is not None:
                notes.extend(f"model {side}: {n}" for n in said)
        if profiles is not None:
            d = vm.with_guest_costs(d, profiles[i], [])
        d = json.loads(_core.validate_json(json.dumps(d)))
        d["kernel"]["cgroup_version"] = 2
        sims = simulate(d, reps, progress, per_cgroup=True)
        # A model side on a version before the proactive items (rule pgscan_proactive)
        # counts memory.reclaim as direct already; only a later version's is folded.
        if fold and notes is not None and any(x for c in sims for k, x in c.items() if "_proactive@" in k):
            notes.append(f"model {side}: a kernel without pgscan_proactive in memory.stat: the model's proactive counts are shown under direct")
        out[side] = [vm.fold_proactive(s) for s in sims] if fold else sims
    return out


def _row(xa: list[float], xb: list[float]) -> dict:
    return {**ab_row(xa, xb), "a_values": xa, "b_values": xb}


def agreement(k: dict, m: dict) -> str:
    """Whether the model's A/B moves as the kernels' does."""
    if not k["significant"] and not m["significant"]:
        return "yes (neither changes)"
    if k["significant"] and m["significant"]:
        same = (k["b_mean"] - k["a_mean"]) * (m["b_mean"] - m["a_mean"]) > 0
        return "yes" if same else "no (opposite)"
    return "no (kernel only)" if k["significant"] else "no (model only)"


def kernel_compare(
    scenario: dict, kernel_a: str, kernel_b: str, reps: int, accel: str = "auto", timeout: float = 1800,
    a: str | None = None, b: str | None = None, progress=None, model_costs: str = "guest",
) -> dict:
    if reps < 2:
        raise KernelRunError(f"--reps {reps}: kernel-compare needs at least 2 reps per kernel for its t-test")
    spec = compare_table(scenario)
    scenario = {k: v for k, v in scenario.items() if k != "compare"}
    sa = parse_switches(a) if a is not None else dict(spec.get("a", {}))
    sb = parse_switches(b) if b is not None else dict(spec.get("b", {}))
    va, vb = _model_version(kernel_a), _model_version(kernel_b)
    if sa == sb and (va is None or va == vb):
        raise KernelRunError(
            "kernel-compare: the model's A and B are the same switch set on the same kernel version; give the "
            "scenario a [compare] table or --a/--b (e.g. --b rotation_cost=false) matching what kernel B changes, "
            "or two kernels of different versions (e.g. debian-6.12 and debian-7.3)"
        )
    check_sides(scenario, sa, sb, tuple("--" + x if v is not None else f"[compare].{x}" for x, v in (("a", a), ("b", b))))
    norm, nprocs, notes = vm.prepare(scenario)
    vm.check_prerequisites()
    ka, kb = _kernel(kernel_a, progress), _kernel(kernel_b, progress)
    profiles, accels = None, (accel, accel)
    timing = norm
    if model_costs == "guest":
        # Each kernel's accelerator first (its guest's costs are those under it), then
        # its guest's costs; kernel A's set the memory.reclaim writes' progress points.
        got = [vm.model_with_guest_costs(norm, k, accel, timeout, [], progress) for k in (ka, kb)]
        profiles = tuple(g[0]["costs_profile"] for g in got)
        accels = tuple(g[1] for g in got)
        timing = got[0][0]
        notes.extend(f"model {s}: the model runs with the guest's costs of kernel {s} ({p})" for s, p in zip("AB", profiles))
    after = vm.reclaim_timing(timing, "progress", notes, progress)
    runs, how = kernel_sides(norm, nprocs, ka, kb, reps, accels, timeout, progress, after)
    has = [c.pop("_proactive") for side in runs.values() for c in side]
    fold = bool(norm.get("reclaim")) and not all(has)
    model = model_sides(scenario, sa, sb, reps, fold, progress, (ka.release, kb.release), notes, profiles)
    # The scenario's [compare] aggregates over cgroups (cv:pgsteal@/memcg*), per rep on
    # each side, first.
    aggs = [n for n in spec.get("metrics", []) if across_cgroup_counters(runs["A"][0], n) is not None]
    for side in (*runs.values(), *model.values()):
        for c in side:
            c.update({n: across_cgroup_counters(c, n) or 0.0 for n in aggs})
    names = aggs + [n for n in runs["A"][0] if why_not_comparable(n) is None and n not in aggs]
    rows = []
    for n in names:
        kx = [[c.get(n, 0) for c in runs[s]] for s in ("A", "B")]
        mx = [[c.get(n, 0) for c in model[s]] for s in ("A", "B")] if n != "wall_s" else None
        if not any(kx[0] + kx[1]) and not (mx and any(mx[0] + mx[1])):
            continue
        k = _row(*kx)
        m = _row(*mx) if mx else None
        rows.append({"name": n, "kernel": k, "model": m, "agree": agreement(k, m) if m else None})
    notes.append(f"accel: {'; '.join(how)}")
    return {
        "scenario": norm.get("name") or "scenario",
        "reps": reps,
        "kernel_a": {"image": str(ka.image), "release": ka.release},
        "kernel_b": {"image": str(kb.image), "release": kb.release},
        "model_a": sa,
        "model_b": sb,
        "notes": notes,
        "metrics": rows,
    }


def format_kernel_compare(c: dict) -> str:
    sw = lambda v: ",".join(f"{k}={json.dumps(x)}" for k, x in v.items()) or "(upstream)"
    w = max([28] + [len(r["name"]) for r in c["metrics"]])
    lines = [
        f"# kernel-compare {c['scenario']}: reps = {c['reps']} per kernel, interleaved",
        f"#   kernel A = {c['kernel_a']['release']} ({c['kernel_a']['image']})",
        f"#   kernel B = {c['kernel_b']['release']} ({c['kernel_b']['image']})",
        f"#   model  A = {sw(c['model_a'])}   model B = {sw(c['model_b'])}",
    ]
    lines += [f"note: {n}" for n in c["notes"]]
    head = f"{'A mean':>12} {'± std':>9} {'B mean':>12} {'± std':>9} {'%change':>9} {'p':>7}  "
    lines += ["", f"{'':<{w}} {'--- kernels ---':^62}{'--- model ---':^62}",
              f"{'metric':<{w}} {head}{head}{'model agrees'}"]

    def cols(s: dict | None) -> str:
        if s is None:
            return f"{'-':>12} {'':>9} {'-':>12} {'':>9} {'':>9} {'':>7}  "
        pct = "n/a" if s["pct_change"] is None else f"{s['pct_change']:+.1f}%"
        p = "-" if s["p_value"] is None else f"{s['p_value']:.2g}"
        mark = "*" if s["significant"] else " "
        return f"{fmt_num(s['a_mean']):>12} {fmt_num(s['a_std']):>9} {fmt_num(s['b_mean']):>12} {fmt_num(s['b_std']):>9} {pct:>9} {p:>6}{mark}  "

    for r in c["metrics"]:
        lines.append(f"{r['name']:<{w}} {cols(r['kernel'])}{cols(r['model'])}{r['agree'] or ''}")
    lines += ["", f"* = significant: Welch's t-test p < {ALPHA} (p -: samples that do not vary and differ)"]
    return "\n".join(lines)
