"""Change-point candidates for one oriented series (pure numpy; no I/O).

The analysis turns a series into ``y`` (log value, up = worse) with a robust
noise ``sigma``; this module proposes where its level changes. Candidates are
tested for significance and size by the caller (:mod:`harness.analysis`).

Three pieces:

* :func:`clean_spikes`: a Hampel-type filter (Hampel 1974, JASA 69) that
  replaces an *isolated* spike -- a point far from the median of its two
  neighbours on each side while those two sides agree -- by their mean. A
  real step is never isolated (the points after it agree with it), and the
  newest point is never cleaned (it is what ``pending`` is about).
* :func:`binary_segmentation`: binary segmentation with the standardised
  CUSUM of a mean shift (Scott & Knott 1974; Vostrikova 1981; the statistic is
  the Gaussian likelihood-ratio test of one change in mean, e.g. Truong, Oudre
  & Vayatis 2020, "Selective review of offline change point detection
  methods", Signal Processing 167, section 5.2). Each split is the argmax of
  ``|S_k - k/n S_n| / sqrt(k (n - k) / n)`` over the segment, so the change is
  put at the adjacent commit pair that best separates the two levels.
* :func:`tail_split`: the newest 1-2 points against the level before them (the
  split binary segmentation cannot make with its minimum segment length).

Why our own and not a library: measured in ``docs/analysis.md`` (section
"Choosing the detection core", ``experiments/detection/detect_compare.py``) with the rest of
the analysis shared, it is as accurate as the best library core (ruptures' RBF
``KernelCPD``, ``asv.step_detect``, Apache Otava's E-divisive) on the
benchmark's histories, at a fraction of their cost (a few O(n) numpy passes
per split: 0.04 ms for 1,000 points against 5.6 ms for ``KernelCPD``), which
is what keeps 1,000 commits x 1,000 series under 10 s; the libraries remain
selectable (``AnalysisConfig.detector``) for that comparison.
"""

from __future__ import annotations

import math

import numpy as np


def clean_spikes(y: np.ndarray, sigma: float, k: float = 4.0) -> tuple[np.ndarray, np.ndarray]:
    """Replace isolated spikes by the level around them.

    Parameters
    ----------
    y : ndarray, shape (n,)
        Oriented log values.
    sigma : float
        Robust noise (same units as ``y``), > 0.
    k : float
        A point is a spike when it is more than ``k * sigma`` from the median
        of the (up to) two points on each side, both sides lying within
        ``k * sigma`` of each other. The newest point is never a spike.

    Returns
    -------
    (cleaned, spikes) : ndarray, ndarray of int
        ``cleaned`` is a copy of ``y``; ``spikes`` the replaced indices.
    """
    y = np.asarray(y, dtype=float)
    n = y.size
    out = y.copy()
    if n < 3 or sigma <= 0:
        return out, np.zeros(0, dtype=int)
    pad = np.concatenate(([np.nan, np.nan], y, [np.nan, np.nan]))
    idx = np.arange(n) + 2

    def side(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        # median of the (up to) two points of one side: their mean, or the one present
        return np.where(np.isnan(a), b, np.where(np.isnan(b), a, 0.5 * (a + b)))

    left_m = side(pad[idx - 2], pad[idx - 1])
    right_m = side(pad[idx + 1], pad[idx + 2])
    thr = k * sigma
    far_l = np.abs(y - left_m) > thr
    far_r = np.abs(y - right_m) > thr
    agree = np.abs(left_m - right_m) <= thr
    same_side = np.sign(y - left_m) == np.sign(y - right_m)
    spike = far_l & far_r & agree & same_side
    spike[0] = False
    spike[-1] = False
    hits = np.nonzero(spike)[0]
    out[hits] = 0.5 * (left_m[hits] + right_m[hits])
    return out, hits


def cusum_split(y: np.ndarray, min_size: int, min_right: int | None = None) -> tuple[int, float]:
    """Best single mean-shift split of ``y``.

    Returns ``(k, stat)``: ``y[:k]`` and ``y[k:]`` are the two levels (at
    least ``min_size`` and ``min_right`` (default ``min_size``) long) and ``stat = |mean(y[k:]) - mean(y[:k])| *
    sqrt(k (n - k) / n)`` (in the units of ``y``; divide by the noise sigma
    for a z-score). ``(0, 0.0)`` when ``y`` is too short to split.
    """
    n = y.size
    right = min_size if min_right is None else min_right
    if n < min_size + right:
        return 0, 0.0
    s = np.cumsum(y)
    total = s[-1]
    k = np.arange(min_size, n - right + 1)
    left = s[k - 1]
    # S_k - k/n S_n, scaled to a mean difference times sqrt(k (n-k) / n)
    stat = np.abs(left - k * (total / n)) * np.sqrt(n / (k * (n - k)))
    j = int(np.argmax(stat))
    return int(k[j]), float(stat[j])


def binary_segmentation(
    y: np.ndarray, sigma: float, *, min_size: int = 3, z: float = 4.0, forced: tuple[int, ...] = ()
) -> list[int]:
    """Change points of ``y`` (each the index of the first point at a new level).

    Recursive binary segmentation: split a segment at its best CUSUM point
    while the split's z-score (``stat / sigma``) exceeds ``z``. ``forced``
    boundaries (version, environment, failure gaps) cut the series first, so
    no level is estimated across them.

    Parameters
    ----------
    y : ndarray, shape (n,)
    sigma : float
        Noise of ``y``, > 0.
    min_size : int
        Shortest segment that binary segmentation may create.
    z : float
        Split threshold in noise units. For ``n`` candidate positions the null
        maximum of the standardised CUSUM grows like ``sqrt(2 log n)`` (about
        3.1 for 120 points); 4 keeps pure noise unsplit at the sizes we see
        (measured in ``docs/analysis.md``) while the significance test decides.

    Raises
    ------
    ValueError
        ``sigma`` is not positive.
    """
    if not sigma > 0:
        raise ValueError(f"binary_segmentation needs sigma > 0, got {sigma}")
    n = y.size
    cps = set(int(f) for f in forced if 0 < f < n)
    stack = []
    edges = [0] + sorted(cps) + [n]
    for a, b in zip(edges[:-1], edges[1:]):
        stack.append((a, b))
    while stack:
        a, b = stack.pop()
        k, stat = cusum_split(y[a:b], min_size)
        if k and stat / sigma > z:
            cps.add(a + k)
            stack.append((a, a + k))
            stack.append((a + k, b))
    return sorted(cps)


def refine(y: np.ndarray, cps: list[int], fixed: tuple[int, ...] = (), min_size: int = 3) -> list[int]:
    """Re-locate each change point between its two neighbours.

    Binary segmentation picks a split with both sides at least ``min_size``
    long, so a ramp or a step next to another change can be cut a commit or
    two away from where it is. Each point not in ``fixed`` is moved to the
    best single split (:func:`cusum_split`) of the points between its
    neighbouring change points, a side there being as short as one point
    except at either end of the series (``min_size``: one old point is no level): the repartition step of Bai
    (1997), "Estimating multiple breaks one at a time", Econometric Theory 13.
    At the start of the series two points are a level when each lies nearer its
    own mean than the new level's (:func:`_start_level_holds`): OpenBLAS's
    ``DSyrk(100, d)`` on noble starts 0.948, 0.955, then 1.00 for 30 commits, and
    a three-point minimum named the step one commit late, at a +0.4% commit;
    one low first point (``gbmv`` on skylake, 0.92 then 0.99) is no level.
    """
    n = y.size
    cur = sorted(set(cps))
    for i, c in enumerate(cur):
        if c in fixed:
            continue
        lo = cur[i - 1] if i > 0 else 0
        hi = cur[i + 1] if i + 1 < len(cur) else n
        if hi - lo < 2:
            continue
        right = min_size if hi == n else 1
        k, _ = cusum_split(y[lo:hi], min(min_size, 2) if lo == 0 else 1, right)
        if lo == 0 and 0 < k < min_size and not _start_level_holds(y[:k], y[k:hi]):
            k, _ = cusum_split(y[lo:hi], min_size, right)
        if k:
            cur[i] = lo + k
    return sorted(set(cur))


def _start_level_holds(before: np.ndarray, after: np.ndarray) -> bool:
    """Whether the few points ``before`` a split at the start of a series are a
    level of their own: every one lies nearer their mean than the mean of
    ``after`` (the rule :func:`tail_split` applies to the newest points)."""
    if before.size == 0 or after.size == 0:
        return False
    old, new = float(np.mean(before)), float(np.mean(after))
    return bool(np.all(np.abs(before - old) < np.abs(before - new)))


def tail_split(
    y: np.ndarray, start: int, sigma: float, *, window: int, max_tail: int = 2, min_base: int = 2
) -> tuple[int, float] | None:
    """The newest ``t`` points (``1 <= t <= max_tail``) against the level before.

    ``y[start:]`` is the last segment. For each ``t`` the statistic is
    ``(mean(y[-t:]) - median(base)) / (sigma * sqrt(1/t + pi/(2 n_base)))``
    with ``base`` the up to ``window`` points of the segment before the tail;
    the ``t`` with the largest ``|z|`` wins, among those whose every point lies
    nearer the new level than the old one (else the newest commit undid it:
    an excursion, not a step). Returns ``(index of the first tail
    point, z)`` or ``None`` when the base has fewer than ``min_base`` points.
    """
    n = y.size
    best = None
    for t in range(1, max_tail + 1):
        k = n - t
        base = y[max(start, k - window) : k]
        if base.size < min_base:
            break
        med = float(np.median(base))
        tail = y[k:]
        d = float(np.mean(tail) - med)
        # every tail point must sit nearer the new level than the old one: a
        # point that is back (the newest commit undid it) makes it an excursion
        if t > 1 and np.any(np.abs(tail - med) <= np.abs(tail - (med + d))):
            continue
        se = sigma * math.sqrt(1.0 / t + (math.pi / 2.0) / base.size)
        zt = d / se
        if best is None or abs(zt) > abs(best[1]):
            best = (k, zt)
    return best
