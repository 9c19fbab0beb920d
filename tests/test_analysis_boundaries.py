"""Change detection exactly at ``min_points`` and ``confirm_after``, one each
side, in both directions (time: higher is worse; throughput: higher is better).

A step with ``confirm_after`` points at its new level is confirmed (regression
or improvement); with one fewer it is ``pending``; a series with
``min_points`` valid points is tested, with one fewer it is "not enough
history". An off-by-one (``<`` for ``<=``) or a direction ignored on one path
moves a finding between these, so each is pinned here. The series are a long
quiet level (0.3% noise, seeded) and a 3x move, far from any other threshold.
"""

from __future__ import annotations

import numpy as np
import pytest

from harness import analysis as A

CFG = A.AnalysisConfig()


def H(i: int) -> str:
    return f"{i:040x}"


def mk(values, metric=None, unit="seconds", name="suite.op.time_x"):
    pts = [A.Point(commit=H(i), value=float(v), version="v1") for i, v in enumerate(values)]
    return A.Series(A.SeriesKey("m1", name, (("n", "1"),)), pts, unit=unit, metric=metric)


def quiet(n, seed=0, level=1.0, noise=0.003):
    rng = np.random.default_rng(seed)
    return level * np.exp(noise * rng.standard_normal(n))


def _step(n_after: int, factor: float, seed: int = 0) -> np.ndarray:
    return np.r_[quiet(30, seed), factor * quiet(n_after, seed + 100)]


def _steps(report, at=30):
    return [f for f in report.findings if int(f.commit_after, 16) == at]


# ----------------------------------------------------------------------------- confirm_after


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize(
    "n_after,confirmed",
    [(CFG.confirm_after - 1, False), (CFG.confirm_after, True), (CFG.confirm_after + 1, True)],
    ids=["one-short", "at", "one-more"],
)
@pytest.mark.parametrize(
    "factor,metric,unit,confirmed_status",
    [
        (3.0, None, "seconds", A.Status.REGRESSION),  # time up: slower
        (1 / 3, None, "seconds", A.Status.IMPROVEMENT),  # time down: faster
        (1 / 3, "gbps", "GB/s", A.Status.REGRESSION),  # throughput down: slower
        (3.0, "gbps", "GB/s", A.Status.IMPROVEMENT),  # throughput up: faster
    ],
    ids=["time-up", "time-down", "gbps-down", "gbps-up"],
)
def test_confirm_after_boundary(n_after, confirmed, factor, metric, unit, confirmed_status, seed):
    r = A.analyze([mk(_step(n_after, factor, seed), metric=metric, unit=unit)], config=CFG)
    (f,) = _steps(r)
    if confirmed:
        assert f.status is confirmed_status, f.reason
    else:
        assert f.status is A.Status.PENDING, f.reason
        assert f.extra["n_after"] == n_after
    # ``change`` is oriented (positive = worse in the metric's own direction): a 3x
    # throughput drop is +200%, like a 3x time increase.
    assert (f.change > 0) == (confirmed_status is A.Status.REGRESSION)


@pytest.mark.parametrize("confirm_after,min_segment", [(2, 2), (3, 3), (6, 3)])
def test_confirm_after_is_read_from_the_config(confirm_after, min_segment):
    cfg = A.AnalysisConfig(confirm_after=confirm_after, min_segment=min_segment)
    (short,) = _steps(A.analyze([mk(_step(confirm_after - 1, 3.0))], config=cfg))
    (enough,) = _steps(A.analyze([mk(_step(confirm_after, 3.0))], config=cfg))
    assert short.status is A.Status.PENDING
    assert enough.status is A.Status.REGRESSION
    assert int(enough.commit_after, 16) == 30 and enough.extra["n_after"] == confirm_after


def test_confirm_after_below_min_segment_is_refused():
    """Found here (issue 30): with confirm_after=2 < min_segment=3, a step with two
    points after it was confirmed at the commit before it (n_after 3, wrong commit)."""
    A.AnalysisConfig(confirm_after=3, min_segment=3)
    with pytest.raises(ValueError, match="confirm_after"):
        A.AnalysisConfig(confirm_after=2)
    A.AnalysisConfig(confirm_after=2, min_segment=2)


# ----------------------------------------------------------------------------- min_points


def _row(report):
    (row,) = report.series
    return row


@pytest.mark.parametrize("min_points", [3, 5])
def test_min_points_boundary(min_points):
    cfg = A.AnalysisConfig(min_points=min_points)
    below = _row(A.analyze([mk(quiet(min_points - 1))], config=cfg))
    at = _row(A.analyze([mk(quiet(min_points))], config=cfg))
    above = _row(A.analyze([mk(quiet(min_points + 1))], config=cfg))
    assert below["status"] == "insufficient_history"
    assert below["reason"] == f"not enough history: {min_points - 1} points, need {min_points}"
    assert at["status"] == above["status"] == "tested"


def test_min_points_below_three_is_refused():
    A.AnalysisConfig(min_points=3)
    with pytest.raises(ValueError, match="min_points"):
        A.AnalysisConfig(min_points=2)


# ----------------------------------------------------------------------------- min_effect


@pytest.mark.parametrize(
    "factor,reported",
    [(1.03, False), (1.10, True), (1 / 1.03, False), (1 / 1.10, True)],
    ids=["3%-slower", "10%-slower", "3%-faster", "10%-faster"],
)
def test_min_effect_each_side(factor, reported):
    # 0.3% noise: both are far beyond noise, only the 5% practical threshold separates them.
    r = A.analyze([mk(_step(20, factor))], config=CFG)
    found = _steps(r)
    assert bool(found) is reported, [f.reason for f in r.findings]
    if reported:
        (f,) = found
        assert f.status is (A.Status.REGRESSION if factor > 1 else A.Status.IMPROVEMENT)


# ----------------------------------------------------------------------------- wording and long series


@pytest.mark.parametrize(
    "factor,metric,unit,word",
    [(3.0, None, "seconds", "lower"), (1 / 3, "gbps", "GB/s", "higher")],
    ids=["time", "gbps"],
)
def test_confirmed_step_says_its_direction_and_noise(factor, metric, unit, word):
    # 3% noise, so that the printed noise has a non-zero first decimal (3.0x%).
    values = np.r_[quiet(30, 0, noise=0.03), factor * quiet(8, 100, noise=0.03)]
    (f,) = _steps(A.analyze([mk(values, metric=metric, unit=unit)], config=CFG))
    assert f.status is A.Status.REGRESSION
    assert f.extra["noise_rel"] > 0.01
    assert f"({word} is better)" in f.reason, f.reason
    assert f"noise {f.extra['noise_rel'] * 100:.2f}%" in f.reason, f.reason


def test_pending_at_the_head_of_a_series_longer_than_256_points():
    """Index arithmetic on long series (a small-int identity check would pass below 257)."""
    values = np.r_[quiet(300, 5), 3.0 * quiet(1, 6)]
    (f,) = _steps(A.analyze([mk(values)], config=CFG), at=300)
    assert f.status is A.Status.PENDING and f.extra["n_after"] == 1


def _with_samples(values, n):
    pts = [
        A.Point(commit=H(i), value=float(v), version="v1", samples=tuple(float(v) * (1 + 0.002 * k) for k in range(n)))
        for i, v in enumerate(values)
    ]
    return A.Series(A.SeriesKey("m1", "suite.op.time_x", (("n", "1"),)), pts, unit="seconds")


@pytest.mark.parametrize("n,test", [(6, "Mann-Whitney"), (5, "Welch's t on 5 runs a side")])
def test_samples_test_named_at_the_rank_test_minimum(n, test):
    from harness.analysis.stats import RANK_TEST_MIN

    assert RANK_TEST_MIN == 6
    values = np.r_[quiet(30, 7), 1.3 * quiet(1, 8)]
    (f,) = _steps(A.analyze([_with_samples(values, n)], config=CFG))
    assert f"({test} p=" in f.reason, f.reason


def test_drift_counts_its_commits_from_start_to_end():
    """A four-commit ramp starting at commit 12 (so start and end differ in more
    than their last digit: 15 // 12 + 1 is not 15 - 12 + 1)."""
    levels = np.r_[np.ones(12), 1.04, 1.04**2, 1.04**3, 1.04**4 * np.ones(30)]
    drifts = 0
    for seed in range(6):
        r = A.analyze([mk(levels * quiet(levels.size, seed))], config=CFG)
        for f in r.findings:
            if f.status is A.Status.DRIFT_REGRESSION:
                drifts += 1
                start, end = int(f.extra["drift_start_commit"], 16), int(f.extra["drift_end_commit"], 16)
                assert f.extra["drift_commits"] == end - start + 1 == 4
                assert "4 consecutive commits" in f.reason or "4 commits with" in f.reason
    assert drifts >= 3


@pytest.mark.parametrize("jump", [1.5, 3.0])
def test_a_change_over_two_commits_names_its_span(jump):
    """A 4% move then a big one (2% noise, seed 0, as in test_analysis_shapes):
    one change named at the largest move, spanning both commits."""
    from test_analysis import mk as mk_noisy
    from test_analysis import noisy

    levels = np.r_[np.ones(40), 1.04, 1.04, 1.04 * jump * np.ones(30)]
    r = A.analyze([mk_noisy(noisy(levels, 0.02, 0))])
    (f,) = [f for f in r.findings if f.extra.get("moves")]
    at = [int(m["commit"], 16) for m in f.extra["moves"]]
    assert at == [41, 42]
    assert "one change over 2 commits, named at the largest move" in f.reason, f.reason


def test_a_change_over_two_commits_counts_the_commits_before_its_named_one():
    """A 10% move at commit 56, then a 3x one at 58 (2% noise): one change named
    at 58, its level before measured on the ``window`` (50) points before the
    first move, so 52 commits lie between that window's start (6) and the named
    commit, never more than the 58 there are (mutation: ``big_at - lo`` as
    ``big_at ^ lo``, equal when the window starts at commit 0)."""
    from test_analysis import mk as mk_noisy
    from test_analysis import noisy

    levels = np.r_[np.ones(56), 1.1, 1.1, 3.3 * np.ones(30)]
    for seed in (0, 1):
        (f,) = A.analyze([mk_noisy(noisy(levels, 0.02, seed))]).findings
        assert f.status is A.Status.REGRESSION and int(f.commit_after, 16) == 58
        assert [int(m["commit"], 16) for m in f.extra["moves"]] == [56, 58]
        assert f.extra["n_before"] == 52 and f.extra["n_after"] == 30
        assert "median of 30 commits after vs 52 before" in f.reason


@pytest.mark.parametrize("field", ["min_effect", "fdr_q", "noise_floor", "split_z", "tail_z"])
@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_a_threshold_that_is_not_finite_is_refused(field, bad):
    """Hostile trial: ``analyze --min-effect nan`` ran (``nan <= 0`` is False).
    Control: the default configuration builds."""
    import harness.analysis as A

    with pytest.raises(ValueError, match=f"{field} must be a finite number"):
        A.AnalysisConfig(**{field: bad})
    assert A.AnalysisConfig().min_effect == 0.05
