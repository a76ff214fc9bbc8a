"""The statistics of A/B comparisons (compare, kernel-compare) and the formatting of their
numbers: mean and sample standard deviation, Welch's t-test, percent change."""

from __future__ import annotations

import math
import warnings

# Significance level of the A/B tables.
ALPHA = 0.05


def mean_sd(xs: list[float]) -> tuple[float, float]:
    """Mean and sample standard deviation (n - 1 in the denominator; 0 for one sample)."""
    n = len(xs)
    m = sum(xs) / n
    sd = math.sqrt(sum((x - m) ** 2 for x in xs) / (n - 1)) if n > 1 else 0.0
    return m, sd


def significance(a: list[float], b: list[float]) -> tuple[bool, float | None]:
    """Whether A and B differ at p < ALPHA, and the p-value of Welch's t-test (scipy).

    - Fewer than two samples on a side: no test (False, None).
    - Neither side varies (deterministic runs): the samples compare exactly; a
      difference is significant, with no p-value (True or False, None).
    - Otherwise Welch's t-test, two-sided (one side may have zero variance).
    """
    from scipy import stats

    if len(a) < 2 or len(b) < 2:
        return False, None
    (ma, sa), (mb, sb) = mean_sd(a), mean_sd(b)
    if sa == 0 and sb == 0:
        return ma != mb, None
    with warnings.catch_warnings():
        # Nearly identical samples make scipy warn about precision; the test still answers.
        warnings.simplefilter("ignore", RuntimeWarning)
        p = float(stats.ttest_ind(a, b, equal_var=False).pvalue)
    return p < ALPHA, p


def pct_change(a: float, b: float) -> float | None:
    """B's change over A in percent of |A|; None where A is 0 and B is not."""
    if a == 0:
        return None if b != 0 else 0.0
    return 100.0 * (b - a) / abs(a)


def ab_row(xa: list[float], xb: list[float]) -> dict:
    """One metric's A/B figures: each side's mean and std, %change, Welch's verdict."""
    (ma, sa), (mb, sb) = mean_sd(xa), mean_sd(xb)
    sig, p = significance(xa, xb)
    return {
        "a_mean": ma, "a_std": sa, "b_mean": mb, "b_std": sb, "pct_change": pct_change(ma, mb),
        "significant": sig, "p_value": p,
    }


def fmt_num(x: float) -> str:
    """A figure of any size for a table: 4 significant digits when very large or small."""
    if x == 0:
        return "0"
    if abs(x) >= 1e6 or abs(x) < 1e-2:
        return f"{x:.4g}"
    return f"{x:,.2f}"


def fmt_ns(ns: float) -> str:
    """A duration in ns with its unit (s, ms, us, ns)."""
    for unit, div in (("s", 1e9), ("ms", 1e6), ("us", 1e3)):
        if ns >= div:
            return f"{ns / div:.2f} {unit}"
    return f"{ns:.0f} ns"
