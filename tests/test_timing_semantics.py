"""Timing semantics that fail when the method silently changes.

``tests/test_timing.py`` checks the stopping rule and the order of operations.
These check what the numbers mean, with injected work on synthetic clocks
(no real time, so a busy machine cannot change the outcome):

- **warm-up is done and is long enough**: a callable whose first calls are
  slow (JIT, autotune, cold caches) must not leave a slow call in the samples,
  on the CPU (``warmup_s`` of synthetic time) and on CUDA (the warm-up loop's
  host clock is the fake device's clock);
- **the statistic is the documented one**: ``p50_s`` is the median of
  ``samples_s`` (not the minimum or the mean), ``p20_s``/``p80_s`` numpy's
  linear quantiles, on a deliberately skewed distribution where they differ;
- **cold means flushed**: a fake kernel that runs twice as fast when its data
  is still in L2 (no flush since its last call) gives the slow time in
  ``cold`` mode and the fast time in ``hot`` mode.
"""

from __future__ import annotations

import statistics
from types import SimpleNamespace

import numpy as np
import pytest
from test_timing import FakeCuda, FakeNs, FakeTorch, cfg, fake_cfg

from harness.measure import clocks, timing, timing_cuda

NO_MONITOR = clocks.NullMonitor("synthetic clock")

# ----------------------------------------------------------------------------- CPU warm-up


def _slow_start_cpu(clk: FakeNs, n_slow: int, slow_ns: int, fast_ns: int):
    calls = [0]

    def fn():
        clk.ns += slow_ns if calls[0] < n_slow else fast_ns
        calls[0] += 1

    return fn, calls


def test_cpu_warm_up_eats_the_slow_first_calls():
    clk = FakeNs()
    # 5 calls of 10 ms (50 ms) inside a 60 ms warm-up, then 250 us calls.
    fn, calls = _slow_start_cpu(clk, 5, 10_000_000, 250_000)
    r = timing.time_cpu(fn, cfg(warmup_s=0.06, max_time_s=0.2), clock_ns=clk, monitor=NO_MONITOR)
    assert max(r.samples_s) == pytest.approx(250e-6), "a warm-up call leaked into the samples"
    assert r.p50_s == pytest.approx(250e-6)
    # The warm-up lasted warmup_s: the 5 slow calls plus 40 fast ones (10 ms / 250 us).
    assert calls[0] - sum(r.extra["cpu"]["batches"]["n_samples"]) * r.number == 5 + 40


def test_cpu_warm_up_of_two_calls_is_not_enough_here():
    """Negative control: with warm-up time ignored (two calls), slow calls leak."""
    clk = FakeNs()
    fn, _ = _slow_start_cpu(clk, 5, 10_000_000, 250_000)
    r = timing.time_cpu(fn, cfg(warmup_s=0.0, max_time_s=0.2), clock_ns=clk, monitor=NO_MONITOR)
    assert max(r.samples_s) == pytest.approx(10e-3)


def test_cpu_samples_per_call_use_the_post_warm_up_time():
    # Calls of 10 ms during warm-up, then 7 us: ``number`` must come from the
    # warm-up's mean call (one call already lasts >= 100 us) -- and the samples are
    # per call whatever ``number`` is.
    clk = FakeNs()
    fn, _ = _slow_start_cpu(clk, 3, 10_000_000, 7_000)
    r = timing.time_cpu(fn, cfg(warmup_s=0.03, max_time_s=0.2), clock_ns=clk, monitor=NO_MONITOR)
    assert r.p50_s == pytest.approx(7e-6)


# ----------------------------------------------------------------------------- the statistic


def test_p50_is_the_median_not_the_minimum_or_the_mean():
    clk = FakeNs()
    # A skewed cycle: min 200 us, median 300 us, mean 520 us.
    cycle = [200_000, 300_000, 250_000, 1_500_000, 350_000]
    i = [0]

    def fn():
        clk.ns += cycle[i[0] % len(cycle)]
        i[0] += 1

    r = timing.time_cpu(
        fn, cfg(warmup_s=0.0, min_samples=25, max_time_s=0.05, target_rel=1e-9), clock_ns=clk, monitor=NO_MONITOR
    )
    xs = r.samples_s
    assert r.number == 1
    assert r.p50_s == pytest.approx(statistics.median(xs))
    assert r.p20_s == pytest.approx(float(np.quantile(xs, 0.2)))
    assert r.p80_s == pytest.approx(float(np.quantile(xs, 0.8)))
    assert r.p50_s != pytest.approx(min(xs)) and r.p50_s != pytest.approx(statistics.fmean(xs))
    assert r.p50_s == pytest.approx(300e-6)


# ----------------------------------------------------------------------------- CUDA warm-up and flush


@pytest.fixture
def fake_host_clock(monkeypatch):
    """Make timing_cuda's host clock the fake device's clock (``cuda.now``)."""

    def install(cuda):
        monkeypatch.setattr(timing_cuda, "time", SimpleNamespace(perf_counter=lambda: cuda.now))

    return install


class SlowStartCuda(FakeCuda):
    """The first ``n_slow`` calls take ``slow_s``; later ones ``kernel_s``. With
    ``l2`` a call runs in half the time when nothing ran since its own last call
    (its data still in L2); a flush evicts it."""

    def __init__(self, n_slow=0, slow_s=1e-3, l2=False, **kw):
        super().__init__(**kw)
        self.n_slow, self.slow_s, self.l2 = n_slow, slow_s, l2
        self.calls = 0

    def kernel(self, tag="call"):
        def launch():
            if self.calls < self.n_slow:
                dt = self.slow_s
            else:
                dt = self.kernel_s / 2 if self.l2 and self._last_op_not_flush() else self.kernel_s
            self.calls += 1
            self.now += dt
            self.log.append(tag)
            self.enqueue()

        return launch

    def _last_op_not_flush(self):
        for op in reversed(self.log):
            if op in ("flush", "call"):
                return op == "call"
        return False


@pytest.mark.parametrize("method", ["cold", "hot"])
def test_cuda_warm_up_eats_the_slow_first_calls(method, fake_host_clock):
    cuda = SlowStartCuda(n_slow=5, slow_s=2e-3)
    fake_host_clock(cuda)
    r = timing_cuda._time_cuda(FakeTorch(cuda), cuda.kernel(), fake_cfg(method, warmup_s=0.02), 60 << 20, None, None)
    assert max(r.samples_s) == pytest.approx(1e-4), "a warm-up call leaked into the samples"


def test_cuda_without_warm_up_time_the_slow_calls_leak(fake_host_clock):
    """Negative control: warm-up of one call (``warmup_s=0``) leaves four slow calls."""
    cuda = SlowStartCuda(n_slow=5, slow_s=2e-3)
    fake_host_clock(cuda)
    r = timing_cuda._time_cuda(FakeTorch(cuda), cuda.kernel(), fake_cfg("cold", warmup_s=0.0), 60 << 20, None, None)
    assert max(r.samples_s) == pytest.approx(2e-3)


def test_cold_is_flushed_and_hot_is_not(fake_host_clock):
    cold_cuda = SlowStartCuda(l2=True)
    fake_host_clock(cold_cuda)
    cold = timing_cuda._time_cuda(FakeTorch(cold_cuda), cold_cuda.kernel(), fake_cfg("cold"), 60 << 20, None, None)
    hot_cuda = SlowStartCuda(l2=True)
    fake_host_clock(hot_cuda)
    hot = timing_cuda._time_cuda(FakeTorch(hot_cuda), hot_cuda.kernel(), fake_cfg("hot"), 60 << 20, None, None)
    assert cold.p50_s == pytest.approx(1e-4) and max(cold.samples_s) == pytest.approx(1e-4)
    assert hot.p50_s == pytest.approx(0.5e-4)
