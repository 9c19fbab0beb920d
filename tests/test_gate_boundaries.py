"""The gate's decision exactly at each threshold and one step on each side.

``harness.gate.decide`` compares with strict inequalities: a ratio of medians
is *beyond* the practical threshold only when ``ratio > 1 + threshold``
(slower) or ``ratio < 1 / (1 + threshold)`` (faster), and a side has enough
samples when ``n >= min_samples``. An off-by-one (``>=`` for ``>``, ``>`` for
``>=``) moves a series between SAME, UNCERTAIN and SLOWER, which decides a
pull request's exit code, so each boundary is tested at the value, just
inside and just outside, for both directions. Samples are built so that the
medians are exact floats (odd counts, the median is the middle element) and
the two sides do not overlap (the test is significant whenever the ratio is
beyond the threshold). Also every exit-code path of :func:`exit_code`, and
the survivors of the cosmic-ray sample on this module (docs/mutation.md).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from harness.core.model import GateStatus
from harness.gate import decide
from harness.gate.decide import GateConfig, SeriesInput, Side, Stats, Verdict, classify, exit_code, sample_stats

THR = 0.05
#: 15 base samples spread by +-0.7% around a median of exactly 1.0 ms.
BASE = [1e-3 * (1.0 + 0.001 * (i - 7)) for i in range(15)]


def _series(ratio: float, n_base: int = 15, n_head: int = 15) -> SeriesInput:
    """Base of ``n_base`` samples (median exactly 1 ms), head the same shape times ``ratio``."""
    base = _spread(n_base)
    head = [x * ratio for x in _spread(n_head)]
    return SeriesInput("bench_x", (("n", "1"),), Side(present=True, samples=base), Side(present=True, samples=head))


def _spread(n: int) -> list[float]:
    mid = n // 2
    return [1e-3 * (1.0 + 0.001 * (i - mid)) for i in range(n)]


def _classify(ratio, **kw) -> Verdict:
    cfg = GateConfig(threshold=THR, **{k: v for k, v in kw.items() if k in ("min_samples", "alpha")})
    n = {k: v for k, v in kw.items() if k in ("n_base", "n_head")}
    return classify(_series(ratio, **n), cfg)


def test_median_is_exact_so_the_boundary_is_exact():
    v = _classify(1.0 + THR)
    assert v.stats.base_p50_s == 1e-3
    assert v.stats.ratio == 1.0 + THR


# ----------------------------------------------------------------------------- the change threshold


@pytest.mark.parametrize(
    "ratio,status",
    [
        (1.0 + THR, GateStatus.SAME),  # exactly at the threshold: not beyond (strict >)
        (math.nextafter(1.0 + THR, 0), GateStatus.SAME),
        (1.0 + THR + 1e-3, GateStatus.SLOWER),
        (1.0 + THR - 1e-3, GateStatus.SAME),
    ],
    ids=["at", "one-ulp-inside", "just-outside", "just-inside"],
)
def test_slower_threshold(ratio, status):
    v = _classify(ratio)
    assert v.status is status, v.reason


@pytest.mark.parametrize(
    "ratio,status",
    [
        (1.0 / (1.0 + THR), GateStatus.SAME),  # exactly at the mirrored threshold: not beyond (strict <)
        (1.0 / (1.0 + THR) - 1e-3, GateStatus.FASTER),
        (1.0 / (1.0 + THR) + 1e-3, GateStatus.SAME),
        (1.0 - THR, GateStatus.FASTER),  # 5% faster is beyond 1/1.05 (4.76%): the threshold is not symmetric in %
    ],
    ids=["at", "just-outside", "just-inside", "minus-threshold"],
)
def test_faster_threshold(ratio, status):
    # Head median = ratio * base median exactly, so the ratio is the one asked for.
    v = _classify(ratio)
    assert v.status is status, v.reason


def test_slower_and_faster_are_not_mirrored_by_sign():
    """A direction ignored in one path would give SLOWER for a speed-up."""
    assert _classify(0.8).status is GateStatus.FASTER
    assert _classify(1.25).status is GateStatus.SLOWER
    assert exit_code([_classify(0.8)]) == decide.EXIT_OK
    assert exit_code([_classify(1.25)]) == decide.EXIT_SLOWER


def test_per_benchmark_threshold_boundary():
    cfg = GateConfig(threshold=THR, thresholds=(("bench_*", 0.10),))
    assert classify(_series(1.10), cfg).status is GateStatus.SAME
    assert classify(_series(1.101), cfg).status is GateStatus.SLOWER
    assert classify(_series(1.06), cfg).status is GateStatus.SAME  # beyond the default, within the override


# ----------------------------------------------------------------------------- min_samples


@pytest.mark.parametrize(
    "n_base,n_head,too_few",
    [(6, 6, False), (5, 6, True), (6, 5, True), (7, 7, False), (5, 5, True)],
)
def test_min_samples_boundary(n_base, n_head, too_few):
    # min_samples=6 (asv's own Mann-Whitney needs 6): 6 per side gets a test, 5 does not.
    # alpha=0.05 so that 6 vs 6 fully separated samples (p = 0.0022) reach significance either way.
    v = _classify(1.25, n_base=n_base, n_head=n_head, min_samples=6, alpha=0.05)
    if too_few:
        assert v.status is GateStatus.UNCERTAIN and "too few samples" in v.reason, v.reason
    else:
        assert v.status is GateStatus.SLOWER, v.reason


def test_too_few_samples_within_threshold_is_same_not_uncertain():
    v = _classify(1.01, n_base=3, n_head=3)
    assert v.status is GateStatus.SAME and "too few samples" in v.reason


def test_too_few_samples_beyond_fast_threshold_is_uncertain_but_not_borderline():
    v = _classify(0.5, n_base=3, n_head=3)
    assert v.status is GateStatus.UNCERTAIN and not v.borderline
    assert _classify(1.5, n_base=3, n_head=3).borderline


# ----------------------------------------------------------------------------- alpha and borderline


def test_alpha_boundary_is_strict():
    # 6 vs 6 fully separated: the exact two-sided p-value is 2 / C(12, 6) = 2/924.
    p = 2 / 924
    v = _classify(1.25, n_base=6, n_head=6, alpha=0.05)
    assert v.stats.p_value == pytest.approx(p)
    assert _classify(1.25, n_base=6, n_head=6, alpha=p).status is GateStatus.UNCERTAIN  # p < alpha is strict
    assert _classify(1.25, n_base=6, n_head=6, alpha=p * 1.01).status is GateStatus.SLOWER


def test_borderline_factor_of_one_is_allowed_and_below_is_refused():
    GateConfig(borderline_factor=1.0)
    with pytest.raises(ValueError, match="borderline_factor"):
        GateConfig(borderline_factor=math.nextafter(1.0, 0))


@pytest.mark.parametrize("field,ok,bad", [("min_samples", 2, 1), ("threshold", 9.99, 10.0), ("alpha", 0.49, 0.5)])
def test_config_range_boundaries(field, ok, bad):
    GateConfig(**{field: ok})
    with pytest.raises(ValueError):
        GateConfig(**{field: bad})


def test_borderline_slower_is_remeasured_clear_slower_is_not():
    near = _classify(1.0 + THR + 0.01)  # lower CI end below 1 + 2 * threshold
    far = _classify(1.5)
    assert near.status is GateStatus.SLOWER and near.borderline and decide.needs_remeasure(near)
    assert far.status is GateStatus.SLOWER and not far.borderline and not decide.needs_remeasure(far)


# ----------------------------------------------------------------------------- exit codes


def _verdict(status, acknowledged=False) -> Verdict:
    v = Verdict("b", (), status, "r")
    if acknowledged:
        v.acknowledged = decide.Acknowledgement(pattern="b", reason="expected", commit="c" * 40)
    return v


@pytest.mark.parametrize(
    "statuses,code",
    [
        ([], decide.EXIT_BROKEN),  # nothing measured at all
        ([GateStatus.SAME], decide.EXIT_OK),
        ([GateStatus.FASTER, GateStatus.NEW, GateStatus.REMOVED, GateStatus.UNCERTAIN], decide.EXIT_OK),
        ([GateStatus.SAME, GateStatus.SLOWER], decide.EXIT_SLOWER),
        ([GateStatus.SLOWER, GateStatus.BROKEN], decide.EXIT_BROKEN),  # BROKEN wins over SLOWER
        ([GateStatus.BROKEN], decide.EXIT_BROKEN),
    ],
)
def test_exit_code_paths(statuses, code):
    assert exit_code([_verdict(s) for s in statuses]) == code


def test_acknowledged_slower_does_not_block():
    assert exit_code([_verdict(GateStatus.SLOWER, acknowledged=True)]) == decide.EXIT_OK
    assert exit_code([_verdict(GateStatus.SLOWER, acknowledged=True), _verdict(GateStatus.SLOWER)]) == 1


def test_exit_codes_are_the_documented_numbers():
    assert (decide.EXIT_OK, decide.EXIT_SLOWER, decide.EXIT_BROKEN) == (0, 1, 2)


# ----------------------------------------------------------------------------- mutation survivors


def test_change_is_ratio_minus_one():
    st = sample_stats(BASE, [x * 1.2 for x in BASE])
    assert st.change == pytest.approx(0.2)
    assert Stats(1, 1, 1.0, 0.5, 0.5, None, None, None).change == -0.5


def test_stats_default_to_one_round_per_side():
    st = Stats(1, 1, 1.0, 1.0, 1.0, None, None, None)
    assert (st.rounds_base, st.rounds_head) == (1, 1)


@pytest.mark.parametrize("nb,nh", [(1, 3), (3, 1), (1, 1)])
def test_one_sample_on_a_side_gives_no_interval_and_no_test(nb, nh):
    st = sample_stats(_spread(nb), _spread(nh))
    assert st.p_value is None and st.ci_low is None and st.ci_high is None


def test_two_samples_per_side_get_an_interval_and_a_test():
    st = sample_stats(_spread(2), [x * 2 for x in _spread(2)])
    assert st.p_value is not None and st.ci_low is not None


def test_reason_names_the_interval_of_the_change():
    v = _classify(2.5)  # above 2, so ci_high - 1 and ci_high % 1 differ
    st = v.stats
    want = f"99% CI {decide._pct(st.ci_low - 1)}..{decide._pct(st.ci_high - 1)}"
    assert want in v.reason, v.reason
    assert st.ci_low > 2.4 and st.ci_high < 2.6  # the interval is of the ratio, printed as a change
    assert "+150.0%" in v.reason


def test_worst_first_puts_the_largest_slowdown_first_and_a_verdict_without_stats_as_no_change():
    no_stats = Verdict("a", (), GateStatus.UNCERTAIN, "no samples")
    small = _classify(0.99)
    small.status = GateStatus.UNCERTAIN
    big = _classify(1.5)
    big.status = GateStatus.UNCERTAIN
    order = decide.sort_worst_first([small, no_stats, big])
    assert [v.stats.ratio if v.stats else None for v in order] == [big.stats.ratio, None, small.stats.ratio]


def test_alpha_of_zero_is_refused():
    with pytest.raises(ValueError, match="alpha"):
        GateConfig(alpha=0.0)
    with pytest.raises(ValueError, match="alpha"):
        GateConfig(alpha=-0.01)


def test_p_exactly_at_alpha_is_not_significant_and_says_why():
    p = _classify(1.25, n_base=6, n_head=6, alpha=0.05).stats.p_value
    v = _classify(1.25, n_base=6, n_head=6, alpha=p)
    assert v.status is GateStatus.UNCERTAIN
    assert f"p >= alpha={p:g}" in v.reason, v.reason


def test_faster_sorts_after_removed():
    faster = Verdict("a", (), GateStatus.FASTER, "r")
    removed = Verdict("b", (), GateStatus.REMOVED, "r")
    assert [v.status for v in decide.sort_worst_first([faster, removed])] == [GateStatus.REMOVED, GateStatus.FASTER]
    assert list(decide.SEVERITY) == sorted(decide.SEVERITY, key=decide.SEVERITY.get)
    assert sorted(decide.SEVERITY.values()) == list(range(len(GateStatus)))  # a strict order, no ties


def test_head_present_without_samples_is_uncertain():
    s = SeriesInput("b", (), Side(present=True, samples=_spread(7)), Side(present=True, samples=None))
    v = classify(s)
    assert v.status is GateStatus.UNCERTAIN and "no timing samples recorded (base 7, head 0)" in v.reason


def test_identical_samples_have_p_of_one():
    # Equivalent mutant note (docs/mutation.md): scipy also returns 1.0 here; the
    # guard keeps that true whatever the scipy version does with all-tied samples.
    assert sample_stats([1e-3] * 6, [1e-3] * 6).p_value == 1.0


def test_confirm_keeps_the_first_verdict_when_the_remeasurement_did_not_run_it():
    first = _classify(1.0 + THR + 0.01)
    gone = SeriesInput("bench_x", (("n", "1"),), Side.absent(), Side.absent())
    out = decide.confirm(first, gone, gone)
    assert out.status is first.status and not out.borderline
    assert out.reason == first.reason + "; the re-measurement did not run it (kept the first result)"


@pytest.mark.parametrize("confidence", [0.9, 0.99])
def test_interval_is_the_percentile_bootstrap_at_the_documented_level(confidence):
    """Efron & Tibshirani's percentile interval: the (1 - c)/2 and (1 + c)/2
    quantiles of the resampled ratios (same seed, same resamples)."""
    # Distinct noisy samples, so neighbouring resampled ratios differ and a quantile
    # a little off the documented one (0.495% for 0.5%) gives another value.
    gen = np.random.default_rng(11)
    base = list(1e-3 * np.exp(0.02 * gen.standard_normal(31)))
    head = list(1.1e-3 * np.exp(0.02 * gen.standard_normal(31)))
    st = sample_stats(base, head, confidence=confidence, bootstrap=2000, seed=3)
    rng = np.random.default_rng(3)
    b, h = np.asarray(base), np.asarray(head)
    ratios = decide._bootstrap_medians([h], 2000, rng) / decide._bootstrap_medians([b], 2000, rng)
    lo, hi = np.percentile(ratios, [(1 - confidence) / 2 * 100, (1 + confidence) / 2 * 100])
    assert (st.ci_low, st.ci_high) == (pytest.approx(lo), pytest.approx(hi))
