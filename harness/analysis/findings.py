"""Accepted candidates of one series -> findings: one per change, with status,
commit pair, size and CI, evidence, and for ``pending`` what will confirm it."""

from __future__ import annotations

import math

import numpy as np

from harness.analysis.model import (
    DRIFT_MAX_SHARE,
    AnalysisConfig,
    Candidate,
    Direction,
    Finding,
    SeriesAnalysis,
    Status,
)
from harness.analysis.series import _oriented
from harness.analysis.stats import RANK_TEST_MIN, _huber_mean, _ratio_ci
from harness.core.model import change_text, direction_assumed


def _ramp_beats_step(y: np.ndarray, sigma: float, ramp: Candidate, step: Candidate, window: int) -> bool:
    """Whether a drift candidate fits the points from its start to ``window``
    after its end better than an overlapping step does, by at least the drift
    rule's margin of 6 sigma^2. The ramp model is the level before, a linear
    ramp over its commits and then its stated new level; the step model the
    two levels either side of the step. A ramp that overstates the new level
    (the last ramp point was high) loses to the step."""
    n = y.size
    s, e = ramp.start, ramp.index + 1
    lo = max(0, min(s, step.index) - window)
    hi = min(n, max(e, step.index + 1) + window)
    base = _huber_mean(y[lo : min(s, step.index)], sigma) if min(s, step.index) > lo else float(y[lo])
    ramp_fit = np.full(hi - lo, base + ramp.d)
    idx = np.arange(lo, hi)
    L = e - s
    ramp_fit[idx < s] = base
    inside = (idx >= s) & (idx < e)
    ramp_fit[inside] = base + (idx[inside] - s + 1) / L * ramp.d
    after = _huber_mean(y[step.index : hi], sigma)
    before = _huber_mean(y[lo : step.index], sigma) if step.index > lo else base
    step_fit = np.where(idx < step.index, before, after)
    seg = y[lo:hi]
    return float(np.sum((seg - step_fit) ** 2) - np.sum((seg - ramp_fit) ** 2)) > 6.0 * sigma * sigma


def _one_per_change(
    a: SeriesAnalysis, acc: list[tuple[Candidate, float]], config: AnalysisConfig
) -> list[tuple[Candidate, float]]:
    """Accepted candidates of one series, one per change: a drift and a step
    that overlap are one change, reported as the drift when the ramp fits
    better (:func:`_ramp_beats_step`), else as the step; overlapping drifts
    keep the most significant."""
    if not any(c.kind == "drift" for c, _ in acc):
        return acc
    y = _oriented(a.valid_values, a.series.direction)
    steps = [(c, q) for c, q in acc if c.kind == "step"]
    drifts = sorted(((c, q) for c, q in acc if c.kind == "drift"), key=lambda cq: (not cq[0].also, cq[0].p_value))
    dropped_steps: set[int] = set()
    kept: list[tuple[Candidate, float]] = []
    for c, q in drifts:
        if any(not (c.index < d.start or c.start > d.index) for d, _ in kept):
            continue  # one creeping change, found by both rules
        over = [st for st, _ in steps if c.start - 1 <= st.index <= c.index + 1]
        if over and not all(_ramp_beats_step(y, a.noise, c, st, config.window) for st in over):
            continue
        dropped_steps.update(id(st) for st in over)
        kept.append((c, q))
    return [(c, q) for c, q in steps if id(c) not in dropped_steps] + kept


def _size_text(d: float, direction: Direction = Direction.LOWER_IS_BETTER) -> str:
    """A change of ``d`` (oriented log units, + = worse) in the one wording
    (:func:`harness.core.model.change_text`): ``+26.8% slower``, ``x482705 slower``."""
    return change_text(math.expm1(d), higher=direction is Direction.HIGHER_IS_BETTER)


#: A step undoes an earlier opposite step of the same series when the net move
#: over both is at most this share of the later step (and within two noise sigmas
#: beyond it): the series came back to the level it had before the first one.
UNDO_MAX_NET_SHARE = 0.35


def mark_undone(a: SeriesAnalysis, kept: list[tuple[Candidate, float]], findings: list[Finding]) -> None:
    """Say so in the reason when a step returns a series to the level it had
    before an earlier opposite step (``extra.undoes``: that step's commit):
    "+13.1% slower, back to the level before the -10.7% faster step at
    4f64df4c, 13 commits earlier". A lost speed-up is still a regression (the
    level held for more points than an excursion); the reason names what it
    undid, so a reader sees one dip and its end, not two unrelated changes
    (OpenBLAS's Dgemm(100, d) on skylake, ``docs/analysis.md``).

    ``kept`` and ``findings`` are the series' accepted candidates and their
    findings, in the same order; findings are changed in place.
    """
    steps = [(c, f) for (c, _q), f in zip(kept, findings) if c.kind == "step" and c.annotation in (None, "gap")]
    steps.sort(key=lambda cf: cf[0].index)
    sigma = a.noise or 0.0
    for (c1, f1), (c2, f2) in zip(steps, steps[1:]):
        if c1.d * c2.d >= 0:
            continue
        net = abs(c1.d + c2.d)
        if net > UNDO_MAX_NET_SHARE * abs(c2.d) and net > 2.0 * sigma:
            continue
        n = c2.index - c1.index
        f2.extra["undoes"] = f1.commit_after
        f2.reason += (
            f"; back to the level before the {_size_text(c1.d, a.series.direction)} step at "
            f"{(f1.commit_after or '')[:12]}, {n} commit(s) earlier"
        )


def _boundary_in(a: SeriesAnalysis, c: Candidate) -> int:
    """Index of the first pair inside drift ``c`` (``start`` .. ``index``) whose
    points differ in benchmark version (``c.annotation == "version"``) or in
    environment (``"env"``); ``c.start`` when none does."""
    pts = {p.commit: p for p in a.series.points}
    vc = a.valid_commits
    for k in range(max(c.start, 1), c.index + 1):
        p0, p1 = pts[vc[k - 1]], pts[vc[k]]
        if (p0.version != p1.version) if c.annotation == "version" else (p0.env != p1.env):
            return k
    return c.start


def _largest_move(c: Candidate) -> int:
    """Index of the merged move (``c.moves``) that moved most (the first of equals)."""
    return max(c.moves, key=lambda m: abs(m[1]))[0]


def _moves(a: SeriesAnalysis, moves: list[tuple[int, float]]) -> tuple[list[dict], str]:
    """Merged moves ``(index, d)`` as ``extra.moves`` entries and as the reason's
    "+4.0% slower at <commit>, ..." list."""
    rows = [{"commit": a.valid_commits[i], "change": math.expm1(d)} for i, d in moves]
    text = ", ".join(f"{_size_text(d, a.series.direction)} at {a.valid_commits[i][:12]}" for i, d in moves)
    return rows, text


def _samples_test_name(a: SeriesAnalysis, c: Candidate) -> str:
    """Which test :func:`harness.analysis.stats._sample_test` ran on the pair's samples."""
    pts = [p for p in a.series.points if p.commit in (a.valid_commits[c.index - 1], a.valid_commits[c.index])]
    n = min((len(p.samples or ()) for p in pts), default=0)
    return "Mann-Whitney" if n >= RANK_TEST_MIN else f"Welch's t on {n} runs a side"


#: Below this a p-value is printed as a bound: its model (normal noise, commits
#: independent) is not trusted that far into its tail, and "p=4.9e-132" from one
#: point read as false precision (newcomer trial, 2026-12-07). R prints
#: ``< 2.2e-16`` for the same reason; the report's JSON keeps the value.
P_TEXT_FLOOR = 1e-10


def p_text(p: float) -> str:
    """``p=0.0003`` (two significant digits), or ``p<1e-10`` below :data:`P_TEXT_FLOOR`."""
    return f"p<{P_TEXT_FLOOR:.0e}" if p < P_TEXT_FLOOR else f"p={p:.2g}"


def at_newest(a: SeriesAnalysis, c: Candidate, config: AnalysisConfig) -> bool:
    """Whether ``c`` is a change at the newest commits of its series, not yet
    confirmed (fewer than ``confirm_after`` points at its new level, the last
    of them the series' newest): a ``pending`` finding, tested in its own
    Benjamini-Hochberg family (:func:`harness.analysis.run._accept`)."""
    return c.n_after < config.confirm_after and c.index + c.n_after >= a.n_valid


def _candidate_finding(a: SeriesAnalysis, c: Candidate, q: float, zq: float, config: AnalysisConfig) -> Finding:
    """One accepted candidate as a :class:`Finding`: status, commit pair, size
    with CI, the move at the named pair (``extra.jump_ratio``) and a reason
    that gives the evidence and, for ``pending``, what will confirm it."""
    s = a.series
    label = s.key.label()
    ratio, ci = _ratio_ci(c.d, c.se, zq, s.direction)
    before = a.valid_commits[c.start - 1]
    after = a.valid_commits[c.index] if c.kind == "step" else a.valid_commits[c.start]
    if c.kind == "drift" and c.annotation in ("version", "env"):
        # a ramp scanned across a version or environment change is that change:
        # named at the pair where it happens, as a step there would be
        k = _boundary_in(a, c)
        before, after = a.valid_commits[k - 1], a.valid_commits[k]
    elif c.kind == "drift" and c.moves:
        # a ramp that binary segmentation cut into steps: named at its largest
        # move, as merged steps are (experiments/detection/drift_naming.py: its
        # first change point lay outside the ramp in 37% of such drifts at 2% noise)
        k = _largest_move(c)
        before, after = a.valid_commits[k - 1], a.valid_commits[k]
    worse = c.d > 0
    pct = _size_text(c.d, s.direction)  # carries its word: "+26.8% slower", "-10.5% faster"
    unit_word = "higher" if s.direction is Direction.HIGHER_IS_BETTER else "lower"
    extra = {
        "n_before": c.n_before,
        "n_after": c.n_after,
        "noise_rel": a.noise,
        "kind": c.kind,
        "direction": s.direction.value,
    }
    if c.jump is not None:
        sgn = -1.0 if s.direction is Direction.HIGHER_IS_BETTER else 1.0
        extra["jump_ratio"] = math.exp(sgn * c.jump)
    if c.p_samples is not None:
        extra["p_samples"] = c.p_samples
    if c.kind == "drift":
        extra["drift_start_commit"] = a.valid_commits[c.start]
        extra["drift_end_commit"] = a.valid_commits[c.index]
        extra["drift_commits"] = c.index - c.start + 1
    how = (  # a drift's shape: scanned ramps move at every commit, merged steps at their change points
        f"{c.index - c.start + 1} commits with {len(c.moves)} moves the same way"
        if c.moves
        else f"{c.index - c.start + 1} consecutive commits each moved the same way"
    )
    samples_txt = ""
    test = _samples_test_name(a, c)
    if c.p_samples is not None:
        differ = "differ" if c.p_samples <= config.sample_alpha else "do not differ"
        samples_txt = f"; the recorded samples of the two commits {differ} ({test} p={c.p_samples:.3g})"
    if c.annotation in ("version", "env"):
        st = Status.VERSION_CHANGE if c.annotation == "version" else Status.ENV_CHANGE
        reason = f"{pct} ({unit_word} is better) at a {c.annotation_reason}; not attributed to the code"
        extra["annotation"] = c.annotation
    elif c.kind == "drift" and c.index == a.n_valid - 1 and c.n_after < 2:
        st = Status.PENDING
        reason = (
            f"creeping {'slowdown' if worse else 'speed-up'} at the newest commits: {how}, "
            f"{pct} in total against the median of the "
            f"{c.n_before} commits before; the next commit confirms it or shows an excursion"
        )
    elif c.kind == "drift":
        st = Status.DRIFT_REGRESSION if worse else Status.DRIFT_IMPROVEMENT
        reason = (
            f"creeping {'slowdown' if worse else 'speed-up'}: {how} "
            f"(none by more than {DRIFT_MAX_SHARE:.0%} of the change), {pct} in total "
            f"against the median of "
            f"the {c.n_before} commits before"
        )
    elif at_newest(a, c, config):
        st = Status.PENDING
        need = config.confirm_after - c.n_after
        reason = (
            f"{pct} at the newest {c.n_after} commit(s) against the median of the {c.n_before} before "
            f"(noise {a.noise * 100:.2f}%, {p_text(c.p_value)}){samples_txt}; confirmed when {need} more "
            f"commit(s) stay at the new level, an outlier if the next one returns"
        )
        extra["confirm_commits_needed"] = need
    elif c.p_samples is not None and c.p_samples > config.sample_alpha:
        st = Status.PENDING
        reason = (
            f"{pct} between segments, but the recorded samples of the two "
            f"commits do not differ ({test} p={c.p_samples:.3g}); confirmed by a rerun with more samples"
        )
    else:
        st = Status.REGRESSION if worse else Status.IMPROVEMENT
        reason = (
            f"step: {pct} ({unit_word} is better), median of {c.n_after} "
            f"commits after vs {c.n_before} before, noise {a.noise * 100:.2f}%"
        )
    if c.annotation == "gap":
        reason += f"; {c.annotation_reason}"
        extra["annotation"] = "gap"
    if c.also and c.kind == "step":
        extra["also_at"] = [a.valid_commits[i] for i in c.also]
        moves = c.moves or [(c.index, c.d)] + [(i, 0.0) for i in c.also]
        extra["moves"], text = _moves(a, moves)
        span = moves[-1][0] - moves[0][0] + 1
        reason += f"; one change over {span} commits, named at the largest move: " + text
    elif c.kind == "drift" and c.moves:
        extra["moves"], text = _moves(a, c.moves)
        reason += (
            f"; from {a.valid_commits[c.start][:12]} to {a.valid_commits[c.index][:12]}, named at the "
            "largest move: " + text
        )
    if c.note:
        reason += f"; {c.note}"
    if s.direction is Direction.LOWER_IS_BETTER and direction_assumed(s.metric, s.unit):
        # "%" or "score": an accuracy and an error rate read the same (issue 29, round 4)
        reason += f"; lower is better assumed: the unit {s.unit!r} does not say which way is better (asv's convention)"
        extra["direction_assumed"] = True
    return Finding(
        st, label, s.key, before, after, ratio, ci, math.expm1(c.d), reason, p_value=c.p_value, q_value=q, extra=extra
    )
