"""A/B experiments: one scenario under two variant sets over several seeds.

Prints, as MMTests and lkp do, per metric: A mean +- stddev, B mean +- stddev, %change and
a mark where Welch's t-test (scipy) finds the difference significant at p < 0.05; then the
perf-lock-contention table side by side.
"""

from __future__ import annotations

import json
import os
from typing import Iterable

from . import _core
from ._core import ScenarioError
from .batch import probe, result_text, run_all
from .metrics import metric
from .scenario import apply_side, compare_table, load_scenario, parse_switches, quoted
from .versions import differing_rules, format_differing_rules
from .stats import ALPHA, ab_row, fmt_ns, fmt_num, mean_sd, pct_change

DEFAULT_METRICS = [
    "pgscan_kswapd",
    "pgscan_direct",
    "pgsteal_kswapd",
    "pgsteal_direct",
    "pgscan_anon",
    "pgscan_file",
    "workingset_refault_anon",
    "workingset_refault_file",
    "pswpin",
    "pswpout",
    "allocstall_normal",
    "kswapd_cpu_ns",
    "lock_wait_total_ns",
    "lock_acquisitions",
]


def check_metrics(data: dict, names: list[str], origin: str | None = None) -> None:
    """Refuse an unknown metric before the runs: each one is read off a probe run of the
    scenario cut to one virtual millisecond (batch.probe: its result has every counter,
    cgroup, workload and tracepoint the full runs will have). With `origin` (the list's
    place, e.g. `scenario.compare.metrics`), the refusal names the entry."""
    r = json.loads(result_text(*probe(data, 1_000_000, 1_000_000)[:2]))
    for i, name in enumerate(names):
        try:
            metric(r, name)
        except ScenarioError as e:
            if origin is None:
                raise
            why = str(e).removeprefix(f"metric {name!r}: ")
            raise ScenarioError(f"{origin}[{i}] = {quoted(name)}: {why}") from None


def check_compare_table(data: dict) -> None:
    """Refuse, at validation, what `compare` would refuse of the scenario's [compare]
    table: a side's switches or fields (applied as compare applies them) and a metric
    (read off a probe run of one virtual millisecond, as compare does), naming the entry."""
    spec = compare_table(data)
    if not spec:
        return
    d = {k: v for k, v in data.items() if k != "compare"}
    _core.validate_json(json.dumps(d))
    sides = {}
    for k in ("a", "b"):
        if k in spec:
            try:
                sides[k] = apply_side(d, spec[k])
                _core.validate_json(json.dumps(sides[k]))
            except ScenarioError as e:
                raise ScenarioError(f"scenario.compare.{k}: {e}") from None
    names = spec.get("metrics") or []
    if names:
        check_metrics(sides.get("a", d), names, "scenario.compare.metrics")


def compare(
    scenario,
    *,
    a: str | dict | None = None,
    b: str | dict | None = None,
    seeds: int | None = None,
    overrides: Iterable[str] = (),
    metrics: list[str] | None = None,
    jobs: int | None = None,
    full_scale: bool = False,
) -> dict:
    """Run `scenario` under variant sets A and B over `seeds` seeds; returns the comparison
    (the same data as `reclaimsim compare --json`)."""
    data = load_scenario(scenario, overrides, full_scale)
    spec = compare_table(data)
    data.pop("compare", None)
    va = parse_switches(a) if isinstance(a, str) or a is None else dict(a)
    vb = parse_switches(b) if isinstance(b, str) or b is None else dict(b)
    if a is None:
        va = dict(spec.get("a", {}))
    if b is None:
        vb = dict(spec.get("b", {}))
    if va == vb:
        raise ScenarioError("compare: A and B are the same variant set; give --a/--b (e.g. --b rotation_cost=false)")
    k = seeds if seeds is not None else spec.get("seeds", 3)
    if not 1 <= k <= 1000:
        raise ScenarioError(f"compare: --seeds {k}: allowed 1 to 1000")
    names = metrics or list(spec.get("metrics", DEFAULT_METRICS))
    # Validate in this process first, so a bad field or switch is its own clear error.
    base = json.loads(_core.validate_json(json.dumps(data)))
    sides, norms = [], []
    for side, v in (("A", va), ("B", vb)):
        try:
            d = apply_side(data, v)
            norms.append(json.loads(_core.validate_json(json.dumps(d))))
        except ScenarioError as e:
            raise ScenarioError(f"compare: side {side}: {e}") from None
        sides.append(d)
    check_metrics(sides[0], names)
    if base["seed"] + k - 1 >= 2**64:
        raise ScenarioError(f"compare: seeds {base['seed']} to {base['seed'] + k - 1}: a seed is at most 2^64 - 1")
    jobs_in = [json.dumps({**d, "seed": base["seed"] + i}) for d in sides for i in range(k)]
    texts = run_all(jobs_in, jobs or min(len(jobs_in), os.cpu_count() or 1))
    results = [json.loads(t) for t in texts]
    ra, rb = results[:k], results[k:]
    out_metrics = []
    for name in names:
        xa = [metric(r, name) for r in ra]
        xb = [metric(r, name) for r in rb]
        out_metrics.append({"name": name, **ab_row(xa, xb)})
    sites = sorted({l["caller"] for r in results for l in r["locks"]})
    locks = []
    for s in sites:
        wa = mean_sd([sum(l["total_wait_ns"] for l in r["locks"] if l["caller"] == s) for r in ra])[0]
        wb = mean_sd([sum(l["total_wait_ns"] for l in r["locks"] if l["caller"] == s) for r in rb])[0]
        aa = mean_sd([sum(l["acquisitions"] for l in r["locks"] if l["caller"] == s) for r in ra])[0]
        ab = mean_sd([sum(l["acquisitions"] for l in r["locks"] if l["caller"] == s) for r in rb])[0]
        locks.append(
            {
                "site": s,
                "a_total_wait_ns": wa,
                "b_total_wait_ns": wb,
                "a_acquisitions": aa,
                "b_acquisitions": ab,
                "pct_change": pct_change(wa, wb),
            }
        )
    locks.sort(key=lambda l: -max(l["a_total_wait_ns"], l["b_total_wait_ns"]))
    return {
        "scenario": data.get("name") or str(scenario),
        "a": va,
        "b": vb,
        "seeds": k,
        "metrics": out_metrics,
        "locks": locks,
        "rules": differing_rules(*norms),
    }


def format_compare(c: dict) -> str:
    sw = lambda v: ",".join(f"{k}={json.dumps(x)}" for k, x in v.items()) or "(upstream)"
    w = max([32] + [len(m["name"]) for m in c["metrics"]])
    lines = [
        f"# compare {c['scenario']}: A = {sw(c['a'])}  B = {sw(c['b'])}  seeds = {c['seeds']}",
        "",
        f"{'metric':<{w}} {'A mean':>14} {'± std':>10} {'B mean':>14} {'± std':>10} {'%change':>9} {'p':>8}",
    ]
    for m in c["metrics"]:
        pct = "n/a" if m["pct_change"] is None else f"{m['pct_change']:+.2f}%"
        p = "-" if m.get("p_value") is None else f"{m['p_value']:.2g}"
        mark = " *" if m["significant"] else ""
        lines.append(
            f"{m['name']:<{w}} {fmt_num(m['a_mean']):>14} {fmt_num(m['a_std']):>10} {fmt_num(m['b_mean']):>14} "
            f"{fmt_num(m['b_std']):>10} {pct:>9} {p:>8}{mark}"
        )
    lines += [
        "",
        f"* = significant: Welch's t-test p < {ALPHA}, or samples that do not vary and differ (p -); "
        "fewer than 2 seeds: no test",
    ]
    rules = format_differing_rules(c.get("rules", []))
    lines += [""] + rules if rules else []
    lines += ["", "## lock contention: total wait (mean over seeds)"]
    lines.append(f"{'caller':<28} {'A wait':>12} {'B wait':>12} {'%change':>9} {'A acq':>12} {'B acq':>12}")
    for l in c["locks"]:
        pct = "n/a" if l["pct_change"] is None else f"{l['pct_change']:+.2f}%"
        lines.append(
            f"{l['site']:<28} {fmt_ns(l['a_total_wait_ns']):>12} {fmt_ns(l['b_total_wait_ns']):>12} {pct:>9} "
            f"{l['a_acquisitions']:>12.0f} {l['b_acquisitions']:>12.0f}"
        )
    return "\n".join(lines)
