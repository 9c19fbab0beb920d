"""What the CPU and CUDA timers share: the configuration, the result, the
order-statistics summary and the stopping rule (:mod:`harness.measure.timing`
describes the methods and the rule; callers import the names from there).
"""

from __future__ import annotations

import math
import statistics
import time
from dataclasses import asdict, dataclass, field, replace
from typing import Callable, Sequence

from harness.measure import clock_batches as _batches
from harness.measure import clocks as _clocks

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
        Never stop with fewer samples (at least 3; the 99% median CI needs 8).
    max_samples : int
        Stop after this many samples even if not converged (bounds memory and
        the number of CUDA events for microsecond kernels).
    min_time_s, max_time_s : float
        Wall-clock bounds on the sampling phase, in seconds.
    warmup_s : float
        Time spent calling the kernel before sampling (JIT, autotune, caches, clocks).
    batch : int
        Samples in the first batch; later batches take a tenth of the samples so
        far (at least ``batch``), so the convergence check costs O(log n) passes.
        On CUDA there is one device sync per batch.
    graph_unroll : int
        Calls captured per CUDA graph in ``graph`` mode (raised to the number of
        rotated input copies when that is larger).
    exclude_throttled : bool
        Drop samples from batches during which NVML reported a slowdown reason
        (they are always flagged in the result either way).
    block_host : bool
        Queue a spin kernel ahead of each CUDA batch (see module docstring).
    threads : int or None
        ``cpu`` method only: PyTorch intra-op threads while timing
        (``torch.set_num_threads``), default 1; ``None`` leaves torch's own
        setting (one thread per core). Part of the series' provenance: it is in
        this config, hence in every record, and in the harness version
        (:func:`harness.core.devices.harness_version`).
    exclude_contended : bool
        ``cpu`` method only: drop samples judged contended (preempted, or in
        a stretch whose threads waited on a run queue for more than
        :data:`harness.measure.clocks.CPU_CONTENTION_LIMIT` of the wall time:
        :func:`time_cpu`); default True; they stay counted in the result. When fewer than
        ``min_samples`` clean samples remain, every sample is kept and the
        result is flagged contended instead.
    steady_malloc : bool
        ``cpu`` method only: fix glibc's allocator thresholds before timing
        (:func:`steady_malloc`), so the time of an op does not depend on
        whether this process's allocator happens to return freed tensors to
        the OS (default True).
    l2_flush : str
        ``cold`` mode's flush: ``read`` (default: a sum over the buffer, clean
        lines) or ``write`` (``zero_``, what ``triton.testing.do_bench`` does;
        the self-check's timer-agreement rounds use it to compare like with like).
    """

    method: str = "cpu"
    target_rel: float = 0.005
    min_samples: int = 10
    max_samples: int = 100_000
    min_time_s: float = 0.05
    max_time_s: float = 1.0
    warmup_s: float = 0.025
    batch: int = 10
    graph_unroll: int = 20
    exclude_throttled: bool = False
    block_host: bool = True
    threads: int | None = 1
    exclude_contended: bool = True
    steady_malloc: bool = True
    l2_flush: str = "read"

    def __post_init__(self) -> None:
        if self.method not in TIMING_METHODS:
            raise ValueError(f"timing method must be one of {TIMING_METHODS}, got {self.method!r}")
        if not (0 < self.target_rel < 1):
            raise ValueError(f"target_rel must be in (0, 1), got {self.target_rel!r}")
        if self.min_samples < 3:
            raise ValueError("min_samples must be at least 3")
        if self.max_samples < self.min_samples:
            raise ValueError(f"max_samples ({self.max_samples}) must be >= min_samples ({self.min_samples})")
        if not (0 <= self.min_time_s <= self.max_time_s):
            raise ValueError("need 0 <= min_time_s <= max_time_s")
        if self.warmup_s < 0:
            raise ValueError("warmup_s must be >= 0")
        if self.batch < 1 or self.graph_unroll < 1:
            raise ValueError("batch and graph_unroll must be positive")
        if self.threads is not None and (
            isinstance(self.threads, bool) or not isinstance(self.threads, int) or self.threads < 1
        ):
            raise ValueError(f"threads must be a positive int or None, got {self.threads!r}")
        if self.l2_flush not in ("read", "write"):
            raise ValueError(f"l2_flush must be 'read' or 'write', got {self.l2_flush!r}")

    def as_dict(self) -> dict:
        return asdict(self)


def quick(config: TimingConfig) -> TimingConfig:
    """A cheaper variant for ``--quick`` runs: looser target (2%), shorter bounds."""
    return replace(
        config,
        target_rel=max(config.target_rel, 0.02),
        min_samples=5,
        min_time_s=min(config.min_time_s, 0.01),
        max_time_s=min(config.max_time_s, 0.2),
        warmup_s=min(config.warmup_s, 0.01),
    )


@dataclass
class TimingResult:
    """Samples and summary of one timed case.

    Attributes
    ----------
    method : str
        Timing method (:data:`TIMING_METHODS`).
    samples_s : list of float
        Per-call times in seconds, in the order taken (throttled samples removed
        when the config excludes them).
    number : int
        Calls per sample (CPU: back-to-back calls; hot: calls per event pair,
        more than one below 20 us; graph: calls per replay times replays per
        event pair). ``samples_s`` are per call either way.
    converged : bool
        False when ``max_time_s``/``max_samples`` ran out before ``target_rel`` was met.
    stop_reason : str
        Why sampling stopped, with the sample count and elapsed time.
    ci_rel, stdev_rel : float or None
        99% median-CI half-width and standard deviation, relative to the median.
    p20_s, p50_s, p80_s : float or None
        Quantiles of ``samples_s``.
    config : dict
        The :class:`TimingConfig` used.
    flush_bytes : int or None
        Size of the cold-mode L2 flush buffer.
    elapsed_s : float or None
        Wall time of the sampling phase.
    clocks : dict
        NVML summary (:func:`harness.measure.clock_batches.summarize`); ``available`` False
        with a ``reason`` when unknown.
    throttled : list of bool or None
        Per sample, whether it was taken while throttled; ``None`` when unknown.
    p50_clock_normalised_s : float or None
        Median of ``sample * sm_clock / max_sm_clock`` (:func:`harness.measure.clock_batches.normalise`).
    p50_unthrottled_s : float or None
        Median of the samples known not to be throttled.
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
    elapsed_s: float | None = None
    clocks: dict = field(default_factory=lambda: {"available": False, "reason": "not recorded"})
    throttled: list | None = None
    p50_clock_normalised_s: float | None = None
    p50_unthrottled_s: float | None = None
    extra: dict = field(default_factory=dict)

    def as_dict(self) -> dict:
        return asdict(self)


# --------------------------------------------------------------------- statistics


def quantile(xs: Sequence[float], q: float) -> float:
    """Linear-interpolated quantile (numpy's default ``linear`` method).

    Raises ``ValueError`` for no samples or ``q`` outside [0, 1].
    """
    if not xs:
        raise ValueError("quantile of no samples")
    if not (0 <= q <= 1):
        raise ValueError(f"quantile q must be in [0, 1], got {q!r}")
    s = sorted(xs)
    pos = (len(s) - 1) * q
    lo = math.floor(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def import_statistics() -> None:
    """Import what :func:`median_ci` needs, before a measurement starts.

    ``scipy.stats`` takes about 1 s to import in a fresh process on a 2-core
    machine. Imported lazily inside the first stopping-rule check, that second
    is charged to ``max_time_s`` (1 s on the CPU: most of a fresh asv process's
    budget) and its page faults to the timing thread's count.
    """
    from scipy.stats import binom  # noqa: F401


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


def summarize(xs: Sequence[float], resolution_s: float = 0.0) -> dict:
    """p20/p50/p80, stdev_rel and the 99% median CI's relative half-width of ``xs``.

    ``resolution_s`` (seconds per sample, e.g. the event timer's 0.5 us divided
    by the calls per event pair) floors the CI half-width: samples quantised to
    a tick tie, and ties give an order-statistics CI of zero width that would
    declare convergence on a median known only to within a tick.
    """
    if not xs:
        return {"p20_s": None, "p50_s": None, "p80_s": None, "stdev_rel": None, "ci_rel": None}
    p50 = quantile(xs, 0.5)
    ci = median_ci(xs)
    stdev_rel = statistics.stdev(xs) / p50 if len(xs) > 1 and p50 > 0 else None
    ci_rel = max((ci[1] - ci[0]) / 2, resolution_s) / p50 if ci and p50 > 0 else None
    return {
        "p20_s": quantile(xs, 0.2),
        "p50_s": p50,
        "p80_s": quantile(xs, 0.8),
        "stdev_rel": stdev_rel,
        "ci_rel": ci_rel,
    }


def converged(xs: Sequence[float], target_rel: float) -> bool:
    """True when the 99% median CI's relative half-width of ``xs`` is known and <= ``target_rel``."""
    s = summarize(xs)
    return s["ci_rel"] is not None and s["ci_rel"] <= target_rel


# --------------------------------------------------------------------- stopping rule


@dataclass
class Sampling:
    """Outcome of :func:`sample_until_stable`."""

    samples: list[float]
    converged: bool
    stop_reason: str
    elapsed_s: float
    batches: int


def next_batch_size(n_taken: int, config: TimingConfig) -> int:
    """Samples in the next batch: ``max(batch, n_taken // 10)``, never past ``max_samples``.

    Geometric growth keeps the number of convergence checks (each a sort plus a
    binomial quantile) logarithmic in the sample count, while overshooting the
    time bounds by at most ~10%.
    """
    return max(1, min(max(config.batch, n_taken // 10), config.max_samples - n_taken))


def sample_until_stable(
    take_batch: Callable[[int], list[float]],
    config: TimingConfig,
    clock: Callable[[], float] = time.perf_counter,
    resolution_s: float = 0.0,
) -> Sampling:
    """Apply the stopping rule to any sampler.

    Parameters
    ----------
    take_batch : callable
        ``take_batch(k) -> list of per-call times in seconds``; normally ``k`` of
        them, fewer when samples are being excluded (throttled batch).
    config : TimingConfig
        ``target_rel``, ``min_samples``, ``max_samples``, ``min_time_s``, ``max_time_s``, ``batch``.
    clock : callable
        Wall clock in seconds (injectable for tests).
    resolution_s : float
        Timer resolution per sample, seconds: floors the CI half-width (:func:`summarize`).

    Returns
    -------
    Sampling
        ``converged`` is True only when the target was met with at least
        ``min_samples`` samples and ``min_time_s`` elapsed. When ``max_time_s``
        runs out below ``min_samples``, one more batch tops the count up (a slow
        kernel still gets its minimum), and ``stop_reason`` says so.
    """
    import_statistics()
    samples: list[float] = []
    start = clock()
    batches = 0
    while True:
        samples.extend(take_batch(next_batch_size(len(samples), config)))
        batches += 1
        elapsed = clock() - start
        enough = len(samples) >= config.min_samples and elapsed >= config.min_time_s
        if enough:
            ci_rel = summarize(samples, resolution_s)["ci_rel"]
            if ci_rel is not None and ci_rel <= config.target_rel:
                return Sampling(
                    samples,
                    True,
                    f"ci_rel {ci_rel:.3g} <= {config.target_rel:g} after {len(samples)} samples in {elapsed:.3g} s",
                    elapsed,
                    batches,
                )
        if len(samples) >= config.max_samples:
            return Sampling(
                samples,
                False,
                f"max_samples={config.max_samples} reached in {elapsed:.3g} s before ci_rel <= {config.target_rel:g}",
                elapsed,
                batches,
            )
        if elapsed >= config.max_time_s:
            why = f"max_time_s={config.max_time_s:g} reached after {len(samples)} samples"
            if len(samples) < config.min_samples:
                samples.extend(take_batch(config.min_samples - len(samples)))
                batches += 1
                why += f"; topped up to {len(samples)} of min_samples={config.min_samples}"
                elapsed = clock() - start
            return Sampling(
                samples, False, f"{why} in {elapsed:.3g} s before ci_rel <= {config.target_rel:g}", elapsed, batches
            )


def _monitored(take: Callable, monitor, exclude: bool, log: list, after: bool = True) -> Callable[[int], list[float]]:
    """Wrap ``take(k, during)`` so the monitor is read where ``take`` calls
    ``during`` and, with ``after``, once more when the batch is done; the batch's
    samples are dropped when throttled and ``exclude`` is set. Appends one
    :class:`harness.measure.clock_batches.BatchClocks` per batch to ``log``."""

    def take_batch(k: int) -> list[float]:
        readings: list = []

        def during() -> None:
            r = monitor.read() if monitor is not None else None
            if r is not None:
                readings.append(r)

        xs = take(k, during)
        if after:
            during()
        b = _batches.BatchClocks(
            n_samples=len(xs), readings=readings, max_sm_clock_mhz=getattr(monitor, "max_sm_clock_mhz", None)
        )
        if exclude and b.throttled:
            b.kept = False
        log.append(b)
        return list(xs) if b.kept else []

    return take_batch


def _result(
    method: str,
    sampling: Sampling,
    number: int,
    config: TimingConfig,
    batches: list,
    monitor,
    resolution_s: float = 0.0,
    **kw,
) -> TimingResult:
    s = summarize(sampling.samples, resolution_s)
    excluded = sum(b.n_samples for b in batches if not b.kept)
    if excluded:
        sampling.stop_reason += f"; {excluded} samples excluded as throttled or CPU-contended"
    c = _batches.summarize(
        batches, sampling.samples, monitor if monitor is not None else _clocks.NullMonitor("no clock monitor")
    )
    return TimingResult(
        method=method,
        samples_s=list(sampling.samples),
        number=number,
        converged=sampling.converged,
        stop_reason=sampling.stop_reason,
        config=config.as_dict(),
        elapsed_s=sampling.elapsed_s,
        **s,
        **c,
        **kw,
    )
