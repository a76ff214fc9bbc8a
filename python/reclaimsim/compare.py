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
from .perflock import perf_caller
from .versions import differing_rules, format_differing_rules, rules_in_force
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
    if "a" in spec and "b" in spec and dict(spec["a"]) == dict(spec["b"]):
        raise ScenarioError("scenario.compare: a and b are the same variant set; compare would run one experiment twice")
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
    ra, rb = _run_sides(sides, base["seed"], k, jobs)
    out = {
        "scenario": data.get("name") or str(scenario),
        "a": va,
        "b": vb,
        "seeds": k,
        "metrics": _metric_rows(names, ra, rb),
        "locks": _lock_rows(ra, rb, norms),
        "rules": differing_rules(*norms),
    }
    observe = {n.get("observe", "none") for n in norms}
    observe = observe.pop() if len(observe) == 1 else "none"  # the observer itself A/B'd: no pass without it
    if observe != "none":
        # The seed's figures are what its observer read; the kernel without one is the
        # other half of the answer: the same pair, unobserved.
        out["observe"] = observe
        plain = [{**d, "observe": "none"} for d in sides]
        ua, ub = _run_sides(plain, base["seed"], k, jobs)
        truth = list(dict.fromkeys(n.removeprefix("perf.") for n in names))
        out["unobserved"] = {"metrics": _metric_rows(truth, ua, ub), "locks": _lock_rows(ua, ub, norms)}
    return out


def _run_sides(sides: list[dict], seed: int, k: int, jobs: int | None) -> tuple[list[dict], list[dict]]:
    """Each side's results over seeds seed..seed+k-1."""
    jobs_in = [json.dumps({**d, "seed": seed + i}) for d in sides for i in range(k)]
    texts = run_all(jobs_in, jobs or min(len(jobs_in), os.cpu_count() or 1))
    results = [json.loads(t) for t in texts]
    return results[:k], results[k:]


def _metric_rows(names: list[str], ra: list[dict], rb: list[dict]) -> list[dict]:
    return [{"name": n, **ab_row([metric(r, n) for r in ra], [metric(r, n) for r in rb])} for n in names]


def _lock_rows(ra: list[dict], rb: list[dict], norms: list[dict]) -> list[dict]:
    """Per call site, the mean over seeds of each side's total wait and acquisitions (all
    locks at the site), and the caller perf names for it on each side's kernel (`norms`:
    the sides' validated scenarios); of an observed run, also what the observer read."""
    rules = [rules_in_force(n) for n in norms]

    def mean(rs, s, col, observed=False):
        pick = (lambda l: l["observed"][col]) if observed else (lambda l: l[col])
        return mean_sd([sum(pick(l) for l in r["locks"] if l["caller"] == s) for r in rs])[0]

    observed = all("observed" in l for r in ra + rb for l in r["locks"])
    locks = []
    for s in sorted({l["caller"] for r in ra + rb for l in r["locks"]}):
        wa, wb = mean(ra, s, "total_wait_ns"), mean(rb, s, "total_wait_ns")
        callers = dict.fromkeys(perf_caller(s, r) for r in rules)
        row = {
            "site": s,
            "perf_caller": " / ".join(callers),
            "a_total_wait_ns": wa,
            "b_total_wait_ns": wb,
            "a_acquisitions": mean(ra, s, "acquisitions"),
            "b_acquisitions": mean(rb, s, "acquisitions"),
            "pct_change": pct_change(wa, wb),
        }
        if observed:
            oa, ob = mean(ra, s, "total_wait_ns", True), mean(rb, s, "total_wait_ns", True)
            row["observed"] = {
                "a_total_wait_ns": oa,
                "b_total_wait_ns": ob,
                "a_contended": mean(ra, s, "contended", True),
                "b_contended": mean(rb, s, "contended", True),
                "pct_change": pct_change(oa, ob),
            }
        locks.append(row)
    locks.sort(key=lambda l: -max(l["a_total_wait_ns"], l["b_total_wait_ns"]))
    return locks


def format_compare(c: dict) -> str:
    sw = lambda v: ",".join(f"{k}={json.dumps(x)}" for k, x in v.items()) or "(upstream)"
    lines = [f"# compare {c['scenario']}: A = {sw(c['a'])}  B = {sw(c['b'])}  seeds = {c['seeds']}", ""]
    observe = c.get("observe")
    if observe:
        lines += [f"observed by {observe} (perf.* metrics: what it reads); the unobserved kernel follows", ""]
    lines += _metric_table(c["metrics"])
    lines += [
        "",
        f"* = significant: Welch's t-test p < {ALPHA}, or samples that do not vary and differ (p -); "
        "fewer than 2 seeds: no test",
    ]
    rules = format_differing_rules(c.get("rules", []))
    lines += [""] + rules if rules else []
    if observe and all("observed" in l for l in c["locks"]):
        lines += ["", f"## lock contention as {observe} reads it: total wait of the traced waiters (mean over seeds)"]
        lines.append(
            f"{'caller (as perf names it)':<28} {'A wait':>12} {'B wait':>12} {'%change':>9} "
            f"{'A contended':>12} {'B contended':>12}   model site"
        )
        for l in c["locks"]:
            o = l["observed"]
            lines.append(
                f"{_caller(l):<28} {fmt_ns(o['a_total_wait_ns']):>12} {fmt_ns(o['b_total_wait_ns']):>12} "
                f"{_pct(o['pct_change']):>9} {o['a_contended']:>12.0f} {o['b_contended']:>12.0f}   {l['site']}"
            )
        lines += ["", f"## lock contention under {observe}, every waiter (mean over seeds)"]
    else:
        lines += ["", "## lock contention: total wait (mean over seeds)"]
    lines += _lock_table(c["locks"])
    u = c.get("unobserved")
    if u:
        lines += ["", "## the same pair unobserved (observe = none)", ""] + _metric_table(u["metrics"])
        lines += ["", "## lock contention unobserved: total wait (mean over seeds)"] + _lock_table(u["locks"])
    return "\n".join(lines)


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{x:+.2f}%"


def _metric_table(rows: list[dict]) -> list[str]:
    w = max([32] + [len(m["name"]) for m in rows])
    lines = [f"{'metric':<{w}} {'A mean':>14} {'± std':>10} {'B mean':>14} {'± std':>10} {'%change':>9} {'p':>8}"]
    for m in rows:
        p = "-" if m.get("p_value") is None else f"{m['p_value']:.2g}"
        mark = " *" if m["significant"] else ""
        lines.append(
            f"{m['name']:<{w}} {fmt_num(m['a_mean']):>14} {fmt_num(m['a_std']):>10} {fmt_num(m['b_mean']):>14} "
            f"{fmt_num(m['b_std']):>10} {_pct(m['pct_change']):>9} {p:>8}{mark}"
        )
    return lines


def _caller(l: dict) -> str:
    return l.get("perf_caller", l["site"])


def _lock_table(locks: list[dict]) -> list[str]:
    lines = [
        f"{'caller (as perf names it)':<28} {'A wait':>12} {'B wait':>12} {'%change':>9} {'A acq':>12} {'B acq':>12}"
        "   model site"
    ]
    for l in locks:
        lines.append(
            f"{_caller(l):<28} {fmt_ns(l['a_total_wait_ns']):>12} {fmt_ns(l['b_total_wait_ns']):>12} "
            f"{_pct(l['pct_change']):>9} {l['a_acquisitions']:>12.0f} {l['b_acquisitions']:>12.0f}   {l['site']}"
        )
    return lines
