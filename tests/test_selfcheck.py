"""GPU self-check: its decision logic on synthetic measurements, and its
behaviour on a machine without CUDA (a clear report and exit code 2)."""

from __future__ import annotations

import json
import random

import pytest

from harness import cli
from harness.core.metrics import Peaks
from harness.measure import selfcheck
from kernels._base import Cost

GiB = 1 << 30


# --------------------------------------------------------------------- copy bandwidth


def test_copy_bandwidth_passes_at_h200_measured_rate():
    # 2 GiB moved (1 GiB read + 1 GiB written) in 0.5 ms = 4294.97 GB/s = 89.5% of 4800.
    c = selfcheck.check_copy_bandwidth("copy_large", 2 * GiB, 0.5e-3, 4800.0)
    assert c.status == selfcheck.PASS
    assert c.value == pytest.approx(2 * GiB / 0.5e-3 / 1e9 / 4800)
    assert "89.5%" in c.reason


def test_copy_bandwidth_fails_below_eighty_percent():
    c = selfcheck.check_copy_bandwidth("copy_large", 2 * GiB, 2 * GiB / 3000e9, 4800.0)
    assert c.status == selfcheck.FAIL and c.value == pytest.approx(0.625)


def test_copy_bandwidth_boundary_and_undecided_cases():
    exactly = 2 * GiB / (0.8 * 4800e9)
    assert selfcheck.check_copy_bandwidth("c", 2 * GiB, exactly, 4800.0).status == selfcheck.PASS
    assert selfcheck.check_copy_bandwidth("c", 2 * GiB, 1e-3, None).status == selfcheck.UNDECIDED
    assert selfcheck.check_copy_bandwidth("c", 2 * GiB, 0.0, 4800.0).status == selfcheck.UNDECIDED
    assert selfcheck.check_copy_bandwidth("c", 2 * GiB, float("nan"), 4800.0).status == selfcheck.UNDECIDED
    with pytest.raises(ValueError):
        selfcheck.check_copy_bandwidth("c", 0, 1e-3, 4800.0)
    with pytest.raises(ValueError):
        selfcheck.check_copy_bandwidth("c", 1, 1e-3, 4800.0, min_fraction=1.5)


# --------------------------------------------------------------------- timer agreement


def test_timers_agree_within_two_percent():
    c = selfcheck.check_timer_agreement("k", [1.00e-4, 1.01e-4, 0.99e-4], [1.01e-4, 1.015e-4, 1.0e-4])
    assert c.status == selfcheck.PASS
    assert c.value == pytest.approx(1.00e-4 / 1.01e-4 - 1)


def test_timers_disagree_beyond_two_percent():
    c = selfcheck.check_timer_agreement("k", [1.03e-4] * 3, [1.0e-4] * 3)
    assert c.status == selfcheck.FAIL and c.value == pytest.approx(0.03)
    c = selfcheck.check_timer_agreement("k", [0.97e-4] * 3, [1.0e-4] * 3)
    assert c.status == selfcheck.FAIL and c.value == pytest.approx(-0.03)


def test_timer_tolerance_widens_to_event_resolution_for_short_kernels():
    # 10 us kernel: 0.5 us resolution = 5%; a 3% difference is within it.
    c = selfcheck.check_timer_agreement("k", [10.3e-6] * 3, [10.0e-6] * 3)
    assert c.status == selfcheck.PASS and c.threshold == pytest.approx(0.05)
    assert selfcheck.check_timer_agreement("k", [10.6e-6] * 3, [10.0e-6] * 3).status == selfcheck.FAIL


def test_timer_agreement_undecided_without_usable_times():
    assert selfcheck.check_timer_agreement("k", [], [1e-4]).status == selfcheck.UNDECIDED
    assert selfcheck.check_timer_agreement("k", [float("nan"), 0.0], [1e-4]).status == selfcheck.UNDECIDED
    with pytest.raises(ValueError):
        selfcheck.check_timer_agreement("k", [1.0], [1.0], tol_rel=0)


# --------------------------------------------------------------------- cold vs hot


def noisy(center, n, rel, seed):
    rng = random.Random(seed)
    return [center * (1 + rel * rng.gauss(0, 1)) for _ in range(n)]


def test_cold_faster_than_hot_beyond_noise_fails():
    c = selfcheck.check_cold_not_faster("k", noisy(0.90e-4, 60, 0.005, 1), noisy(1.0e-4, 60, 0.005, 2))
    assert c.status == selfcheck.FAIL and c.value < -0.05
    assert "flush leaks" in c.reason


def test_cold_slower_than_hot_passes():
    c = selfcheck.check_cold_not_faster("k", noisy(1.3e-4, 60, 0.005, 3), noisy(1.0e-4, 60, 0.005, 4))
    assert c.status == selfcheck.PASS and c.value > 0.25


def test_cold_within_noise_or_floor_of_hot_passes():
    # Overlapping CIs: noise, not a bug.
    c = selfcheck.check_cold_not_faster("k", noisy(0.995e-4, 40, 0.02, 5), noisy(1.0e-4, 40, 0.02, 6))
    assert c.status == selfcheck.PASS
    # Separated CIs but a 0.5% gap: below the 1% floor (clock drift between runs).
    c = selfcheck.check_cold_not_faster("k", noisy(0.995e-4, 200, 0.0002, 7), noisy(1.0e-4, 200, 0.0002, 8))
    assert c.details["cold_ci_s"][1] < c.details["hot_ci_s"][0]
    assert c.status == selfcheck.PASS


def test_cold_vs_hot_undecided_with_too_few_samples():
    assert selfcheck.check_cold_not_faster("k", [1.0] * 5, [1.0] * 50).status == selfcheck.UNDECIDED


# --------------------------------------------------------------------- guard and verdict


def test_guard_check():
    cost = Cost(flops=0, bytes_read=GiB, bytes_written=GiB)
    h200 = Peaks(989.0, 4800.0, "datasheet")
    assert selfcheck.check_guard("c", cost, 0.5e-3, h200).status == selfcheck.PASS
    bug = selfcheck.check_guard("c", cost, 1e-6, h200)  # 2 PB/s
    assert bug.status == selfcheck.FAIL and "roofline floor" in bug.reason
    assert selfcheck.check_guard("c", cost, 0.0, h200).status == selfcheck.FAIL
    assert selfcheck.check_guard("c", cost, 1e-3, None).status == selfcheck.UNDECIDED


def test_overall_verdict_and_exit_codes():
    P = selfcheck.Check("a", "k", selfcheck.PASS, "")
    F = selfcheck.Check("b", "k", selfcheck.FAIL, "")
    U = selfcheck.Check("c", "k", selfcheck.UNDECIDED, "")
    assert selfcheck.overall([P, U]) == ("pass", 0)
    assert selfcheck.overall([P, F, U]) == ("fail", 1)
    assert selfcheck.overall([U]) == ("undecided", 2)
    assert selfcheck.overall([]) == ("undecided", 2)


# --------------------------------------------------------------------- without CUDA


def test_run_without_cuda_reports_it_and_does_not_crash(monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    report = selfcheck.run()
    assert report["status"] == "no_cuda" and report["exit_code"] == 2
    assert "no CUDA device" in report["reason"] and report["checks"] == []
    assert selfcheck.format_report(report)[0].startswith("selfcheck: no CUDA device")


def test_run_when_cuda_query_raises(monkeypatch):
    import torch

    def boom():
        raise RuntimeError("driver exploded")

    monkeypatch.setattr(torch.cuda, "is_available", boom)
    report = selfcheck.run()
    assert report["status"] == "no_cuda" and "driver exploded" in report["reason"]


def test_cli_selfcheck_without_cuda_exits_2_and_writes_the_report(tmp_path, monkeypatch, capsys):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    out = tmp_path / "sub" / "selfcheck.json"
    assert cli.main(["selfcheck", "--out", str(out)]) == 2
    data = json.loads(out.read_text())
    assert data["status"] == "no_cuda" and data["thresholds"]["timer_agreement_rel"] == 0.02
    assert "no CUDA device" in capsys.readouterr().err


def test_report_json_has_no_nan(tmp_path):
    path = selfcheck.write_report({"status": "pass", "x": float("nan"), "y": [float("inf"), 1.0]}, tmp_path / "r.json")
    assert json.loads(path.read_text()) == {"status": "pass", "x": None, "y": [None, 1.0]}


# --------------------------------------------------------------------- orchestration on a simulated GPU


def _fake_result(method, center, n=40, seed=0):
    from harness.measure import timing

    xs = noisy(center, n, 0.002, seed)
    return timing.TimingResult(
        method=method,
        samples_s=xs,
        number=1,
        converged=True,
        stop_reason="synthetic",
        config=timing.TimingConfig(method=method).as_dict(),
        **timing.summarize(xs),
    )


@pytest.fixture
def simulated_gpu(monkeypatch):
    """run() with CUDA, NVML, the kernels, our timer and do_bench replaced by
    synthetic stand-ins: exercises the orchestration and report, not a GPU."""
    import torch
    import triton.testing

    from harness.core import devices
    from harness.core.devices import DeviceIdentity
    from harness.measure import clocks, timing

    ident = DeviceIdentity(
        kind="cuda", name="NVIDIA H200", host="h", versions={}, compute_capability="9.0", l2_bytes=60 << 20
    )
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(devices, "identify", lambda device=None: ident)
    monkeypatch.setattr(clocks, "open_monitor", lambda *a, **k: clocks.NullMonitor("simulated"))
    centers = {"copy_large": 0.5e-3, "copy_l2_resident": 10e-6, "matmul_bf16_4096": 0.2e-3}
    kernels = [
        selfcheck.Kernel(
            name,
            (lambda name=name: name),
            Cost(
                2 * 4096**3 if "matmul" in name else 0,
                GiB if name == "copy_large" else 1 << 20,
                GiB if name == "copy_large" else 1 << 20,
            ),
            "synthetic",
            l2_matters=name.startswith("copy"),
            fits_l2=name == "copy_l2_resident",
        )
        for name in centers
    ]
    monkeypatch.setattr(selfcheck, "_kernels", lambda torch_, l2, quick: kernels)
    state = {"do_bench_scale": 1.0, "hot_scale": {"copy_l2_resident": 0.5}}

    def fake_time_cuda(fn, config, l2_bytes=None, rotated=None, monitor=None):
        name = fn()
        scale = state["hot_scale"].get(name, 1.0) if config.method == "hot" else 1.0
        return _fake_result(config.method, centers[name] * scale, seed=sum(map(ord, name + config.method)))

    monkeypatch.setattr(timing, "time_cuda", fake_time_cuda)
    monkeypatch.setattr(
        triton.testing, "do_bench", lambda fn, warmup, rep, return_mode: centers[fn()] * state["do_bench_scale"] * 1e3
    )
    return state


def test_simulated_gpu_run_passes_and_reports_every_check(simulated_gpu, tmp_path):
    report = selfcheck.run()
    assert report["status"] == "pass" and report["exit_code"] == 0, report["reason"]
    names = {(c["name"], c["kernel"]) for c in report["checks"]}
    for k in ("copy_large", "copy_l2_resident", "matmul_bf16_4096"):
        assert ("timer_agreement", k) in names and ("integrity_guard", k) in names
        # Check 3 only where the L2 matters.
        assert (("cold_not_faster_than_hot", k) in names) == k.startswith("copy")
    assert report["measurements"]["copy_l2_resident"]["check3_hot_by_round_s"][0] == pytest.approx(5e-6, rel=0.01)
    assert ("copy_bandwidth", "copy_large") in names
    assert report["datasheet"]["peak_gbps"] == 4800
    assert report["measurements"]["copy_large"]["cold"]["p50_s"] == pytest.approx(0.5e-3, rel=0.01)
    selfcheck.write_report(report, tmp_path / "r.json")
    assert json.loads((tmp_path / "r.json").read_text())["status"] == "pass"


def test_simulated_gpu_run_fails_when_do_bench_disagrees(simulated_gpu):
    simulated_gpu["do_bench_scale"] = 1.1
    report = selfcheck.run()
    assert report["status"] == "fail" and report["exit_code"] == 1
    assert "timer_agreement[copy_large]" in report["reason"]


def test_simulated_gpu_run_fails_when_cold_beats_hot(simulated_gpu):
    simulated_gpu["hot_scale"] = {"copy_large": 1.2}
    report = selfcheck.run()
    assert report["exit_code"] == 1 and "cold_not_faster_than_hot[copy_large]" in report["reason"]


def test_a_cold_large_copy_slightly_faster_than_hot_is_the_write_back_not_a_leak(simulated_gpu):
    # Issue 26: with the read flush a cold copy starts with a clean L2, a hot one
    # first writes back the dirty lines of its previous call: cold 2% faster.
    simulated_gpu["hot_scale"] = {"copy_l2_resident": 0.5, "copy_large": 1.02}
    report = selfcheck.run()
    assert report["exit_code"] == 0, report["reason"]
    c3 = next(c for c in report["checks"] if c["name"] == "cold_not_faster_than_hot" and c["kernel"] == "copy_large")
    assert c3["status"] == "pass" and c3["threshold"] == pytest.approx(0.01 + (60 << 20) / (2 * GiB))
    # Control: beyond the allowance it is still a leak.
    simulated_gpu["hot_scale"] = {"copy_l2_resident": 0.5, "copy_large": 1.06}
    assert "cold_not_faster_than_hot[copy_large]" in selfcheck.run()["reason"]


def test_a_flush_that_does_not_evict_fails_check_4(simulated_gpu):
    report = selfcheck.run()
    c4 = [c for c in report["checks"] if c["name"] == "flush_evicts"]
    assert [c["kernel"] for c in c4] == ["copy_l2_resident"] and c4[0]["status"] == "pass"
    simulated_gpu["hot_scale"] = {"copy_l2_resident": 1.0}  # hot no faster: L2 still warm when cold
    report = selfcheck.run()
    assert report["exit_code"] == 1 and "flush_evicts[copy_l2_resident]" in report["reason"]


def test_writeback_allowance_and_flush_evicts_by_hand():
    big, small = Cost(0, GiB, GiB), Cost(0, 1 << 20, 1 << 20)
    assert selfcheck.writeback_allowance(big, 60 << 20) == pytest.approx((60 << 20) / (2 * GiB))
    assert selfcheck.writeback_allowance(small, 60 << 20) == 0.0  # fits in L2
    assert selfcheck.writeback_allowance(big, None) == 0.0
    assert selfcheck.check_flush_evicts("k", [1.5, 1.6], [1.0, 1.0]).status == selfcheck.PASS
    assert selfcheck.check_flush_evicts("k", [1.01, 1.0], [1.0, 1.0]).status == selfcheck.FAIL
    assert selfcheck.check_flush_evicts("k", [1.05, 1.05], [1.0, 1.0]).status == selfcheck.UNDECIDED
    assert selfcheck.check_flush_evicts("k", [1.5], [1.0]).status == selfcheck.UNDECIDED


def test_hot_matmul_slower_at_the_power_cap_is_not_a_timing_bug(simulated_gpu):
    # Issue 18: hot runs back to back at the power cap; on a correct timer the
    # bf16 matmul's hot median is above cold. Check 3 does not apply there.
    simulated_gpu["hot_scale"] = {"copy_l2_resident": 0.5, "matmul_bf16_4096": 1.2}
    report = selfcheck.run()
    assert report["exit_code"] == 0, report["reason"]


def test_check3_on_interleaved_rounds():
    # Cold faster in every round by 5%: the flush leaks.
    c = selfcheck.check_cold_not_faster_rounds("k", [0.95, 0.95, 0.96], [1.0, 1.0, 1.0])
    assert c.status == selfcheck.FAIL and c.value == pytest.approx(-0.05)
    # A clock change between runs flips sign across interleaved rounds: not a bug.
    assert selfcheck.check_cold_not_faster_rounds("k", [0.9, 1.08, 0.92], [1.0, 1.0, 1.0]).status == selfcheck.PASS
    # Faster in every round but within the 1% floor.
    assert selfcheck.check_cold_not_faster_rounds("k", [0.995] * 3, [1.0] * 3).status == selfcheck.PASS
    assert selfcheck.check_cold_not_faster_rounds("k", [0.9], [1.0]).status == selfcheck.UNDECIDED
    assert selfcheck.check_cold_not_faster_rounds("k", [0.9, None], [1.0, 1.0]).status == selfcheck.UNDECIDED


def test_round_time_prefers_the_clock_normalised_median():
    r = _fake_result("hot", 1e-3)
    assert selfcheck.round_time(r) == (r.p50_s, False)
    r.p50_clock_normalised_s = 0.8e-3
    assert selfcheck.round_time(r) == (0.8e-3, True)
