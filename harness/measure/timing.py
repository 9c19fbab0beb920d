"""Device-accurate timing with a stopping rule, clocks and throttling.

Methods (each is part of a series' identity: the ``timing`` asv parameter, so
values from different methods are never compared):

- ``cpu``: ``time.perf_counter_ns`` around ``number`` back-to-back calls
  (``number`` chosen so one sample lasts at least 100 us), with PyTorch's
  intra-op thread count set by the method (``threads``, default 1) and every
  thread of the process watched for run-queue wait; contended stretches of
  samples are excluded (see :func:`time_cpu`, which also states the limits).
- ``cold`` (CUDA): CUDA events around one call; before every sample the L2 is
  flushed by *reading* (a sum into a preallocated scalar) a buffer of at least
  twice the device's L2 size (:func:`flush_buffer_bytes`), enqueued *before* the
  start event, so it is outside the timed region. A read leaves clean lines: a
  write flush (``zero_``, as ``triton.testing.do_bench`` does with 256 MB)
  leaves up to an L2 of dirty lines whose write-back lands inside the next call.
- ``hot`` (CUDA): CUDA events, no flush: repeated calls find their data in L2.
  Calls shorter than :data:`_MIN_EVENT_SPAN_S` are timed several per event pair
  (``number``), so the ~0.5 us event resolution stays small against a sample.
- With ``block_host`` (default) a spin kernel (``torch.cuda._sleep``) is queued
  ahead of each batch in every CUDA mode, cold included, so that the whole batch
  is enqueued while the GPU is busy: the samples then run back to back and the
  host's launch latency is not timed (NVBench's "blocking kernel",
  ``docs/benchmarks.md``). Batches are enqueued in chunks that stay well below
  the ~1024-entry launch queue (:data:`_MAX_QUEUED_OPS`), each behind its own spin.
- ``graph`` (CUDA): the call captured ``graph_unroll`` times in one CUDA graph,
  rotating over copies of the inputs (:func:`rotation_count`) so that L2 does
  not just replay one working set, replayed and divided: launch overhead removed.

Stopping rule (NVBench-style; NVBench's own default is the relative standard
deviation below 0.5% with at least 10 samples, 0.5 s minimum and a timeout):
samples are taken in batches until the relative half-width of the 99%
confidence interval of the median is at or below ``target_rel`` (default 0.5%),
with at least ``min_samples`` samples and ``min_time_s`` of measurement, or
until ``max_time_s`` (or ``max_samples``) is spent; the result records whether it
converged, why it stopped and how long it took. The median CI comes from order
statistics (distribution-free; the binomial construction in Conover, *Practical
Nonparametric Statistics*, 3rd ed., 3.2), which is robust to the occasional slow
sample that inflates a standard deviation. The same rule drives the CPU timer.

Clocks: on CUDA, NVML is read in the middle of every chunk of a batch, once
the GPU has reached that chunk's middle sample (the host waits on its start
event), so the reading sees the clocks of the timed work, not of the spin
kernel or of an idle GPU after the sync (:mod:`harness.measure.clocks`); each
sample is flagged when taken while the GPU was throttled (and dropped when
``exclude_throttled``), and a clock-normalised median is recorded beside the
raw one. Without NVML all of that is unknown, never an error.
"""

from __future__ import annotations

import contextlib
import math
import statistics
import time
from dataclasses import asdict, dataclass, field, replace
from typing import Callable, Sequence

from harness.measure import clocks as _clocks

TIMING_METHODS = ("cpu", "cold", "hot", "graph")

#: Host time to enqueue one sample (events + launch) assumed before the first
#: batch has been measured; sizes the blocking spin kernel. Typical CUDA launch
#: overhead is 3-10 us per call; twice that covers the two event records.
_LAUNCH_S_GUESS = 20e-6
#: Longest blocking spin queued ahead of one batch, seconds.
_MAX_BLOCK_S = 0.1
#: ``cudaEventElapsedTime`` resolution, seconds ("around 0.5 microseconds",
#: CUDA Runtime API reference). One event pair around a 3 us kernel is
#: quantised by ~15%, and tied samples make the median CI look like zero.
EVENT_RESOLUTION_S = 0.5e-6
#: Below this per-call time ``hot`` times several calls per event pair (and
#: ``graph`` several replays), so one pair spans at least this long: 40 event
#: ticks, a quantisation of 2.5% per sample and far less on the median.
_MIN_EVENT_SPAN_S = 20e-6
#: CUDA's launch queue holds about 1024 pending launches; past it a launch
#: blocks the host, the spin kernel no longer covers the batch, and the timed
#: region starts to include the host's launch work. A batch is enqueued in
#: chunks of at most this many stream operations (events, flush, calls at an
#: assumed :data:`_LAUNCHES_PER_CALL` kernels each), each chunk behind its own spin.
_MAX_QUEUED_OPS = 256
_LAUNCHES_PER_CALL = 2


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
        if self.threads is not None and (isinstance(self.threads, bool) or not isinstance(self.threads, int)
                                         or self.threads < 1):
            raise ValueError(f"threads must be a positive int or None, got {self.threads!r}")
        if self.l2_flush not in ("read", "write"):
            raise ValueError(f"l2_flush must be 'read' or 'write', got {self.l2_flush!r}")

    def as_dict(self) -> dict:
        return asdict(self)


def quick(config: TimingConfig) -> TimingConfig:
    """A cheaper variant for ``--quick`` runs: looser target (2%), shorter bounds."""
    return replace(config, target_rel=max(config.target_rel, 0.02), min_samples=5,
                   min_time_s=min(config.min_time_s, 0.01), max_time_s=min(config.max_time_s, 0.2),
                   warmup_s=min(config.warmup_s, 0.01))


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
        NVML summary (:func:`harness.measure.clocks.summarize`); ``available`` False
        with a ``reason`` when unknown.
    throttled : list of bool or None
        Per sample, whether it was taken while throttled; ``None`` when unknown.
    p50_clock_normalised_s : float or None
        Median of ``sample * sm_clock / max_sm_clock`` (:func:`harness.measure.clocks.normalise`).
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
    return {"p20_s": quantile(xs, 0.2), "p50_s": p50, "p80_s": quantile(xs, 0.8), "stdev_rel": stdev_rel, "ci_rel": ci_rel}


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
                return Sampling(samples, True, f"ci_rel {ci_rel:.3g} <= {config.target_rel:g} after "
                                f"{len(samples)} samples in {elapsed:.3g} s", elapsed, batches)
        if len(samples) >= config.max_samples:
            return Sampling(samples, False, f"max_samples={config.max_samples} reached in {elapsed:.3g} s "
                            f"before ci_rel <= {config.target_rel:g}", elapsed, batches)
        if elapsed >= config.max_time_s:
            why = f"max_time_s={config.max_time_s:g} reached after {len(samples)} samples"
            if len(samples) < config.min_samples:
                samples.extend(take_batch(config.min_samples - len(samples)))
                batches += 1
                why += f"; topped up to {len(samples)} of min_samples={config.min_samples}"
                elapsed = clock() - start
            return Sampling(samples, False, f"{why} in {elapsed:.3g} s before ci_rel <= {config.target_rel:g}",
                            elapsed, batches)


def _monitored(take: Callable, monitor, exclude: bool, log: list, after: bool = True) -> Callable[[int], list[float]]:
    """Wrap ``take(k, during)`` so the monitor is read where ``take`` calls
    ``during`` and, with ``after``, once more when the batch is done; the batch's
    samples are dropped when throttled and ``exclude`` is set. Appends one
    :class:`harness.measure.clocks.BatchClocks` per batch to ``log``."""

    def take_batch(k: int) -> list[float]:
        readings: list = []

        def during() -> None:
            r = monitor.read() if monitor is not None else None
            if r is not None:
                readings.append(r)

        xs = take(k, during)
        if after:
            during()
        b = _clocks.BatchClocks(n_samples=len(xs), readings=readings)
        if exclude and b.throttled:
            b.kept = False
        log.append(b)
        return list(xs) if b.kept else []

    return take_batch


def _result(method: str, sampling: Sampling, number: int, config: TimingConfig, batches: list, monitor,
            resolution_s: float = 0.0, **kw) -> TimingResult:
    s = summarize(sampling.samples, resolution_s)
    excluded = sum(b.n_samples for b in batches if not b.kept)
    if excluded:
        sampling.stop_reason += f"; {excluded} samples excluded as throttled or CPU-contended"
    c = _clocks.summarize(batches, sampling.samples, monitor if monitor is not None else
                          _clocks.NullMonitor("no clock monitor"))
    return TimingResult(method=method, samples_s=list(sampling.samples), number=number,
                        converged=sampling.converged, stop_reason=sampling.stop_reason,
                        config=config.as_dict(), elapsed_s=sampling.elapsed_s, **s, **c, **kw)


# --------------------------------------------------------------------- CPU

#: Longest stretch of CPU samples between two contention readings, seconds. A
#: contended stretch is dropped whole, so it is kept short (a neighbour takes a
#: core for a scheduler slice of a few ms); reading every thread's schedstat
#: costs tens of microseconds, outside the timed calls.
CPU_CHUNK_S = 0.01


@contextlib.contextmanager
def intra_op_threads(threads: int | None):
    """Set PyTorch's intra-op thread count for the ``with`` block, then restore it.

    Yields ``{"requested": threads, "torch_threads": n}`` with the count torch
    reports inside the block (``None`` when torch cannot be imported; the
    timing still runs). ``threads=None`` changes nothing. Raises
    ``RuntimeError`` when torch does not take the requested count.
    """
    try:
        import torch
    except ImportError as exc:
        yield {"requested": threads, "torch_threads": None, "reason": f"torch not importable: {exc}"}
        return
    old = torch.get_num_threads()
    if threads is None:
        yield {"requested": None, "torch_threads": old}
        return
    torch.set_num_threads(threads)
    try:
        got = torch.get_num_threads()
        if got != threads:
            raise RuntimeError(f"torch.set_num_threads({threads}) left {got} intra-op threads")
        yield {"requested": threads, "torch_threads": got}
    finally:
        torch.set_num_threads(old)


#: When contended samples were excluded and fewer than ``min_samples`` clean ones
#: remain at ``max_time_s``, sampling goes on until this many times ``max_time_s``.
CONTENDED_EXTENSION = 3.0

#: glibc ``mallopt`` parameters (``malloc.h``) and the value set for both, bytes.
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
STEADY_MALLOC_BYTES = 1 << 30


def steady_malloc() -> dict:
    """Stop glibc's allocator from returning freed memory to the OS between calls.

    ``mallopt(M_MMAP_THRESHOLD, 1 GiB)`` and ``mallopt(M_TRIM_THRESHOLD, 1 GiB)``
    (glibc ``mallopt(3)``): allocations below 1 GiB come from the heap and a
    freed heap top is kept, so the next call reuses it instead of faulting
    fresh zeroed pages in. Without it glibc's *dynamic* thresholds decide, by
    the process's allocation history, whether every call of a multi-MiB op
    page-faults: measured here, an unfused rmsnorm at 1024x1024 fp32 took
    1559 minor faults and 3.1 ms of CPU per call without it, 0 faults and
    0.25 ms with it, and the CPU series clustered at two levels run to run.
    The setting is process-wide and stays (asv runs each case in its own
    process). Returns ``{"applied": bool, "reason": ...}``; never raises (not
    glibc: not applied, with the reason).
    """
    try:
        import ctypes

        libc = ctypes.CDLL(None)
        mallopt = libc.mallopt
    except (OSError, AttributeError) as exc:
        return {"applied": False, "reason": f"no glibc mallopt: {exc}"}
    ok = mallopt(_M_MMAP_THRESHOLD, STEADY_MALLOC_BYTES) == 1 and mallopt(_M_TRIM_THRESHOLD, STEADY_MALLOC_BYTES) == 1
    return {"applied": bool(ok), "reason": None if ok else "mallopt refused the thresholds",
            "mmap_threshold_bytes": STEADY_MALLOC_BYTES, "trim_threshold_bytes": STEADY_MALLOC_BYTES}


def _minor_faults() -> int | None:
    try:
        import resource

        return resource.getrusage(getattr(resource, "RUSAGE_THREAD", resource.RUSAGE_SELF)).ru_minflt
    except (ImportError, OSError, ValueError):
        return None


def time_cpu(fn: Callable[[], object], config: TimingConfig | None = None,
             clock_ns: Callable[[], int] = time.perf_counter_ns, monitor=None,
             thread_ns: Callable[[], int] | None = None) -> TimingResult:
    """Time ``fn()`` on the CPU with ``perf_counter_ns``.

    Each sample runs ``number`` calls back to back (``number`` chosen during
    warm-up so a sample lasts at least 100 us, well above timer resolution) and
    records the per-call mean. ``clock_ns`` (nanoseconds) drives both the
    samples and the stopping rule, so a synthetic clock can test it.

    What the method controls, and records in ``extra["cpu"]``:

    - **threads**: PyTorch's intra-op pool is set to ``config.threads``
      (default 1) for warm-up and sampling (:func:`intra_op_threads`). On a
      shared machine a multi-threaded op waits for its slowest worker, so one
      neighbour on one core turns a 0.6 ms op into 4.5 ms; one thread measures
      the code, not the neighbours (``docs/performance.md``).
    - **contention**: samples are taken in stretches of at most
      :data:`CPU_CHUNK_S`; around each, ``monitor`` (default
      :func:`harness.measure.clocks.open_cpu_monitor`: every thread of the process) is
      read, and the timing thread's CPU time (``thread_ns``, default
      ``time.thread_time_ns`` when ``clock_ns`` is the real clock) is taken
      beside the wall time. Single-threaded (``threads=1`` with a thread
      clock), each *sample* is judged: one whose wall time exceeds the timing
      thread's CPU time by more than :data:`harness.measure.clocks.CPU_CONTENTION_LIMIT`
      was preempted (or blocked), so a neighbour's time slice costs only the
      samples it hit. Otherwise each *stretch* is judged: contended when the
      process's threads together waited on a run queue for more than the limit
      of its wall time (a pool worker waiting for a core stalls the op).
      Contended samples are flagged (``throttled``, reason ``cpu_contention``)
      and, with ``config.exclude_contended``, excluded; if fewer than
      ``min_samples`` clean samples remain at ``max_time_s``, sampling goes on
      up to :data:`CONTENDED_EXTENSION` times ``max_time_s``; if still too few
      remain, all are kept and
      ``extra["cpu"]["contended"]`` is True (the record says so).
    - **allocator**: with ``config.steady_malloc`` glibc's thresholds are
      fixed first (:func:`steady_malloc`), and the timing thread's minor page
      faults per call are recorded (``minor_faults_per_call``).
    - per stretch: samples, wall, thread CPU, process CPU, run-queue wait,
      contended and kept samples (``extra["cpu"]["batches"]``, columns).

    Limits: only this process's threads are set and watched (a BLAS or OpenMP
    pool outside torch's control is not limited, a child process is not
    watched); run-queue wait does not see a neighbour that slows us through
    shared caches or memory bandwidth, or frequency changes (turbo, thermal):
    those still move the median. A contended stretch is detected only after it
    ran, so it costs time, and on a saturated machine most of ``max_time_s``
    can go to excluded stretches.

    Raises ``ValueError`` when ``config.method`` is not ``cpu``, ``RuntimeError``
    when torch refuses the thread count.
    """
    config = config or TimingConfig(method="cpu")
    if config.method != "cpu":
        raise ValueError(f"time_cpu needs method='cpu', got {config.method!r}")
    if monitor is None:
        monitor = _clocks.open_cpu_monitor()
    if thread_ns is None and clock_ns is time.perf_counter_ns:
        thread_ns = time.thread_time_ns
    malloc_info = steady_malloc() if config.steady_malloc else {"applied": False, "reason": "steady_malloc off"}
    with intra_op_threads(config.threads) as threads_info:
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
        # Samples per stretch; re-estimated from each stretch (warm-up calls are slow).
        chunk = [max(1, int(CPU_CHUNK_S / (per_call * number))) if per_call > 0 else 100]

        single = config.threads == 1 and thread_ns is not None

        def take(k: int) -> tuple[list[float], list[float] | None]:
            out, cpu = [], ([] if single else None)
            for _ in range(k):
                if single:
                    c0 = thread_ns()
                a = clock_ns()
                for _ in range(number):
                    fn()
                b = clock_ns()
                out.append((b - a) / 1e9 / number)
                if single:
                    cpu.append((thread_ns() - c0) / 1e9 / number)
            return out, cpu

        log: list = []
        parts: list[list[float]] = []  # the samples of each entry of `log`
        cols = {k: [] for k in ("n_samples", "wall_s", "thread_cpu_s", "process_cpu_s", "run_queue_wait_s",
                                "contended_samples", "kept_samples")}
        limit = _clocks.CPU_CONTENTION_LIMIT

        def add(xs: list[float], b) -> None:
            log.append(b)
            parts.append(xs)

        def take_batch(k: int) -> list[float]:
            kept: list[float] = []
            while k > 0:
                c = min(k, chunk[0])
                k -= c
                r0 = monitor.read()
                w0, p0 = clock_ns(), time.process_time_ns()
                t0 = thread_ns() if thread_ns else None
                xs, cpus = take(c)
                w1, p1 = clock_ns(), time.process_time_ns()
                t1 = thread_ns() if thread_ns else None
                r1 = monitor.read()
                wall = (w1 - w0) / 1e9
                wait = _clocks.run_queue_wait_s(r0, r1) if r0 is not None and r1 is not None else None
                if single:
                    # One thread does all the work: a sample whose wall time exceeds
                    # its thread CPU time by more than the limit was preempted (or
                    # blocked). Judged per sample, so the clean samples of a stretch
                    # survive a neighbour's time slice.
                    clean = [x for x, cp in zip(xs, cpus) if x - cp <= limit * x]
                    dirty = [x for x, cp in zip(xs, cpus) if x - cp > limit * x]
                    t = r1.t_s if r1 is not None else 0.0
                    if clean:
                        add(clean, _clocks.BatchClocks(len(clean), [_clocks.ClockReading(t_s=t, reasons=())]))
                        kept.extend(clean)
                    if dirty:
                        b = _clocks.BatchClocks(len(dirty), [_clocks.ClockReading(t_s=t, reasons=("cpu_contention",))])
                        b.kept = not config.exclude_contended
                        add(dirty, b)
                        if b.kept:
                            kept.extend(dirty)
                    n_bad, n_kept = len(dirty), len(clean) + (0 if config.exclude_contended else len(dirty))
                else:
                    # Several threads (or no thread clock): judged per stretch, from the
                    # run-queue wait of every thread of the process.
                    b = _clocks.BatchClocks(n_samples=len(xs), readings=[r for r in (r0, r1) if r is not None])
                    bad = "cpu_contention" in b.reasons
                    if (config.exclude_throttled and b.throttled) or (config.exclude_contended and bad):
                        b.kept = False
                    add(xs, b)
                    if b.kept:
                        kept.extend(xs)
                    n_bad, n_kept = (len(xs) if bad else 0), (len(xs) if b.kept else 0)
                for key, v in (("n_samples", len(xs)), ("wall_s", wall),
                               ("thread_cpu_s", (t1 - t0) / 1e9 if thread_ns else None),
                               ("process_cpu_s", (p1 - p0) / 1e9), ("run_queue_wait_s", wait),
                               ("contended_samples", n_bad), ("kept_samples", n_kept)):
                    cols[key].append(v)
                if xs and min(xs) > 0:
                    # From the fastest sample: a preempted one would shrink the stretches.
                    chunk[0] = max(1, int(CPU_CHUNK_S / (min(xs) * number)))
            return kept

        f0 = _minor_faults()
        sampling = sample_until_stable(take_batch, config, clock=lambda: clock_ns() / 1e9)
        if len(sampling.samples) < config.min_samples and any(not b.kept for b in log):
            # Contention ate the budget: wait it out a little longer for clean samples.
            t_end = clock_ns() / 1e9 + (CONTENDED_EXTENSION - 1) * config.max_time_s
            n0 = len(sampling.samples)
            while len(sampling.samples) < config.min_samples and clock_ns() / 1e9 < t_end:
                sampling.samples.extend(take_batch(config.min_samples - len(sampling.samples)))
            sampling.stop_reason += (f"; extended by up to {(CONTENDED_EXTENSION - 1) * config.max_time_s:.3g} s "
                                     f"for clean samples: {n0} -> {len(sampling.samples)}")
        f1 = _minor_faults()

    n_calls = sum(cols["n_samples"]) * number
    n_contended = sum(cols["contended_samples"])
    fallback = len(sampling.samples) < config.min_samples and any(not b.kept for b in log)
    if fallback:
        # Too few clean samples: keep everything, flagged, rather than lose the case.
        clean_n = len(sampling.samples)
        for b in log:
            b.kept = True
        cols["kept_samples"] = list(cols["n_samples"])
        sampling.samples = [x for xs in parts for x in xs]
        sampling.converged = False
        sampling.stop_reason += (f"; only {clean_n} uncontended samples (< min_samples={config.min_samples}): "
                                 f"all {len(sampling.samples)} kept, flagged contended")
    walls = [w for w in cols["wall_s"] if w and w > 0]
    cpu_frac = [c / w for c, w in zip(cols["thread_cpu_s"], cols["wall_s"]) if c is not None and w and w > 0]
    waits = [q / w for q, w in zip(cols["run_queue_wait_s"], cols["wall_s"]) if q is not None and w and w > 0]
    extra = {"cpu": {
        "threads": threads_info,
        "malloc": malloc_info,
        "minor_faults_per_call": ((f1 - f0) / n_calls if f0 is not None and f1 is not None and n_calls else None),
        "judged": "per sample (wall vs thread CPU time)" if single else "per stretch (run-queue wait, all threads)",
        "chunk_samples": chunk[0],
        "contended": bool(fallback or (n_contended and not config.exclude_contended)),
        "contended_samples": n_contended,
        "excluded_samples": sum(b.n_samples for b in log if not b.kept),
        "contended_batches": sum(1 for n in cols["contended_samples"] if n),
        "batches_total": len(cols["n_samples"]),
        "wall_s_total": sum(walls),
        "thread_cpu_frac_p50": statistics.median(cpu_frac) if cpu_frac else None,
        "run_queue_wait_frac": {"p50": statistics.median(waits), "max": max(waits)} if waits else None,
        "contention_source": getattr(monitor, "name", None) if getattr(monitor, "available", False)
        else getattr(monitor, "reason", None),
        "batches": _json_columns(cols),
    }}
    res = _result("cpu", sampling, number, config, log, monitor, extra=extra)
    if single and waits and res.clocks.get("available"):
        # Judged per sample, the batches carry no scheduler readings: the
        # stretches' run-queue wait is the record's spread.
        res.clocks["cpu_wait_frac"] = {"min": min(waits), "p50": statistics.median(waits), "max": max(waits)}
        res.clocks["cpu_contention_limit"] = _clocks.CPU_CONTENTION_LIMIT
    return res


def _json_columns(cols: dict) -> dict:
    """Per-stretch columns with floats rounded to ns (records stay small)."""
    return {k: [round(v, 9) if isinstance(v, float) else v for v in vs] for k, vs in cols.items()}


# --------------------------------------------------------------------- CUDA


def flush_buffer_bytes(l2_bytes: int | None, factor: int = 2, fallback_bytes: int = 256 << 20) -> int:
    """Size of the L2 flush buffer: ``factor`` times the device's L2 size, in bytes.

    ``fallback_bytes`` (256 MiB, four times the largest L2 of the GPUs in our
    spec table) is used when the driver does not report an L2 size (``None`` or 0).
    Raises ``ValueError`` for a negative size or a factor below 2.
    """
    if factor < 2:
        raise ValueError("the flush buffer must be at least twice the L2 size")
    if l2_bytes is None or l2_bytes == 0:
        return fallback_bytes
    if l2_bytes < 0:
        raise ValueError(f"negative L2 size {l2_bytes}")
    return int(factor * l2_bytes)


def l2_bytes_of(props) -> int | None:
    """L2 size in bytes from ``torch.cuda.get_device_properties(...)`` (``L2_cache_size``);
    ``None`` when the properties do not carry it or report 0."""
    v = getattr(props, "L2_cache_size", None)
    return int(v) if v else None


def rotation_count(working_set_bytes: int, l2_bytes: int | None, max_copies: int = 32) -> int:
    """How many input copies ``graph`` mode rotates over.

    Enough copies that one pass over all of them writes at least twice the L2
    (``ceil(2 * l2 / working_set)``), so a replay does not find the previous
    call's data in cache; at least 2, at most ``max_copies`` (memory). An
    unknown L2 gives 3. Raises ``ValueError`` for a negative working set or ``max_copies < 2``.
    """
    if working_set_bytes < 0:
        raise ValueError(f"negative working set {working_set_bytes}")
    if max_copies < 2:
        raise ValueError("max_copies must be at least 2")
    if not l2_bytes:
        return 3
    if working_set_bytes == 0:
        return max_copies
    return int(min(max_copies, max(2, math.ceil(2 * l2_bytes / working_set_bytes))))


def time_cuda(fn: Callable[[], object], config: TimingConfig, l2_bytes: int | None = None,
              rotated: Sequence[Callable[[], object]] | None = None, monitor=None) -> TimingResult:
    """Time ``fn()`` on the current CUDA stream with CUDA events.

    Parameters
    ----------
    fn : callable
        Launches the kernel(s) of one invocation, asynchronously, on the current stream.
    config : TimingConfig
        ``method`` must be ``cold``, ``hot`` or ``graph``.
    l2_bytes : int or None
        Device L2 size, for the cold-mode flush buffer (:func:`flush_buffer_bytes`).
    rotated : sequence of callables, optional
        For ``graph`` mode: the same call on different copies of the inputs.
    monitor : harness.measure.clocks.ClockMonitor, optional
        Opened on the current device (and closed afterwards) when not given.

    Each sample's time is ``start.elapsed_time(end)`` (milliseconds, ~0.5 us
    resolution per the CUDA documentation of ``cudaEventElapsedTime``) between
    events recorded on the stream immediately around the call; ``graph``
    divides a replay by the number of calls captured in it.

    Raises ``ValueError`` for a non-CUDA method.
    """
    import torch

    if config.method not in ("cold", "hot", "graph"):
        raise ValueError(f"time_cuda needs method cold, hot or graph, got {config.method!r}")
    own_monitor = monitor is None
    if own_monitor:
        monitor = _clocks.open_monitor(torch.cuda.current_device())
    try:
        return _time_cuda(torch, fn, config, l2_bytes, rotated, monitor)
    finally:
        if own_monitor:
            monitor.close()


def calls_per_event_pair(per_call_s: float, min_span_s: float = _MIN_EVENT_SPAN_S, max_calls: int = 1000) -> int:
    """Calls timed between one pair of events: enough that the pair spans at
    least ``min_span_s`` (``ceil(min_span_s / per_call_s)``), at least 1, at most
    ``max_calls``. Raises ``ValueError`` for a negative time."""
    if per_call_s < 0:
        raise ValueError(f"negative per-call time {per_call_s}")
    if per_call_s == 0:
        return max_calls
    return int(min(max_calls, max(1, math.ceil(min_span_s / per_call_s - 1e-9))))  # 1e-9: float ratios like 10.000000000000002


def chunk_size(number: int, flush: bool, max_ops: int = _MAX_QUEUED_OPS,
               launches_per_call: int = _LAUNCHES_PER_CALL) -> int:
    """Samples enqueued behind one spin kernel: stream operations per sample are
    two events, the flush (cold) and ``number`` calls of ``launches_per_call``
    kernels; at most ``max_ops`` of them are queued at once (at least one sample)."""
    per_sample = 2 + (1 if flush else 0) + number * launches_per_call
    return max(1, max_ops // per_sample)


def _time_cuda(torch, fn, config: TimingConfig, l2_bytes, rotated, monitor) -> TimingResult:
    flush = None
    flush_bytes = None
    if config.method == "cold":
        flush_bytes = flush_buffer_bytes(l2_bytes)
        flush = torch.empty(flush_bytes // 4, dtype=torch.float32, device="cuda")
        flush.fill_(1.0)
        sink = torch.empty((), dtype=torch.float32, device="cuda")

        def flush_l2() -> None:
            if config.l2_flush == "write":
                flush.zero_()
            else:
                torch.sum(flush, dim=0, out=sink)  # reads every line; writes one scalar

    call = fn
    number = 1
    if config.method == "graph":
        calls = list(rotated) if rotated else [fn]
        unroll = max(config.graph_unroll, len(calls))
        for c in calls:  # warm the allocator, JIT and autotuner outside capture
            c()
        torch.cuda.synchronize()
        g = torch.cuda.CUDAGraph()
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            with torch.cuda.graph(g, stream=s):
                for i in range(unroll):
                    calls[i % len(calls)]()
        torch.cuda.current_stream().wait_stream(s)
        call = g.replay
        number = unroll

    # Warm-up (JIT, autotune, clocks), timed with events to size the event pairs.
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    w0, w1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    while True:
        w0.record()
        call()
        w1.record()
        torch.cuda.synchronize()
        if time.perf_counter() - t0 >= config.warmup_s:
            break
    per_call_s = max(0.0, w0.elapsed_time(w1) / 1e3)
    # Several calls per event pair for short hot/graph calls; a cold sample must
    # be one call after one flush, so cold keeps one and its CI is floored instead.
    repeat = calls_per_event_pair(per_call_s) if config.method in ("hot", "graph") else 1
    number *= repeat
    resolution_s = EVENT_RESOLUTION_S / number

    sleep = getattr(torch.cuda, "_sleep", None) if config.block_host else None
    clock_hz = (getattr(monitor, "max_sm_clock_mhz", None) or 2000) * 1e6
    per_sample_host_s = [_LAUNCH_S_GUESS * (1 + repeat)]
    chunk = chunk_size(repeat, flush is not None)

    def take_chunk(k: int, during) -> list[float]:
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(k)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(k)]
        if sleep is not None:
            # Spin long enough to cover enqueueing the chunk; at a lower clock it
            # spins longer, which only wastes a little time. Not timed.
            sleep(int(min(_MAX_BLOCK_S, 1.5 * k * per_sample_host_s[0]) * clock_hz))
        h0 = time.perf_counter()
        for i in range(k):
            if flush is not None:
                flush_l2()  # enqueued before the start event: not timed
            starts[i].record()
            for _ in range(repeat):
                call()
            ends[i].record()
        per_sample_host_s[0] = max(1e-6, (time.perf_counter() - h0) / k)
        # NVML while the timed work runs: wait until the GPU reaches the middle
        # sample's start event, then read.
        starts[k // 2].synchronize()
        during()
        torch.cuda.synchronize()
        return [st.elapsed_time(en) / 1e3 / number for st, en in zip(starts, ends)]

    def take(k: int, during) -> list[float]:
        out: list[float] = []
        while len(out) < k:
            out.extend(take_chunk(min(chunk, k - len(out)), during))
        return out

    log: list = []
    sampling = sample_until_stable(_monitored(take, monitor, config.exclude_throttled, log, after=False), config,
                                   resolution_s=resolution_s)
    return _result(config.method, sampling, number, config, log, monitor, resolution_s=resolution_s,
                   flush_bytes=flush_bytes, extra={"calls_per_event_pair": repeat, "samples_per_chunk": chunk,
                                                   "event_resolution_s": EVENT_RESOLUTION_S,
                                                   "flush": (("read (sum)" if config.l2_flush == "read" else "write (zero_)")
                                                             if flush is not None else None)})
