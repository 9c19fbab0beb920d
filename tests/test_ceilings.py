"""Ceilings that hold: calibration repeated until stable, cache-resident shapes (issue 13)."""

from __future__ import annotations

import pytest

from harness.core import metrics
from harness.core.devices import DeviceIdentity
from harness.core.metrics import Peaks
from harness.measure import calibrate, timing
from kernels._base import Cost


def run(p50, converged=True, contended=False):
    return timing.TimingResult(
        method="cpu",
        samples_s=[p50] * 10,
        number=1,
        converged=converged,
        stop_reason="x",
        ci_rel=0.001,
        stdev_rel=0.0,
        p20_s=p50,
        p50_s=p50,
        p80_s=p50,
        config={},
        extra={"cpu": {"contended": contended}},
    )


def scripted(*results):
    it = iter(results)
    calls = []

    def once():
        calls.append(1)
        return next(it)

    return once, calls


def test_repeats_until_the_best_two_clean_runs_agree_and_keeps_the_best():
    once, calls = scripted(run(2.0e-3), run(1.3e-3), run(1.0e-3), run(1.01e-3), run(9.0))
    best, info = calibrate.repeat_until_stable(once, max_repeats=5)
    assert len(calls) == 4 and info["stable"] is True
    assert best.p50_s == 1.0e-3 and info["chosen"] == 2
    assert "agree within 1.00%" in info["stability"]
    assert [r["p50_s"] for r in info["runs"]] == [2.0e-3, 1.3e-3, 1.0e-3, 1.01e-3]


def test_contended_or_unconverged_runs_never_make_the_ceiling():
    # The fastest run is contended, the next one did not converge: neither is clean.
    once, _ = scripted(run(0.5e-3, contended=True), run(0.6e-3, converged=False), run(1.0e-3), run(1.005e-3))
    best, info = calibrate.repeat_until_stable(once, max_repeats=5)
    assert best.p50_s == 1.0e-3 and info["stable"] and info["contended_runs"] == 1
    assert info["runs"][0]["contended"] is True


def test_unstable_calibration_says_so_and_falls_back_to_the_fastest_valid_run():
    once, _ = scripted(run(2.0e-3), run(1.0e-3), run(1.5e-3))
    best, info = calibrate.repeat_until_stable(once, max_repeats=3)
    assert best.p50_s == 1.0e-3 and info["stable"] is False
    assert "3 runs taken" in info["stability"] and "differ by 50.00%" in info["stability"]
    once, _ = scripted(run(2.0e-3, contended=True), run(1.0e-3, contended=True))
    best, info = calibrate.repeat_until_stable(once, max_repeats=2)
    assert best.p50_s == 1.0e-3 and not info["stable"] and "0 clean" in info["stability"]


def test_repeat_budget_and_arguments():
    t = [0.0]

    def once():
        t[0] += 10.0
        return run(1e-3 * t[0])

    _, info = calibrate.repeat_until_stable(once, max_repeats=10, budget_s=15.0, clock=lambda: t[0])
    assert len(info["runs"]) == 2 and "time budget" in info["stability"]  # at least two, then the budget
    with pytest.raises(ValueError):
        calibrate.repeat_until_stable(once, max_repeats=1)
    with pytest.raises(ValueError):
        calibrate.repeat_until_stable(once, stable_rel=0)


def test_a_run_that_would_end_past_the_deadline_is_not_started():
    t = [0.0]

    def slow_once():
        t[0] += 9.0  # one call of a CPU fp16 matmul: seconds, whatever max_time_s says
        return run(1e-3 * (1 + t[0]))

    _, info = calibrate.repeat_until_stable(slow_once, max_repeats=5, deadline=15.0, clock=lambda: t[0])
    assert len(info["runs"]) == 1 and "time cap" in info["stability"]  # min_runs yields to the cap
    t[0] = 0.0
    _, info = calibrate.repeat_until_stable(slow_once, max_repeats=3, deadline=100.0, clock=lambda: t[0])
    assert len(info["runs"]) == 3  # control: far from the deadline, the usual rule


def cpu_ident():
    return DeviceIdentity(
        kind="cpu", name="Test CPU", host="h", versions={"torch": "x", "harness": "0.3.0"}, l2_bytes=1 << 20
    )


def test_calibration_records_its_repeats_contention_and_threads(tmp_path):
    plan = calibrate.CalibrationPlan(
        copy_bytes=1 << 20,
        matmul_n=32,
        dtypes=("fp32",),
        config=timing.TimingConfig(method="cpu", max_time_s=0.03, min_time_s=0.0, warmup_s=0.001, threads=1),
    )
    cal = calibrate.measure(cpu_ident(), plan=plan)
    for fig in (cal["copy"], cal["read"], cal["add"], cal["matmul"]["fp32"]):
        assert 2 <= len(fig["repeats"]) <= calibrate.MAX_REPEATS
        assert fig["p50_s"] == fig["repeats"][fig["chosen_run"]]["p50_s"]
        assert isinstance(fig["stable"], bool) and fig["stability"]
    assert cal["read"]["bytes"] == cal["copy"]["bytes"] // 2  # the same buffer, read once, nothing written
    assert cal["add"]["bytes"] == 3 * cal["read"]["bytes"]  # two buffers read, one written
    c = cal["contention"]
    assert c["runs"] == (
        len(cal["copy"]["repeats"])
        + len(cal["read"]["repeats"])
        + len(cal["add"]["repeats"])
        + len(cal["matmul"]["fp32"]["repeats"])
    )
    assert "loadavg_1min_before" in c and c["contended_runs"] >= 0
    assert cal["cpu_threads"] == 1
    calibrate.save(cal, tmp_path)
    # A single-threaded timing takes only a single-threaded calibration.
    assert calibrate.load_latest(tmp_path, "h-cpu", cpu_threads=1)["date"] == cal["date"]
    assert calibrate.load_latest(tmp_path, "h-cpu", cpu_threads=2) is None
    assert calibrate.load_latest(tmp_path, "h-cpu", cpu_threads=None) is None  # torch's default threads
    assert calibrate.load_latest(tmp_path, "h-cpu") is not None


# --------------------------------------------------------------------- cache-resident working sets

ADD_SMALL = Cost(flops=1 << 18, bytes_read=2 << 20, bytes_written=1 << 20)  # 3 MiB
CPU_PEAKS = Peaks(tflops=0.05, gbps=4.0, source="measured test")


def test_cache_resident_figure_is_marked_and_not_called_dram_bandwidth_utilisation():
    assert metrics.working_set_in_cache(ADD_SMALL, 32 << 20)
    assert not metrics.working_set_in_cache(ADD_SMALL, 1 << 20) and not metrics.working_set_in_cache(ADD_SMALL, None)
    t = 3 * 2**20 / 30e9  # 30 GB/s: 7.5x the DRAM copy ceiling, plausible from cache
    m = metrics.compute_metrics(ADD_SMALL, t, None, CPU_PEAKS, cache_resident=True, cache_bytes=32 << 20)
    assert m.status == "ok" and m.cache_resident is True
    assert m.gbps == pytest.approx(3 * 2**20 / t / 1e9)
    assert m.bw_util is None and m.bw_util_measured is None  # would have been 750%
    assert m.sol is None and m.sol_measured is None  # memory-bound: no roof for on-chip bytes
    assert "cache-resident" in m.cache_note and "32 MiB" in m.cache_note
    plain = metrics.compute_metrics(ADD_SMALL, t, None, CPU_PEAKS)
    assert plain.bw_util == pytest.approx(7.5, rel=0.01) and plain.cache_resident is False  # negative control


def test_cache_resident_compute_bound_op_keeps_the_compute_roof():
    mm = Cost(flops=2 * 256**3, bytes_read=2 * 256 * 256 * 4, bytes_written=256 * 256 * 4)
    t = 2 * 256**3 / 0.025e12  # half the compute peak
    m = metrics.compute_metrics(mm, t, None, CPU_PEAKS, cache_resident=True, cache_bytes=32 << 20)
    assert m.bound == "compute" and m.bw_util is None
    assert m.sol == pytest.approx(0.5) and m.mfu == pytest.approx(0.5)


def test_memory_ceiling_is_the_higher_of_copy_and_read():
    """A copy undercounts its traffic on write-allocate caches, so a read-mostly
    kernel may beat it: the ceiling is max(copy, read); an old calibration without
    a read figure keeps the copy's; a read figure that is not ok is not used."""
    from harness.core import guards

    cal = {
        "date": "d",
        "machine": "m",
        "copy": {"gbps": 38.0, "status": "ok"},
        "read": {"gbps": 55.0, "status": "ok"},
        "matmul": {},
    }
    assert guards.memory_ceiling_gbps(cal) == 55.0
    assert guards.calibration_ceilings(cal, "fp32", False).gbps == 55.0
    assert guards.memory_ceiling_gbps(dict(cal, add={"gbps": 60.0, "status": "ok"})) == 60.0
    old = {k: v for k, v in cal.items() if k != "read"}
    assert guards.memory_ceiling_gbps(old) == 38.0
    bad = dict(cal, read={"gbps": None, "status": "invalid", "reason": "x"})
    assert guards.memory_ceiling_gbps(bad) == 38.0
    assert guards.memory_ceiling_gbps({"copy": {"status": "invalid"}}) is None


# --------------------------------------------------------------------- time cap and contention (issue 25/26)


def _tiny_plan(dtypes=("fp32",)):
    return calibrate.CalibrationPlan(
        copy_bytes=1 << 16,
        matmul_n=16,
        dtypes=dtypes,
        config=timing.TimingConfig(method="cpu", max_time_s=0.02, min_time_s=0.0, warmup_s=0.001, threads=1),
    )


def test_a_calibration_whose_runs_are_all_contended_withholds_the_figures(monkeypatch):
    monkeypatch.setattr(calibrate, "_time", lambda fn, ident, cfg, monitor=None: run(1e-3, contended=True))
    cal = calibrate.measure(cpu_ident(), plan=_tiny_plan())
    for fig in (cal["copy"], cal["read"], cal["add"], cal["matmul"]["fp32"]):
        assert fig["status"] == metrics.STATUS_CONTENDED and "could not calibrate" in fig["reason"]
    assert cal["copy"]["gbps"] is None and cal["matmul"]["fp32"]["tflops"] is None
    assert calibrate.measured_peaks(cal, "fp32", uses_tensor_cores=False) is None  # nothing usable
    # Control: one clean run among contended ones is a ceiling.
    seq = iter([run(1e-3, contended=True), run(1.2e-3)] * 20)
    monkeypatch.setattr(calibrate, "_time", lambda fn, ident, cfg, monitor=None: next(seq))
    cal = calibrate.measure(cpu_ident(), plan=_tiny_plan())
    assert cal["copy"]["status"] == metrics.STATUS_OK and cal["copy"]["p50_s"] == 1.2e-3


def test_the_time_cap_bounds_the_calibration_and_names_what_it_left_out(monkeypatch):
    t = [0.0]

    def slow_run(fn, ident, cfg, monitor=None):
        t[0] += 1.0  # each run "takes" one second of a fake clock
        return run(1e-3)

    monkeypatch.setattr(calibrate, "_time", slow_run)
    monkeypatch.setattr(calibrate.time, "perf_counter", lambda: t[0])
    cal = calibrate.measure(cpu_ident(), plan=_tiny_plan(("fp32", "bf16")), time_cap_s=3.5)
    assert t[0] <= 3.5 + 1.0  # at most one run started just before the cap
    statuses = {k: cal[k]["status"] for k in ("copy", "read", "add")}
    statuses.update({f"mm_{d}": m["status"] for d, m in cal["matmul"].items()})
    assert statuses["copy"] == metrics.STATUS_OK  # the headline figure first
    assert calibrate.STATUS_NO_TIME in statuses.values()
    for k in ("read", "add"):
        if cal[k]["status"] == calibrate.STATUS_NO_TIME:
            assert cal[k]["gbps"] is None and "time cap" in cal[k]["reason"]
    assert list(cal["matmul"]) == ["fp32", "bf16"]  # on the CPU, the suite's own dtype first
    assert cal["time_cap_s"] == 3.5
    # Without a cap every figure is measured.
    t[0] = 0.0
    cal = calibrate.measure(cpu_ident(), plan=_tiny_plan(("fp32", "bf16")), time_cap_s=None)
    assert all(cal[k]["status"] == metrics.STATUS_OK for k in ("copy", "read", "add"))
    with pytest.raises(ValueError):
        calibrate.measure(cpu_ident(), plan=_tiny_plan(), time_cap_s=-1)


def test_a_figure_whose_first_runs_are_contended_is_not_repeated():
    # Issue 25: under contention the calibration repeated until stable and never was.
    once, calls = scripted(*[run(1e-3, contended=True)] * 5)
    _, info = calibrate.repeat_until_stable(once, max_repeats=5)
    assert len(calls) == calibrate.CONTENDED_RUNS_STOP and "contended" in info["stability"]
    assert calibrate.contention_status(info)["reason"].startswith("could not calibrate: contended")
    # Control: one clean run among them and the usual rule goes on.
    once, calls = scripted(run(1e-3, contended=True), run(1.3e-3), run(1.0e-3), run(1.3e-3), run(1.3e-3))
    _, info = calibrate.repeat_until_stable(once, max_repeats=5)
    assert len(calls) == 5
    once, calls = scripted(*[run(1e-3, contended=True)] * 5)
    _, info = calibrate.repeat_until_stable(once, max_repeats=5, contended_stop=None)
    assert len(calls) == 5  # off: the old behaviour


def test_a_contended_machine_stops_the_calibration_and_says_so(monkeypatch):
    calls = []

    def contended(fn, ident, cfg, monitor=None):
        calls.append(1)
        return run(1e-3, contended=True)

    monkeypatch.setattr(calibrate, "_time", contended)
    said = []
    cal = calibrate.measure(cpu_ident(), plan=_tiny_plan(("fp32", "bf16", "fp16")), progress=said.append)
    stop = calibrate.CONTENDED_FIGURES_STOP
    # per group (bandwidths, matmuls): two figures of two runs each, then the rest not attempted
    assert len(calls) == 2 * stop * calibrate.CONTENDED_RUNS_STOP
    figs = [cal[k] for k in calibrate.BANDWIDTH_FIGURES] + list(cal["matmul"].values())
    assert all(f["status"] == metrics.STATUS_CONTENDED for f in figs)
    assert all(f["reason"].startswith("could not calibrate: contended") for f in figs)
    assert "not attempted after copy bandwidth and read bandwidth" in cal["add"]["reason"]
    assert "repeats" not in cal["add"] and cal["add"]["gbps"] is None
    assert "repeats" in cal["matmul"]["fp32"] and cal["matmul"]["fp32"]["tflops"] is None  # a new group: tried
    assert "not attempted after matmul fp32 and matmul bf16" in cal["matmul"]["fp16"]["reason"]
    assert any("could not calibrate: contended" in m for m in said)
    # Control: a clean figure between contended ones resets the streak.
    seq = iter([run(1e-3, contended=True)] * 2 + [run(1e-3), run(1e-3)] + [run(1e-3, contended=True)] * 20)
    monkeypatch.setattr(calibrate, "_time", lambda fn, ident, cfg, monitor=None: next(seq))
    cal = calibrate.measure(cpu_ident(), plan=_tiny_plan(("fp32", "bf16")))
    assert cal["read"]["status"] == metrics.STATUS_OK
    assert "repeats" in cal["add"] and "repeats" in cal["matmul"]["fp32"]  # measured, then the streak
    # add (contended) does not count against the matmuls: a new group, so bf16 is tried too
    assert "repeats" in cal["matmul"]["bf16"]


def test_the_time_cap_is_a_wall_clock_bound_even_for_long_runs(monkeypatch):
    # A run lasts as long as its sampling time (fake clock): near the cap the
    # sampling time is cut, so the calibration ends within the cap.
    t = [0.0]
    seen = []

    def honest_run(fn, ident, cfg, monitor=None):
        seen.append(cfg.max_time_s)
        t[0] += cfg.warmup_s + cfg.max_time_s
        return run(1e-3 * (1 + len(seen) % 3))  # never stable: every run is asked for

    monkeypatch.setattr(calibrate, "_time", honest_run)
    monkeypatch.setattr(calibrate.time, "perf_counter", lambda: t[0])
    plan = calibrate.CalibrationPlan(
        copy_bytes=1 << 16,
        matmul_n=16,
        dtypes=("fp32", "bf16"),
        config=timing.TimingConfig(method="cpu", max_time_s=4.0, min_time_s=0.0, warmup_s=0.001, threads=1),
    )
    cal = calibrate.measure(cpu_ident(), plan=plan, time_cap_s=10.0)
    assert t[0] <= 10.0
    assert max(seen) == 4.0 and min(seen) < 4.0  # cut near the cap
    assert any(f.get("status") == calibrate.STATUS_NO_TIME for f in [cal["add"], *cal["matmul"].values()])
    assert cal["contention"]["seconds"] <= 10.0


def test_cuda_matmul_ceilings_are_timed_cold_like_the_suite():
    ident = DeviceIdentity(kind="cuda", name="NVIDIA H200", host="h", versions={}, compute_capability="9.0")
    assert calibrate.plan_for(ident).config.method == "cold"
    import inspect

    # The matmul figures use the plan's configuration, no other method.
    assert 'method="hot"' not in inspect.getsource(calibrate._measure_matmuls)
