"""The cross-GPU rules given broken input: peaks that are no peaks, ratios that
do not fit a float, a machine paired with itself, a dropped point named as the
newest commit, a one-point level with a CI, and ``devices`` of the wrong type.

Each test is built from the input a hostile-input helper fed the rules at
``b5fad68`` (every one emitted a finding or crashed there) and has a negative
control: the same call with sound input still gives its finding.
"""

from __future__ import annotations

import json
import math
from decimal import Decimal
from fractions import Fraction

import numpy as np
import pytest
from test_analysis import A100, H100, mk, noisy

import harness.analysis as A
from harness.analysis.cross import _latest_level
from harness.core import devices as core_devices

CFG = A.AnalysisConfig()
DEVS = {"ampere": A100, "hopper": H100}
KEY = ("bench", (("n", "1"),))
MEM = {KEY: A.CaseCost(flops=1e6, bytes_total=1e9, dtype="bf16")}


def _sol(values, machine):
    return mk(values, machine=machine, metric="sol")


def _time(values, machine):
    return mk(values, machine=machine, unit="seconds")


@pytest.mark.parametrize(
    "bad", [float("nan"), float("inf"), 0.0, -2039.0, True, "2039", 5e-324, 10**400, Fraction(1, 10**400), None]
)
def test_a_device_peak_that_is_not_a_finite_positive_number_is_refused(bad):
    if bad is not None:  # None is "bandwidth unknown", allowed for peak_gbps alone
        with pytest.raises(ValueError, match="peak_gbps must be a finite number > 0"):
            A.DevicePeaks("A100", bad, {"fp32": 19.5})
    with pytest.raises(ValueError, match=r"peak_tflops\['bf16'\] must be a finite number > 0"):
        A.DevicePeaks("A100", 2039.0, {"fp32": 19.5, "bf16": bad})
    # control: a sound device, and a device with no known bandwidth
    assert A.DevicePeaks("A100", 2039.0, {"fp32": 19.5}).peak_gbps == 2039.0
    assert A.DevicePeaks("A100", None, {}).peak_gbps is None


def test_a_peak_given_as_another_kind_of_number_is_stored_as_a_float():
    """Fraction, Decimal, numpy and int peaks are floats once stored, so every
    rule (and its reason's formatting) sees one type."""
    d = A.DevicePeaks("A100", Fraction(2039), {"fp32": Decimal("19.5"), "bf16": np.float32(312), "fp16": 312})
    assert type(d.peak_gbps) is float and all(type(v) is float for v in d.peak_tflops.values())
    h = A.DevicePeaks("H100", Fraction(3350), {"fp32": Fraction(67)})
    (f,) = A.generation_speedups(
        [_time([1.0] * 5, "ampere"), _time([10.0] * 5, "hopper")], {"ampere": d, "hopper": h}, MEM
    )
    assert "measured speedup 0.10x" in f.reason
    assert type(A.CaseCost(Fraction(10**6), 10**9, "bf16").flops) is float


def test_a_device_needs_a_name_and_a_mapping_of_peaks():
    with pytest.raises(ValueError, match="name must be a non-empty string"):
        A.DevicePeaks(" ", 2039.0, {})
    with pytest.raises(ValueError, match="peak_tflops must map dtype"):
        A.DevicePeaks("A100", 2039.0, [("fp32", 19.5)])


@pytest.mark.parametrize("field", ["flops", "bytes_total"])
@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -100.0, 10**400, "1e9"])
def test_a_case_cost_that_is_not_a_finite_count_is_refused(field, bad):
    kw = {"flops": 1e9, "bytes_total": 1e9, "dtype": "bf16", field: bad}
    with pytest.raises(ValueError, match=f"{field} must be a finite number >= 0"):
        A.CaseCost(**kw)
    assert A.CaseCost(flops=0.0, bytes_total=0.0, dtype="bf16").flops == 0.0


@pytest.mark.parametrize("cell", ["nan", "inf", "-312", "312 TFLOPS", "5e-324"])
def test_the_spec_table_refuses_a_peak_that_is_not_a_finite_number_naming_the_row(tmp_path, cell):
    src = core_devices.SPEC_TABLE.read_text().splitlines()
    header = src[0].split(",")
    row = src[1].split(",")
    row[header.index("bf16_tflops")] = cell
    bad = tmp_path / "specs.csv"
    bad.write_text("\n".join([src[0], src[1], ",".join(row)]) + "\n")
    with pytest.raises(ValueError, match=r"specs.csv:3: bf16_tflops is .* for 'A100 SXM4 80GB'"):
        core_devices.spec_table(str(bad))
    bw = list(row)
    bw[header.index("bf16_tflops")] = "312"
    bw[header.index("peak_gbps")] = "nan"
    bad.write_text("\n".join([src[0], ",".join(bw)]) + "\n")
    with pytest.raises(ValueError, match="specs.csv:2: peak_gbps is 'nan' for 'A100 SXM4 80GB'"):
        core_devices.spec_table(str(bad))
    good = tmp_path / "good.csv"
    good.write_text("\n".join(src[:2]) + "\n")
    assert core_devices.spec_table(str(good))[0].peak_tflops["bf16"] == 312.0


def test_devices_of_the_wrong_type_raise_a_type_error_naming_it():
    sol = [_sol([0.8] * 5, "ampere"), _sol([0.2] * 5, "hopper")]
    with pytest.raises(TypeError, match="devices must map machine -> DevicePeaks, got list"):
        A.efficiency_gaps(sol, [A100, H100])
    with pytest.raises(TypeError, match=r"devices\['hopper'\] must be a DevicePeaks or None, got str"):
        A.generation_speedups([_time([1] * 5, "ampere")], {"ampere": A100, "hopper": "H100"}, MEM)
    with pytest.raises(TypeError, match="got tuple"):
        A.divergent_changes([], CFG, devices=(A100,))
    (g,) = A.efficiency_gaps(sol, DEVS)  # control
    assert g.key.machine == "hopper"


def test_a_ratio_that_does_not_fit_a_float_is_no_finding():
    """1e300 s on one GPU against 1e-300 s on another overflows the measured
    speedup to inf; 1e-300 against 1e300 speed-of-light underflows the gap ratio
    to 0. Neither is a number to defend; each series is still analysed alone."""
    assert A.generation_speedups([_time([1e300] * 5, "ampere"), _time([1e-300] * 5, "hopper")], DEVS, MEM) == []
    assert A.efficiency_gaps([_sol([1e-300] * 5, "ampere"), _sol([1e300] * 5, "hopper")], DEVS) == []
    r = A.analyze(
        [_time([1e300] * 5, "ampere"), _time([1e-300] * 5, "hopper")],
        CFG,
        devices=DEVS,
        costs=MEM,
        aux_series=[_sol([1e-300] * 5, "ampere"), _sol([1e300] * 5, "hopper")],
    )
    json.dumps(r.as_dict(), allow_nan=False, default=str)
    assert not [f for f in r.findings if f.other_key is not None]
    # 1e50 or more apart is no finding either, where the ratio and its CI still fit
    # a float (1e-161 s against 1e161 s: a ratio of 6e-323, a CI from 0)
    assert A.generation_speedups([_time([1e-161] * 5, "ampere"), _time([1e161] * 5, "hopper")], DEVS, MEM) == []
    assert A.generation_speedups([_time([1e154] * 5, "ampere"), _time([1e-154] * 5, "hopper")], DEVS, MEM) == []
    assert A.efficiency_gaps([_sol([1e-160] * 5, "ampere"), _sol([1e150] * 5, "hopper")], DEVS) == []
    # control: the same rules on values a float holds
    (f,) = A.generation_speedups([_time([1.0] * 5, "ampere"), _time([10.0] * 5, "hopper")], DEVS, MEM)
    assert math.isfinite(f.ratio) and f.ratio > 0


def test_an_aux_series_value_fifty_orders_from_its_median_fails_its_own_point():
    """``sol`` series reach only the cross-GPU rules, and pass the same float-range
    check as the series the analysis tests: one 1e-300 among 0.2s is a failed
    point, and the gap is read from the other four."""
    r = A.analyze(
        [],
        CFG,
        devices=DEVS,
        aux_series=[_sol([0.8] * 5, "ampere"), _sol([0.2, 0.2, 0.2, 0.2, 1e-300], "hopper")],
    )
    (g,) = [f for f in r.findings if f.status is A.Status.EFFICIENCY_GAP]
    assert g.ratio == pytest.approx(0.25) and g.commit_before == f"{3:040x}"


def test_two_series_of_one_case_on_one_machine_are_never_a_divergent_pair():
    commits = [f"{i:040x}" for i in range(60)]
    down = noisy(np.r_[np.ones(30), 0.85 * np.ones(30)], 0.02, 10)
    up = noisy(np.r_[np.ones(30), 1.15 * np.ones(30)], 0.02, 11)
    series = [
        mk(down, machine="ampere", commits=commits),
        mk(up, machine="ampere", commits=commits),
        mk(up, machine="hopper", commits=commits),
    ]
    r = A.analyze(series, CFG, commit_order=commits)
    pairs = [(f.key.machine, f.other_key.machine) for f in r.findings if f.status is A.Status.DIVERGENT_CHANGE]
    assert pairs == [("hopper", "ampere")]


def test_the_newest_commit_of_a_latest_level_is_that_of_its_newest_usable_value():
    """A NaN, zero or negative newest point is dropped from the level, so the
    finding names the commit before it, not the dropped one."""
    for bad in (float("nan"), 0.0, -1.0):
        s = _sol([0.2, 0.2, 0.2, 0.2, bad], "hopper")
        assert _latest_level(s, 5)[3] == f"{3:040x}"
        (g,) = A.efficiency_gaps([_sol([0.8] * 5, "ampere"), s], DEVS)
        assert g.commit_before == f"{3:040x}"
    assert _latest_level(_sol([0.2] * 5, "hopper"), 5)[3] == f"{4:040x}"  # control


def test_a_level_of_one_point_gives_a_finding_with_no_ci_and_says_so():
    """One value has no standard error; before, it counted as zero and gave a
    CI as tight as the other machine's alone."""
    (g,) = A.efficiency_gaps([_sol([0.80, 0.82, 0.78, 0.80, 0.81], "ampere"), _sol([0.2], "hopper")], DEVS)
    assert g.ci is None and "from one point on hopper: no CI" in g.reason
    (f,) = A.generation_speedups([_time([1.0, 1.01, 0.99, 1.0, 1.0], "ampere"), _time([10.0], "hopper")], DEVS, MEM)
    assert f.ci is None and "from one point on hopper: no CI" in f.reason
    # one point as predicted is no finding: decided on the estimate
    pred = H100.peak_gbps / A100.peak_gbps
    assert A.generation_speedups([_time([1.0] * 5, "ampere"), _time([1.0 / pred], "hopper")], DEVS, MEM) == []
    # control: two points a side give a CI and no note
    (g2,) = A.efficiency_gaps([_sol([0.80, 0.82], "ampere"), _sol([0.2, 0.21], "hopper")], DEVS)
    assert g2.ci is not None and "no CI" not in g2.reason


def test_the_spec_table_refuses_a_bad_sm_count_memory_or_cache_naming_the_row(tmp_path):
    src = core_devices.SPEC_TABLE.read_text().splitlines()
    header = src[0].split(",")
    for col, cell in (
        ("sm_count", "nan"),
        ("sm_count", "inf"),
        ("sm_count", "10.5"),
        ("memory_gb", "-80"),
        ("l2_mb", "nan"),
    ):
        row = src[1].split(",")
        row[header.index(col)] = cell
        bad = tmp_path / "specs.csv"
        bad.write_text("\n".join([src[0], ",".join(row)]) + "\n")
        with pytest.raises(ValueError, match=rf"specs.csv:2: {col} is .* for 'A100 SXM4 80GB'"):
            core_devices.spec_table(str(bad))


def test_a_latest_level_uses_only_values_the_series_analysis_can_use():
    """A bool, or an int no float can hold, is no measurement: the series' own analysis calls it unusable, and
    the cross-GPU level skips it too (before, ``True`` was a level of 1.0 and
    named as the newest usable commit)."""
    for bad in (True, 10**400):  # an int beyond float range either (float() would overflow)
        s = mk([1.0, 1.0, 1.0, 1.0, 1.0, 2.0], machine="hopper", unit="seconds")
        s.points[-1].value = bad
        assert _latest_level(s, 5)[3] == f"{4:040x}"


def test_a_divergent_change_whose_ci_would_overflow_is_no_finding():
    """Called directly (``analyze``'s 1e50 check is not in the way), two machines
    moving e^346 apart: the ratio's CI ends would overflow."""
    commits = [f"{i:040x}" for i in range(16)]
    big, alt = 173.0, [8.0, -8.0] * 4
    amp = [math.exp(big + e) for e in alt] + [math.exp(-big + e) for e in alt]
    hop = [math.exp(-big + e) for e in alt] + [math.exp(big + e) for e in alt]
    an = [
        A.analyze_series(mk(amp, machine="ampere", commits=commits)),
        A.analyze_series(mk(hop, machine="hopper", commits=commits)),
    ]
    for f in A.divergent_changes(an, CFG, commit_order=commits, devices=DEVS):
        assert math.isfinite(f.ratio) and all(math.isfinite(x) and x > 0 for x in f.ci)


def test_a_divergence_where_only_the_other_machine_moved_is_no_slowdown_in_its_event():
    """OpenBLAS Dgemm(100, d): skylake -10.7% faster, graviton and noble +0.4% and
    +0.0%. The divergent changes keyed on graviton and noble made the event read
    "2 slower, 1 faster"; a divergence whose worse machine did not itself move
    is now ``diverged`` in its event, and the event is the improvement. Control:
    a worse machine that did get slower is still ``slower``."""
    commits = [f"{i:040x}" for i in range(60)]
    flat = noisy(np.ones(60), 0.005, 3)
    fast = noisy(np.r_[np.ones(30), 0.85 * np.ones(30)], 0.005, 4)
    r = A.analyze(
        [mk(flat, machine="ampere", commits=commits), mk(fast, machine="hopper", commits=commits)],
        CFG,
        commit_order=commits,
    )
    (div,) = [f for f in r.findings if f.status is A.Status.DIVERGENT_CHANGE]
    assert div.key.machine == "ampere" and div.extra["worse_machine_moved"] is False
    (ev,) = [e for e in r.events if e["commit_range"][1] == commits[30]]
    assert ev["status"] == "improvement" and (ev["n_slower"], ev["n_faster"]) == (0, 1)
    assert sorted(s["direction"] for s in ev["series"]) == ["diverged", "faster"]
    slow = noisy(np.r_[np.ones(30), 1.15 * np.ones(30)], 0.005, 5)
    r2 = A.analyze(
        [mk(slow, machine="ampere", commits=commits), mk(fast, machine="hopper", commits=commits)],
        CFG,
        commit_order=commits,
    )
    (div2,) = [f for f in r2.findings if f.status is A.Status.DIVERGENT_CHANGE]
    assert div2.extra["worse_machine_moved"] is True
    (ev2,) = [e for e in r2.events if e["commit_range"][1] == commits[30]]
    assert ev2["status"] == "mixed"
    assert [s["direction"] for s in ev2["series"] if s["status"] == "divergent_change"] == ["slower"]


def test_a_divergent_change_is_named_at_commits_its_machine_measured():
    """hopper failed at the commits of the boundary ampere's change point names
    (29, 30): the finding keyed on hopper named 29 -> 30, two commits hopper has
    no value for. It is now named at hopper's own pair across the change, and
    the reason gives both machines' pairs. Control: with no failure the pair is
    the boundary's and the reason says "between the same commits"."""
    commits = [f"{i:040x}" for i in range(60)]
    amp = mk(noisy(np.r_[np.ones(30), 0.85 * np.ones(30)], 0.02, 10), machine="ampere", commits=commits)
    hv = list(noisy(np.r_[np.ones(30), 1.15 * np.ones(30)], 0.02, 11))
    for drop, pair in (([29, 30], (28, 31)), ([], (29, 30))):
        vals = [None if i in drop else v for i, v in enumerate(hv)]
        hop = mk(vals, machine="hopper", commits=commits)
        r = A.analyze([amp, hop], CFG, devices=DEVS, commit_order=commits)
        (f,) = [f for f in r.findings if f.status is A.Status.DIVERGENT_CHANGE]
        assert f.key.machine == "hopper"
        assert (commits.index(f.commit_before), commits.index(f.commit_after)) == pair
        measured = {p.commit for p in hop.points if p.value is not None}
        assert {f.commit_before, f.commit_after} <= measured
        assert ("between the same commits" in f.reason) == (not drop), f.reason


def test_machines_on_interleaved_commits_give_one_divergent_change():
    """ampere ran the even commits, hopper the odd ones: each machine's change
    point was a boundary of its own, and the one change was reported twice
    (58 -> 60 and 59 -> 61, the first naming commits hopper never ran)."""
    commits = [f"{i:040x}" for i in range(120)]
    amp = mk(noisy(np.r_[np.ones(30), 0.85 * np.ones(30)], 0.02, 10), machine="ampere", commits=commits[0::2])
    hop = mk(noisy(np.r_[np.ones(30), 1.15 * np.ones(30)], 0.02, 11), machine="hopper", commits=commits[1::2])
    r = A.analyze([amp, hop], CFG, devices=DEVS, commit_order=commits)
    (f,) = [f for f in r.findings if f.status is A.Status.DIVERGENT_CHANGE]
    assert (f.key.machine, commits.index(f.commit_before), commits.index(f.commit_after)) == ("hopper", 59, 61)
    assert "across the same change" in f.reason
