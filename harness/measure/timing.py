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

The code: :mod:`harness.measure.timing_base` (configuration, result,
statistics, stopping rule), :mod:`harness.measure.timing_cpu` (``cpu``) and
:mod:`harness.measure.timing_cuda` (``cold``, ``hot``, ``graph``); every public
name is re-exported here, the one module callers import.
"""

from __future__ import annotations

from harness.measure.timing_base import (  # noqa: F401  (re-exported)
    TIMING_METHODS,
    Sampling,
    TimingConfig,
    TimingResult,
    converged,
    median_ci,
    next_batch_size,
    quantile,
    quick,
    sample_until_stable,
    summarize,
)
from harness.measure.timing_cpu import (  # noqa: F401
    CONTENDED_EXTENSION,
    CPU_CHUNK_S,
    STEADY_MALLOC_BYTES,
    intra_op_threads,
    steady_malloc,
    time_cpu,
)
from harness.measure.timing_cuda import (  # noqa: F401
    EVENT_RESOLUTION_S,
    calls_per_event_pair,
    chunk_size,
    flush_buffer_bytes,
    l2_bytes_of,
    rotation_count,
    time_cuda,
)
