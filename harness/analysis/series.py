"""One series: usable points, failure stretches, boundaries, change candidates.

:func:`analyze_series` is the per-series half of the analysis (the run-wide
half, Benjamini-Hochberg and the cross-machine rules, is :mod:`harness.analysis.run`).
"""

from __future__ import annotations

import math
import sys
from typing import Mapping, Sequence

import numpy as np

from harness.analysis.detect import clean_spikes, refine, tail_split
from harness.analysis.detectors import DETECTORS
from harness.analysis.drift import _drift_candidates
from harness.analysis.model import (
    DRIFT_MAX_SHARE,
    ENV_KEYS,
    AnalysisConfig,
    Candidate,
    Direction,
    Finding,
    Point,
    Series,
    SeriesAnalysis,
    Status,
)
from harness.analysis.stats import _huber_mean, _residual_noise, _sample_test, _step_test, robust_noise


def _oriented(values: np.ndarray, direction: Direction) -> np.ndarray:
    y = np.log(values)
    return -y if direction is Direction.HIGHER_IS_BETTER else y


def _env_diff(a: Point, b: Point) -> list[str]:
    ea, eb = dict(a.env or {}), dict(b.env or {})
    out = []
    for k in sorted(set(ea) | set(eb)):
        if k in ENV_KEYS or k not in ("machine",):
            va, vb = ea.get(k), eb.get(k)
            if va != vb and not (va in (None, "") and vb in (None, "")):
                out.append(f"{k} {va or '?'} -> {vb or '?'}")
    return out


def _boundary_annotation(pts: Sequence[Point], k: int) -> tuple[str, str] | None:
    """Version / environment change between valid points k-1 and k."""
    a, b = pts[k - 1], pts[k]
    if a.version and b.version and a.version != b.version:
        return "version", f"benchmark version changed {a.version[:8]} -> {b.version[:8]}"
    env = _env_diff(a, b)
    if env:
        return "env", "environment changed: " + "; ".join(env)
    return None


_FLOAT_MAX = sys.float_info.max


def _usable(v) -> bool:
    """A value the analysis can use: a finite positive number (bools are not)."""
    t = type(v)
    if t is float:
        return 0.0 < v < math.inf
    if t is int:
        return 0 < v <= _FLOAT_MAX  # an int beyond float range is no measurement
    return isinstance(v, (float, np.floating, np.integer)) and math.isfinite(v) and v > 0


def _valid_points(series: Series) -> tuple[list[Point], int, dict, list[int], dict[int, list[str]]]:
    """Split a series into usable points and failures.

    Returns ``(valid, n_failed, reasons, gap_before, failed_commits)`` where
    ``gap_before[k]`` counts the failed or unusable points between valid points
    ``k - 1`` and ``k`` (0 for the first) and ``failed_commits[k]`` names them
    (only for ``k`` with a gap).
    """
    pts = list(series.points)  # once: a PointView makes its points on each pass
    ok = [_usable(p.value) for p in pts]
    if all(ok):
        return pts, 0, {}, [0] * len(pts), {}
    valid: list[Point] = []
    reasons: dict[str, int] = {}
    gap_before: list[int] = []
    failed_commits: dict[int, list[str]] = {}
    pending: list[str] = []
    for p, good in zip(pts, ok):
        if good:
            if valid and pending:
                failed_commits[len(valid)] = pending
            gap_before.append(len(pending) if valid else 0)
            valid.append(p)
            pending = []
        else:
            pending.append(p.commit)
            v = p.value
            r = p.reason or ("null result" if v is None else f"unusable value {v!r}")
            reasons[r] = reasons.get(r, 0) + 1
    return valid, len(pts) - len(valid), reasons, gap_before, failed_commits


def _series_noise(y: np.ndarray, valid: Sequence[Point], floor: float) -> float:
    """Robust noise of ``y``; for short series (< 8 points, where the MAD of a
    handful of differences is unreliable) at least the typical per-commit
    uncertainty that asv stored (its 99% CI of the median, half-width / 2.576)."""
    sigma = robust_noise(y, floor)
    if y.size < 8:
        half = [
            0.5 * math.log(p.ci[1] / p.ci[0]) / 2.576
            for p in valid
            if p.ci and p.ci[0] and p.ci[1] and 0 < p.ci[0] < p.ci[1]
        ]
        if half:
            sigma = max(sigma, float(np.median(half)))
    return sigma


def _resolve_bounds(y: np.ndarray, cps: list[int], bounds: Mapping[int, object]) -> tuple[list[int], dict]:
    """Merge detected change points with known boundaries (version, environment,
    failure gap). A detected point one commit from a boundary is one change:
    it is put where a two-level fit of the points between the neighbouring
    change points is better (lower squared error), so a step one commit away
    from a version change stays a code change. Returns the change points and,
    for a boundary that lost, ``{boundary: winning index}``."""
    n = y.size
    cps = sorted(set(int(c) for c in cps if 0 < c < n))
    moved: dict[int, int] = {}
    out = set(cps)
    for b in sorted(bounds):
        near = [c for c in cps if abs(c - b) == 1 and c not in bounds]
        if not near or b in cps:
            out.add(b)
            continue
        c = near[0]
        others = sorted(x for x in out if x not in (b, c))
        lo = max([x for x in others if x < min(b, c)] + [0])
        hi = min([x for x in others if x > max(b, c)] + [n])
        seg = y[lo:hi]

        def sse(k: int, seg=seg, lo=lo) -> float:
            a, z = seg[: k - lo], seg[k - lo :]
            return float(np.sum((a - a.mean()) ** 2) + np.sum((z - z.mean()) ** 2)) if a.size and z.size else math.inf

        if sse(b) <= sse(c):
            out.discard(c)
            out.add(b)
        else:
            moved[b] = c
    return sorted(out), moved


def _merge_close_steps(
    y: np.ndarray,
    cands: list[Candidate],
    sigma: float,
    config: AnalysisConfig,
    n_pos: int,
    bounds: Mapping[int, tuple[str, str]] | None = None,
) -> list[Candidate]:
    """Consecutive unannotated steps the same way at most ``drift_max_len - 1``
    commits apart are one change spread over those commits (a ramp that binary
    segmentation cut in two), sized from the level before the first to the level
    after the last. When no step carries :data:`DRIFT_MAX_SHARE` of it, it is a
    creeping drift over its span; else it is a step named at the commit with
    the largest move (a 4% move two commits before a 3x jump is the jump's
    change, not the 4% commit's), and ``moves`` keeps each step's size so the
    reason can say how much moved where. Steps at a version, environment or gap
    boundary are never merged, nor steps with a version or environment
    boundary between them (``bounds``, :func:`_boundaries`): the move across it
    is not the code's alone."""
    between = sorted(k for k, v in (bounds or {}).items() if v[0] in ("version", "env"))
    out: list[Candidate] = []
    for c in cands:
        prev = out[-1] if out else None
        if (
            prev is not None
            and c.kind == "step"
            and (prev.kind == "step" or prev.moves)
            and prev.annotation is None
            and c.annotation is None
            and 0 < c.index - (prev.moves[-1][0] if prev.moves else prev.index) <= config.drift_max_len - 1
            and prev.d * c.d > 0
            and not any((prev.moves[0][0] if prev.moves else prev.index) < k <= c.index for k in between)
        ):
            first = prev.moves[0][0] if prev.moves else prev.index
            lo = prev.span_lo if prev.span_lo is not None else prev.index - prev.n_before
            hi = c.index + c.n_after
            d, se, p, n1, n2 = _step_test(y, first, lo, hi, sigma, n_pos)
            d = _huber_mean(y[c.index : hi], sigma) - _huber_mean(y[lo:first], sigma)
            se = sigma * math.sqrt(1.0 / n1 + 1.0 / max(hi - c.index, 1))
            moves = list(prev.moves or [(prev.index, prev.d)]) + [(c.index, c.d)]
            big_at, big_d = max(moves, key=lambda m: abs(m[1]))
            # no single step carries most of the change: a creeping drift over those commits
            creeping = abs(d) > 0 and abs(big_d) <= DRIFT_MAX_SHARE * abs(d)
            named = prev if big_at == prev.index else c
            m = Candidate(
                "drift" if creeping else "step",
                moves[-1][0] if creeping else big_at,
                first if creeping else big_at,
                d,
                se,
                min(p, max(prev.p_value, c.p_value)),
                big_at - lo if not creeping else n1,
                hi - big_at if not creeping else hi - c.index,
                p_samples=named.p_samples,
                jump=named.jump,
                note=prev.note or c.note,
                also=[i for i, _ in moves if i != (big_at if not creeping else first)],
            )
            m.part = abs(big_d)
            m.moves = moves
            m.span_lo = lo
            out[-1] = m
            continue
        out.append(c)
    return out


def analyze_series(
    series: Series, config: AnalysisConfig = AnalysisConfig(), machine_commits: Sequence[str] | None = None
) -> SeriesAnalysis:
    """Detect steps, drifts and gaps in one series.

    Steps: isolated spikes are cleaned (:func:`harness.analysis.detect.clean_spikes`),
    change points proposed by ``config.detector`` (default binary segmentation,
    :func:`harness.analysis.detect.binary_segmentation`), version, environment and
    failure-gap boundaries always tested, the newest 1-2 commits tested against
    the level before them (:func:`harness.analysis.detect.tail_split`); every
    candidate's size and p-value come from the neighbouring segments.

    Parameters
    ----------
    series : Series
        Points in commit order.
    config : AnalysisConfig
    machine_commits : sequence of str, optional
        Every commit its machine has results for, in order; lets a series that
        stops be reported as missing since its last value.

    Returns
    -------
    SeriesAnalysis
        Candidates carry position-adjusted p-values; :func:`analyze` applies
        Benjamini-Hochberg across series and turns them into findings. A series
        with fewer than ``config.min_points`` valid points gets no candidates and
        ``insufficient`` says so ("not enough history: N points, need M").

    Raises
    ------
    TypeError
        ``series`` is not a :class:`Series`.
    """
    if not isinstance(series, Series):
        raise TypeError(f"analyze_series needs a Series, got {type(series).__name__}")
    pts = series.points
    valid, failed, reasons, gap_before, failed_commits = _valid_points(series)
    gaps = _gap_findings(series, valid, failed, reasons, machine_commits)
    n = len(valid)
    values = np.array([p.value for p in valid], dtype=float)
    base = dict(
        series=series,
        n_points=len(pts),
        n_valid=n,
        n_failed=failed,
        failure_reasons=reasons,
        gap_findings=gaps,
        valid_commits=[p.commit for p in valid],
        valid_values=values,
    )
    if n < config.min_points:
        y0 = _oriented(values, series.direction) if n else values
        cand = _samples_candidate(valid, series, config) if n >= 2 else None
        if cand is not None:  # two commits with samples are a real test
            return SeriesAnalysis(
                noise=abs(cand.se),
                se_typical=None,
                n_positions=1,
                candidates=[cand],
                levels=[(0, n - 1), (n - 1, n)],
                **base,
            )
        return SeriesAnalysis(
            noise=robust_noise(y0, config.noise_floor) if n >= 2 else None,
            se_typical=None,
            n_positions=0,
            candidates=[],
            levels=[(0, n)] if n else [],
            insufficient=f"not enough history: {n} point{'' if n == 1 else 's'}, need {config.min_points}",
            **base,
        )
    y = _oriented(values, series.direction)
    sigma = _series_noise(y, valid, config.noise_floor)
    yc, spikes = clean_spikes(y, sigma)
    n_pos = max(n - 2 * config.min_segment + 1, 1)
    bounds = _one_point_between_gaps(yc, _boundaries(valid, gap_before, failed_commits), sigma)
    cps, moved = _change_points(yc, sigma, bounds, config)
    gap_idx = [k for k, v in bounds.items() if v[0] == "gap"]  # a ramp never spans one, moved or not
    cps, bounds, gap_notes = _steps_before_gaps(yc, cps, bounds, config, sigma)
    edges = [0] + cps + [n]
    levels = list(zip(edges[:-1], edges[1:]))
    sigma = _residual_noise(yc, levels, sigma, config.noise_floor)
    cands = _step_candidates(y, yc, sigma, valid, cps, bounds, moved, n_pos, config)
    for c in cands:
        if c.index in gap_notes:
            c.note = "; ".join(x for x in (c.note, gap_notes[c.index]) if x)
        if c.index < n and gap_before[c.index] and c.index not in bounds:  # an intermittent failure
            c.note = "; ".join(x for x in (c.note, f"{gap_before[c.index]} failed commit(s) between the pair") if x)
    cands, excursions = _excursions(yc, cands, sigma, config)
    cands = _merge_close_steps(yc, cands, sigma, config, n_pos, bounds)
    # one point is no level: a step needs two points before it, and two after
    # unless it is at the newest commits (the tail rule's pending)
    cands = [c for c in cands if c.n_before >= 2 and (c.n_after >= 2 or c.index + c.n_after >= n)]
    drifts = _drift_candidates(yc, sigma, config, cps, {k: v for k, v in bounds.items() if v[0] != "gap"}, gap_idx)
    # a ramp into a level that came back is part of that excursion, not a drift
    # (OpenBLAS gemm(100, d): a creeping 19% speed-up whose level went back 7 commits on)
    cands.extend(d for d in drifts if not any(f - 1 <= d.index and d.start <= b for f, b, _d, _n in excursions))
    se_typ = sigma * math.sqrt(2.0 / max(min(config.window, n // 2), 1))  # Huber means of two windows
    return SeriesAnalysis(
        noise=sigma,
        se_typical=se_typ,
        n_positions=n_pos,
        candidates=cands,
        levels=levels,
        spikes=[valid[i].commit for i in spikes],
        excursions=excursions,
        **base,
    )


def _excursions(
    y: np.ndarray, cands: list[Candidate], sigma: float, config: AnalysisConfig
) -> tuple[list[Candidate], list[tuple[int, int, float, float]]]:
    """Levels that do not hold: two consecutive significant unannotated steps
    that move opposite ways, at most ``excursion_max_len`` points apart, with
    the level after the second back at the level before the first, are one
    excursion, not a regression and its undoing an improvement. "Back" means
    the net move (clipped means of the levels either side, as in the step
    test) is below ``min_effect`` or within 3 standard errors of zero.

    Measured (docs/analysis.md): ``synth_asv.py --realistic`` carries 2-3
    commit moves of 15-30% that revert; OpenBLAS's real asv history carries
    moves of 5-8 commits that come back to the level before them (a fast state
    of gemm that comes and goes, an on/off stretch of nrm2), which a kernel
    engineer reading the series called noise, one by one. Twice the
    confirmation count (8) covers them; a move that holds longer and then
    comes back is a regression and a fix. Returns the candidates left and the excursions as
    ``(first, back, d, d_net)``: indices of the first point of the excursion
    and the first point back, the excursion's size and the net move.
    """
    theta = math.log1p(config.min_effect)
    # pairs of steps that are significant on their own (a weak change point
    # inside or beside the excursion does not break it up)
    steps = sorted((c for c in cands if c.kind == "step" and c.p_value <= config.fdr_q), key=lambda c: c.index)
    drop: set[int] = set()
    out: list[tuple[int, int, float, float]] = []
    for j in range(1, len(steps)):
        c2 = steps[j]
        # the move out may be a ramp: a chain of steps the same way, each at
        # most drift_max_len - 1 commits after the one before
        k = j - 1
        while (
            k > 0
            and steps[k - 1].d * steps[k].d > 0
            and steps[k].index - steps[k - 1].index <= config.drift_max_len - 1
            and not steps[k - 1].annotation
        ):
            k -= 1
        chain = steps[k:j]
        c1 = chain[0]
        if any(id(c) in drop or c.annotation or c.moves for c in chain) or c2.annotation or c2.moves:
            continue
        if chain[-1].d * c2.d >= 0 or not 0 < c2.index - c1.index <= config.excursion_max_len:
            continue
        lo, hi = c1.index - c1.n_before, c2.index + c2.n_after
        before, after = y[lo : c1.index], y[c2.index : hi]
        if before.size < 2 or (after.size < 2 and hi < y.size):
            continue  # one point is no level (the newest commit alone may be the return)
        d_net = _huber_mean(after, sigma) - _huber_mean(before, sigma)
        se_net = sigma * math.sqrt(1.0 / before.size + 1.0 / after.size)
        if abs(d_net) < theta or abs(d_net) < 3.0 * se_net:
            drop.update(id(c) for c in (*chain, c2))
            level = _huber_mean(y[c1.index : c2.index], sigma) - _huber_mean(before, sigma)
            out.append((c1.index, c2.index, level, d_net))
    return [c for c in cands if id(c) not in drop], out


def _samples_candidate(valid: Sequence[Point], series: Series, config: AnalysisConfig) -> Candidate | None:
    """A history too short for change detection whose newest two commits both
    recorded samples (six or more each, as asv's compare needs, or three or
    more repeated runs each: :func:`harness.analysis.stats._sample_test`): the newest
    commit against the one before, on the samples. ``d`` is the log ratio of
    the sample medians (oriented), its standard error from the samples' MAD
    (``1.4826 MAD sqrt(pi/2 / m)`` per side, the large-sample error of a
    median), the p-value :func:`harness.analysis.stats._sample_test`'s. ``None`` when
    samples are missing or the points carry a version or environment change."""
    a, b = valid[-2], valid[-1]
    p = _sample_test(a, b)
    if p is None or a.version != b.version or a.env != b.env:
        return None
    sa, sb = np.log(np.asarray(a.samples, dtype=float)), np.log(np.asarray(b.samples, dtype=float))
    if not (np.all(np.isfinite(sa)) and np.all(np.isfinite(sb))):
        return None
    sgn = -1.0 if series.direction is Direction.HIGHER_IS_BETTER else 1.0
    d = sgn * float(np.median(sb) - np.median(sa))
    se = math.sqrt(
        sum((1.4826 * float(np.median(np.abs(x - np.median(x))))) ** 2 * (math.pi / 2) / x.size for x in (sa, sb))
    )
    se = max(se, config.noise_floor)
    n = len(valid)
    return Candidate("step", n - 1, n - 1, d, se, p, n - 1, 1, p_samples=p)


def _one_point_between_gaps(y: np.ndarray, bounds: dict[int, tuple[str, str]], sigma: float) -> dict:
    """``bounds`` without the gap boundary on one side of a single valid point
    that lies between two failure gaps, when that point reads as the level on
    that side (within 3 sigma of the median of up to 3 points there, or less
    than half as far from it as from the other side's): one point is no level,
    and as two boundaries it took the step at the first gap with it.
    ``1.0 x 40, fail, 1.5, fail, 1.5 x 30`` was reported only as failing; the
    +50% step is now found at the first gap (with its failed commits named). A
    point about half-way keeps both boundaries."""
    gaps = sorted(k for k, v in bounds.items() if v[0] == "gap")
    out = dict(bounds)
    for g1, g2 in zip(gaps, gaps[1:]):
        if g2 - g1 != 1 or g1 not in out:
            continue
        mid, after, before = float(y[g1]), y[g2 : g2 + 3], y[max(0, g1 - 3) : g1]
        if after.size < 2 or before.size < 2:
            continue
        d_after, d_before = abs(mid - float(np.median(after))), abs(mid - float(np.median(before)))
        if d_after < 3.0 * sigma or 2.0 * d_after < d_before:
            del out[g2]
        elif d_before < 3.0 * sigma or 2.0 * d_before < d_after:
            del out[g1]
    return out


#: A series with at least this many one-commit failures between valid points
#: fails intermittently: those single failures are no boundaries of its levels.
INTERMITTENT_MIN_SINGLE_GAPS = 3


def _intermittent(gap_before: Sequence[int]) -> bool:
    """True when the series fails intermittently: :data:`INTERMITTENT_MIN_SINGLE_GAPS`
    or more failure stretches of exactly one commit between valid points. Each
    such gap as a boundary would cut the series into levels of one or two
    points that no step test accepts: a 30% step in a series failing every
    other commit went unreported (``tests/test_analysis_shapes.py``)."""
    return sum(1 for g in gap_before if g == 1) >= INTERMITTENT_MIN_SINGLE_GAPS


def _boundaries(
    valid: Sequence[Point], gap_before: Sequence[int], failed_commits: Mapping[int, Sequence[str]]
) -> dict[int, tuple[str, str]]:
    """Known boundaries between valid points ``k - 1`` and ``k``: a failure gap
    (``("gap", text)``), a benchmark-version or an environment change. In a
    series that fails intermittently (:func:`_intermittent`), a one-commit
    failure is no boundary: a change across it is found like any other."""
    bounds: dict[int, tuple[str, str]] = {}
    flaky = _intermittent(gap_before)
    for k in range(1, len(valid)):
        if gap_before[k] and not (flaky and gap_before[k] == 1):
            fc = failed_commits[k]
            bounds[k] = (
                "gap",
                f"jump across a failure gap: {gap_before[k]} failed commit(s) "
                f"{fc[0][:12]}..{fc[-1][:12]} between the two measured commits",
            )
            continue
        a, b = valid[k - 1], valid[k]
        if a.version == b.version and a.env == b.env:
            continue
        ann = _boundary_annotation(valid, k)
        if ann:
            bounds[k] = ann
    return bounds


def _change_points(yc: np.ndarray, sigma: float, bounds: Mapping[int, tuple], config: AnalysisConfig):
    """Change points of the cleaned series: the detector's, refined (Bai 1997),
    merged with the known boundaries (:func:`_resolve_bounds`), then the tail
    rule for the newest ``confirm_after`` commits. The newest commits are
    decided by the tail rule alone (one family, one location), so a split
    there never pre-empts it. Returns ``(cps, moved)``."""
    n = yc.size
    cps = DETECTORS[config.detector](yc / sigma, config)
    cps = [c for c in cps if n - c > config.confirm_after]
    cps = refine(yc, sorted(set(cps) | set(bounds)), fixed=tuple(bounds), min_size=config.min_segment)
    cps = [c for c in cps if n - c > config.confirm_after or c in bounds]
    cps, moved = _resolve_bounds(yc, [c for c in cps if c not in bounds], bounds)
    cps = _collapse_single_points(yc, cps, bounds)
    cps = _collapse_split_pairs(yc, cps, bounds, sigma)
    last = cps[-1] if cps else 0
    tail = tail_split(yc, last, sigma, window=config.window, max_tail=config.confirm_after)
    if tail is not None and abs(tail[1]) >= config.tail_z and tail[0] not in cps:
        # a tail measured against two points that disagree is no change either
        cps = _collapse_split_pairs(yc, sorted(set(cps) | {tail[0]}), bounds, sigma)
    return cps, moved


def _split_sse(seg: np.ndarray, k: int) -> float:
    """Squared error of a two-level fit of ``seg`` split before index ``k``,
    each level its median (robust to the outlier the callers are deciding about)."""
    left, right = seg[:k], seg[k:]
    return float(np.sum((left - np.median(left)) ** 2) + np.sum((right - np.median(right)) ** 2))


def _steps_before_gaps(
    y: np.ndarray, cps: list[int], bounds: Mapping[int, tuple], config: AnalysisConfig, sigma: float
) -> tuple[list[int], dict, dict[int, str]]:
    """A step just before a failure stretch is found at its own commit.

    A failure gap is always a change point, so a step one to three commits
    before it left a level of one to three points that the step test refuses
    (one point is no level) or that the tail rule never sees, and the change
    was reported across the gap as a pending (a real 5.9x step one point before
    a failure stretch was lost that way). For each gap boundary ``g``, the best
    two-level split of the points between the neighbouring change points, at
    ``g`` or up to ``confirm_after - 1`` points before it, wins: when it is
    before the gap, the step is there and its new level continues across the
    gap (the gap is then no boundary, and the step's reason says so).

    Returns the change points, the boundaries left and, per moved step, the note.
    """
    n = y.size
    cur = sorted(cps)
    bounds = dict(bounds)
    notes: dict[int, str] = {}
    for g in sorted(k for k, v in bounds.items() if v[0] == "gap"):
        if g not in cur:
            continue
        i = cur.index(g)
        lo = cur[i - 1] if i > 0 else 0
        hi = cur[i + 1] if i + 1 < len(cur) else n
        w = config.confirm_after - 1
        pre, post = y[max(lo, g - w - 10) : max(lo, g - w)], y[g : g + 3]
        if pre.size and post.size and abs(float(np.median(post) - np.median(pre))) < 3.0 * sigma:
            continue  # no level change around the gap: nothing to place
        seg = y[lo:hi]

        options = [k for k in range(max(lo + 2, g - config.confirm_after + 1), g + 1) if k not in bounds or k == g]
        if not options:
            continue
        best = min(options, key=lambda k: _split_sse(seg, k - lo))
        if best == g:
            continue
        text = bounds.pop(g)[1]
        cur[i] = best
        notes[best] = f"the new level continues across {text.removeprefix('jump across ')}"
    return sorted(set(cur)), bounds, notes


def _collapse_single_points(y: np.ndarray, cps: list[int], bounds: Mapping[int, tuple]) -> list[int]:
    """A level of one point between two change points that move opposite ways
    is an outlier at (or next to) a step, not two steps: keep the one of the
    two positions where a two-level fit of the points between the neighbouring
    change points is better (the outlier then sits inside a level, where the
    clipped means of the step test bound its weight)."""
    cur = sorted(cps)
    i = 0
    while i + 1 < len(cur):
        a, b = cur[i], cur[i + 1]
        if b - a != 1 or a in bounds or b in bounds:
            i += 1
            continue
        lo = cur[i - 1] if i > 0 else 0
        hi = cur[i + 2] if i + 2 < len(cur) else y.size
        if a - lo < 1 or hi - b < 1:
            i += 1
            continue
        up1 = y[a] - y[lo:a].mean()
        up2 = y[b:hi].mean() - y[a]
        if up1 * up2 >= 0:
            i += 1  # same way: a ramp, merged later
            continue
        seg = y[lo:hi]

        keep = a if _split_sse(seg, a - lo) <= _split_sse(seg, b - lo) else b
        cur[i : i + 2] = [keep]
    return cur


def _collapse_split_pairs(y: np.ndarray, cps: list[int], bounds: Mapping[int, tuple], sigma: float) -> list[int]:
    """Two points that disagree are no level either: a level of two points
    between two change points (not at a boundary) whose points differ by more
    than ``3 sqrt(2) sigma`` is an outlier beside a step, and one of its two
    change points goes: a detected one beside a version, environment or gap
    boundary, else the one whose removal leaves the better two-level fit
    (as :func:`_collapse_single_points`). On OpenBLAS's real history a 25%
    speed-up followed by one low outlier was reported as a 4% regression
    after the outlier."""
    cur = sorted(cps)
    i = 0
    while i + 1 < len(cur):
        a, b = cur[i], cur[i + 1]
        if b - a != 2 or (a in bounds and b in bounds) or abs(y[a] - y[a + 1]) <= 3.0 * math.sqrt(2.0) * sigma:
            i += 1
            continue
        if a in bounds or b in bounds:  # a boundary stays; the detected point beside the outlier goes
            cur[i : i + 2] = [a if a in bounds else b]
            continue
        lo = cur[i - 1] if i > 0 else 0
        hi = cur[i + 2] if i + 2 < len(cur) else y.size
        seg = y[lo:hi]

        cur[i : i + 2] = [a if _split_sse(seg, a - lo) <= _split_sse(seg, b - lo) else b]
    return cur


def _step_candidates(y, yc, sigma, valid, cps, bounds, moved, n_pos, config) -> list[Candidate]:
    """A tested :class:`Candidate` per change point: size and p-value from the
    neighbouring levels (up to ``window`` points each side), the move at the
    named pair, the boundary label, and a note when a version or environment
    change sits one commit away (the step is then a code change). The newest
    ``confirm_after`` positions are their own family (a change that just
    happened), the rest of the history the other."""
    n = yc.size
    edges = [0] + list(cps) + [n]
    W = config.window
    cands: list[Candidate] = []
    for i, k in enumerate(cps):
        lo = max(edges[i], k - W)
        hi = min(edges[i + 2], k + W)
        if k - lo < 1 or hi - k < 1:
            continue
        fam = config.confirm_after if n - k <= config.confirm_after else n_pos
        d, se, p, n1, n2 = _step_test(yc, k, lo, hi, sigma, fam)
        c = Candidate("step", k, k, d, se, p, n1, n2, p_samples=_sample_test(valid[k - 1], valid[k]))
        c.jump = float(y[k] - y[k - 1])
        if k in bounds:
            c.annotation, c.annotation_reason = bounds[k]
        near = [b for b, w in moved.items() if w == k]
        if near:
            ann = bounds.get(near[0])
            c.note = (
                f"{ann[1] if ann else 'boundary'} one commit {'before' if near[0] < k else 'after'} this step, "
                f"at {valid[near[0]].commit[:12]}; the step is not at that commit, so it is a code change"
            )
        cands.append(c)
    return cands


def failure_stretches(series: Series) -> list[dict]:
    """Runs of consecutive failed (null or unusable) points of a series.

    Returns one dict per run, oldest first: ``since`` (first failed commit),
    ``last_failed``, ``back_at`` (first commit with a value again, ``None``
    while still failing at the newest point) and ``failed`` (count).
    """
    out: list[dict] = []
    cur: dict | None = None
    for p in series.points:
        if not _usable(p.value):
            if cur is None:
                cur = {"since": p.commit, "last_failed": p.commit, "back_at": None, "failed": 0}
                out.append(cur)
            cur["last_failed"] = p.commit
            cur["failed"] += 1
        elif cur is not None:
            cur["back_at"] = p.commit
            cur = None
    return out


def _gap_findings(
    series: Series, valid: list[Point], failed: int, reasons: dict, machine_commits: Sequence[str] | None
) -> list[Finding]:
    """``failing`` (one finding per series: every failure stretch, "failing
    since X, back at Y", with the first failed commit) and ``missing`` (the
    machine has later results that no longer name the series: "missing since
    X", X the first such commit)."""
    label = series.key.label()
    out = []
    why = "; ".join(f"{r} x{c}" for r, c in sorted(reasons.items(), key=lambda kv: -kv[1])[:3])
    if failed:
        st = failure_stretches(series)
        parts = [
            f"failing since {x['since'][:12]}"
            + (f", back at {x['back_at'][:12]}" if x["back_at"] else ", still failing at the newest result")
            + f" ({x['failed']} commit{'s' if x['failed'] > 1 else ''})"
            for x in st
        ]
        shown = parts if len(parts) <= 4 else parts[:2] + [f"... {len(parts) - 3} more ..."] + parts[-1:]
        last = st[-1]
        head = (
            f"{failed} of {len(series.points)} results failed" if valid else f"all {len(series.points)} results failed"
        )
        out.append(
            Finding(
                Status.FAILING,
                label,
                series.key,
                last["since"],
                last["back_at"],
                None,
                None,
                None,
                f"{head}: " + "; ".join(shown) + f" ({why})",
                extra={"failed": failed, "total": len(series.points), "stretches": st},
            )
        )
    if series.points and machine_commits is not None:
        order = {c: i for i, c in enumerate(machine_commits)}
        last_seen = series.last_seen or series.points[-1].commit
        if last_seen in order:
            later = list(machine_commits[order[last_seen] + 1 :])
            if later:
                last_ok = valid[-1].commit if valid else None
                out.append(
                    Finding(
                        Status.MISSING,
                        label,
                        series.key,
                        last_seen,
                        later[0],
                        None,
                        None,
                        None,
                        f"missing since commit {later[0][:12]}: the machine's {len(later)} later result file(s) do not "
                        f"name this series (last seen at {last_seen[:12]}"
                        + (f", last value at {last_ok[:12]})" if last_ok and last_ok != last_seen else ")"),
                        extra={"later_commits": len(later), "last_seen": last_seen, "last_value": last_ok},
                    )
                )
    return out
