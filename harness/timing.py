"""Device-accurate timing with a stopping rule.

Methods (each is part of a series' identity; values from different methods are
never compared):

- ``cpu``: ``time.perf_counter_ns`` around ``number`` back-to-back calls.
- ``cold`` (CUDA): CUDA events around one call; before every sample the L2 is
  flushed by writing a buffer of at least twice the device's L2 size, and the
  flush is enqueued *before* the start event, so it is outside the timed region
  (as ``triton.testing.do_bench`` does).
- ``hot`` (CUDA): CUDA events, no flush: repeated calls find their data in L2.
- ``graph`` (CUDA): the call captured ``graph_unroll`` times in one CUDA graph
  (rotating over copies of the inputs so that L2 does not just replay one
  working set), replayed and divided: launch overhead removed.

Stopping rule (NVBench-style, see NVIDIA/nvbench ``docs/benchmarks.md``):
samples are taken in batches until the relative half-width of the 99%
confidence interval of the median is at or below ``target_rel`` (default 0.5%),
with at least ``min_samples`` samples and ``min_time_s`` of measurement, or
until ``max_time_s`` is spent; the result records whether it converged. The
median CI comes from order statistics (distribution-free; the binomial
construction in Conover, *Practical Nonparametric Statistics*, 3rd ed., 3.2),
which is robust to the occasional slow sample that inflates a standard deviation.
"""

from __future__ import annotations

import math
import statistics
import time
from dataclasses import asdict, dataclass, field, replace
from typing import Callable, Sequence

TIMING_METHODS = ("cpu", "cold", "hot", "graph")


@dataclass(frozen=True)
class TimingConfig:
    """How to time one case.

    Attributes
    ----------
    method : str
        One of :data:`TIMING_METHODS`.
    target_rel : float
        Stop when the 99% CI half-width of the median, relative to the median,
        is at or below this (0.005 = 0.5%).
    min_samples : int
        Never stop with fewer samples.
    min_time_s, max_time_s : float
        Wall-clock bounds on the sampling phase, in seconds.
    warmup_s : float
        Time spent calling the kernel before sampling (JIT, autotune, caches, clocks).
    batch : int
        Samples between convergence checks (one device sync per batch on CUDA).
    graph_unroll : int
        Calls captured per CUDA graph in ``graph`` mode.
    """

    method: str = "cpu"
    target_rel: float = 0.005
    min_samples: int = 10
    min_time_s: float = 0.05
    max_time_s: float = 1.0
    warmup_s: float = 0.025
    batch: int = 10
    graph_unroll: int = 20

    def __post_init__(self) -> None:
        if self.method not in TIMING_METHODS:
            raise ValueError(f"timing method must be one of {TIMING_METHODS}, got {self.method!r}")
        if not (0 < self.target_rel < 1):
            raise ValueError(f"target_rel must be in (0, 1), got {self.target_rel!r}")
        if self.min_samples < 3:
            raise ValueError("min_samples must be at least 3")
        if not (0 <= self.min_time_s <= self.max_time_s):
            raise ValueError("need 0 <= min_time_s <= max_time_s")
        if self.batch < 1 or self.graph_unroll < 1:
            raise ValueError("batch and graph_unroll must be positive")

    def as_dict(self) -> dict:
        return asdict(self)


def quick(config: TimingConfig) -> TimingConfig:
    """A cheaper variant for ``--quick`` runs: looser target, shorter bounds."""
    return replace(config, target_rel=max(config.target_rel, 0.02), min_samples=5,
                   min_time_s=min(config.min_time_s, 0.01), max_time_s=min(config.max_time_s, 0.2),
                   warmup_s=min(config.warmup_s, 0.01))


@dataclass
class TimingResult:
    """Samples and summary of one timed case.

    ``samples_s`` are per-call times in seconds, in the order taken.
    ``converged`` is False when ``max_time_s`` ran out before ``target_rel`` was met.
    """

    method: str
    samples_s: list[float]
    number: int
    converged: bool
    stop_reason: str
    ci_rel: float | None
    stdev_rel: float | None
    p20_s: float | None
    p50_s: float | None
    p80_s: float | None
    config: dict
    flush_bytes: int | None = None
    extra: dict = field(default_factory=dict)

    def as_dict(self) -> dict:
        return asdict(self)


# --------------------------------------------------------------------- statistics


def quantile(xs: Sequence[float], q: float) -> float:
    """Linear-interpolated quantile (numpy's default ``linear`` method)."""
    if not xs:
        raise ValueError("quantile of no samples")
    s = sorted(xs)
    pos = (len(s) - 1) * q
    lo = math.floor(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def median_ci(xs: Sequence[float], confidence: float = 0.99) -> tuple[float, float] | None:
    """Distribution-free CI of the median from order statistics.

    Uses ranks ``k`` and ``n - k + 1`` (1-based), with ``k`` the largest rank such
    that ``P(Binomial(n, 1/2) < k) <= (1 - confidence) / 2``. ``None`` when the
    sample is too small for the requested confidence (n < 8 at 99%).
    """
    from scipy.stats import binom

    n = len(xs)
    if n < 2:
        return None
    alpha = (1 - confidence) / 2
    k = int(binom.ppf(alpha, n, 0.5))  # P(X <= k) >= alpha
    while k > 0 and binom.cdf(k - 1, n, 0.5) > alpha:
        k -= 1
    if k < 1:
        return None
    s = sorted(xs)
    return s[k - 1], s[n - k]


def summarize(xs: Sequence[float]) -> dict:
    """p20/p50/p80, stdev_rel and the 99% median CI's relative half-width of ``xs``."""
    if not xs:
        return {"p20_s": None, "p50_s": None, "p80_s": None, "stdev_rel": None, "ci_rel": None}
    p50 = quantile(xs, 0.5)
    ci = median_ci(xs)
    stdev_rel = statistics.stdev(xs) / p50 if len(xs) > 1 and p50 > 0 else None
    ci_rel = (ci[1] - ci[0]) / 2 / p50 if ci and p50 > 0 else None
    return {"p20_s": quantile(xs, 0.2), "p50_s": p50, "p80_s": quantile(xs, 0.8), "stdev_rel": stdev_rel, "ci_rel": ci_rel}


def converged(xs: Sequence[float], target_rel: float) -> bool:
    s = summarize(xs)
    return s["ci_rel"] is not None and s["ci_rel"] <= target_rel


# --------------------------------------------------------------------- stopping rule


def sample_until_stable(
    take_batch: Callable[[int], list[float]],
    config: TimingConfig,
    clock: Callable[[], float] = time.perf_counter,
) -> tuple[list[float], bool, str]:
    """Apply the stopping rule to any sampler.

    Parameters
    ----------
    take_batch : callable
        ``take_batch(k) -> list of k per-call times in seconds``.
    config : TimingConfig
    clock : callable
        Wall clock in seconds (injectable for tests).

    Returns
    -------
    samples, converged, stop_reason
    """
    samples: list[float] = []
    start = clock()
    while True:
        samples.extend(take_batch(config.batch))
        elapsed = clock() - start
        enough = len(samples) >= config.min_samples and elapsed >= config.min_time_s
        if enough and converged(samples, config.target_rel):
            return samples, True, f"ci_rel <= {config.target_rel:g} after {len(samples)} samples"
        if elapsed >= config.max_time_s:
            if len(samples) < config.min_samples:
                # Never stop below the minimum: a very slow kernel takes min_samples anyway.
                samples.extend(take_batch(config.min_samples - len(samples)))
            return samples, False, f"max_time_s={config.max_time_s:g} reached after {len(samples)} samples"


def _result(method, samples, number, ok, why, config, **kw) -> TimingResult:
    s = summarize(samples)
    return TimingResult(method=method, samples_s=list(samples), number=number, converged=ok, stop_reason=why,
                        config=config.as_dict(), **s, **kw)


# --------------------------------------------------------------------- CPU


def time_cpu(fn: Callable[[], object], config: TimingConfig | None = None,
             clock_ns: Callable[[], int] = time.perf_counter_ns) -> TimingResult:
    """Time ``fn()`` on the CPU with ``perf_counter_ns``.

    Each sample runs ``number`` calls back to back (``number`` chosen during
    warm-up so a sample lasts at least 100 us, well above timer resolution) and
    records the per-call mean.
    """
    config = config or TimingConfig(method="cpu")
    if config.method != "cpu":
        raise ValueError(f"time_cpu needs method='cpu', got {config.method!r}")
    # Warm-up, and pick `number`.
    t0 = clock_ns()
    calls = 0
    while True:
        fn()
        calls += 1
        if (clock_ns() - t0) / 1e9 >= config.warmup_s and calls >= 2:
            break
    per_call = (clock_ns() - t0) / 1e9 / calls
    number = max(1, int(math.ceil(100e-6 / per_call))) if per_call > 0 else 1000

    def take(k: int) -> list[float]:
        out = []
        for _ in range(k):
            a = clock_ns()
            for _ in range(number):
                fn()
            b = clock_ns()
            out.append((b - a) / 1e9 / number)
        return out

    samples, ok, why = sample_until_stable(take, config)
    return _result("cpu", samples, number, ok, why, config)


# --------------------------------------------------------------------- CUDA


def flush_buffer_bytes(l2_bytes: int | None, factor: int = 2, fallback_bytes: int = 256 << 20) -> int:
    """Size of the L2 flush buffer: ``factor`` times the device's L2 size.

    ``fallback_bytes`` (256 MiB, four times the largest L2 of the GPUs in our
    spec table) is used when the driver does not report an L2 size.
    Raises ``ValueError`` for a negative size or a factor below 2.
    """
    if factor < 2:
        raise ValueError("the flush buffer must be at least twice the L2 size")
    if l2_bytes is None or l2_bytes == 0:
        return fallback_bytes
    if l2_bytes < 0:
        raise ValueError(f"negative L2 size {l2_bytes}")
    return int(factor * l2_bytes)


def time_cuda(fn: Callable[[], object], config: TimingConfig, l2_bytes: int | None = None,
              rotated: Sequence[Callable[[], object]] | None = None) -> TimingResult:
    """Time ``fn()`` on the current CUDA stream with CUDA events.

    Parameters
    ----------
    fn : callable
        Launches the kernel(s) of one invocation, asynchronously.
    config : TimingConfig
        ``method`` must be ``cold``, ``hot`` or ``graph``.
    l2_bytes : int or None
        Device L2 size, for the cold-mode flush buffer.
    rotated : sequence of callables, optional
        For ``graph`` mode: the same call on different copies of the inputs.
    """
    import torch

    if config.method not in ("cold", "hot", "graph"):
        raise ValueError(f"time_cuda needs method cold, hot or graph, got {config.method!r}")
    flush = None
    flush_bytes = None
    if config.method == "cold":
        flush_bytes = flush_buffer_bytes(l2_bytes)
        flush = torch.empty(flush_bytes // 4, dtype=torch.int32, device="cuda")

    call = fn
    number = 1
    if config.method == "graph":
        calls = list(rotated) if rotated else [fn]
        for c in calls:  # warm the allocator and JIT outside capture
            c()
        torch.cuda.synchronize()
        g = torch.cuda.CUDAGraph()
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            with torch.cuda.graph(g, stream=s):
                for i in range(config.graph_unroll):
                    calls[i % len(calls)]()
        torch.cuda.current_stream().wait_stream(s)
        call = g.replay
        number = config.graph_unroll

    # Warm-up (JIT, autotune, clocks).
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < config.warmup_s:
        call()
        torch.cuda.synchronize()

    def take(k: int) -> list[float]:
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(k)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(k)]
        for i in range(k):
            if flush is not None:
                flush.zero_()  # enqueued before the start event: not timed
            starts[i].record()
            call()
            ends[i].record()
        torch.cuda.synchronize()
        return [s.elapsed_time(e) / 1e3 / number for s, e in zip(starts, ends)]

    samples, ok, why = sample_until_stable(take, config)
    return _result(config.method, samples, number, ok, why, config, flush_bytes=flush_bytes)
