"""Creeping drifts: runs of 2..``drift_max_len`` commits moving the same way."""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from harness.analysis.model import _SQRT_HALF_PI, DRIFT_MAX_SHARE, AnalysisConfig, Candidate
from harness.analysis.stats import _norm_sf2


def _drift_candidates(
    y: np.ndarray, sigma: float, config: AnalysisConfig, cps: list[int], bounds: dict, gaps: Sequence[int] = ()
) -> list[Candidate]:
    """Runs of 2..drift_max_len commits moving the same way (the first by more
    than ``2 sigma`` from the baseline, each next one further), none by more than
    :data:`DRIFT_MAX_SHARE` of the total, fitting a ramp better than a step,
    that
    together move at least ``min_effect`` away from the median of the
    ``window`` points before the run.

    Why long: the scan is vectorised over every ramp start at once (arrays of
    starts, signs and baselines shared by the length loop); cut into pieces,
    each would need all of those arrays."""
    n = y.size
    theta = math.log1p(config.min_effect)
    W = config.window
    Lmax = config.drift_max_len
    out: list[Candidate] = []
    if n < 5:
        return out
    dy = np.diff(y)
    n_tests = max(n * (Lmax - 1), 1)
    # median of the (up to) W points before each possible ramp start s, never
    # reaching back across a change point (a step is not a drift's baseline)
    base = np.full(n, np.nan)
    nbase = np.zeros(n, dtype=int)
    edges = [0] + [c for c in cps if 0 < c < n] + [n]
    for a, b in zip(edges[:-1], edges[1:]):
        top = min(b, n - 1)  # ramp starts s in a+3 .. top
        if top < a + 3:
            continue
        s = np.arange(a + 3, top + 1)
        idx = s[:, None] - W + np.arange(W)[None, :]
        win = np.where(idx >= a, y[np.clip(idx, 0, n - 1)], np.nan)
        base[s] = _row_medians(win)
        nbase[s] = np.minimum(s - a, W)
    best: list[tuple] = []
    # a ramp's first commit leaves the baseline by more than 2 sigma; its sign
    # is the drift's direction (few positions pass, so the loops below are short)
    S0 = np.arange(3, n - 1)
    first0 = y[S0] - base[S0]
    keep = ~np.isnan(first0) & (np.abs(np.nan_to_num(first0)) > 2.0 * sigma)
    S0, first0 = S0[keep], first0[keep]
    if S0.size == 0:
        return out
    sgn0 = np.sign(first0)
    for L in range(2, Lmax + 1):
        inr = S0 + L - 1 < n
        S, sg = S0[inr], sgn0[inr]
        if S.size == 0:
            break
        total = sg * (y[S + L - 1] - base[S])
        # every commit of the ramp moves the same way, none carries most of
        # the change (that would be a step)
        biggest = sg * (y[S] - base[S])
        ok = np.ones(S.size, dtype=bool)
        for k in range(1, L):
            inc = sg * dy[S + k - 1]
            ok &= inc > 0
            biggest = np.maximum(biggest, inc)
        ok &= (total >= theta) & (biggest <= DRIFT_MAX_SHARE * total)
        # persistence: the commits after the ramp (up to ``confirm_after - 1``
        # of them, where the series has them) must stay nearer the new level
        # than the baseline, else it was an excursion (a level must hold to be
        # a change: a 3-commit machine slow phase passed the old 2-commit check)
        for j in range(config.confirm_after - 1):
            idx = S + L + j
            later = np.where(idx < n, sg * (y[np.minimum(idx, n - 1)] - base[S]), np.inf)
            ok &= later >= 0.5 * total
        for s, sign in zip(S[ok], sg[ok]):
            s = int(s)
            e = s + L  # exclusive end of the ramp
            if any(s <= g < e for g in gaps):
                continue  # a ramp never links points across a failure gap
            b = float(base[s])
            # level after the ramp: its last point and any later points up to
            # the next change point that stay within 2 sigma of it
            after = [y[e - 1]]
            nxt = min([c for c in cps if c >= e] + [n])
            for j in range(e, min(nxt, e + W)):
                if abs(y[j] - y[e - 1]) <= 2 * sigma:
                    after.append(y[j])
                else:
                    break
            lvl = float(np.median(after))
            d = lvl - b
            if sign * d < theta:
                continue
            # a ramp must fit the ramp points better than a step to the new
            # level does (by 6 sigma^2, measured on synthetic steps and ramps), else it is a step
            # that noise made look gradual
            ramp = y[s:e]
            frac = np.arange(1, L + 1) / L
            sse_ramp = float(np.sum((ramp - (b + frac * d)) ** 2))
            sse_step = float(np.sum((ramp - lvl) ** 2))
            if sse_step - sse_ramp < 6.0 * sigma * sigma:
                continue
            n1 = int(nbase[s])
            var_after = (_SQRT_HALF_PI**2 if len(after) > 2 else 1.0) / len(after)
            se = sigma * math.sqrt(var_after + (_SQRT_HALF_PI**2) / n1)
            p = min(1.0, _norm_sf2(d / se) * n_tests)
            best.append((p > 1e-3, sse_ramp / L, p, s, e, d, se, n1, len(after)))
    # keep non-overlapping runs: clearly significant ones first, and among
    # those the ramp that fits its points best (noise next to a drift makes
    # longer and shorter overlapping ramps pass too)
    best.sort()
    used: list[tuple[int, int]] = []
    for _weak, _fit, p, s, e, d, se, n1, n2 in best:
        if any(not (e <= a or s >= b) for a, b in used):
            continue
        used.append((s, e))
        c = Candidate("drift", e - 1, s, d, se, p, n1, n2)
        inside = [k for k in bounds if s <= k < e]
        if inside:
            c.annotation, c.annotation_reason = bounds[inside[0]]
        out.append(c)
    return out


def _row_medians(a: np.ndarray) -> np.ndarray:
    """Median of each row ignoring NaN (NaN for a row without values).
    ``np.nanmedian`` loops in Python over rows for this shape; a sort does not."""
    srt = np.sort(a, axis=1)  # NaN sorts last
    k = np.sum(~np.isnan(a), axis=1)
    lo = np.take_along_axis(srt, ((k - 1) // 2)[:, None], axis=1)[:, 0]
    hi = np.take_along_axis(srt, (k // 2)[:, None], axis=1)[:, 0]
    return 0.5 * (lo + hi)
