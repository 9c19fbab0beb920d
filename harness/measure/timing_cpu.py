"""The ``cpu`` timing method: :func:`time_cpu` (``perf_counter_ns`` around
back-to-back calls, intra-op threads set, contended samples excluded) and what
it controls: the thread count (:func:`intra_op_threads`) and glibc's allocator
(:func:`steady_malloc`). Callers import these from :mod:`harness.measure.timing`.
"""

from __future__ import annotations

import contextlib
import math
import statistics
import time
from typing import Callable

from harness.measure import clock_batches as _batches
from harness.measure import clocks as _clocks
from harness.measure.timing_base import TimingConfig, TimingResult, _result, import_statistics, sample_until_stable

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
    return {
        "applied": bool(ok),
        "reason": None if ok else "mallopt refused the thresholds",
        "mmap_threshold_bytes": STEADY_MALLOC_BYTES,
        "trim_threshold_bytes": STEADY_MALLOC_BYTES,
    }


def _minor_faults() -> int | None:
    try:
        import resource

        return resource.getrusage(getattr(resource, "RUSAGE_THREAD", resource.RUSAGE_SELF)).ru_minflt
    except (ImportError, OSError, ValueError):
        return None


def time_cpu(
    fn: Callable[[], object],
    config: TimingConfig | None = None,
    clock_ns: Callable[[], int] = time.perf_counter_ns,
    monitor=None,
    thread_ns: Callable[[], int] | None = None,
) -> TimingResult:
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
      the code, not the neighbours (``docs/measuring.md``).
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
    import_statistics()  # not inside the page-fault count below
    with intra_op_threads(config.threads) as threads_info:
        number, per_call = _warm_up(fn, clock_ns, config.warmup_s)
        sampler = _Stretches(fn, config, number, per_call, clock_ns, thread_ns, monitor)
        f0 = _minor_faults()
        sampling = sample_until_stable(sampler.take_batch, config, clock=lambda: clock_ns() / 1e9)
        _extend_for_clean(sampling, sampler, config, clock_ns)
        f1 = _minor_faults()
    fallback = _keep_all_if_too_few(sampling, sampler, config)
    n_calls = sum(sampler.cols["n_samples"]) * number
    faults = (f1 - f0) / n_calls if f0 is not None and f1 is not None and n_calls else None
    extra, waits = _cpu_extra(sampler, config, monitor, threads_info, malloc_info, faults, fallback)
    res = _result("cpu", sampling, number, config, sampler.log, monitor, extra=extra)
    if sampler.single and waits and res.clocks.get("available"):
        # Judged per sample, the batches carry no scheduler readings: the
        # stretches' run-queue wait is the record's spread.
        res.clocks["cpu_wait_frac"] = {"min": min(waits), "p50": statistics.median(waits), "max": max(waits)}
        res.clocks["cpu_contention_limit"] = _clocks.CPU_CONTENTION_LIMIT
    return res


def _warm_up(fn: Callable[[], object], clock_ns: Callable[[], int], warmup_s: float) -> tuple[int, float]:
    """Call ``fn`` for at least ``warmup_s`` (and twice); returns ``(number, per_call_s)``:
    the calls per sample so one sample lasts at least 100 us, and the warm-up's mean call time."""
    t0 = clock_ns()
    calls = 0
    while True:
        fn()
        calls += 1
        if (clock_ns() - t0) / 1e9 >= warmup_s and calls >= 2:
            break
    per_call = (clock_ns() - t0) / 1e9 / calls
    number = max(1, int(math.ceil(100e-6 / per_call))) if per_call > 0 else 1000
    return number, per_call


#: Per-stretch columns of ``extra["cpu"]["batches"]``.
_STRETCH_COLUMNS = (
    "n_samples",
    "wall_s",
    "thread_cpu_s",
    "process_cpu_s",
    "run_queue_wait_s",
    "contended_samples",
    "kept_samples",
)


class _Stretches:
    """The CPU sampler: takes samples in stretches of at most :data:`CPU_CHUNK_S`,
    reads the contention monitor around each and judges its samples (per sample
    when single-threaded with a thread clock, else per stretch; see :func:`time_cpu`).

    ``log`` holds one :class:`harness.measure.clock_batches.BatchClocks` per judged group,
    ``parts`` the samples of each entry of ``log``, ``cols`` the per-stretch columns.
    """

    def __init__(self, fn, config: TimingConfig, number: int, per_call: float, clock_ns, thread_ns, monitor):
        self.fn, self.config, self.number = fn, config, number
        self.clock_ns, self.thread_ns, self.monitor = clock_ns, thread_ns, monitor
        self.single = config.threads == 1 and thread_ns is not None
        # Samples per stretch; re-estimated from each stretch (warm-up calls are slow).
        self.chunk = max(1, int(CPU_CHUNK_S / (per_call * number))) if per_call > 0 else 100
        self.log: list = []
        self.parts: list[list[float]] = []
        self.cols: dict[str, list] = {k: [] for k in _STRETCH_COLUMNS}

    def take(self, k: int) -> tuple[list[float], list[float] | None]:
        """``k`` samples (per-call wall seconds) and, single-threaded, each one's thread CPU seconds."""
        fn, number, clock_ns, thread_ns = self.fn, self.number, self.clock_ns, self.thread_ns
        out, cpu = [], ([] if self.single else None)
        for _ in range(k):
            if self.single:
                c0 = thread_ns()
            a = clock_ns()
            for _ in range(number):
                fn()
            b = clock_ns()
            out.append((b - a) / 1e9 / number)
            if self.single:
                cpu.append((thread_ns() - c0) / 1e9 / number)
        return out, cpu

    def _add(self, xs: list[float], b) -> None:
        self.log.append(b)
        self.parts.append(xs)

    def take_batch(self, k: int) -> list[float]:
        """``k`` samples in stretches; returns the kept ones."""
        kept: list[float] = []
        while k > 0:
            c = min(k, self.chunk)
            k -= c
            kept.extend(self._stretch(c))
        return kept

    def _stretch(self, c: int) -> list[float]:
        clock_ns, thread_ns, monitor = self.clock_ns, self.thread_ns, self.monitor
        r0 = monitor.read()
        w0, p0 = clock_ns(), time.process_time_ns()
        t0 = thread_ns() if thread_ns else None
        xs, cpus = self.take(c)
        w1, p1 = clock_ns(), time.process_time_ns()
        t1 = thread_ns() if thread_ns else None
        r1 = monitor.read()
        wall = (w1 - w0) / 1e9
        wait = _clocks.run_queue_wait_s(r0, r1) if r0 is not None and r1 is not None else None
        if self.single:
            kept, n_bad = self._judge_samples(xs, cpus, r1)
        else:
            kept, n_bad = self._judge_stretch(xs, r0, r1)
        for key, v in (
            ("n_samples", len(xs)),
            ("wall_s", wall),
            ("thread_cpu_s", (t1 - t0) / 1e9 if thread_ns else None),
            ("process_cpu_s", (p1 - p0) / 1e9),
            ("run_queue_wait_s", wait),
            ("contended_samples", n_bad),
            ("kept_samples", len(kept)),
        ):
            self.cols[key].append(v)
        if xs and min(xs) > 0:
            # From the fastest sample: a preempted one would shrink the stretches.
            self.chunk = max(1, int(CPU_CHUNK_S / (min(xs) * self.number)))
        return kept

    def _judge_samples(self, xs: list[float], cpus: list[float], r1) -> tuple[list[float], int]:
        """One thread does all the work: a sample whose wall time exceeds its
        thread CPU time by more than the limit was preempted (or blocked). Judged
        per sample, so the clean samples of a stretch survive a neighbour's time
        slice. Returns the kept samples and the number contended."""
        limit = _clocks.CPU_CONTENTION_LIMIT
        clean = [x for x, cp in zip(xs, cpus) if x - cp <= limit * x]
        dirty = [x for x, cp in zip(xs, cpus) if x - cp > limit * x]
        t = r1.t_s if r1 is not None else 0.0
        kept: list[float] = []
        if clean:
            self._add(clean, _batches.BatchClocks(len(clean), [_clocks.ClockReading(t_s=t, reasons=())]))
            kept.extend(clean)
        if dirty:
            b = _batches.BatchClocks(len(dirty), [_clocks.ClockReading(t_s=t, reasons=("cpu_contention",))])
            b.kept = not self.config.exclude_contended
            self._add(dirty, b)
            if b.kept:
                kept.extend(dirty)
        return kept, len(dirty)

    def _judge_stretch(self, xs: list[float], r0, r1) -> tuple[list[float], int]:
        """Several threads (or no thread clock): judged per stretch, from the
        run-queue wait of every thread of the process."""
        config = self.config
        b = _batches.BatchClocks(
            n_samples=len(xs),
            readings=[r for r in (r0, r1) if r is not None],
            max_sm_clock_mhz=getattr(self.monitor, "max_sm_clock_mhz", None),
        )
        bad = "cpu_contention" in b.reasons
        if (config.exclude_throttled and b.throttled) or (config.exclude_contended and bad):
            b.kept = False
        self._add(xs, b)
        return (list(xs) if b.kept else []), (len(xs) if bad else 0)


def _extend_for_clean(sampling, sampler: _Stretches, config: TimingConfig, clock_ns) -> None:
    """Contention ate the budget (fewer than ``min_samples`` kept, some excluded):
    sample on for up to :data:`CONTENDED_EXTENSION` times ``max_time_s`` in all."""
    if not (len(sampling.samples) < config.min_samples and any(not b.kept for b in sampler.log)):
        return
    t_end = clock_ns() / 1e9 + (CONTENDED_EXTENSION - 1) * config.max_time_s
    n0 = len(sampling.samples)
    while len(sampling.samples) < config.min_samples and clock_ns() / 1e9 < t_end:
        sampling.samples.extend(sampler.take_batch(config.min_samples - len(sampling.samples)))
    sampling.stop_reason += (
        f"; extended by up to {(CONTENDED_EXTENSION - 1) * config.max_time_s:.3g} s "
        f"for clean samples: {n0} -> {len(sampling.samples)}"
    )


def _keep_all_if_too_few(sampling, sampler: _Stretches, config: TimingConfig) -> bool:
    """Too few clean samples even after the extension: keep everything, flagged,
    rather than lose the case. Returns whether it did."""
    if not (len(sampling.samples) < config.min_samples and any(not b.kept for b in sampler.log)):
        return False
    clean_n = len(sampling.samples)
    for b in sampler.log:
        b.kept = True
    sampler.cols["kept_samples"] = list(sampler.cols["n_samples"])
    sampling.samples = [x for xs in sampler.parts for x in xs]
    sampling.converged = False
    sampling.stop_reason += (
        f"; only {clean_n} uncontended samples (< min_samples={config.min_samples}): "
        f"all {len(sampling.samples)} kept, flagged contended"
    )
    return True


def _cpu_extra(
    sampler: _Stretches,
    config: TimingConfig,
    monitor,
    threads_info: dict,
    malloc_info: dict,
    faults_per_call: float | None,
    fallback: bool,
) -> tuple[dict, list[float]]:
    """``extra["cpu"]`` of the result, and the stretches' run-queue wait fractions."""
    cols, log = sampler.cols, sampler.log
    n_contended = sum(cols["contended_samples"])
    walls = [w for w in cols["wall_s"] if w and w > 0]
    cpu_frac = [c / w for c, w in zip(cols["thread_cpu_s"], cols["wall_s"]) if c is not None and w and w > 0]
    waits = [q / w for q, w in zip(cols["run_queue_wait_s"], cols["wall_s"]) if q is not None and w and w > 0]
    extra = {
        "cpu": {
            "threads": threads_info,
            "malloc": malloc_info,
            "minor_faults_per_call": faults_per_call,
            "judged": "per sample (wall vs thread CPU time)"
            if sampler.single
            else "per stretch (run-queue wait, all threads)",
            "chunk_samples": sampler.chunk,
            "contended": bool(fallback or (n_contended and not config.exclude_contended)),
            "contended_samples": n_contended,
            "excluded_samples": sum(b.n_samples for b in log if not b.kept),
            "contended_batches": sum(1 for n in cols["contended_samples"] if n),
            "batches_total": len(cols["n_samples"]),
            "wall_s_total": sum(walls),
            "thread_cpu_frac_p50": statistics.median(cpu_frac) if cpu_frac else None,
            "run_queue_wait_frac": {"p50": statistics.median(waits), "max": max(waits)} if waits else None,
            "contention_source": getattr(monitor, "name", None)
            if getattr(monitor, "available", False)
            else getattr(monitor, "reason", None),
            "batches": _json_columns(cols),
        }
    }
    return extra, waits


def _json_columns(cols: dict) -> dict:
    """Per-stretch columns with floats rounded to ns (records stay small)."""
    return {k: [round(v, 9) if isinstance(v, float) else v for v in vs] for k, vs in cols.items()}
