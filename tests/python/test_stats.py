"""compare's statistics against values worked out by hand.

The p-values come from closed forms of Student's t distribution (for 2 and 4 degrees of
freedom the CDF is elementary), with t and the Welch-Satterthwaite degrees of freedom
computed here from the samples: none of it from scipy, which the code uses.
"""

import math

import pytest

from reclaimsim.compare import format_compare
from reclaimsim.stats import mean_sd, pct_change, significance


def p_two_sided(t: float, df: int) -> float:
    """Two-sided p of Student's t for df 2 or 4, in closed form."""
    t = abs(t)
    if df == 2:
        return 1 - t / math.sqrt(2 + t * t)
    if df == 4:
        x = t / math.sqrt(4 + t * t)
        return 1 - 1.5 * (x - x**3 / 3)
    raise ValueError(df)


def welch_by_hand(a, b):
    """Welch's t and degrees of freedom from the textbook formulas."""
    ma, mb = sum(a) / len(a), sum(b) / len(b)
    va = sum((x - ma) ** 2 for x in a) / (len(a) - 1)
    vb = sum((x - mb) ** 2 for x in b) / (len(b) - 1)
    sa, sb = va / len(a), vb / len(b)
    t = (ma - mb) / math.sqrt(sa + sb)
    df = (sa + sb) ** 2 / (sa**2 / (len(a) - 1) + sb**2 / (len(b) - 1))
    return t, df


def test_mean_and_sample_standard_deviation():
    # The classic example: population sd 2, sample sd sqrt(32 / 7).
    m, sd = mean_sd([2, 4, 4, 4, 5, 5, 7, 9])
    assert m == 5
    assert sd == pytest.approx(math.sqrt(32 / 7))
    assert mean_sd([3.5]) == (3.5, 0.0)


@pytest.mark.parametrize(
    "a, b, df, p_hand, significant",
    [
        # Overlapping: means 2 and 3, variances 1: t = -1.2247 on 4 df, p = 0.288.
        ([1, 2, 3], [2, 3, 4], 4, 0.2879, False),
        # Separated: means 2 and 5, variances 1: t = -3.674 on 4 df, p = 0.0213.
        ([1, 2, 3], [4, 5, 6], 4, 0.0213, True),
        # A constant: t = 3 / sqrt(1/3) = 5.196 on (1/3)^2 / ((1/3)^2 / 2) = 2 df, p = 0.0351.
        ([5, 5, 5], [1, 2, 3], 2, 0.0351, True),
    ],
)
def test_welch_t_test_against_closed_forms(a, b, df, p_hand, significant):
    t, welch_df = welch_by_hand(a, b)
    assert welch_df == pytest.approx(df)
    sig, p = significance(a, b)
    assert p == pytest.approx(p_two_sided(t, df), rel=1e-9)
    assert p == pytest.approx(p_hand, abs=1e-4)
    assert sig is significant


def test_welch_not_student_for_unequal_variances_and_sizes():
    # Student's pooled test gives p = 0.002 here (significant); Welch's gives 0.188 on
    # 2.003 df: a small noisy side B must not be pooled with a large quiet side A.
    a = [10.0, 10.1, 9.9, 10.0, 10.1, 9.9, 10.0, 10.05, 9.95, 10.0]
    b = [11.0, 13.0, 10.5]
    t, df = welch_by_hand(a, b)
    assert 2 < df < 3
    sig, p = significance(a, b)
    # The t-distribution's tail for a fractional df, by numerical integration of its density.
    dens = lambda x: math.gamma((df + 1) / 2) / (math.sqrt(df * math.pi) * math.gamma(df / 2)) * (
        1 + x * x / df
    ) ** (-(df + 1) / 2)
    n, hi = 200000, abs(t) + 2000.0
    h = (hi - abs(t)) / n
    tail = sum(dens(abs(t) + (i + 0.5) * h) for i in range(n)) * h
    assert p == pytest.approx(2 * tail, rel=1e-3)
    assert 0.1 < p < 0.3  # Student: 0.002
    assert sig is False


def test_zero_variance_on_both_sides_compares_exactly():
    # Deterministic runs: every seed gives the same value.
    assert significance([7, 7, 7], [7, 7, 7]) == (False, None)
    assert significance([7, 7, 7], [8, 8, 8]) == (True, None)


def test_fewer_than_two_samples_is_no_test():
    assert significance([1.0], [100.0]) == (False, None)
    assert significance([1.0, 2.0], [100.0]) == (False, None)
    assert significance([], []) == (False, None)


def test_identical_varying_samples_are_not_significant():
    sig, p = significance([1, 2, 3], [1, 2, 3])
    assert p == pytest.approx(1.0) and sig is False


def test_percent_change():
    assert pct_change(200, 150) == -25.0
    assert pct_change(-4, -2) == 50.0  # relative to |A|
    assert pct_change(0, 0) == 0.0
    assert pct_change(0, 5) is None


def test_the_report_marks_only_significant_metrics():
    row = dict(a_mean=2.0, a_std=1.0, b_mean=3.0, b_std=1.0, pct_change=50.0)
    c = {
        "scenario": "s", "a": {}, "b": {"rotation_cost": False}, "seeds": 3, "locks": [],
        "metrics": [
            {"name": "overlapping", **row, "significant": False, "p_value": 0.288},
            {"name": "separated", **row, "significant": True, "p_value": 0.0213},
        ],
    }
    lines = {l.split()[0]: l for l in format_compare(c).splitlines() if l.startswith(("overlapping", "separated"))}
    assert lines["overlapping"].rstrip().endswith("0.29")
    assert lines["separated"].rstrip().endswith("0.021 *")


def test_metrics_across_cgroups_are_the_population_cv_and_the_sum():
    from reclaimsim.metrics import metric

    r = {
        "end_ns": 10**9,
        "cgroups": [
            {"path": "/", "memory.stat": {"pgsteal": 100}},
            {"path": "/memcg0", "memory.stat": {"pgsteal": 10}},
            {"path": "/memcg1", "memory.stat": {"pgsteal": 30}},
        ],
    }
    # mean 20, population stddev 10: 50%. The root does not match /memcg*.
    assert metric(r, "cv:pgsteal@/memcg*") == pytest.approx(50.0)
    assert metric(r, "sum:pgsteal@/memcg*") == 40.0
    with pytest.raises(Exception, match="no cgroup matches"):
        metric(r, "sum:pgsteal@/nothing*")


def test_a_side_sets_switches_and_scenario_fields():
    from reclaimsim.scenario import apply_side, parse_switches

    data = {"kernel": {"swappiness": 60}, "variants": {"rotation_cost": True}}
    side = parse_switches("kernel.lru=mglru,kernel.lru_gen.enabled=3,mglru_memcg_iter=true")
    d = apply_side(data, side)
    assert d["kernel"] == {"swappiness": 60, "lru": "mglru", "lru_gen": {"enabled": 3}}
    # the scenario's own switches stay, the side's join them
    assert d["variants"] == {"rotation_cost": True, "mglru_memcg_iter": True}
    assert data["variants"] == {"rotation_cost": True}
    # A [compare] table may nest: { kernel = { lru = "mglru" } }.
    d = apply_side(data, {"kernel": {"lru": "mglru"}})
    assert d["kernel"]["lru"] == "mglru"
    assert data["kernel"] == {"swappiness": 60}


def test_proactive_metrics_by_hand():
    from reclaimsim.metrics import metric

    # 4 writes of 2 MiB (512 pages each) that reclaimed 2,100 pages in all, 3 ms each.
    r = {
        "end_ns": 10**9,
        "proactive": {
            "writes": 4,
            "requested_bytes": 4 * 2 * 2**20,
            "reclaimed_bytes": 2100 * 4096,
            "latency_ns": {"mean": 3_000_000},
        },
    }
    assert metric(r, "proactive_accuracy") == pytest.approx(100.0 * 2100 / 2048)
    assert metric(r, "proactive_latency_ns") == 3_000_000
    assert metric(r, "proactive_ns_per_page") == pytest.approx(4 * 3_000_000 / 2100)
    with pytest.raises(Exception, match="no \\[\\[reclaim\\]\\] schedule"):
        metric({"end_ns": 1, "proactive": None}, "proactive_accuracy")
