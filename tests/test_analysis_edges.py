"""Analysis rules at their edges: the alternative detectors' short-series guard and
Otava's input, a ramp's persistence window, overlapping drifts, a ramp that starts
where an excursion comes back, and a case cost's default peak.

Each test kills a mutant the analysis package sample (seed 3 at ``05d7f8c``,
``scripts/mutation_sample.py --package harness/analysis``, docs/mutation.md)
left alive even with the whole-report snapshot.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from test_analysis import A100, H100, mk, noisy

import harness.analysis as A
from harness.analysis import autotune, detectors, drift, findings, machine, stats
from harness.analysis.cross import _latest_level
from harness.analysis.detect import _start_level_holds, clean_spikes, refine
from harness.analysis.machine import MACHINE_EVENT_MIN_SERIES
from harness.analysis.model import Candidate
from harness.analysis.series import _collapse_split_pairs, _excursions, _samples_candidate, _steps_before_gaps

CFG = A.AnalysisConfig()


def test_the_rbf_detector_needs_two_minimum_segments():
    """Below ``2 * min_segment`` points there is no split to test: no change point
    (ruptures itself would raise BadSegmentationParameters); a longer series with
    a step gets it."""
    m = CFG.min_segment
    assert detectors.detect_rbf(np.r_[np.zeros(m), 5.0 * np.ones(m - 1)], CFG) == []
    assert detectors.detect_rbf(np.r_[np.zeros(10), 5.0 * np.ones(10)], CFG) == [10]


def test_otava_sees_the_standardised_series_on_a_gentle_scale():
    """Otava reads magnitudes relative to the mean, so the detector feeds it
    ``exp(0.01 z)``, which keeps a 3-sigma step a step next to a 6-sigma outlier;
    ``exp(z)`` would make the outlier 400 times the level and hide the step."""
    pytest.importorskip("otava")
    rng = np.random.default_rng(1)
    z = np.r_[np.zeros(40), 3 * np.ones(40)] + rng.standard_normal(80)
    z[10] += 6
    assert detectors.DETECTORS["otava"](z, CFG) == [40]


def _ramp_then_back(hold: int) -> np.ndarray:
    y = [0.0] * 30 + [0.05, 0.10, 0.15, 0.20] + [0.20] * hold + [0.0] * 20
    return np.array(y) + 0.002 * np.random.default_rng(0).standard_normal(len(y))


def test_a_ramps_new_level_must_hold_confirm_after_minus_one_commits():
    """The commits after a ramp (up to ``confirm_after - 1`` = 3 of them) must stay
    nearer the new level than the baseline; the 4th may already be back. With the
    window one commit longer the 2-commit hold below loses its 3-point ramp."""
    assert CFG.confirm_after == 4
    got = [(c.start, c.index) for c in drift._drift_candidates(_ramp_then_back(2), 0.01, CFG, [], {}, ())]
    assert got == [(30, 32)]
    got = [(c.start, c.index) for c in drift._drift_candidates(_ramp_then_back(1), 0.01, CFG, [], {}, ())]
    assert got == [(30, 31)]
    assert drift._drift_candidates(_ramp_then_back(0), 0.01, CFG, [], {}, ()) == []


def _cand(start: int, index: int, p: float) -> A.Candidate:
    return A.Candidate("drift", index, start, 0.1, 0.01, p, 20, 20)


def test_an_overlapping_drift_is_dropped_and_the_next_separate_one_kept():
    """Drifts sorted by p: the first is kept, the second overlaps it (one creeping
    change found twice) and is dropped, and the third, elsewhere, is still kept."""
    a = A.analyze_series(mk(np.ones(80)))
    first, overlapping, separate = _cand(15, 20, 1e-8), _cand(17, 22, 1e-6), _cand(50, 55, 1e-4)
    kept = findings._one_per_change(a, [(separate, 0.01), (overlapping, 0.01), (first, 0.01)], CFG)
    assert [c for c, _ in kept] == [first, separate]


def test_a_ramp_starting_where_an_excursion_comes_back_is_part_of_it():
    """A 20% dip of 4 commits, then a creep of 4 x 5% starting one commit after it
    came back: the analysis lists the excursion and keeps no drift that starts at
    or before the commit it came back at (the rule ``f - 1 <= index and start <= back``)."""
    rng = np.random.default_rng(4)
    # the draws that chose this shape in a search over shapes (L=4, -20%, r=4, +5%, start 35)
    rng.integers(2, 5), rng.choice([0.2, 0.3, -0.2]), rng.integers(2, 5), rng.choice([0.03, 0.05, 0.08])
    rng.integers(-1, 2)
    lv = np.zeros(60)
    lv[30:34] = -0.2
    for k in range(4):
        lv[35 + k :] += 0.05
    a = A.analyze_series(mk(np.exp(lv + 0.01 * rng.standard_normal(60))))
    assert a.excursions, "the dip is an excursion"
    for f, back, _d, _n in a.excursions:
        assert not [c for c in a.candidates if c.kind == "drift" and f - 1 <= c.index and c.start <= back]
    assert [(c.kind, c.start, c.index) for c in a.candidates] == [("drift", 37, 38)]


def test_a_case_cost_uses_the_vector_peak_unless_it_says_tensor_cores():
    cost = A.CaseCost(flops=1e15, bytes_total=1e8, dtype="bf16")
    assert cost.peak_tflops(H100) == 67.0
    assert dataclasses.replace(cost, uses_tensor_cores=True).peak_tflops(H100) == 989.0


def test_otava_change_points_at_the_ends_of_the_series_are_dropped(monkeypatch):
    """Only an index strictly inside the series splits it; Otava's answer is filtered
    to 1..n-1 whatever it returns (here faked: -1, 0, 1, n-1, n and n+1)."""
    otava_analysis = pytest.importorskip("otava.analysis")

    class CP:
        def __init__(self, index):
            self.index = index

    z = np.zeros(20)
    monkeypatch.setattr(
        otava_analysis, "compute_change_points", lambda *a, **k: ([CP(i) for i in (-1, 0, 1, 19, 20, 21)], [])
    )
    assert detectors.DETECTORS["otava"](z, CFG) == [1, 19]


_COMMITS = [f"{i:040x}" for i in range(60)]


def _two_gpus(d_ampere: float, d_hopper: float, noise_hopper: float = 0.002, flip: bool = False):
    a = mk(noisy(np.r_[np.ones(30), np.exp(d_ampere) * np.ones(30)], 0.002, 10), machine="ampere", commits=_COMMITS)
    h = mk(
        noisy(np.r_[np.ones(30), np.exp(d_hopper) * np.ones(30)], noise_hopper, 11), machine="hopper", commits=_COMMITS
    )
    r = A.analyze([h, a] if flip else [a, h], commit_order=_COMMITS)
    return [f for f in r.findings if f.status is A.Status.DIVERGENT_CHANGE]


@pytest.mark.parametrize("flip", [False, True], ids=["ampere-first", "hopper-first"])
def test_changes_that_differ_by_more_than_the_threshold_with_disjoint_intervals_diverge(flip):
    """+8.3% on ampere against -3.9% on hopper: not opposite significant changes
    (hopper's move is under min_effect), but 0.12 apart in log units, past
    divergence_threshold (0.10), with intervals that do not overlap: divergent,
    named as such, whichever machine is listed first."""
    (f,) = _two_gpus(0.08, -0.04, flip=flip)
    assert f.key.machine == "ampere" and f.other_key.machine == "hopper"
    assert f.reason.startswith("changes differ by more than 10% with non-overlapping CIs: +8.")
    assert (f.commit_before, f.commit_after) == (_COMMITS[29], _COMMITS[30])
    assert f.ratio == pytest.approx(np.exp(0.12), rel=0.01)
    (g,) = _two_gpus(0.25, 0.10, flip=flip)  # both slower, 0.15 apart: divergent too
    assert g.reason.startswith("changes differ by more than 10%")


@pytest.mark.parametrize("flip", [False, True], ids=["ampere-first", "hopper-first"])
def test_changes_under_the_threshold_or_with_overlapping_intervals_do_not_diverge(flip):
    """0.08 apart (under 0.10) with disjoint intervals: no finding; 0.30 apart
    against a hopper so noisy that its interval covers ampere's: no finding."""
    assert _two_gpus(0.08, 0.0, flip=flip) == []
    assert _two_gpus(0.30, 0.0, noise_hopper=1.0, flip=flip) == []


# --------------------------------------------------------------------------- machine phases


def _panel(start: int, stop: int, *, n: int = 60, scale: float = 1e-3, seed: int = 0, factor: float = 1.10):
    """20 series of one machine at levels of ``scale`` (milliseconds: log levels far
    from 0, so a level and a move cannot be mistaken for each other), all
    ``factor`` slower on ``[start, stop)``."""
    rng = np.random.default_rng(seed)
    out = []
    for j in range(20):
        levels = np.ones(n) * scale * rng.uniform(0.5, 2.0)
        levels[start:stop] *= factor
        out.append(mk(noisy(levels, 0.01, 100 * seed + j), name=f"b{j}"))
    return out


@pytest.mark.parametrize(
    "start, stop", [(30, 33), (52, 55), (53, 56), (55, 57), (55, 58)], ids=["mid", "window", "tail", "tail2", "tail3"]
)
def test_a_slow_phase_that_comes_back_is_one_machine_event_wherever_it_is(start, stop):
    """Mid-history (5 points after it to judge the level) and at the newest commits
    (fewer than 5 after it: the tail's median judges it)."""
    series = _panel(start, stop)
    r = A.analyze(series)
    (ev,) = r.machine_events
    commits = [p.commit for p in series[0].points]
    assert commits.index(ev["commit_range"][1]) == start and commits.index(ev["back_at"]) == stop
    assert ev["length"] == stop - start and ev["n_tested"] == 20 and ev["n_series"] >= 16
    assert ev["median_ratio"] == pytest.approx(1.10, rel=0.02) and ev["direction"] == "slower"


@pytest.mark.parametrize("start", [30, 53], ids=["mid", "tail"])
def test_a_move_that_holds_or_half_comes_back_is_no_machine_event(start):
    """Every series 10% slower from ``start`` on, or 10% slower for 3 commits and
    then still 6% slower: the level did not come back (within a third of the move)."""
    assert A.analyze(_panel(start, 60)).machine_events == []
    half = _panel(start, 60, factor=1.06)
    for s in half:
        for i in range(start, start + 3):
            s.points[i] = dataclasses.replace(s.points[i], value=s.points[i].value * 1.10 / 1.06)
    assert A.analyze(half).machine_events == []


def test_a_phase_is_judged_on_the_five_points_after_it_not_on_a_later_change():
    """A 3-commit slow phase at 30, back at 33, then every series 30% slower from 40
    on (a change that holds): the phase came back on the 5 points after it (33-37),
    although the median of everything after it (mostly the later level) did not."""
    series = _panel(30, 33)
    for s in series:
        for i in range(40, 60):
            s.points[i] = dataclasses.replace(s.points[i], value=s.points[i].value * 1.3)
    r = A.analyze(series)
    (ev,) = r.machine_events
    commits = [p.commit for p in series[0].points]
    assert commits.index(ev["commit_range"][1]) == 30 and commits.index(ev["back_at"]) == 33


def test_a_phase_near_the_end_is_judged_on_the_points_it_has():
    """61 commits, a phase at 54-56: 4 points after it, judged by their median (the
    5-point window would run past the end); and a phase at 48-50 whose 5-point
    window (51-55) is back while a change from 55 on makes most of the rest slower."""
    series = _panel(54, 57, n=61)
    (ev,) = A.analyze(series).machine_events
    commits = [p.commit for p in series[0].points]
    assert commits.index(ev["commit_range"][1]) == 54 and commits.index(ev["back_at"]) == 57
    series = _panel(48, 51)
    for s in series:
        for i in range(55, 60):
            s.points[i] = dataclasses.replace(s.points[i], value=s.points[i].value * 1.3)
    (ev,) = A.analyze(series).machine_events
    assert commits.index(ev["commit_range"][1]) == 48 and commits.index(ev["back_at"]) == 51


def test_a_tail_phase_of_series_above_one_that_returns_a_little_low_is_an_event():
    """Levels of 50 (GB/s-sized numbers, log levels above 0), 10% slower at 55-56,
    then back 1% below where they were: came back (1% is within a third of 10%)."""
    series = _panel(55, 57, scale=50.0)
    for s in series:
        for i in range(57, 60):
            s.points[i] = dataclasses.replace(s.points[i], value=s.points[i].value * 0.99)
    (ev,) = A.analyze(series).machine_events
    commits = [p.commit for p in series[0].points]
    assert commits.index(ev["commit_range"][1]) == 55 and commits.index(ev["back_at"]) == 57


# --------------------------------------------------------------------------- seed 4 (62a9462)


def test_the_pelt_detector_reads_the_series_as_one_column():
    z = np.r_[np.zeros(20), 5.0 * np.ones(20)] + 0.1 * np.random.default_rng(0).standard_normal(40)
    assert detectors.detect_pelt_l1(z, CFG) == [20]


def test_a_ramps_baseline_at_the_start_of_the_series_includes_its_first_point():
    """A ramp from commit 3: its baseline is the median of commits 0-2
    (-0.01, 0.01, 0.0 -> 0.0), so the 2-commit ramp to 0.10 moves by 0.10."""
    y = np.array([-0.01, 0.01, 0.0, 0.05, 0.10, 0.15, 0.20] + [0.20] * 20)
    (c,) = drift._drift_candidates(y, 0.01, CFG, [], {}, ())
    assert (c.start, c.index) == (3, 4) and c.d == pytest.approx(0.10, abs=1e-12)


def test_a_step_back_to_within_a_third_of_the_level_before_undoes_the_first():
    """+35% for 20 commits, then back to 2% above the start: the net move (0.02) is
    past 2 sigma (0.008) but under 35% of the second step, so the second step
    undoes the first and says so."""
    lv = np.r_[np.ones(30), 1.35 * np.ones(20), np.exp(0.02) * np.ones(20)]
    s = mk(noisy(lv, 0.004, 5))
    reg, imp = A.analyze([s]).findings
    assert (reg.status, imp.status) == (A.Status.REGRESSION, A.Status.IMPROVEMENT)
    assert imp.extra["undoes"] == reg.commit_after
    assert imp.reason.endswith(f"step at {reg.commit_after[:12]}, 20 commit(s) earlier")
    assert "back to the level before the +3" in imp.reason


def test_the_median_of_no_series_is_nan_for_every_commit():

    out = machine._nanmedian_cols(np.empty((0, 5)))
    assert out.shape == (5,) and np.isnan(out).all()


@pytest.mark.parametrize("first, length", [(3, 3), (4, 4), (5, 5)])
def test_an_excursion_near_the_start_counts_its_points(first, length):
    """An excursion from commit 3 back at 6 is 3 points long (the row's length is
    back - first, whatever their ratio)."""
    lv = np.ones(40)
    lv[first : first + length] = 1.5
    s = mk(noisy(lv, 0.01, 0))
    (exc,) = A.analyze([s]).health["excursions"]
    assert exc["length"] == length
    assert [p.commit for p in s.points].index(exc["back_at"]) == first + length


def _point(samples):
    return A.Point(commit="c", value=float(np.median(samples)), samples=tuple(samples))


@pytest.mark.parametrize(
    "na, nb, test", [(6, 6, "rank"), (8, 8, "rank"), (8, 4, "welch"), (4, 8, "welch"), (3, 3, "welch")]
)
def test_the_samples_test_is_mann_whitney_from_six_a_side_and_welch_below(na, nb, test):
    from scipy.stats import mannwhitneyu, ttest_ind

    rng = np.random.default_rng(na * 10 + nb)
    a = list(1e-3 * np.exp(0.02 * rng.standard_normal(na)))
    b = list(1.03e-3 * np.exp(0.02 * rng.standard_normal(nb)))
    p = stats._sample_test(_point(a), _point(b))
    if test == "rank":
        assert p == pytest.approx(mannwhitneyu(a, b, alternative="two-sided").pvalue, rel=1e-12)
    else:
        assert p == pytest.approx(ttest_ind(np.log(a), np.log(b), equal_var=False).pvalue, rel=1e-12)


def test_a_case_cost_is_frozen():
    import dataclasses as dc

    cost = A.CaseCost(flops=1.0, bytes_total=2.0, dtype="fp32")
    with pytest.raises(dc.FrozenInstanceError):
        cost.flops = 3.0


def test_a_significant_step_whose_whole_interval_is_under_min_effect_is_no_change():
    """+4.3% in 0.1% noise: past min_estimate_share (80%) of the 5% min_effect, very
    significant, but its 99% interval does not reach 5%: no finding. +6% is one."""
    small = mk(noisy(np.r_[np.ones(30), np.exp(0.042) * np.ones(30)], 0.001, 3))
    assert A.analyze([small]).findings == []
    big = mk(noisy(np.r_[np.ones(30), np.exp(0.06) * np.ones(30)], 0.001, 3))
    assert [f.status for f in A.analyze([big]).findings] == [A.Status.REGRESSION]


@pytest.mark.parametrize("gap", [1, 2, 3])
def test_a_merged_ramp_reports_the_move_of_the_step_it_names(gap):
    """+10%, then x3 ``gap`` commits later: one regression named at the big step,
    whose ``jump_ratio`` is that step's own move (3 / 1.1), not the small one's."""
    lv = np.r_[np.ones(40), 1.1 * np.ones(gap), 3.0 * np.ones(40 - gap)]
    s = mk(noisy(lv, 0.01, 1))
    (f,) = A.analyze([s]).findings
    assert f.status is A.Status.REGRESSION and [p.commit for p in s.points].index(f.commit_after) == 40 + gap
    assert f.extra["jump_ratio"] == pytest.approx(3.0 / 1.1, rel=0.03)


def test_a_merged_ramp_past_256_points_names_its_first_step_when_that_is_the_big_one():
    """x3 at commit 270, then +10% two commits later, in a 300-point series: the
    merged regression is named at 270, the big step, with that step's own move."""
    lv = np.r_[np.ones(270), 3.0 * np.ones(2), 3.3 * np.ones(28)]
    s = mk(noisy(lv, 0.01, 1))
    (f,) = A.analyze([s]).findings
    assert f.status is A.Status.REGRESSION and [p.commit for p in s.points].index(f.commit_after) == 270
    assert f.extra["jump_ratio"] == pytest.approx(3.0, rel=0.03)


# --------------------------------------------------------------------------- seed 6 (0ee5fae)


def test_a_records_launch_config_is_kept_whole_less_its_error():

    rec = {"launch_config": {"BLOCK_SIZE_M": 64, "BLOCK_SIZE_N": 128, "num_warps": 4, "error": "x"}}
    facts = autotune.facts_from_record(rec)
    assert facts["config"] == {"BLOCK_SIZE_M": 64, "BLOCK_SIZE_N": 128, "num_warps": 4}


@pytest.mark.parametrize("gap, kept", [(5, True), (31, False), (40, True)])
def test_a_ramp_is_dropped_only_when_a_failure_gap_falls_inside_it(gap, kept):
    """The ramp of commits 30-32 is kept with a gap far before (5) or after it (40),
    and dropped when the gap's index (31) lies inside it."""
    got = drift._drift_candidates(_ramp_then_back(3), 0.01, CFG, [], {}, (gap,))
    assert bool(got) is kept and (not got or (got[0].start, got[0].index) == (30, 32))


# ----------------------------------------------- seed 7 (f2f3f51) and seed 6 survivors


def test_the_rbf_detector_splits_a_series_of_exactly_two_minimum_segments():
    """``2 * min_segment`` points are enough for one split (ruptures' own minimum):
    at a low penalty the step between the two halves is found."""
    m = CFG.min_segment
    cfg = dataclasses.replace(CFG, penalty=0.1)
    assert detectors.detect_rbf(np.r_[np.zeros(m), 50.0 * np.ones(m)], cfg) == [m]


def test_clean_spikes_replaces_nothing_without_noise_or_neighbours():
    """A zero (or negative) noise has no ``k * sigma`` to compare with, and fewer
    than three points have no two sides: nothing is a spike, and the returned
    index array is empty (not a stray index 0)."""

    y = np.array([1.0, 1.0, 5.0, 1.0, 1.0])
    for sigma in (0.0, -0.5):
        out, spikes = clean_spikes(y, sigma)
        assert spikes.size == 0 and out.tolist() == y.tolist()
    out, spikes = clean_spikes(np.array([1.0, 5.0]), 0.1)
    assert spikes.size == 0 and out.tolist() == [1.0, 5.0]
    out, spikes = clean_spikes(y, 0.1)  # the positive control
    assert spikes.tolist() == [2] and out.tolist() == [1.0] * 5


def test_a_stored_ci_with_a_negative_lower_bound_does_not_floor_the_noise():
    """asv can store a CI whose lower end is at or below zero for a very noisy
    time; its log half-width is undefined, so it is not used (the other points'
    CIs still floor a short series' noise)."""
    pts = [
        A.Point(commit=f"{i:040x}", value=1.0 + 0.001 * i, ci=(0.97 + 0.001 * i, 1.03 + 0.001 * i)) for i in range(5)
    ]
    pts.append(A.Point(commit=f"{5:040x}", value=1.0, ci=(-0.2, 2.2)))
    a = A.analyze_series(A.Series(A.SeriesKey("m1", "b", (("n", "1"),)), pts, unit="seconds"), CFG)
    assert a.noise == pytest.approx(0.5 * np.log(1.03 / 0.97) / 2.576, rel=0.05)


def test_a_failing_series_lists_four_stretches_and_elides_from_five():
    """The failing finding's reason names up to four failure stretches; from five
    on it shows the first two, how many more, and the last."""

    def reason(k):
        values = []
        for _ in range(k):
            values += [1.0, 1.0, None]
        values += [1.0, 1.0]
        (f,) = [f for f in A.analyze([mk(values, "fl")], CFG).findings if f.status.value == "failing"]
        return f.reason

    four, five = reason(4), reason(5)
    assert four.count("failing since") == 4 and "more" not in four
    assert five.count("failing since") == 3 and "... 2 more ..." in five


def test_a_ramps_new_level_is_read_over_at_most_window_points():
    """The level after a ramp is its last point and the points after it within
    2 sigma, up to ``window`` of them: a long flat tail does not count beyond it."""
    cfg = dataclasses.replace(CFG, window=10)
    y = np.r_[np.zeros(20), [0.03, 0.06, 0.09], 0.09 * np.ones(40)]
    (c,) = [c for c in drift._drift_candidates(y, 0.01, cfg, [], {}) if c.kind == "drift"]
    assert (c.start, c.index) == (20, 22)
    assert c.n_after == cfg.window + 1 and c.n_before == cfg.window


def test_a_machine_without_known_peaks_between_two_gpus_hides_no_cross_gpu_finding():
    """The cross-GPU rules compare every pair of machines of a case: a pair that
    cannot be compared (a machine with no known peaks, listed between the two
    GPUs) is skipped, and the pair after it is still compared."""
    devs = {"ampere": A100, "hopper": H100}
    sol = [
        mk([0.80, 0.81, 0.79, 0.80, 0.80], machine="ampere", metric="sol"),
        mk([0.60, 0.61, 0.59, 0.60, 0.60], machine="laptop", metric="sol"),
        mk([0.40, 0.41, 0.39, 0.40, 0.40], machine="hopper", metric="sol"),
    ]
    (g,) = A.efficiency_gaps(sol, devs)
    assert (g.key.machine, g.other_key.machine) == ("hopper", "ampere")
    key = ("bench", (("n", "1"),))
    mem = {key: A.CaseCost(flops=1e6, bytes_total=1e9, dtype="bf16", uses_tensor_cores=False)}
    times = [
        mk([1.00, 1.01, 0.99, 1.00, 1.00], machine="ampere", unit="seconds"),
        mk([2.00, 2.01, 1.99, 2.00, 2.00], machine="laptop", unit="seconds"),
        mk([1.00, 0.99, 1.01, 1.00, 1.00], machine="hopper", unit="seconds"),
    ]
    (f,) = A.generation_speedups(times, devs, mem)
    assert (f.other_key.machine, f.key.machine) == ("ampere", "hopper")


def test_a_divergent_change_reads_each_level_back_only_to_that_series_own_last_step():
    """The size of each machine's move at a divergent change is read from the
    level since that machine's previous change point, not across it: ampere
    stepped up 30% at commit 20 and down 15% at 40, hopper up 15% at 40; the
    ampere move is -15%, not the median across both of its earlier levels."""
    commits = [f"{i:040x}" for i in range(60)]
    amp = noisy(np.r_[np.ones(20), 1.3 * np.ones(20), 1.105 * np.ones(20)], 0.005, 70)
    hop = noisy(np.r_[np.ones(40), 1.15 * np.ones(20)], 0.005, 71)
    r = A.analyze(
        [
            mk(amp, "x", "ampere", unit="seconds", commits=commits),
            mk(hop, "x", "hopper", unit="seconds", commits=commits),
        ],
        CFG,
        commit_order=commits,
        devices={"ampere": A100, "hopper": H100},
    )
    (f,) = [f for f in r.findings if f.status is A.Status.DIVERGENT_CHANGE and f.commit_after == commits[40]]
    assert f.key.machine == "hopper"
    assert f.extra["change_worse_machine"] == pytest.approx(0.15, abs=0.01)
    assert f.extra["change_other_machine"] == pytest.approx(-0.15, abs=0.01)


def test_a_machine_with_exactly_the_minimum_number_of_series_has_its_phase_found():
    """``MACHINE_EVENT_MIN_SERIES`` series moving together and back is a machine
    event; one series fewer is not a panel at all."""

    commits = [f"{i:040x}" for i in range(60)]

    def events(k):
        series = []
        for j in range(k):
            v = noisy(np.ones(60), 0.01, 80 + j)
            v[30:33] *= 1.25
            series.append(mk(v, f"s{j}", "box", unit="seconds", commits=commits))
        return A.analyze(series, CFG, commit_order=commits).machine_events

    (ev,) = events(MACHINE_EVENT_MIN_SERIES)
    assert ev["machine"] == "box"
    assert events(MACHINE_EVENT_MIN_SERIES - 1) == []


def test_a_version_change_to_a_hash_that_sorts_lower_is_still_a_boundary():
    """asv's benchmark versions are hashes: a new version may sort below the
    old one. A step where the version goes from ``f00d...`` to ``0bad...`` is a
    version change all the same."""
    versions = ["f00d" * 16] * 30 + ["0bad" * 16] * 30
    r = A.analyze([mk(noisy(np.r_[np.ones(30), 1.5 * np.ones(30)], 0.01, 90), "v", versions=versions)], CFG)
    assert [f.status for f in r.findings] == [A.Status.VERSION_CHANGE]


def test_a_split_pair_is_decided_on_the_levels_between_its_own_neighbours():
    """Of two change points two commits apart around a disagreeing pair, the one
    kept is the better two-level fit between the neighbouring change points
    (20 and the end), not from the series' first change point: a 3x level at
    10..19 must not weigh in."""

    y = np.r_[np.ones(10), 3.0 * np.ones(10), np.ones(10), [0.5, 1.2], 1.2 * np.ones(10)]
    assert _collapse_split_pairs(y, [10, 20, 30, 32], {}, 0.01) == [10, 20, 32]
    assert _collapse_split_pairs(y[20:], [10, 12], {}, 0.01) == [12]  # the same pair on its own


def test_an_excursion_between_short_levels_is_back_within_three_standard_errors():
    """Back means a net move within ``3 sigma sqrt(1/n_before + 1/n_after)`` of
    zero: with two points on each side (noise 2.5%) a +6% net move is back
    (3 SE = 7.5%), and a +9% one is not."""

    def run(net):
        y = np.r_[np.zeros(8), [0.0, 0.0], [0.3, 0.3, 0.3], [net, net], np.zeros(5)]
        up = Candidate("step", 10, 10, 0.3, 0.02, 1e-6, 2, 3)
        down = Candidate("step", 13, 13, net - 0.3, 0.02, 1e-6, 3, 2)
        return _excursions(y, [up, down], 0.025, CFG)

    left, exc = run(0.06)
    assert left == [] and [(f, b) for f, b, _d, _n in exc] == [(10, 13)]
    assert exc[0][3] == pytest.approx(0.06)
    left, exc = run(0.09)
    assert len(left) == 2 and exc == []


def test_a_step_before_a_gap_is_looked_for_up_to_confirm_after_minus_one_points_before_it():
    """The split before a gap boundary ``g`` is searched at ``g - confirm_after + 1``
    .. ``g`` only (confirm_after 4: 27..30 for a gap at 30): a step three points
    before the gap moves the change point there; one four points before is out
    of that reach (binary segmentation finds such a step by itself), and the
    search stops at the earliest point it may take, 27, not at 26."""

    g = 30
    bounds = {g: ("gap", "jump across a failure gap: 2 failed commit(s) a..b between the two measured commits")}
    for before in (3, 4):
        y = np.r_[np.zeros(g - before), np.ones(before + 20)]
        cps, left, notes = _steps_before_gaps(y, [g], bounds, CFG, 0.01)
        assert cps == [g - CFG.confirm_after + 1]
        assert g not in left and list(notes) == [g - 3]


# ------------------------------------------------------------ seed 8 (36d878b) survivors


def test_an_efficiency_gap_names_the_lower_gpu_whichever_is_listed_first():
    devs = {"ampere": A100, "hopper": H100}
    low = mk([0.40, 0.41, 0.39, 0.40, 0.40], machine="hopper", metric="sol")
    high = mk([0.80, 0.81, 0.79, 0.80, 0.80], machine="ampere", metric="sol")
    for order in ([low, high], [high, low]):
        (g,) = A.efficiency_gaps(order, devs)
        assert (g.key.machine, g.other_key.machine) == ("hopper", "ampere")
        assert g.ratio == pytest.approx(0.5, rel=0.02)


def test_a_latest_level_of_two_points_has_a_standard_error_and_one_point_none():

    med, se, n, last = _latest_level(mk([0.80, 0.84], metric="sol"), 5)
    assert (med, n) == (pytest.approx(0.82), 2) and np.isfinite(se) and se > 0
    med, se, n, last = _latest_level(mk([0.80], metric="sol"), 5)
    assert (med, n) == (0.8, 1) and np.isnan(se)
    assert _latest_level(mk([0.7, 0.8, 0.9], metric="sol"), 5)[2] == 3


def test_the_point_before_the_newest_can_be_a_spike_and_the_newest_cannot():

    out, spikes = clean_spikes(np.array([1.0, 1.0, 1.0, 1.0, 5.0, 1.0]), 0.1)
    assert spikes.tolist() == [4] and out[4] == 1.0
    out, spikes = clean_spikes(np.array([1.0, 1.0, 1.0, 1.0, 1.0, 5.0]), 0.1)
    assert spikes.size == 0 and out[5] == 5.0


def test_refine_keeps_a_three_point_level_at_the_end_by_default():
    """``refine``'s default ``min_size`` is 3: a step three points before the end
    stays; at 4 it could not be placed there."""

    y = np.r_[np.zeros(20), np.ones(3)]
    assert refine(y, [20]) == [20]
    assert refine(y, [20], min_size=4) != [20]


def test_a_control_that_moves_less_than_half_the_phase_did_not_move():
    """A control kernel moved with a machine event only when it moved the same
    way by at least half the event's median move: +5% against a +25% phase is
    weaker evidence, said as such."""
    commits = [f"{i:040x}" for i in range(60)]

    def controls(factor):
        series = []
        for j in range(4):
            v = noisy(np.ones(60), 0.005, 100 + j)
            v[30:33] *= 1.25
            series.append(mk(v, f"s{j}", "box", unit="seconds", commits=commits))
        v = noisy(np.ones(60), 0.002, 110)
        v[30:33] *= factor
        series.append(mk(v, "suite.control_copy.track_time", "box", unit="seconds", commits=commits))
        (ev,) = A.analyze(series, CFG, commit_order=commits).machine_events
        return ev

    ev = controls(1.05)
    assert [c["moved"] for c in ev["controls"]] == [False] and "did not move" in ev["reason"]
    ev = controls(1.2)
    assert [c["moved"] for c in ev["controls"]] == [True] and "moved with them" in ev["reason"]


def test_repeated_runs_that_never_vary_are_tested_exactly():
    """Three identical runs a side: the samples test is decided without a t-test
    (no variance): p 0 when the two values differ, 1 when they are equal."""

    def pt(v):
        return A.Point(commit="c" * 40, value=v, samples=(v, v, v))

    assert stats._sample_test(pt(1.0), pt(2.0)) == 0.0
    assert stats._sample_test(pt(1.0), pt(1.0)) == 1.0


def test_the_search_before_a_gap_stays_two_points_past_the_previous_change_point():
    """The step moved before a gap keeps a level of at least two points after the
    previous change point (``lo + 2``), and its segment ends at the next change
    point after the gap, not at one before it."""

    g = 30
    bounds = {g: ("gap", "jump across a failure gap: 2 failed commit(s) a..b between the two measured commits")}
    y = np.r_[np.zeros(g - 4), [0.5], np.ones(23)]  # a one-point level at 26, the step at 27
    assert _steps_before_gaps(y, [g - 4, g], bounds, CFG, 0.01)[0] == [g - 4, g - 2]
    y = np.r_[np.zeros(10), 2.0 * np.ones(19), np.ones(21), 3.0 * np.ones(10)]  # cps 10, gap 30, 50
    assert _steps_before_gaps(y, [10, g, 50], bounds, CFG, 0.01)[0] == [10, 29, 50]


def test_an_excursion_out_by_a_two_step_ramp_after_an_older_step_is_one_excursion():
    """An older step, then a move out in two steps one commit apart, then the
    move back: the two steps out are one chain, so the excursion starts at the
    first of them (20) and is judged against the level before it."""

    y = np.r_[0.2 * np.ones(5), np.zeros(15), [0.15], 0.3 * np.ones(3), np.zeros(10)]
    steps = [
        Candidate("step", 5, 5, -0.2, 0.01, 1e-6, 5, 15),
        Candidate("step", 20, 20, 0.15, 0.01, 1e-6, 15, 1),
        Candidate("step", 21, 21, 0.15, 0.01, 1e-6, 1, 3),
        Candidate("step", 24, 24, -0.3, 0.01, 1e-6, 3, 10),
    ]
    left, exc = _excursions(y, steps, 0.01, CFG)
    assert [(f, b) for f, b, _d, _n in exc] == [(20, 24)]
    assert left == [steps[0]]


# ------------------------------------------------------------ seed 9 (82979b1) survivors


def test_same_compiled_code_only_when_the_fingerprints_are_equal():

    (note,) = autotune.same_code_notes({"code": "abc123/env"}, {"code": "abc123/env"})
    assert note["kind"] == "same_compiled_code" and "abc123" in note["text"]
    assert autotune.same_code_notes({"code": "bbb/env"}, {"code": "aaa/env"}) == []
    assert autotune.same_code_notes({"code": "aaa/env"}, {"code": "bbb/env"}) == []


def test_an_autotune_config_change_is_named_whichever_way_a_value_moved():

    for b, a in ((4, 8), (8, 4)):
        (c,) = autotune.changes(
            {"config": {"num_warps": b, "BLOCK_SIZE_M": 64}}, {"config": {"num_warps": a, "BLOCK_SIZE_M": 64}}
        )
        assert c["evidence"]["what"] == "config" and f"num_warps={a} instead of {b}" in c["text"]
        assert c["evidence"]["before"] == {"num_warps": b}


def test_one_point_at_the_start_is_nearer_its_own_mean():

    assert _start_level_holds(np.array([0.9]), np.array([1.0, 1.0]))
    assert not _start_level_holds(np.array([]), np.array([1.0]))
    assert not _start_level_holds(np.array([0.9, 1.0]), np.array([1.0, 1.0]))


def test_the_report_counts_the_series_whose_direction_was_assumed_per_unit():
    r = A.analyze(
        [mk([1.0, 1.0], "a", unit="widgets"), mk([1.0, 1.0], "b", unit="widgets"), mk([1.0, 1.0], "c", unit="seconds")]
    )
    assert r.summary["direction_assumed"] == {"widgets": 2}


def test_two_points_with_samples_across_a_version_change_get_no_samples_test():
    """The samples test compares the newest two commits only when they ran the
    same benchmark version in the same environment."""

    runs = [[1.0, 1.01, 0.99], [2.5, 2.52, 2.49]]

    def cand(versions, envs):
        s = mk([1.0, 2.5], "t", unit="seconds", samples=runs, versions=versions, envs=envs)
        return _samples_candidate(s.points, s, CFG)

    assert cand(["v1", "v1"], [{"torch": "1"}, {"torch": "1"}]) is not None
    assert cand(["v1", "v2"], [{"torch": "1"}, {"torch": "1"}]) is None
    assert cand(["v1", "v1"], [{"torch": "1"}, {"torch": "2"}]) is None
