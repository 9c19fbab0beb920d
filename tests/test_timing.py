"""Timing: stopping rule on synthetic timers, CPU timer on a synthetic clock,
flush and rotation sizing from device properties, series identity per timing
method (through harness.results), provenance and guards in bench records."""

from __future__ import annotations

import json
import math
import os
import random
from types import SimpleNamespace

import numpy as np
import pytest

from harness.core import devices, metrics, records
from harness.core.metrics import Peaks
from harness.measure import bench, clocks, timing, timing_cuda
from harness.store import results


class FakeClock:
    """A wall clock in seconds that only moves when a synthetic sample is taken."""

    def __init__(self):
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def sampler(clock: FakeClock, draw):
    """``take_batch(k)``: k samples from ``draw()``, advancing ``clock`` by their sum."""

    def take(k):
        xs = [draw() for _ in range(k)]
        clock.t += sum(xs)
        return xs

    return take


def cfg(**kw) -> timing.TimingConfig:
    base = dict(method="cpu", target_rel=0.005, min_samples=10, min_time_s=0.0, max_time_s=1.0, batch=10)
    base.update(kw)
    return timing.TimingConfig(**base)


# --------------------------------------------------------------------- stopping rule


def test_converges_on_quiet_samples_and_says_so():
    clock = FakeClock()
    rng = random.Random(1)
    s = timing.sample_until_stable(sampler(clock, lambda: 1e-3 * (1 + 0.001 * rng.gauss(0, 1))), cfg(), clock)
    assert s.converged is True
    assert "ci_rel" in s.stop_reason and "<= 0.005" in s.stop_reason
    assert len(s.samples) >= 10
    assert timing.summarize(s.samples)["ci_rel"] <= 0.005
    assert s.elapsed_s == pytest.approx(sum(s.samples))
    assert s.elapsed_s < 1.0  # stopped on convergence, long before max_time_s


def test_gives_up_at_max_time_and_records_it():
    clock = FakeClock()
    rng = random.Random(2)
    # Lognormal noise with sigma 0.5: the median CI stays near 10% at these counts.
    c = cfg(max_time_s=0.5)
    s = timing.sample_until_stable(sampler(clock, lambda: 1e-3 * math.exp(0.5 * rng.gauss(0, 1))), c, clock)
    assert s.converged is False
    assert "max_time_s=0.5" in s.stop_reason
    assert s.elapsed_s >= 0.5
    # Geometric batches overshoot by at most ~10% of the samples taken (plus noise in their length).
    assert s.elapsed_s < 0.5 * 1.3
    assert timing.summarize(s.samples)["ci_rel"] > 0.005


def test_minimum_sample_count_is_honoured_even_past_max_time():
    clock = FakeClock()
    # Each sample takes 0.3 s, the budget is 0.5 s: the first batch of 2 already
    # exceeds it; the rule still tops up to min_samples.
    c = cfg(min_samples=7, batch=2, max_time_s=0.5)
    s = timing.sample_until_stable(sampler(clock, lambda: 0.3), c, clock)
    assert len(s.samples) == 7
    assert s.converged is False
    assert "topped up to 7 of min_samples=7" in s.stop_reason


def test_does_not_stop_before_min_samples_even_when_already_tight():
    clock = FakeClock()
    c = cfg(min_samples=55, batch=5)
    s = timing.sample_until_stable(sampler(clock, lambda: 1e-4), c, clock)
    assert s.converged is True
    assert len(s.samples) >= 55


def test_does_not_stop_before_min_time():
    clock = FakeClock()
    c = cfg(min_time_s=0.2)
    s = timing.sample_until_stable(sampler(clock, lambda: 1e-3), c, clock)
    assert s.converged is True
    assert s.elapsed_s >= 0.2


def test_max_samples_bounds_the_count():
    clock = FakeClock()
    rng = random.Random(3)
    c = cfg(max_samples=50, max_time_s=100.0)
    s = timing.sample_until_stable(sampler(clock, lambda: 1e-6 * math.exp(rng.gauss(0, 1))), c, clock)
    assert len(s.samples) == 50
    assert s.converged is False and "max_samples=50" in s.stop_reason


def test_batches_grow_geometrically():
    c = cfg(batch=10, max_samples=1000)
    assert timing.next_batch_size(0, c) == 10
    assert timing.next_batch_size(95, c) == 10
    assert timing.next_batch_size(500, c) == 50
    assert timing.next_batch_size(990, c) == 10  # never past max_samples
    # Number of convergence checks stays logarithmic: 100k samples in < 120 batches.
    n, batches = 0, 0
    big = cfg(batch=10, max_samples=100_000)
    while n < 100_000:
        n += timing.next_batch_size(n, big)
        batches += 1
    assert batches < 120


def test_excluded_batches_do_not_count_towards_min_samples():
    clock = FakeClock()
    calls = {"n": 0}

    def take(k):
        calls["n"] += 1
        clock.t += 0.01
        return [] if calls["n"] % 2 else [1e-3] * k  # every other batch dropped (throttled)

    s = timing.sample_until_stable(take, cfg(min_samples=20, batch=5), clock)
    assert len(s.samples) >= 20 and s.converged


@pytest.mark.parametrize(
    "kw, msg",
    [
        (dict(method="warm"), "timing method"),
        (dict(target_rel=0.0), "target_rel"),
        (dict(min_samples=2), "min_samples"),
        (dict(max_samples=5), "max_samples"),
        (dict(min_time_s=2.0, max_time_s=1.0), "min_time_s"),
        (dict(batch=0), "batch"),
        (dict(warmup_s=-1), "warmup_s"),
    ],
)
def test_config_rejects_bad_values(kw, msg):
    with pytest.raises(ValueError, match=msg):
        cfg(**kw)


def test_quick_loosens_but_keeps_method_and_flags():
    q = timing.quick(timing.TimingConfig(method="hot", exclude_throttled=True))
    assert q.method == "hot" and q.exclude_throttled and q.target_rel == 0.02 and q.max_time_s == 0.2


# --------------------------------------------------------------------- statistics


def test_median_ci_order_statistics_by_hand():
    # n = 20 at 99%: P(Bin(20, 1/2) <= 3) = 0.0013 <= 0.005 < P(<= 4) = 0.0059,
    # so ranks 4 and 17 (1-based).
    assert timing.median_ci(list(range(1, 21))) == (4, 17)
    assert timing.median_ci([1.0] * 7) is None  # too few for 99%
    assert timing.median_ci([5.0, 1.0, 3.0, 2.0, 4.0, 8.0, 7.0, 6.0]) == (1.0, 8.0)


def test_quantiles_match_numpy():
    rng = np.random.default_rng(0)
    xs = list(rng.lognormal(size=37))
    for q in (0.2, 0.5, 0.8):
        assert timing.quantile(xs, q) == pytest.approx(float(np.quantile(xs, q)))
    with pytest.raises(ValueError):
        timing.quantile([], 0.5)
    with pytest.raises(ValueError):
        timing.quantile([1.0], 1.5)


# --------------------------------------------------------------------- CPU timer on a synthetic clock


class FakeNs:
    def __init__(self):
        self.ns = 0

    def __call__(self) -> int:
        return self.ns


def test_time_cpu_uses_the_injected_clock_for_samples_and_the_rule():
    clk = FakeNs()

    def fn():
        clk.ns += 250_000  # 250 us per call

    r = timing.time_cpu(
        fn,
        cfg(min_time_s=0.01, max_time_s=0.5, warmup_s=0.001),
        clock_ns=clk,
        monitor=clocks.NullMonitor("no monitor in this test"),
    )
    assert r.number == 1  # one call already lasts >= 100 us
    assert r.p50_s == pytest.approx(250e-6) and set(r.samples_s) == {250e-6}
    assert r.converged and r.ci_rel == 0.0
    assert r.elapsed_s >= 0.01
    assert r.config["method"] == "cpu" and r.config["target_rel"] == 0.005
    assert r.clocks["available"] is False and r.clocks["reason"] == "no monitor in this test"
    assert r.throttled is None and r.p50_clock_normalised_s is None


def test_time_cpu_batches_short_calls():
    clk = FakeNs()

    def fn():
        clk.ns += 7_000  # 7 us: 15 calls per sample reach 100 us

    r = timing.time_cpu(fn, cfg(warmup_s=0.001), clock_ns=clk)
    assert r.number == 15
    assert r.p50_s == pytest.approx(7e-6)


def test_time_cpu_gives_up_on_noise_and_records_elapsed():
    clk = FakeNs()
    rng = random.Random(4)

    def fn():
        clk.ns += int(1e6 * math.exp(0.6 * rng.gauss(0, 1)))

    r = timing.time_cpu(fn, cfg(max_time_s=0.3, warmup_s=0.001), clock_ns=clk)
    assert not r.converged and "max_time_s=0.3" in r.stop_reason
    assert 0.3 <= r.elapsed_s < 0.45


def test_time_cpu_rejects_a_cuda_method():
    with pytest.raises(ValueError, match="method='cpu'"):
        timing.time_cpu(lambda: None, timing.TimingConfig(method="cold"))


def test_time_cpu_real_clock_smoke():
    r = timing.time_cpu(lambda: sum(range(100)), cfg(max_time_s=0.05, warmup_s=0.001))
    assert r.p50_s > 0 and len(r.samples_s) >= 10


# --------------------------------------------------------------------- flush and rotation sizing


@pytest.mark.parametrize(
    "l2_bytes, expected",
    [
        (60 * 2**20, 120 * 2**20),  # H200 as PyTorch reports it
        (50 * 2**20, 100 * 2**20),  # H100
        (40 * 2**20, 80 * 2**20),  # A100
        (4 * 2**20, 8 * 2**20),  # T4
    ],
)
def test_flush_buffer_is_twice_l2_from_device_properties(l2_bytes, expected):
    props = SimpleNamespace(name="GPU", L2_cache_size=l2_bytes)
    assert timing.flush_buffer_bytes(timing.l2_bytes_of(props)) == expected


def test_flush_buffer_fallback_and_errors():
    assert timing.l2_bytes_of(SimpleNamespace()) is None
    assert timing.l2_bytes_of(SimpleNamespace(L2_cache_size=0)) is None
    assert timing.flush_buffer_bytes(None) == 256 << 20
    assert timing.flush_buffer_bytes(10, factor=4) == 40
    with pytest.raises(ValueError):
        timing.flush_buffer_bytes(-1)
    with pytest.raises(ValueError):
        timing.flush_buffer_bytes(1 << 20, factor=1)


def test_graph_rotation_count_covers_twice_l2():
    l2 = 60 << 20
    assert timing.rotation_count(12 << 20, l2) == 10  # ceil(120 / 12)
    assert timing.rotation_count(1 << 20, l2) == 32  # capped
    assert timing.rotation_count(1 << 30, l2) == 2  # at least 2
    assert timing.rotation_count(1 << 20, None) == 3
    with pytest.raises(ValueError):
        timing.rotation_count(-1, l2)


def test_time_cuda_rejects_cpu_method():
    with pytest.raises(ValueError, match="cold, hot or graph"):
        timing.time_cuda(lambda: None, timing.TimingConfig(method="cpu"))


# --------------------------------------------------------------------- series identity through harness.results


def write_asv_results(tmp_path, commit="a" * 40, timings=("cold", "hot", "graph"), value=1e-3):
    """A minimal asv v2 results directory: one benchmark with a ``timing`` parameter."""
    mdir = tmp_path / "gpu-h200"
    mdir.mkdir(parents=True, exist_ok=True)
    (mdir / "machine.json").write_text(json.dumps({"machine": "gpu-h200", "version": 1}))
    name = "suite.vector_add.track_time"
    (tmp_path / "benchmarks.json").write_text(
        json.dumps(
            {
                name: {
                    "name": name,
                    "param_names": ["provider", "shape", "dtype", "timing"],
                    "unit": "seconds",
                    "type": "track",
                    "version": "1",
                    "params": [["'torch'"], ["'1048576'"], ["'fp32'"], [repr(t) for t in timings]],
                },
                "version": 2,
            }
        )
    )
    n = len(timings)
    samples = [[value * (1 + 0.001 * i) for i in range(10)]] * n
    row = [
        [value] * n,
        [["'torch'"], ["'1048576'"], ["'fp32'"], [repr(t) for t in timings]],
        "1",
        1700000000000,
        1.0,
        [value * 0.99] * n,
        [value * 1.01] * n,
        [value] * n,
        [value] * n,
        [1] * n,
        [10] * n,
        samples,
    ]
    (mdir / f"{commit[:8]}-kernelwatch-py3.11.json").write_text(
        json.dumps(
            {
                "commit_hash": commit,
                "env_name": "kernelwatch-py3.11",
                "date": 1700000000000,
                "params": {"machine": "gpu-h200"},
                "python": "3.11",
                "requirements": {},
                "env_vars": {},
                "result_columns": [
                    "result",
                    "params",
                    "version",
                    "started_at",
                    "duration",
                    "stats_ci_99_a",
                    "stats_ci_99_b",
                    "stats_q_25",
                    "stats_q_75",
                    "stats_number",
                    "stats_repeat",
                    "samples",
                ],
                "results": {name: row},
                "durations": {},
                "version": 2,
            }
        )
    )
    return name


def test_series_identity_differs_between_cold_hot_and_graph(tmp_path):
    write_asv_results(tmp_path)
    rs = results.load(tmp_path, with_records=False)
    assert not rs.errors
    keys = list(rs.series)
    assert sorted(k.timing for k in keys) == ["cold", "graph", "hot"]
    assert len(set(keys)) == 3 and len({k.slug() for k in keys}) == 3
    # Same machine, benchmark and other parameters: only the timing method differs.
    assert len({(k.machine, k.benchmark) for k in keys}) == 1
    assert len({tuple(p for p in k.params if p[0] != "timing") for k in keys}) == 1
    # Records are keyed the same way.
    rk = {
        records.record_key(
            {"machine": "m", "commit": "c", "benchmark": "b", "params": {"timing": t}, "timing": {"method": t}}
        )
        for t in ("cold", "hot", "graph")
    }
    assert len(rk) == 3


def test_a_timing_bug_record_is_never_a_number_downstream(tmp_path):
    commit = "b" * 40
    name = write_asv_results(tmp_path, commit=commit)
    rec = {
        "schema": records.RECORD_SCHEMA,
        "machine": "gpu-h200",
        "commit": commit,
        "benchmark": name,
        "params": {"provider": "torch", "shape": "1048576", "dtype": "fp32", "timing": "hot"},
        "timing": {"method": "hot"},
        "metrics": {
            "status": metrics.STATUS_TIMING_BUG,
            "reason": "time 1e-09 s is below the roofline floor",
            "tflops": None,
            "gbps": None,
        },
    }
    records.write_record(tmp_path, rec)
    rs = results.load(tmp_path)
    by_timing = {k.timing: s for k, s in rs.series.items()}
    bug = by_timing["hot"].points[0]
    assert bug.value is None and bug.samples is None and bug.ci is None
    assert bug.reason.startswith("timing_bug: time 1e-09 s")
    assert by_timing["cold"].points[0].value == pytest.approx(1e-3)


# --------------------------------------------------------------------- provenance and guards in bench records


def _method() -> str:
    """This machine's suite method: ``cpu``, or ``hot`` on a CUDA machine
    (``bench.prepare`` refuses ``cpu`` there), so these tests pass on both."""
    from kernels import _backends

    return "cpu" if _backends.benchmark_device() == "cpu" else "hot"


@pytest.fixture
def cpu_case(monkeypatch):
    """A quick torch vector_add case on this machine's device and method."""
    monkeypatch.setenv("KERNELWATCH_QUICK", "1")
    case = bench.prepare("vector_add", "torch", (4096,), "fp32", _method())
    return dataclasses_replace(case, config=cfg(method=_method(), max_time_s=0.05, warmup_s=0.001))


def dataclasses_replace(obj, **kw):
    import dataclasses

    return dataclasses.replace(obj, **kw)


def test_record_carries_harness_version_and_timing_configuration(cpu_case):
    res = bench.measure(cpu_case)
    ident = devices.identify(cpu_case.device)
    rec = bench.build_record(cpu_case, res, "suite.vector_add.track_time", "c" * 40, "m", ident, None)
    from harness import __version__

    # On a CPU the cpu method's thread count is part of the harness version (and of the config).
    if _method() == "cpu":
        assert rec["harness_version"] == f"{__version__}+cpu1t" and rec["timing"]["config"]["threads"] == 1
    else:
        assert rec["harness_version"] == __version__
    assert rec["timing"]["method"] == _method() and rec["params"]["timing"] == _method()
    assert rec["timing"]["config"] == cpu_case.config.as_dict()
    # This budget (target 0.5%, 0.05 s) may or may not converge; whichever, the
    # flag and the reason agree. The two cases below pin both outcomes.
    t = rec["timing"]
    assert t["stop_reason"].startswith("ci_rel ") if t["converged"] else "before ci_rel <=" in t["stop_reason"]
    c = t["clocks"]
    if os.path.exists(clocks.SCHEDSTAT):  # Linux with schedstat: the CPU contention monitor
        assert c["available"] is True and c["reason"] is None and c["source"].startswith("linux schedstat")
        # one contention flag per sample
        assert len(t["throttled"]) == len(t["samples_s"]) and all(isinstance(f, bool) for f in t["throttled"])
    else:  # elsewhere unknown, with the reason
        assert c["available"] is False and "CPU contention unknown" in c["reason"]
    assert rec["metrics"]["status"] == "ok"
    json.dumps(rec, allow_nan=False)  # a record never holds NaN


@pytest.mark.parametrize("target_rel,converges", [(0.99, True), (1e-12, False)])
def test_record_says_whether_sampling_converged_and_why(cpu_case, target_rel, converges):
    case = dataclasses_replace(cpu_case, config=cfg(target_rel=target_rel, max_time_s=0.05, warmup_s=0.001))
    rec = bench.build_record(
        case, bench.measure(case), "suite.vector_add.track_time", "c" * 40, "m", devices.identify("cpu"), None
    )
    t = rec["timing"]
    assert t["converged"] is converges
    if converges:
        assert t["stop_reason"].startswith("ci_rel ") and "<= 0.99 after" in t["stop_reason"]
        assert len(t["samples_s"]) >= case.config.min_samples
    else:
        assert "max_time_s=0.05 reached" in t["stop_reason"] and "before ci_rel <= 1e-12" in t["stop_reason"]
    assert rec["metrics"]["status"] == "ok"
    json.dumps(rec, allow_nan=False)  # a record never holds NaN


def test_run_fails_a_timing_bug_and_keeps_the_reason_in_the_record(cpu_case, tmp_path, monkeypatch):
    from harness.measure import calibrate

    # Pretend the CPU has a datasheet whose bandwidth this copy-sized add cannot reach.
    monkeypatch.setattr(calibrate, "datasheet_peaks", lambda ident, dtype, tc: Peaks(1e-9, 1e-9, "datasheet test"))
    monkeypatch.setenv("ASV_COMMIT", "d" * 40)
    monkeypatch.setenv("KERNELWATCH_RESULTS_DIR", str(tmp_path))
    monkeypatch.setenv("KERNELWATCH_MACHINE", "test-machine")
    with pytest.raises(RuntimeError, match="timing_bug"):
        bench.run(cpu_case, "suite.vector_add.track_time")
    (rec,) = list(records.read_jsonl(tmp_path / "test-machine" / "kernelwatch" / f"{'d' * 40}.jsonl"))
    assert rec["metrics"]["status"] == "timing_bug" and "roofline floor" in rec["metrics"]["reason"]
    assert rec["metrics"]["tflops"] is None and rec["metrics"]["time_s"] is None


def test_run_fails_invalid_samples_without_producing_a_value(cpu_case, tmp_path, monkeypatch):
    good = bench.measure(cpu_case)
    bad = dataclasses_replace(good, samples_s=[1e-3, 0.0, float("nan")])
    monkeypatch.setattr(bench, "measure", lambda case: bad)
    monkeypatch.setenv("ASV_COMMIT", "e" * 40)
    monkeypatch.setenv("KERNELWATCH_RESULTS_DIR", str(tmp_path))
    monkeypatch.setenv("KERNELWATCH_MACHINE", "test-machine")
    with pytest.raises(RuntimeError, match="invalid: 2 of 3 timing samples invalid"):
        bench.run(cpu_case, "suite.vector_add.track_time")
    (rec,) = list(records.read_jsonl(tmp_path / "test-machine" / "kernelwatch" / f"{'e' * 40}.jsonl"))
    assert rec["metrics"]["status"] == "invalid"
    assert rec["timing"]["samples_s"] == [1e-3, 0.0, None]  # NaN stored as null


# --------------------------------------------------------------------- CUDA control flow on a fake torch


class FakeCuda:
    """Just enough of ``torch.cuda`` to run timing's CUDA path on the CPU.

    A fake stream clock advances by ``kernel_s`` per kernel call and by
    ``flush_s`` per flush; events read it when recorded. ``log`` keeps the
    order of stream operations so the test can check where the flush sits.
    """

    def __init__(self, kernel_s=1e-4, flush_s=5e-5, resolution_s=0.0):
        self.now = 0.0
        self.log = []
        self.kernel_s, self.flush_s = kernel_s, flush_s
        self.slept = []
        self.captures = 0
        self.pending = 0  # stream operations enqueued since the last full sync
        self.max_pending = 0
        cuda = self

        class Event:
            def __init__(self, enable_timing=False):
                self.t = None

            def record(self):
                self.t = cuda.now
                cuda.log.append("event")
                cuda.enqueue()

            def synchronize(self):
                cuda.log.append("wait-event")

            def elapsed_time(self, other):
                dt = other.t - self.t
                if resolution_s:  # event ticks, as cudaEventElapsedTime has
                    dt = round(dt / resolution_s) * resolution_s
                return dt * 1e3  # ms, as CUDA reports

        class Graph:
            def __init__(self):
                self.calls = []

            def replay(self):
                for c in self.calls:
                    c()

        class GraphCtx:
            def __init__(self, g, stream=None):
                self.g = g

            def __enter__(self):
                cuda.capturing = self.g
                cuda.captures += 1

            def __exit__(self, *a):
                cuda.capturing = None

        class Stream:
            def wait_stream(self, other):
                pass

        class StreamCtx:
            def __init__(self, s):
                pass

            def __enter__(self):
                pass

            def __exit__(self, *a):
                pass

        self.capturing = None
        self.Event, self.CUDAGraph, self.graph, self.Stream, self.stream = Event, Graph, GraphCtx, Stream, StreamCtx

    def enqueue(self):
        self.pending += 1
        self.max_pending = max(self.max_pending, self.pending)

    def kernel(self, tag="call"):
        def run():
            self.now += self.kernel_s
            self.log.append(tag)
            self.enqueue()

        def launch():
            if self.capturing is not None:
                self.capturing.calls.append(run)
            else:
                run()

        return launch

    def synchronize(self):
        self.log.append("sync")
        self.pending = 0

    def current_stream(self):
        return self.Stream()

    def _sleep(self, cycles):
        self.slept.append(cycles)
        self.log.append("sleep")


class FakeTorch:
    int32 = "int32"
    float32 = "float32"

    def __init__(self, cuda):
        self.cuda = cuda

    def empty(self, n, dtype=None, device=None):
        # No zero_: a write flush would leave dirty lines in L2 (it must read).
        return SimpleNamespace(n=n, fill_=lambda v: None)

    def sum(self, x, dim=None, out=None):
        cuda = self.cuda
        cuda.now += cuda.flush_s
        cuda.log.append("flush")
        cuda.enqueue()
        return out


def fake_cfg(method, **kw):
    base = dict(method=method, min_samples=10, min_time_s=0.0, max_time_s=0.05, warmup_s=0.0, batch=10)
    base.update(kw)
    return timing.TimingConfig(**base)


def test_cold_mode_flushes_outside_the_timed_region():
    cuda = FakeCuda()
    torch_ = FakeTorch(cuda)
    r = timing_cuda._time_cuda(torch_, cuda.kernel(), fake_cfg("cold"), 60 << 20, None, None)
    assert r.flush_bytes == 120 << 20
    # Every sample is exactly the kernel: the flush (5e-5 s) is not in it.
    assert r.p50_s == pytest.approx(1e-4) and max(r.samples_s) == pytest.approx(1e-4)
    timed = [op for op in cuda.log if op != "sleep"]
    # After warm-up, each sample is: flush, start event, call, end event.
    first = timed.index("flush")
    assert timed[first : first + 8] == ["flush", "event", "call", "event"] * 2
    assert r.extra["flush"].startswith("read")


def test_cold_batches_are_queued_behind_a_spin_kernel_too():
    # Without it the host's launch work races the flush, and idle GPU time
    # lands between the start event and the call.
    cuda = FakeCuda()
    timing_cuda._time_cuda(FakeTorch(cuda), cuda.kernel(), fake_cfg("cold"), 60 << 20, None, None)
    assert cuda.slept and all(c > 0 for c in cuda.slept)
    first = cuda.log.index("flush")
    assert cuda.log[first - 1] == "sleep"  # the spin precedes the chunk's first flush


class LoggingMonitor:
    """A clock monitor that logs where in the stream order it was read."""

    available = True
    max_sm_clock_mhz = 1980
    max_mem_clock_mhz = 2619

    def __init__(self, cuda):
        self.cuda = cuda

    def read(self):
        self.cuda.log.append("nvml")
        return clocks.ClockReading(t_s=self.cuda.now, sm_clock_mhz=1980, mem_clock_mhz=2619, reasons=())


@pytest.mark.parametrize("method", ["cold", "hot", "graph"])
def test_nvml_is_read_while_the_timed_batch_runs(method):
    cuda = FakeCuda()
    r = timing_cuda._time_cuda(FakeTorch(cuda), cuda.kernel(), fake_cfg(method), 60 << 20, None, LoggingMonitor(cuda))
    log = cuda.log
    reads = [i for i, op in enumerate(log) if op == "nvml"]
    assert reads and r.clocks["available"] is True
    assert r.throttled is not None and len(r.throttled) == len(r.samples_s)
    for i in reads:
        # After the host waited for the GPU to reach a sample inside the chunk,
        # before the chunk's sync: never during the spin, never on an idle GPU.
        assert log[i - 1] == "wait-event" and log[i + 1] == "sync"
        assert "event" in log[log[:i].index("sleep") if "sleep" in log[:i] else 0 : i]
    assert all(log[j + 1] != "nvml" for j, op in enumerate(log[:-1]) if op == "sync")


def test_short_hot_kernels_are_timed_several_calls_per_event_pair():
    cuda = FakeCuda(kernel_s=2e-6, resolution_s=0.5e-6)
    r = timing_cuda._time_cuda(FakeTorch(cuda), cuda.kernel(), fake_cfg("hot"), 60 << 20, None, None)
    assert r.extra["calls_per_event_pair"] == 10  # 20 us / 2 us
    assert r.number == 10
    assert r.p50_s == pytest.approx(2e-6)
    assert timing.calls_per_event_pair(1e-3) == 1 and timing.calls_per_event_pair(3e-6) == 7
    with pytest.raises(ValueError):
        timing.calls_per_event_pair(-1.0)


def test_quantised_cold_samples_do_not_fake_convergence():
    # A 3 us kernel on a 0.5 us event clock: every sample ties at 3.0 us, the
    # order-statistics CI is zero wide; floored at the resolution it is 17%.
    cuda = FakeCuda(kernel_s=3e-6, resolution_s=0.5e-6)
    r = timing_cuda._time_cuda(FakeTorch(cuda), cuda.kernel(), fake_cfg("cold"), 60 << 20, None, None)
    assert r.converged is False
    assert r.ci_rel == pytest.approx(0.5e-6 / 3e-6)
    assert timing.summarize([3e-6] * 50)["ci_rel"] == 0.0  # the unfloored statistic would have "converged"


def test_short_cold_kernels_are_batched_over_rotated_copies_after_one_flush():
    # Issue 26: a 3 us cold kernel on the 0.5 us event tick; with rotated copies
    # one flush is followed by several calls, each on its own copy.
    cuda = FakeCuda(kernel_s=3e-6, resolution_s=0.5e-6)
    copies = [cuda.kernel(f"copy{i}") for i in range(12)]
    r = timing_cuda._time_cuda(FakeTorch(cuda), copies[0], fake_cfg("cold"), 60 << 20, copies, None)
    assert r.extra["calls_per_event_pair"] == 7 and r.number == 7  # ceil(20 us / 3 us), 12 copies
    assert r.p50_s == pytest.approx(3e-6)
    timed = [op for op in cuda.log if op != "sleep"]
    first = timed.index("flush")
    assert timed[first : first + 10] == ["flush", "event"] + [f"copy{i}" for i in range(7)] + ["event"]
    assert r.ci_rel < 0.5e-6 / 3e-6  # no longer floored at one tick per call
    # Control: fewer copies than wanted caps the batch; without copies, one call.
    cuda = FakeCuda(kernel_s=3e-6, resolution_s=0.5e-6)
    few = [cuda.kernel(f"copy{i}") for i in range(3)]
    assert timing_cuda._time_cuda(FakeTorch(cuda), few[0], fake_cfg("cold"), 60 << 20, few, None).number == 3
    cuda = FakeCuda(kernel_s=3e-6, resolution_s=0.5e-6)
    assert timing_cuda._time_cuda(FakeTorch(cuda), cuda.kernel(), fake_cfg("cold"), 60 << 20, None, None).number == 1
    # A long kernel is never batched.
    cuda = FakeCuda(kernel_s=1e-4)
    longs = [cuda.kernel(f"copy{i}") for i in range(4)]
    assert timing_cuda._time_cuda(FakeTorch(cuda), longs[0], fake_cfg("cold"), 60 << 20, longs, None).number == 1


def test_batches_stay_below_the_launch_queue():
    cuda = FakeCuda(kernel_s=1e-6)
    c = fake_cfg("hot", batch=5000, min_samples=5000, max_samples=5000, max_time_s=10.0)
    r = timing_cuda._time_cuda(FakeTorch(cuda), cuda.kernel(), c, None, None, None)
    assert len(r.samples_s) == 5000
    assert cuda.max_pending <= timing_cuda._MAX_QUEUED_OPS  # chunks, each synced
    assert len(cuda.slept) >= 5000 // r.extra["samples_per_chunk"]  # one spin per chunk
    assert timing.chunk_size(1, flush=True) == timing_cuda._MAX_QUEUED_OPS // (3 + timing_cuda._LAUNCHES_PER_CALL)


def test_hot_mode_queues_a_spin_kernel_ahead_of_each_batch():
    cuda = FakeCuda()
    r = timing_cuda._time_cuda(FakeTorch(cuda), cuda.kernel(), fake_cfg("hot"), 60 << 20, None, None)
    assert "flush" not in cuda.log and r.flush_bytes is None
    assert len(cuda.slept) >= 1 and all(c > 0 for c in cuda.slept)
    assert r.p50_s == pytest.approx(1e-4)
    r2 = timing_cuda._time_cuda(
        FakeTorch(FakeCuda()), FakeCuda().kernel(), fake_cfg("hot", block_host=False), None, None, None
    )
    assert r2.method == "hot"


def test_graph_mode_captures_rotated_calls_and_divides_by_unroll():
    cuda = FakeCuda()
    calls = [cuda.kernel(f"copy{i}") for i in range(3)]
    r = timing_cuda._time_cuda(FakeTorch(cuda), calls[0], fake_cfg("graph", graph_unroll=6), None, calls, None)
    assert cuda.captures == 1 and r.number == 6
    assert r.p50_s == pytest.approx(1e-4)  # a replay of 6 calls / 6
    replayed = [op for op in cuda.log if op.startswith("copy")]
    assert {"copy0", "copy1", "copy2"} <= set(replayed[-6:])  # rotation inside one replay


def test_exclude_throttled_env_reaches_the_config(monkeypatch):
    monkeypatch.setenv("KERNELWATCH_EXCLUDE_THROTTLED", "1")
    case = bench.prepare("vector_add", "torch", (64,), "fp32", _method())
    assert case.config.exclude_throttled is True


# --------------------------------------------------------------------- A/A comparison


def test_aa_compare_counts_agreement_and_unpaired():
    import importlib.util
    from pathlib import Path

    spec = importlib.util.spec_from_file_location(
        "aa_stability", Path(__file__).parent.parent / "experiments" / "cpu-noise" / "aa_stability.py"
    )
    aa = importlib.util.module_from_spec(spec)
    import sys

    sys.modules.setdefault("aa_stability", aa)  # dataclasses look their module up while building
    spec.loader.exec_module(aa)
    a = {"s1": 1.0, "s2": 2.0, "s3": 1.0, "s4": None, "s5": 1.0}
    b = {"s1": 1.005, "s2": 2.08, "s3": 0.995, "s4": 1.0}
    rep = aa.compare(a, b, threshold=0.01)
    assert rep.n == 3 and set(rep.unpaired) == {"s4", "s5"}
    assert rep.diffs["s2"] == pytest.approx(0.04)
    assert rep.fraction_within == pytest.approx(2 / 3)
    assert rep.quantiles()["max"] == pytest.approx(0.04)
    assert dict(rep.histogram())["(2.00%, 5.00%]"] == 1
    assert sum(c for _, c in rep.histogram()) == 3
    assert aa.compare({}, {}).fraction_within is None
    assert aa.throttle_summary({"s1": 0.5, "s2": 0.0, "s3": None}).startswith("1 of 2 series")
    assert "unknown" in aa.throttle_summary({"s1": None})
    with pytest.raises(ValueError):
        aa.compare(a, b, threshold=0)
