"""The drift-against-step arbitration of :mod:`harness.analysis.findings`,
from the shape of the series rather than a dataset.

``_one_per_change`` treats a drift and a step as one change when the step's
index lies in ``[drift.start - 1, drift.index + 1]`` and keeps the one whose
model fits better (``_ramp_beats_step``); overlapping drifts keep the merged
ramp (``also`` non-empty) first, then the most significant. Each test builds
the values (a quiet level, a linear ramp, a clean step) and the candidates by
hand, one commit inside or outside each bound, and asserts which candidate is
kept and at which commit it is reported. The cosmic-ray survivors these kill
are listed in ``docs/mutation.md``.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from harness import analysis as A
from harness.analysis.findings import _candidate_finding, _one_per_change, _ramp_beats_step

CFG = A.AnalysisConfig()
SIGMA = 0.003
N = 60


def H(i: int) -> str:
    return f"{i:040x}"


def quiet(n: int, seed: int = 0) -> np.ndarray:
    return np.exp(SIGMA * np.random.default_rng(seed).standard_normal(n))


def ramp_values(s: int = 20, e: int = 25, factor: float = 1.3, seed: int = 0) -> np.ndarray:
    """A quiet level, a geometric ramp over ``[s, e)`` to ``factor`` times it, then the new level."""
    lvl = np.ones(N)
    L = e - s
    lvl[s:e] = factor ** (np.arange(1, L + 1) / L)
    lvl[e:] = factor
    return lvl * quiet(N, seed)


def step_values(k: int = 30, factor: float = 1.3, seed: int = 0) -> np.ndarray:
    """A quiet level and a clean step to ``factor`` times it at index ``k``."""
    lvl = np.ones(N)
    lvl[k:] = factor
    return lvl * quiet(N, seed)


def analysis(values: np.ndarray) -> A.SeriesAnalysis:
    pts = [A.Point(commit=H(i), value=float(v), version="v1") for i, v in enumerate(values)]
    series = A.Series(A.SeriesKey("m1", "suite.op.time_x", (("n", "1"),)), pts, unit="seconds")
    n = len(values)
    return A.SeriesAnalysis(
        series=series,
        n_points=n,
        n_valid=n,
        n_failed=0,
        failure_reasons={},
        noise=SIGMA,
        se_typical=None,
        n_positions=n,
        candidates=[],
        gap_findings=[],
        valid_commits=[H(i) for i in range(n)],
        valid_values=np.asarray(values, dtype=float),
        levels=[(0, n)],
    )


def drift(start: int, index: int, d: float = math.log(1.3), p: float = 1e-6, also=()) -> A.Candidate:
    c = A.Candidate("drift", index, start, d, 0.01, p, start, N - index - 1)
    c.also = list(also)
    return c


def step(index: int, d: float = math.log(1.3), p: float = 1e-6) -> A.Candidate:
    return A.Candidate("step", index, index, d, 0.01, p, index, N - index)


def kept_of(a: A.SeriesAnalysis, cands: list[A.Candidate]) -> list[tuple[str, int, str]]:
    """(kind, index, commit reported after) of each candidate kept, sorted."""
    kept = _one_per_change(a, [(c, 0.001) for c in cands], CFG)
    out = []
    for c, q in kept:
        f = _candidate_finding(a, c, q, 1.96, CFG)
        out.append((c.kind, c.index, f.commit_after))
    return sorted(out)


# ----------------------------------------------------------------------------- overlap window


# A drift over [20, 25) (index 24) and one step: a step at drift.index + 1 (25) or
# drift.start - 1 (19) is inside the window, the same change, and the ramp wins; at
# drift.index + 2 (26) or drift.start - 2 (18) it is outside: both are reported, each
# at its own commit.
@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize(
    "step_at, expected",
    [
        (25, [("drift", 24, H(20))]),
        (26, [("drift", 24, H(20)), ("step", 26, H(26))]),
        (19, [("drift", 24, H(20))]),
        (18, [("drift", 24, H(20)), ("step", 18, H(18))]),
    ],
    ids=["just-after-same-change", "two-after-separate", "one-before-same-change", "two-before-separate"],
)
def test_a_step_beside_the_ramp_is_the_same_change_only_inside_the_window(seed, step_at, expected):
    a = analysis(ramp_values(seed=seed))
    assert kept_of(a, [drift(20, 24), step(step_at)]) == expected


# ----------------------------------------------------------------------------- which model fits


@pytest.mark.parametrize("seed", [0, 1])
def test_clean_step_beats_an_overlapping_ramp(seed):
    # a clean 30% step at 30; a 4-commit ramp over [28, 32) misfits by 3/8 d^2, far above 6 sigma^2
    y = np.log(step_values(30, seed=seed))
    assert not _ramp_beats_step(y, SIGMA, drift(28, 31), step(30), CFG.window)
    a = analysis(step_values(30, seed=seed))
    assert kept_of(a, [drift(28, 31), step(30)]) == [("step", 30, H(30))]


@pytest.mark.parametrize("seed", [0, 1])
def test_linear_ramp_beats_a_step_inside_it(seed):
    y = np.log(ramp_values(seed=seed))
    assert _ramp_beats_step(y, SIGMA, drift(20, 24), step(22), CFG.window)
    a = analysis(ramp_values(seed=seed))
    assert kept_of(a, [drift(20, 24), step(22)]) == [("drift", 24, H(20))]


# ----------------------------------------------------------------------------- overlapping drifts


def test_overlapping_drifts_keep_the_merged_ramp_before_the_more_significant():
    # both cover the same ramp; the plain drift is far more significant, the
    # merged ramp (steps joined into one creeping change, ``also`` set) still wins
    a = analysis(ramp_values())
    merged = drift(20, 24, p=1e-3, also=[21, 22, 23, 24])
    plain = drift(21, 24, p=1e-9)
    assert kept_of(a, [plain, merged]) == [("drift", 24, H(20))]
    kept = _one_per_change(a, [(plain, 0.001), (merged, 0.001)], CFG)
    assert [c for c, _ in kept] == [merged]


def test_overlapping_plain_drifts_keep_the_most_significant():
    a = analysis(ramp_values())
    weak, strong = drift(20, 24, p=1e-3), drift(21, 24, p=1e-9)
    kept = _one_per_change(a, [(weak, 0.001), (strong, 0.001)], CFG)
    assert [c for c, _ in kept] == [strong]


# ----------------------------------------------------------------------------- merged step without moves


def test_merged_step_without_recorded_moves_lists_its_commits():
    # a step with later steps merged into it (``also``) but no per-step moves:
    # the finding names the step's own move and a zero move at each merged commit
    a = analysis(step_values(30))
    c = step(30, d=math.log(1.3))
    c.also = [32]
    f = _candidate_finding(a, c, 0.001, 1.96, CFG)
    assert f.extra["also_at"] == [H(32)]
    assert f.extra["moves"] == [
        {"commit": H(30), "change": pytest.approx(0.3)},
        {"commit": H(32), "change": 0.0},
    ]
    assert "one change over 3 commits" in f.reason
    assert f"at {H(30)[:12]}" in f.reason and f"at {H(32)[:12]}" in f.reason


@pytest.mark.parametrize("start", [55, 56, 57])
def test_pending_drift_at_the_newest_commits_counts_its_commits(start):
    # a ramp ending at the newest commit is pending; its reason counts the ramp's
    # commits (5, 4 and 3 here: both parities of index - start)
    a = analysis(ramp_values(start, N))
    c = drift(start, N - 1)
    f = _candidate_finding(a, c, 0.001, 1.96, CFG)
    assert f.status is A.Status.PENDING
    assert f"at the newest commits: {N - start} consecutive commits" in f.reason
