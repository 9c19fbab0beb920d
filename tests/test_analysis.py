"""Synthetic tests of harness.analysis: one per rule, with known change points."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from harness import analysis as A

CFG = A.AnalysisConfig()


def mk(
    values,
    name="bench",
    machine="m1",
    metric=None,
    unit=None,
    versions=None,
    envs=None,
    samples=None,
    commits=None,
    params=(("n", "1"),),
    ci=None,
):
    """A series of ``values`` (``None`` = a failed result); ``ci`` a relative half-width
    stored as each point's asv CI."""
    commits = commits or [f"{i:040x}" for i in range(len(values))]
    pts = []
    for i, v in enumerate(values):
        pts.append(
            A.Point(
                commit=commits[i],
                value=None if v is None else float(v),
                reason="failed" if v is None else None,
                version=versions[i] if versions else "v1",
                env=envs[i] if envs else None,
                samples=tuple(samples[i]) if samples else None,
                ci=None if ci is None or v is None else (float(v) * (1 - ci), float(v) * (1 + ci)),
            )
        )
    return A.Series(A.SeriesKey(machine, name, tuple(params)), pts, unit=unit, metric=metric)


def noisy(levels, noise, seed):
    rng = np.random.default_rng(seed)
    levels = np.asarray(levels, dtype=float)
    return levels * np.exp(noise * rng.standard_normal(levels.size))


def statuses(report, series=None):
    return [f.status for f in report.findings if series is None or f.key.benchmark == series]


# --------------------------------------------------------------------------- basics


def test_direction_from_metric_and_unit():
    for m in ("tflops", "gbps", "mfu", "bw_util", "sol", "sol_measured", "GFLOPS"):
        assert A.direction_for(m) is A.Direction.HIGHER_IS_BETTER, m
    for m in ("time", "latency_ms", "memory", None):
        assert A.direction_for(m, "seconds") is A.Direction.LOWER_IS_BETTER, m


def test_a_direction_given_as_its_string_value_orients_the_series():
    """``direction="higher_is_better"`` is the enum member, so a 10% throughput
    drop is a regression, its jump below 1; a direction that is no value is refused."""
    import dataclasses

    s = dataclasses.replace(mk(noisy(np.r_[np.ones(30), 0.9 * np.ones(30)], 0.02, 3)), direction="higher_is_better")
    assert s.direction is A.Direction.HIGHER_IS_BETTER
    (f,) = A.analyze([s]).findings
    assert f.status is A.Status.REGRESSION and f.change > 0
    assert 0.85 < f.ratio < 0.95 and f.extra["jump_ratio"] < 1 and f.extra["direction"] == "higher_is_better"
    with pytest.raises(ValueError, match="faster"):
        dataclasses.replace(s, direction="faster")


def test_robust_noise_ignores_steps_and_outliers():
    y = np.log(noisy(np.r_[np.ones(50), 1.5 * np.ones(50)], 0.02, 1))
    y[10] += 1.0
    assert 0.015 < A.robust_noise(y) < 0.026
    with pytest.raises(ValueError):
        A.robust_noise([1.0])


def test_benjamini_hochberg_matches_scipy():
    from scipy.stats import false_discovery_control

    p = np.array([0.001, 0.008, 0.039, 0.041, 0.042, 0.06, 0.074, 0.205, 0.212, 0.216])
    q, thr = A.benjamini_hochberg(p, 0.05)
    np.testing.assert_allclose(q, false_discovery_control(p), rtol=1e-12)
    assert thr == 0.008  # only the two smallest pass 0.005 and 0.010
    _, thr_none = A.benjamini_hochberg([0.5, 0.9], 0.05, m=100)
    assert thr_none == pytest.approx(0.05 / 100)


def test_the_tail_statistic_is_the_newest_mean_against_the_median_before():
    """``tail_split``'s z for the newest point: ``(y[-1] - median(base)) /
    (sigma * sqrt(1 + pi / (2 * n_base)))``, base the ``window`` points before
    it (mutation: ``pi / 2.0`` as ``pi - 2.0``)."""
    from harness.analysis.detect import tail_split

    k, z = tail_split(np.r_[np.zeros(8), 1.0], 0, 0.5, window=8, max_tail=1)
    assert k == 8 and z == pytest.approx(1.0 / (0.5 * math.sqrt(1.0 + math.pi / 16.0)), rel=1e-12)


def test_two_newest_points_are_a_tail_only_when_both_sit_at_the_new_level():
    """On a level of 2.0 the newest two points 3.0, 3.0 are a two-point tail;
    3.0 then back at 2.0 is no tail of two (the newest commit undid it), so the
    newest point alone is tested, and it has not moved (mutation: the distance
    to the old level ``tail - med`` as ``tail // med``)."""
    from harness.analysis.detect import tail_split

    base = 2.0 * np.ones(8)
    k, z = tail_split(np.r_[base, 3.0, 3.0], 0, 0.5, window=8)
    assert k == 8 and z == pytest.approx(1.0 / (0.5 * math.sqrt(0.5 + math.pi / 16.0)), rel=1e-12)
    assert tail_split(np.r_[base, 3.0, 2.0], 0, 0.5, window=8) == (9, 0.0)


def test_series_rejects_duplicate_commits():
    with pytest.raises(ValueError, match="twice"):
        A.Series(A.SeriesKey("m", "b"), [A.Point("c", 1.0), A.Point("c", 2.0)])
    with pytest.raises(TypeError):
        A.analyze_series([1, 2, 3])


# --------------------------------------------------------------------------- per-series rules


def test_single_outlier_is_not_a_step():
    for seed in range(10):
        v = noisy(np.ones(60), 0.03, seed)
        v[25] *= 1.5
        r = A.analyze([mk(v)])
        assert not r.findings, (seed, [f.reason for f in r.findings])


def test_ten_percent_step_in_three_percent_noise_found_at_its_commit():
    exact = 0
    for seed in range(20):
        v = noisy(np.r_[np.ones(30), 1.1 * np.ones(30)], 0.03, seed)
        s = mk(v)
        r = A.analyze([s])
        regs = [f for f in r.findings if f.status is A.Status.REGRESSION]
        assert len(regs) == 1, (seed, [f.reason for f in r.findings])
        f = regs[0]
        idx = [p.commit for p in s.points].index(f.commit_after)
        assert abs(idx - 30) <= 1, (seed, idx)
        exact += idx == 30
        assert f.ci[0] < 1.10 < f.ci[1] or abs(f.ratio - 1.10) < 0.03
        assert f.ci[0] > 1.0 and f.change > 0
    assert exact >= 17  # measured: 19/20 land on the exact commit


def test_direction_higher_is_better():
    base = noisy(np.r_[np.ones(30), 0.9 * np.ones(30)], 0.02, 3)
    # a 10% drop of throughput is a regression; of time an improvement
    r = A.analyze([mk(base, "tput", metric="tflops"), mk(base, "lat", unit="seconds")])
    by = {f.key.benchmark: f for f in r.findings}
    assert by["tput"].status is A.Status.REGRESSION
    assert by["tput"].ratio < 1 and by["tput"].change > 0
    assert by["lat"].status is A.Status.IMPROVEMENT
    assert by["lat"].change < 0


def test_creeping_drift_against_baseline():
    # 1.00 -> 1.04 -> 1.08 over three commits, then the new level holds. In 1%
    # noise a realisation can look like a step plus noise; it must still be
    # found where it starts, and at least half the time be called a drift.
    levels = np.r_[np.ones(40), 1.04, 1.08, 1.08 * np.ones(6)]
    labelled_drift = 0
    for seed in range(6):
        s = mk(noisy(levels, 0.01, seed))
        r = A.analyze([s])
        found = [f for f in r.findings if f.status in (A.Status.DRIFT_REGRESSION, A.Status.REGRESSION)]
        assert len(found) == 1, (seed, [(f.status, f.reason) for f in r.findings])
        d = found[0]
        commits = [p.commit for p in s.points]
        # the ramp spans commits 40-41; in 1% noise commit 39 can sit 2 sigma high
        # and join it. A drift is named where it starts; a ramp called a step is
        # named at its largest move (issue 23: blame the commit that carries the
        # change), so the named commit lies in the span, one commit early allowed
        start = commits.index(d.commit_after)
        assert start in (39, 40, 41) and commits.index(d.commit_before) == start - 1, seed
        if d.status is A.Status.REGRESSION and d.extra.get("moves"):
            moved = {commits.index(m["commit"]): m["change"] for m in d.extra["moves"]}
            assert start == max(moved, key=lambda i: abs(moved[i])), (seed, moved)
        assert 1.05 < d.ratio < 1.11
        labelled_drift += d.status is A.Status.DRIFT_REGRESSION
    # where the 1.04 commit reads above 1.06 a step plus noise is as good a fit
    # as the ramp (a two-level fit is chosen unless the ramp wins by 6 sigma^2)
    assert labelled_drift >= 3


def test_drift_at_newest_commits_is_pending_and_transient_is_ignored():
    s = mk(noisy(np.r_[np.ones(40), 1.04, 1.08], 0.01, 2))
    st = statuses(A.analyze([s]))
    assert st == [A.Status.PENDING]
    # two rising commits that fall back: an excursion, not a drift
    s = mk(noisy(np.r_[np.ones(40), 1.04, 1.08, np.ones(10)], 0.01, 2))
    assert statuses(A.analyze([s])) == []


def test_nulls_are_failures_with_their_stretches():
    v = list(noisy(np.ones(30), 0.02, 4))
    v[5] = None
    v[12] = None
    v[25:] = [None] * 5
    r = A.analyze([mk(v)])
    (fail,) = [f for f in r.findings if f.status is A.Status.FAILING]
    assert "7 of 30" in fail.reason
    c = [f"{i:040x}" for i in range(30)]
    assert f"failing since {c[5][:12]}, back at {c[6][:12]} (1 commit)" in fail.reason
    assert f"failing since {c[25][:12]}, still failing at the newest result (5 commits)" in fail.reason
    assert fail.commit_before == c[25] and fail.commit_after is None  # the latest stretch, not back yet
    assert [x["since"] for x in fail.extra["stretches"]] == [c[5], c[12], c[25]]
    # nulls are failures, not absence: nothing is "missing" when the results still name the series
    assert not [f for f in r.findings if f.status is A.Status.MISSING]
    assert r.summary["failed_points"] == 7
    # all null: failing, nothing else, nothing crashes
    r = A.analyze([mk([None] * 8)])
    assert [f.status for f in r.findings] == [A.Status.FAILING]
    assert "all 8" in r.findings[0].reason


def test_missing_since_the_first_commit_that_does_not_name_it():
    s = mk(noisy(np.ones(20), 0.02, 5))
    later = [p.commit for p in s.points] + ["f" * 40, "e" * 40]
    r = A.analyze([s], machine_commits={"m1": later})
    (miss,) = [f for f in r.findings if f.status is A.Status.MISSING]
    assert f"missing since commit {'f' * 12}" in miss.reason and "2 later result file(s)" in miss.reason
    assert miss.commit_before == s.points[-1].commit and miss.commit_after == "f" * 40
    h = r.health
    assert h["missing"] == [{"key": s.key.as_dict(), "since": "f" * 40, "last_seen": s.points[-1].commit}]


def test_step_at_benchmark_version_change_is_annotated():
    v = noisy(np.r_[np.ones(30), 1.3 * np.ones(30)], 0.02, 6)
    versions = ["a" * 64] * 30 + ["b" * 64] * 30
    r = A.analyze([mk(v, versions=versions)])
    assert statuses(r) == [A.Status.VERSION_CHANGE]
    assert "benchmark version changed aaaaaaaa -> bbbbbbbb" in r.findings[0].reason
    assert r.summary["alerts"] == 0


def test_step_at_environment_change_is_annotated():
    v = noisy(np.r_[np.ones(30), 1.2 * np.ones(30)], 0.02, 7)
    envs = [{"torch": "2.4.0", "driver": "550"}] * 30 + [{"torch": "2.5.0", "driver": "550"}] * 30
    r = A.analyze([mk(v, envs=envs)])
    assert statuses(r) == [A.Status.ENV_CHANGE]
    assert "torch 2.4.0 -> 2.5.0" in r.findings[0].reason


def test_any_environment_entry_but_the_machine_labels_a_step():
    """An environment entry outside ``ENV_KEYS`` (a numpy upgrade, which the
    code identity does not see) changing at the step labels it an environment
    change; a ``machine`` entry changing does not, the step stays a regression
    (mutation: ``k in ENV_KEYS or k not in ("machine",)`` as ``and``, which
    reads only ``ENV_KEYS``)."""
    assert "numpy" not in A.ENV_KEYS
    v = noisy(np.r_[np.ones(30), 1.2 * np.ones(30)], 0.02, 7)
    envs = [{"numpy": "1.26.4", "driver": "550"}] * 30 + [{"numpy": "2.1.0", "driver": "550"}] * 30
    (f,) = A.analyze([mk(v, envs=envs)]).findings
    assert f.status is A.Status.ENV_CHANGE and "environment changed: numpy 1.26.4 -> 2.1.0" in f.reason
    envs = [{"machine": "a"}] * 30 + [{"machine": "b"}] * 30
    assert statuses(A.analyze([mk(v, envs=envs)])) == [A.Status.REGRESSION]


def test_recorded_samples_confirm_or_hold_a_step():
    rng = np.random.default_rng(8)
    v = noisy(np.r_[np.ones(30), 1.1 * np.ones(30)], 0.02, 8)
    distinct = [list(x * (1 + 0.005 * rng.standard_normal(10))) for x in v]
    r = A.analyze([mk(v, samples=distinct)])
    (f,) = r.findings
    assert f.status is A.Status.REGRESSION and f.extra["p_samples"] < 0.01
    # samples so spread that the two commits around the step cannot be told apart
    wide = [list(x * (1 + 0.3 * rng.standard_normal(10))) for x in v]
    r = A.analyze([mk(v, samples=wide)])
    (f,) = r.findings
    assert f.status is A.Status.PENDING and "samples" in f.reason


def test_false_alarm_budget_and_fdr_across_many_series():
    null = [mk(noisy(np.ones(100), 0.03, 100 + i), name=f"b{i}") for i in range(300)]
    r = A.analyze(null)
    assert r.summary["alerts"] == 0, [f.reason for f in r.findings]
    b = r.budget
    assert b["hypotheses"] == 600  # a change in the history and one at the newest commits, per series
    assert 0 <= b["expected_false_alerts"] <= b["fdr_q"]
    assert b["expected_false_alerts_without_fdr"] >= b["expected_false_alerts"]
    rows = {row["series"]: row for row in r.series}
    assert all(0.015 < row["noise_rel"] < 0.045 for row in rows.values())
    # five real 10% steps among them are still found
    steps = [mk(noisy(np.r_[np.ones(50), 1.1 * np.ones(50)], 0.03, 900 + i), name=f"s{i}") for i in range(5)]
    r = A.analyze(null + steps)
    found = {f.key.benchmark for f in r.findings if f.status is A.Status.REGRESSION}
    assert found == {f"s{i}" for i in range(5)}
    # a noisier series carries more of the expected false alerts
    loud = A.analyze([mk(noisy(np.ones(100), 0.08, 1), name="loud"), mk(noisy(np.ones(100), 0.01, 2), name="quiet")])
    per = {row["series"].split("/ ")[1].split("(")[0]: row for row in loud.series}
    assert per["loud"]["min_detectable_change"] > per["quiet"]["min_detectable_change"]


@pytest.mark.parametrize("n, per_window", [(7, 3), (20, 10), (101, 50), (200, 50)])
def test_the_typical_change_error_compares_two_windows_of_half_the_history(n, per_window):
    """The budget's typical standard error of a change is that of two window
    means, each of ``window`` (50) points at most and of half the history at
    most: ``noise * sqrt(2 / per_window)`` (mutation: ``n // 2`` as ``n - 2``,
    the same from 102 points on)."""
    a = A.analyze_series(mk(noisy(np.ones(n), 0.01, 3)))
    assert a.se_typical == pytest.approx(a.noise * math.sqrt(2.0 / per_window), rel=1e-12)


# --------------------------------------------------------------------------- cross-machine


A100 = A.DevicePeaks("A100 SXM4 80GB", 2039.0, {"fp32": 19.5, "bf16": 312.0})
H100 = A.DevicePeaks("H100 SXM5 80GB", 3350.0, {"fp32": 67.0, "bf16": 989.0})


def test_divergent_change_between_gpus():
    commits = [f"{i:040x}" for i in range(60)]
    a = mk(noisy(np.r_[np.ones(30), 0.85 * np.ones(30)], 0.02, 10), machine="ampere", commits=commits)
    h = mk(noisy(np.r_[np.ones(30), 1.15 * np.ones(30)], 0.02, 11), machine="hopper", commits=commits)
    r = A.analyze([a, h], devices={"ampere": A100, "hopper": H100}, commit_order=commits)
    div = [f for f in r.findings if f.status is A.Status.DIVERGENT_CHANGE]
    assert len(div) == 1
    d = div[0]
    assert d.key.machine == "hopper" and d.other_key.machine == "ampere"
    assert d.commit_before == commits[29] and d.commit_after == commits[30]
    assert "opposite significant changes" in d.reason
    assert d.ci[0] > 1.0
    # the same change on both GPUs is not divergent
    h2 = mk(noisy(np.r_[np.ones(30), 0.85 * np.ones(30)], 0.02, 12), machine="hopper", commits=commits)
    r = A.analyze([a, h2], devices={"ampere": A100, "hopper": H100}, commit_order=commits)
    assert not [f for f in r.findings if f.status is A.Status.DIVERGENT_CHANGE]


@pytest.mark.parametrize("left_out", [None, 29, 30])
def test_a_divergent_change_needs_both_its_commits_in_the_commit_order(left_out):
    """Opposite 15% moves at commits 29 -> 30 on two GPUs are divergent; when
    the global commit order given leaves out either commit of that pair, the
    change cannot be lined up across machines and none is claimed, without an
    error (mutation: skip only when ``ra is None and rb is None``, which
    compares a missing rank)."""
    commits = [f"{i:040x}" for i in range(60)]
    a = mk(noisy(np.r_[np.ones(30), 0.85 * np.ones(30)], 0.02, 10), machine="ampere", commits=commits)
    h = mk(noisy(np.r_[np.ones(30), 1.15 * np.ones(30)], 0.02, 11), machine="hopper", commits=commits)
    analyses = [A.analyze_series(s) for s in (a, h)]
    order = [c for i, c in enumerate(commits) if i != left_out]
    div = A.divergent_changes(analyses, CFG, commit_order=order, devices={"ampere": A100, "hopper": H100})
    if left_out is None:
        assert [(f.key.machine, f.commit_before, f.commit_after) for f in div] == [("hopper", commits[29], commits[30])]
    else:
        assert div == []


@pytest.mark.parametrize("after, divergent", [(1, False), (2, True)])
def test_divergent_change_needs_two_points_after_the_step_on_each_machine(after, divergent):
    # ampere steps down 15% at commit 30; hopper stays flat but stops after
    # ``after`` points at or past that commit: one point is not a level.
    commits = [f"{i:040x}" for i in range(60)]
    a = mk(noisy(np.r_[np.ones(30), 0.85 * np.ones(30)], 0.02, 10), machine="ampere", commits=commits)
    n = 30 + after
    h = mk(noisy(np.ones(n), 0.02, 11), machine="hopper", commits=commits[:n])
    r = A.analyze([a, h], devices={"ampere": A100, "hopper": H100}, commit_order=commits)
    div = [f for f in r.findings if f.status is A.Status.DIVERGENT_CHANGE]
    assert bool(div) is divergent, [f.reason for f in div]


def test_efficiency_gap_between_gpus():
    sol_a = mk([0.80, 0.81, 0.79, 0.80, 0.80], machine="ampere", metric="sol")
    sol_h = mk([0.40, 0.41, 0.39, 0.40, 0.40], machine="hopper", metric="sol")
    gaps = A.efficiency_gaps([sol_a, sol_h], {"ampere": A100, "hopper": H100})
    assert len(gaps) == 1
    g = gaps[0]
    assert g.status is A.Status.EFFICIENCY_GAP and g.key.machine == "hopper"
    assert g.ratio == pytest.approx(0.5, rel=0.02) and g.ci[1] < 0.7
    close = mk([0.75, 0.76, 0.74, 0.75, 0.75], machine="hopper", metric="sol")
    assert A.efficiency_gaps([sol_a, close], {"ampere": A100, "hopper": H100}) == []


def test_an_efficiency_gap_carries_the_noise_of_both_gpus():
    """A steady 40% of speed-of-light on hopper against 80% on ampere: the gap's
    CI is as wide as ampere's noise makes it, and where ampere's latest sol
    values scatter from 30% to 95% no gap is claimed at all (mutation: the
    higher side's ``se ** 2`` as ``se // 2``, 0 for any se below 2, which
    leaves only the steady side's noise)."""
    devs = {"ampere": A100, "hopper": H100}
    low = mk([0.40] * 5, machine="hopper", metric="sol")
    (g,) = A.efficiency_gaps([mk([0.80, 0.82, 0.78, 0.80, 0.81], machine="ampere", metric="sol"), low], devs)
    assert g.ratio == pytest.approx(0.5) and 0.47 < g.ci[0] < 0.49 and 0.51 < g.ci[1] < 0.53
    scattered = mk([0.80, 0.30, 0.95, 0.80, 0.45], machine="ampere", metric="sol")
    assert A.efficiency_gaps([scattered, low], devs) == []


def test_unexpected_generation_speedup_uses_the_bound():
    key = ("bench", (("n", "1"),))
    mem = {key: A.CaseCost(flops=1e6, bytes_total=1e9, dtype="bf16", uses_tensor_cores=False)}
    comp = {key: A.CaseCost(flops=1e15, bytes_total=1e8, dtype="bf16", uses_tensor_cores=True)}
    devs = {"ampere": A100, "hopper": H100}
    assert A.predicted_speedup(mem[key], A100, H100) == (pytest.approx(3350 / 2039), "memory")
    assert A.predicted_speedup(comp[key], A100, H100) == (pytest.approx(989 / 312), "compute")
    t_a = mk([1.00, 1.01, 0.99, 1.00, 1.00], machine="ampere", unit="seconds")
    same = mk([1.00, 0.99, 1.01, 1.00, 1.00], machine="hopper", unit="seconds")  # no speedup at all
    out = A.generation_speedups([t_a, same], devs, mem)
    assert [f.status for f in out] == [A.Status.UNEXPECTED_SPEEDUP]
    assert "memory-bound" in out[0].reason and out[0].extra["measured_speedup"] == pytest.approx(1.0, rel=0.02)
    as_predicted = mk(list(np.array([1.0, 1.01, 0.99, 1.0, 1.0]) * 2039 / 3350), machine="hopper", unit="seconds")
    assert A.generation_speedups([t_a, as_predicted], devs, mem) == []
    # compute-bound: a speedup at the bandwidth ratio (1.64x) is half the FLOP
    # ratio's prediction (3.17x), outside [1/1.5, 1.5]: one finding, naming the bound.
    out = A.generation_speedups([t_a, as_predicted], devs, comp)
    assert [f.status for f in out] == [A.Status.UNEXPECTED_SPEEDUP]
    assert "compute-bound" in out[0].reason and out[0].extra["bound"] == "compute"
    assert out[0].extra["predicted_speedup"] == pytest.approx(989 / 312)
    assert out[0].extra["measured_speedup"] == pytest.approx(3350 / 2039, rel=0.01)
    assert A.generation_speedups([t_a, same], {"ampere": A100}, mem) == []  # unknown device: no claim


def test_generation_speedup_names_each_machines_newest_commit_and_its_series():
    key = ("bench", (("n", "1"),))
    mem = {key: A.CaseCost(flops=1e6, bytes_total=1e9, dtype="bf16", uses_tensor_cores=False)}
    t_a = mk([1.00, 1.01, 0.99, 1.00, 1.00], machine="ampere", unit="seconds", commits=[f"a{i}" for i in range(5)])
    t_h = mk([1.00, 0.99, 1.01, 1.00], machine="hopper", unit="seconds", commits=[f"h{i}" for i in range(4)])
    for order in ([t_a, t_h], [t_h, t_a]):  # the older GPU is put first either way
        (f,) = A.generation_speedups(order, {"ampere": A100, "hopper": H100}, mem)
        assert (f.commit_before, f.commit_after) == ("a4", "h3")
        assert (f.other_key.machine, f.key.machine) == ("ampere", "hopper")
        assert f.series == "bench(n=1) A100 SXM4 80GB -> H100 SXM5 80GB"


def test_report_is_versioned_json_without_nan():
    v = list(noisy(np.r_[np.ones(30), 1.2 * np.ones(30)], 0.02, 13))
    v[3] = None
    r = A.analyze([mk(v), mk([None, None, None], name="dead")])
    d = r.as_dict()
    text = json.dumps(d, allow_nan=False)
    assert d["schema"] == A.REPORT_SCHEMA and d["version"] == A.REPORT_VERSION
    for f in d["findings"]:
        assert f["status"] in {s.value for s in A.Status}
        assert f["series"] and f["reason"]
        assert len(f["commit_range"]) == 2
        assert set(f["magnitude"]) == {"ratio", "ci", "change"}
    assert "NaN" not in text
    reg = [f for f in d["findings"] if f["status"] == "regression"][0]
    assert reg["magnitude"]["ci"][0] < reg["magnitude"]["ratio"] < reg["magnitude"]["ci"][1]
    assert reg["q_value"] <= 0.05


def test_config_validation():
    with pytest.raises(ValueError):
        A.AnalysisConfig(fdr_q=0)
    with pytest.raises(ValueError):
        A.AnalysisConfig(detector="nope")


@pytest.mark.parametrize("detector", ["binseg", "asv", "rbf"])
def test_detectors_agree_on_a_clear_step(detector):
    cfg = A.AnalysisConfig(detector=detector)
    v = noisy(np.r_[np.ones(30), 1.25 * np.ones(30)], 0.02, 14)
    r = A.analyze([mk(v)], cfg)
    (f,) = r.findings
    assert f.status is A.Status.REGRESSION and f.commit_after == f"{30:040x}"


def test_a_pending_reason_bounds_a_p_value_past_the_models_tail():
    """Newcomer trial (2026-12-07): a one-point pending read "p=4.9e-132"."""
    from harness.analysis.findings import p_text

    assert p_text(4.9e-132) == "p<1e-10"
    assert p_text(3e-05) == "p=3e-05" and p_text(0.00066) == "p=0.00066"  # control: ordinary p as before
    vals = list(noisy(np.ones(40), 0.004, 3))
    vals[-1] *= 1.2
    r = A.analyze([mk(vals)])
    (f,) = [f for f in r.findings if f.status is A.Status.PENDING]
    assert "p<1e-10" in f.reason and f.p_value < 1e-10, f.reason
