"""access_model = "sampled" against per-access runs: an equivalence test, not a failure to
reject (docs/model.md, "Sampled access"; docs/testing.md).

The same scenarios run per access and sampled, over seeds 1..N each (N = 3 here, 20 with
`bash scripts/test --slow`). For each metric, two one-sided Welch t-tests (TOST) on the
logarithm of the counts ask whether the sampled mean is within the margin of the
per-access one: H0 is |mean(log sampled) - mean(log per access)| >= log(1 + margin), and
rejecting it at 5% says the two are equivalent within the margin. Holm's correction runs
over every metric of every scenario at once (the family is the whole table).

The margins, fixed before any run was looked at and not to be widened to make a run pass:
- whole-run counts (/proc/vmstat's pgscan_anon, pgsteal_anon, workingset_refault_anon,
  pswpin): 5%;
- each memcg's pgsteal: 10% (a memcg's share of a reclaim is a few thousand pages).
With 3 seeds the test has power only where runs vary little between seeds (the scenarios
below vary by 0.1-3% from seed to seed on those metrics); 20 seeds narrow it to what the
mode's approximations (docs/model.md) allow.
"""

from __future__ import annotations

import json
import math
import os

import pytest
from scipy import stats

from reclaimsim import _core
from reclaimsim.batch import run_all

SEEDS = 20 if os.environ.get("RECLAIMSIM_SLOW") else 3
ALPHA = 0.05
WHOLE_RUN_MARGIN = 0.05
PER_MEMCG_MARGIN = 0.10
WHOLE_RUN = ["pgscan_anon", "pgsteal_anon", "workingset_refault_anon", "pswpin"]
MEMCGS = 8


def proactive(lru: str) -> dict:
    """Seed 001's shape, scaled down: eight memcgs under the root, each with one paced
    writer of random pages over shmem; the root's memory.reclaim written every 100 ms."""
    return {
        "name": f"sampled-eq-proactive-{lru}",
        "duration": "121s",
        "kernel": {"lru": lru},
        "machine": {"cpus": 12, "memory_per_node": "2G", "swap": {"size": "1G", "device": "zram"}},
        "cgroup": [{"path": "/m{i}", "copies": MEMCGS}],
        "workload": [
            {
                "type": "usemem",
                "name": "f{i}",
                "cgroup": "/m{i}",
                "copies": MEMCGS,
                "mapping": "shmem",
                "size": "32M",
                "random": True,
                "repeat": 0,
                "rate": "64M",
            }
        ],
        "reclaim": [{"cgroup": "/", "at": "1s", "every": "100ms", "times": 1200, "bytes": "4M"}],
    }


def metrics(result: dict) -> dict[str, float]:
    """The compared counts of one run: /proc/vmstat's and each memcg's pgsteal."""
    stat = {c["path"]: c["memory.stat"] for c in result["cgroups"]}
    out = {k: result["vmstat"][k] for k in WHOLE_RUN}
    for i in range(MEMCGS):
        out[f"pgsteal@/m{i}"] = stat[f"/m{i}"]["pgsteal"]
    return out


def margin(metric: str) -> float:
    return PER_MEMCG_MARGIN if "@" in metric else WHOLE_RUN_MARGIN


def tost_p(a: list[float], b: list[float], delta: float) -> float:
    """The TOST p-value that mean(log b) - mean(log a) lies within +-log(1 + delta):
    the larger of the two one-sided Welch tests' p-values."""
    la, lb = [math.log(x) for x in a], [math.log(x) for x in b]
    d = sum(lb) / len(lb) - sum(la) / len(la)
    va = stats.tvar(la) / len(la)
    vb = stats.tvar(lb) / len(lb)
    se = math.sqrt(va + vb)
    bound = math.log(1 + delta)
    if se == 0:
        return 0.0 if abs(d) < bound else 1.0
    df = (va + vb) ** 2 / (va**2 / (len(la) - 1) + vb**2 / (len(lb) - 1))
    p_low = stats.t.sf((d + bound) / se, df)  # H0: d <= -bound
    p_high = stats.t.cdf((d - bound) / se, df)  # H0: d >= +bound
    return max(p_low, p_high)


def holm(pvalues: dict[str, float], alpha: float) -> dict[str, bool]:
    """Holm's step-down: which null hypotheses (here: not equivalent) are rejected."""
    order = sorted(pvalues, key=pvalues.get)
    m = len(order)
    rejected = {}
    going = True
    for i, k in enumerate(order):
        going = going and pvalues[k] <= alpha / (m - i)
        rejected[k] = going
    return rejected


def runs(scenario: dict, model: str) -> list[dict[str, float]]:
    jobs = []
    for seed in range(1, SEEDS + 1):
        d = json.loads(json.dumps(scenario))
        d["seed"] = seed
        d["workload"][0]["access_model"] = model
        jobs.append(_core.validate_json(json.dumps(d)))
    return [metrics(json.loads(t)) for t in run_all(jobs, os.cpu_count() or 1)]


def test_tost_and_holm_by_hand():
    # Equal samples, spread 1%: equivalent within 5% at once with 3 per side (d = 0,
    # se = 0.008, t = 6.1 on 4 df: p = 0.002); a 10% shift is not.
    a = [100.0, 101.0, 99.0]
    assert tost_p(a, a, 0.05) < 0.01
    assert tost_p(a, [x * 1.10 for x in a], 0.05) > 0.5
    # Holm: p = 0.01, 0.02, 0.04 at alpha 0.05 against 0.05/3, 0.05/2, 0.05/1: all three
    # rejected; with 0.03 in second place the step stops there.
    assert holm({"a": 0.01, "b": 0.02, "c": 0.04}, 0.05) == {"a": True, "b": True, "c": True}
    assert holm({"a": 0.01, "b": 0.03, "c": 0.04}, 0.05) == {"a": True, "b": False, "c": False}


def test_sampled_runs_are_equivalent_to_per_access_runs():
    pvalues: dict[str, float] = {}
    table = []
    for lru in ["classic", "mglru"]:
        sc = proactive(lru)
        per, smp = runs(sc, "per_access"), runs(sc, "sampled")
        for k in per[0]:
            a, b = [r[k] for r in per], [r[k] for r in smp]
            name = f"{lru}:{k}"
            pvalues[name] = tost_p(a, b, margin(k))
            ma, mb = sum(a) / len(a), sum(b) / len(b)
            table.append(f"{name:32} per access {ma:10.0f}  sampled {mb:10.0f}  {100 * (mb / ma - 1):+6.2f}%  p {pvalues[name]:.4f}")
    equivalent = holm(pvalues, ALPHA)
    print(f"\nsampled vs per access, {SEEDS} seeds each (TOST p, Holm over {len(pvalues)}):")
    print("\n".join(table))
    failed = [k for k, ok in equivalent.items() if not ok]
    assert not failed, f"not shown equivalent ({SEEDS} seeds): {failed}\n" + "\n".join(table)
