"""Statistics of the analysis: robust noise, Benjamini-Hochberg, the step test.

Each function states its estimator and its source. Pure numpy/scipy; no I/O.
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from harness.analysis.model import _MAD_TO_SIGMA, Direction, Point


def _norm_sf2(z: float) -> float:
    """Two-sided normal tail probability ``P(|Z| >= |z|)``."""
    return math.erfc(abs(z) / math.sqrt(2.0))


def _z_for(level: float) -> float:
    """Two-sided normal quantile for a confidence level (0.99 -> 2.576)."""
    from statistics import NormalDist

    return NormalDist().inv_cdf(0.5 + level / 2.0)


def robust_noise(y: np.ndarray, floor: float = 1e-3) -> float:
    """Robust noise sigma of a series from the MAD of its first differences.

    ``sigma = 1.4826 * median(|diff(y)|) / sqrt(2)``; for ``y = log(value)`` it is
    the relative noise. Differences are immune to level shifts and the median to
    outliers. Returns at least ``floor``. Raises ``ValueError`` for fewer than
    two points.
    """
    y = np.asarray(y, dtype=float)
    if y.size < 2:
        raise ValueError("robust_noise needs at least two points")
    d = np.abs(np.diff(y))
    return max(float(_MAD_TO_SIGMA * np.median(d) / math.sqrt(2.0)), floor)


def benjamini_hochberg(p_values: Sequence[float], q: float, m: int | None = None) -> tuple[np.ndarray, float]:
    """Benjamini-Hochberg step-up procedure.

    Parameters
    ----------
    p_values : sequence of float
        p-values of the tests.
    q : float
        False discovery rate level.
    m : int, optional
        Number of hypotheses (defaults to ``len(p_values)``; pass a larger ``m``
        when untested hypotheses count, e.g. series with no candidate).

    Returns
    -------
    q_values : ndarray
        BH-adjusted p-values (``min_{j>=i} p_(j) m / j``, capped at 1).
    threshold : float
        The largest p-value rejected, or ``q / m`` (the first rung) when none is.

    Reference: Benjamini & Hochberg (1995), JRSS B 57(1), 289-300.
    """
    p = np.asarray(p_values, dtype=float)
    n = p.size
    m = max(int(m or n), n, 1)
    if n == 0:
        return p, q / m
    order = np.argsort(p)
    ranked = p[order] * m / np.arange(1, n + 1)
    qv = np.minimum.accumulate(ranked[::-1])[::-1]
    out = np.empty(n)
    out[order] = np.minimum(qv, 1.0)
    passed = np.nonzero(p[order] <= q * np.arange(1, n + 1) / m)[0]
    thr = float(p[order][passed[-1]]) if passed.size else q / m
    return out, thr


#: Samples a side from which the rank test (asv compare's Mann-Whitney U) is used.
RANK_TEST_MIN = 6
#: Samples a side from which repeated runs are tested at all (Welch's t on logs).
#: Three, not two: with two runs a side Welch's t has one to two degrees of
#: freedom and would veto most real steps as "samples do not confirm".
RUNS_TEST_MIN = 3


def _sample_test(a: Point, b: Point) -> float | None:
    """Two-sided p-value that two commits' samples differ, or ``None`` without them.

    With :data:`RANK_TEST_MIN` or more samples a side: the Mann-Whitney U test
    (asv compare's test, which needs six a side). With 3-5 a side, as repeated
    runs give (a Liger version run three times, an asv commit run 3 times): the
    rank test cannot reach 1% there (3 against 3 gives at best p = 0.1), so
    Welch's t-test on the log samples (times are log-normal-ish; Welch 1947,
    Biometrika 34) decides. Two sides without spread that differ give 0.0, that
    agree 1.0.
    """
    if not a.samples or not b.samples:
        return None
    na, nb = len(a.samples), len(b.samples)
    if na >= RANK_TEST_MIN and nb >= RANK_TEST_MIN:
        from scipy.stats import mannwhitneyu

        return float(mannwhitneyu(a.samples, b.samples, alternative="two-sided").pvalue)
    if na < RUNS_TEST_MIN or nb < RUNS_TEST_MIN:
        return None
    la, lb = np.log(np.asarray(a.samples, dtype=float)), np.log(np.asarray(b.samples, dtype=float))
    if not (np.all(np.isfinite(la)) and np.all(np.isfinite(lb))):
        return None
    if np.ptp(la) == 0 and np.ptp(lb) == 0:
        return 0.0 if la[0] != lb[0] else 1.0
    from scipy.stats import ttest_ind

    p = float(ttest_ind(la, lb, equal_var=False).pvalue)
    return p if math.isfinite(p) else None


def _huber_mean(x: np.ndarray, sigma: float, c: float = 3.0) -> float:
    """Mean of ``x`` with values clipped to ``median(x) +- c * sigma``: the mean's
    efficiency under Gaussian noise (a median costs a factor pi/2 in variance)
    with a bounded influence for the outliers spike cleaning left (a one-step
    Huber M-estimate; Huber 1964, Ann. Math. Statist. 35)."""
    xs = np.sort(x)  # np.median costs several times a sort on these short windows
    n = xs.size
    m = 0.5 * float(xs[(n - 1) // 2] + xs[n // 2])
    return float(xs.clip(m - c * sigma, m + c * sigma).mean())


def _step_test(
    y: np.ndarray, k: int, lo: int, hi: int, sigma: float, n_pos: int
) -> tuple[float, float, float, int, int]:
    """Size ``d`` (clipped means of ``y[k:hi]`` minus ``y[lo:k]``), its standard
    error ``sigma * sqrt(1/n1 + 1/n2)`` and the two-sided normal p-value times
    ``n_pos`` (Bonferroni over the positions the change could have been put at)."""
    before = y[max(lo, 0) : k]
    after = y[k:hi]
    n1, n2 = before.size, after.size
    d = _huber_mean(after, sigma) - _huber_mean(before, sigma)
    se = sigma * math.sqrt(1.0 / n1 + 1.0 / n2)
    p = min(1.0, _norm_sf2(d / se) * max(n_pos, 1))
    return d, se, p, n1, n2


def _residual_noise(y: np.ndarray, levels: Sequence[tuple[int, int]], sigma0: float, floor: float) -> float:
    """Noise from the residuals of the fitted levels, once the change points
    are known: ``sqrt(sum(clip(r, +-3 sigma0)^2) / (0.9707 (n - segments)))``
    with ``r`` each point minus its level's clipped mean. The MAD of first
    differences (``sigma0``, used to find the levels) is immune to steps but
    only about 37% efficient under Gaussian noise, so its error moves every
    z-score by +-10% at 100 points; the clipped residual variance is nearly
    fully efficient and clipping at 3 sigma keeps outliers out (0.9707 =
    E[min(Z^2, 9)] for standard normal Z, the clipping's consistency factor).
    Short series (fewer than 8 points) keep ``sigma0``."""
    n = y.size
    dof = n - len(levels)
    if n < 8 or dof < 4:
        return sigma0
    r = np.empty(n)
    for a, b in levels:
        r[a:b] = y[a:b] - _huber_mean(y[a:b], sigma0)
    c = 3.0 * sigma0
    var = float(np.sum(np.clip(r, -c, c) ** 2)) / (0.9707 * dof)
    return max(math.sqrt(var), floor)


def _ratio_ci(d: float, se: float, z: float, direction: Direction) -> tuple[float, tuple[float, float]]:
    """Natural-unit ratio after/before and its CI from an oriented log step."""
    sgn = -1.0 if direction is Direction.HIGHER_IS_BETTER else 1.0
    lo, hi = sgn * (d - z * se), sgn * (d + z * se)
    return math.exp(sgn * d), (math.exp(min(lo, hi)), math.exp(max(lo, hi)))
