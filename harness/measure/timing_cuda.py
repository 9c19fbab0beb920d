"""The CUDA timing methods ``cold``, ``hot`` and ``graph``: :func:`time_cuda`
(CUDA events, the L2 flush, the blocking spin kernel, CUDA graphs) and its
sizing rules (flush buffer, input rotation, calls per event pair, chunks).
Callers import these from :mod:`harness.measure.timing`.
"""

from __future__ import annotations

import math
import time
from typing import Callable, Sequence

from harness.measure import clocks as _clocks
from harness.measure.timing_base import TimingConfig, TimingResult, _monitored, _result, sample_until_stable

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


def time_cuda(
    fn: Callable[[], object],
    config: TimingConfig,
    l2_bytes: int | None = None,
    rotated: Sequence[Callable[[], object]] | None = None,
    monitor=None,
) -> TimingResult:
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
        The same call on different copies of the inputs: ``graph`` mode
        rotates over them; ``cold`` mode batches a short call over them (one
        flush, then the copies one after another between one pair of events,
        as many as :func:`calls_per_event_pair` asks and there are copies), so
        a microsecond kernel is not measured on the 0.5 us event tick while
        every call of the batch still reads inputs no earlier call of it
        brought into L2 (issue 26).
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
    return int(
        min(max_calls, max(1, math.ceil(min_span_s / per_call_s - 1e-9)))
    )  # 1e-9: float ratios like 10.000000000000002


def chunk_size(
    number: int, flush: bool, max_ops: int = _MAX_QUEUED_OPS, launches_per_call: int = _LAUNCHES_PER_CALL
) -> int:
    """Samples enqueued behind one spin kernel: stream operations per sample are
    two events, the flush (cold) and ``number`` calls of ``launches_per_call``
    kernels; at most ``max_ops`` of them are queued at once (at least one sample)."""
    per_sample = 2 + (1 if flush else 0) + number * launches_per_call
    return max(1, max_ops // per_sample)


def _l2_flusher(torch, config: TimingConfig, l2_bytes):
    """For ``cold``: ``(flush_l2, flush_bytes)``, the call that flushes L2 (a read
    of a buffer of :func:`flush_buffer_bytes`, or a ``zero_`` with
    ``l2_flush="write"``); ``(None, None)`` for the other methods."""
    if config.method != "cold":
        return None, None
    flush_bytes = flush_buffer_bytes(l2_bytes)
    flush = torch.empty(flush_bytes // 4, dtype=torch.float32, device="cuda")
    flush.fill_(1.0)
    sink = torch.empty((), dtype=torch.float32, device="cuda")

    def flush_l2() -> None:
        if config.l2_flush == "write":
            flush.zero_()
        else:
            torch.sum(flush, dim=0, out=sink)  # reads every line; writes one scalar

    return flush_l2, flush_bytes


def _graph_call(torch, fn, config: TimingConfig, rotated) -> tuple[Callable[[], object], int]:
    """``(call, calls_per_call)``: for ``graph`` the replay of a CUDA graph that
    captures ``graph_unroll`` calls rotating over ``rotated``; otherwise ``(fn, 1)``."""
    if config.method != "graph":
        return fn, 1
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
    return g.replay, unroll


def _warm_up(torch, call, warmup_s: float) -> float:
    """Warm-up (JIT, autotune, clocks) for at least ``warmup_s``, timed with
    events; returns the last call's time in seconds, to size the event pairs."""
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    w0, w1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    while True:
        w0.record()
        call()
        w1.record()
        torch.cuda.synchronize()
        if time.perf_counter() - t0 >= warmup_s:
            break
    return max(0.0, w0.elapsed_time(w1) / 1e3)


def _time_cuda(torch, fn, config: TimingConfig, l2_bytes, rotated, monitor) -> TimingResult:
    flush_l2, flush_bytes = _l2_flusher(torch, config, l2_bytes)
    call, number = _graph_call(torch, fn, config, rotated)
    per_call_s = _warm_up(torch, call, config.warmup_s)
    # Several calls per event pair for short hot/graph calls. A cold sample is one
    # flush then calls that find nothing of theirs in L2: with rotated copies, up
    # to one call per copy; without them one call, and its CI is floored instead.
    batch_calls = None
    if config.method in ("hot", "graph"):
        repeat = calls_per_event_pair(per_call_s)
    elif rotated and len(rotated) > 1:
        repeat = min(calls_per_event_pair(per_call_s), len(rotated))
        batch_calls = list(rotated[:repeat]) if repeat > 1 else None
    else:
        repeat = 1
    number *= repeat
    resolution_s = EVENT_RESOLUTION_S / number

    sleep = getattr(torch.cuda, "_sleep", None) if config.block_host else None
    clock_hz = (getattr(monitor, "max_sm_clock_mhz", None) or 2000) * 1e6
    per_sample_host_s = [_LAUNCH_S_GUESS * (1 + repeat)]
    chunk = chunk_size(repeat, flush_l2 is not None)

    def take_chunk(k: int, during) -> list[float]:
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(k)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(k)]
        if sleep is not None:
            # Spin long enough to cover enqueueing the chunk; at a lower clock it
            # spins longer, which only wastes a little time. Not timed.
            sleep(int(min(_MAX_BLOCK_S, 1.5 * k * per_sample_host_s[0]) * clock_hz))
        h0 = time.perf_counter()
        for i in range(k):
            if flush_l2 is not None:
                flush_l2()  # enqueued before the start event: not timed
            starts[i].record()
            if batch_calls is not None:
                for c in batch_calls:
                    c()
            else:
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
    sampling = sample_until_stable(
        _monitored(take, monitor, config.exclude_throttled, log, after=False), config, resolution_s=resolution_s
    )
    return _result(
        config.method,
        sampling,
        number,
        config,
        log,
        monitor,
        resolution_s=resolution_s,
        flush_bytes=flush_bytes,
        extra={
            "calls_per_event_pair": repeat,
            "samples_per_chunk": chunk,
            "event_resolution_s": EVENT_RESOLUTION_S,
            "flush": (
                ("read (sum)" if config.l2_flush == "read" else "write (zero_)") if flush_l2 is not None else None
            ),
        },
    )
