"""The one module that turns a cost and a time into throughput and efficiency.

Definitions (roofline model: Williams, Waterman, Patterson, "Roofline: an
insightful visual performance model for multicore architectures", CACM 2009):

- ``tflops = flops / time_s / 1e12``; ``gbps = (bytes_read + bytes_written) / time_s / 1e9``
- ``mfu = tflops / peak_tflops`` (model FLOPs utilisation; peak for the op's dtype and unit)
- ``bw_util = gbps / peak_gbps``
- ``arithmetic_intensity = flops / bytes``; the ridge point is ``peak_flops / peak_bandwidth``;
  a kernel is ``compute``-bound when its intensity is at or above the ridge, else ``memory``-bound
- ``floor_s = max(flops / peak_flops, bytes / peak_bandwidth)``, the roofline lower bound
- ``sol = floor_s / time_s`` (speed of light: 1.0 means at the roofline)

Each figure is computed against two sets of peaks where available: the datasheet
(``mfu``, ``bw_util``, ``sol``) and this machine's measured ceilings from
``kernelwatch calibrate`` (``mfu_measured``, ``bw_util_measured``,
``sol_measured``). On a CPU the measured ceilings *are* the peaks.

Cache-resident working sets: when a timing without a flush (``hot``,
``graph``, ``cpu``) has a compulsory working set that fits in the device's
last-level cache (L2 on a GPU, LLC on a CPU, :func:`working_set_in_cache`), its
bytes need not cross the DRAM interface, so ``gbps`` is cache bandwidth:
``compute_metrics(..., cache_resident=True)`` marks it (``cache_resident``,
``cache_note``) and gives no ``bw_util``/``bw_util_measured`` (it would not be
DRAM-bandwidth utilisation; figures of 300-700% were shown that way) and no
``sol`` from the DRAM roof (only the compute roof of a compute-bound op holds).

Integrity guards: a zero, negative, NaN or infinite time is ``invalid``; a
throughput above the datasheet peak by more than :data:`PEAK_MARGIN`, or a time
below the roofline floor by the same margin, is a ``timing_bug``
(:func:`integrity_guard`). Neither ever becomes a number in a report: every
derived figure, and the time itself, is ``None`` with a reason (the impossible
time is quoted in the reason only); ``harness.measure.bench.run`` fails such a case so
asv stores no value, and ``harness.results`` turns any point whose record is
not ``ok`` into a missing value with that reason.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import asdict, dataclass, replace

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # kernels._base imports torch; the site and analysis load metrics without it
    from kernels._base import Cost

#: Tolerance above datasheet peak before a result is called a timing bug. GPUs
#: can boost a little above the clock a datasheet quotes, and peak bandwidth is
#: rounded; 5% absorbs both while catching the usual failures (missing sync,
#: flush inside the timed region, async launch timed on the host), which are off
#: by factors, not percent.
PEAK_MARGIN = 0.05

STATUS_OK = "ok"
STATUS_INVALID = "invalid"
STATUS_TIMING_BUG = "timing_bug"
#: Read-time statuses (:func:`read_metrics`): above this machine's measured
#: ceiling by more than :data:`PEAK_MARGIN` (the ceiling is under-measured, or
#: the time is wrong); measured while the CPU was contended.
STATUS_ABOVE_CEILING = "above_ceiling"
STATUS_CONTENDED = "contended"
#: Every status a figure can carry; all but ``ok`` are excluded from statistics
#: and shown as a badge with the reason, never as a plain number.
STATUSES = (STATUS_OK, STATUS_INVALID, STATUS_TIMING_BUG, STATUS_ABOVE_CEILING, STATUS_CONTENDED)


@dataclass(frozen=True)
class Peaks:
    """Ceilings for one device and one op class.

    Attributes
    ----------
    tflops : float or None
        Peak TFLOP/s for the op's dtype and unit (tensor or vector).
    gbps : float or None
        Peak memory bandwidth, GB/s.
    source : str
        ``"datasheet: <sku>"`` or ``"measured: <calibration file>"``.
    """

    tflops: float | None
    gbps: float | None
    source: str


@dataclass(frozen=True)
class Metrics:
    """Derived figures for one measurement. ``None`` fields carry ``reason``."""

    status: str
    reason: str | None
    time_s: float | None
    latency_ms: float | None
    tflops: float | None
    gbps: float | None
    arithmetic_intensity: float | None
    mfu: float | None
    bw_util: float | None
    sol: float | None
    floor_ms: float | None
    bound: str | None
    mfu_measured: float | None
    bw_util_measured: float | None
    sol_measured: float | None
    peaks_source: str | None
    measured_source: str | None
    cache_resident: bool = False
    cache_note: str | None = None

    def as_dict(self) -> dict:
        return asdict(self)


def valid_time(time_s) -> str | None:
    """``None`` when ``time_s`` is a usable time, else the reason it is not."""
    if time_s is None:
        return "no time"
    if isinstance(time_s, bool) or not isinstance(time_s, numbers.Real):
        return f"time {time_s!r} is not a number"
    t = float(time_s)
    if math.isnan(t):
        return "time is NaN"
    if math.isinf(t):
        return "time is infinite"
    if t <= 0:
        return f"time {t!r} s is not positive"
    return None


def tflops(flops: int, time_s: float) -> float:
    """``flops / time_s / 1e12``. Raises ``ValueError`` for an unusable time."""
    reason = valid_time(time_s)
    if reason:
        raise ValueError(reason)
    return flops / time_s / 1e12


def gbps(nbytes: int, time_s: float) -> float:
    """``nbytes / time_s / 1e9`` (GB/s, decimal). Raises ``ValueError`` for an unusable time."""
    reason = valid_time(time_s)
    if reason:
        raise ValueError(reason)
    return nbytes / time_s / 1e9


def roofline_floor_s(cost: Cost, peaks: Peaks) -> float | None:
    """``max(flops / peak_flops, bytes / peak_bandwidth)`` in seconds; terms with an
    unknown peak are left out; ``None`` when neither peak is known."""
    terms = []
    if peaks.tflops and cost.flops:
        terms.append(cost.flops / (peaks.tflops * 1e12))
    if peaks.gbps and cost.bytes_total:
        terms.append(cost.bytes_total / (peaks.gbps * 1e9))
    return max(terms) if terms else None


def bound(cost: Cost, peaks: Peaks) -> str | None:
    """``"compute"`` if arithmetic intensity >= ridge point, ``"memory"`` below it, ``None`` if unknown."""
    if not (peaks.tflops and peaks.gbps) or not cost.bytes_total:
        return None
    ridge = peaks.tflops * 1e12 / (peaks.gbps * 1e9)
    return "compute" if cost.flops / cost.bytes_total >= ridge else "memory"


def dram_bytes_lower_bound(cost: Cost, method: str, cache_bytes: int | None) -> int:
    """Bytes that must cross the DRAM interface in one timed call: what the
    bandwidth guard may hold against the datasheet bandwidth.

    - ``cold`` (L2 flushed before the call): every input byte comes from DRAM,
      but written bytes can stay in a write-back L2 until after the call ends,
      so only writes beyond the cache count: ``bytes_read + max(0, bytes_written - cache)``;
    - ``hot``, ``graph``, ``cpu`` (no flush): up to a cache's worth of the
      working set may already be on chip: ``max(0, bytes_total - cache)``.

    An unknown cache size (``None``) gives ``cost.bytes_total``. Raises
    ``ValueError`` for an unknown method or a negative cache size.
    """
    if method not in ("cold", "hot", "graph", "cpu"):
        raise ValueError(f"unknown timing method {method!r}")
    if cache_bytes is None:
        return cost.bytes_total
    if cache_bytes < 0:
        raise ValueError(f"negative cache size {cache_bytes}")
    if method == "cold":
        return cost.bytes_read + max(0, cost.bytes_written - cache_bytes)
    return max(0, cost.bytes_total - cache_bytes)


def integrity_guard(cost: Cost, time_s: float, datasheet: Peaks | None, *, bandwidth_guard: bool = True,
                    dram_bytes: int | None = None) -> str | None:
    """Why ``time_s`` is physically impossible on a device with ``datasheet`` peaks, or ``None``.

    A time is a *timing bug* when the throughput it implies exceeds a datasheet
    peak by more than :data:`PEAK_MARGIN`: ``flops / time_s > peak_tflops * (1 + PEAK_MARGIN)``
    or ``bytes / time_s > peak_gbps * (1 + PEAK_MARGIN)``. Equivalently the time is
    below the roofline floor ``max(flops / peak_flops, bytes / peak_bandwidth)``
    divided by ``1 + PEAK_MARGIN``; the reason names both the floor and the
    throughput that breaks it. Typical causes: a missing device sync, a kernel
    timed on the host while it runs asynchronously, a result from cache.

    Parameters
    ----------
    cost : Cost
    time_s : float
        A valid time (see :func:`valid_time`), seconds.
    datasheet : Peaks or None
        No guard without datasheet peaks (a CPU, an unknown GPU): measured
        ceilings can legitimately be beaten (in-cache runs).
    bandwidth_guard : bool
        Check the bandwidth term (off for hot runs whose working set fits in cache).
    dram_bytes : int, optional
        Bytes the bandwidth term holds against the datasheet bandwidth, when
        fewer than ``cost.bytes_total`` must reach DRAM in the timed call
        (:func:`dram_bytes_lower_bound`); default ``cost.bytes_total``.

    Raises
    ------
    ValueError
        When ``time_s`` is not a valid time, or ``dram_bytes`` is negative.
    """
    reason = valid_time(time_s)
    if reason:
        raise ValueError(reason)
    if dram_bytes is not None and dram_bytes < 0:
        raise ValueError(f"negative dram_bytes {dram_bytes}")
    if datasheet is None:
        return None
    t = float(time_s)
    nbytes = cost.bytes_total if dram_bytes is None else int(dram_bytes)
    peaks = datasheet if bandwidth_guard else Peaks(datasheet.tflops, None, datasheet.source)
    terms = []  # roofline_floor_s, with the guard's byte count
    if peaks.tflops and cost.flops:
        terms.append(cost.flops / (peaks.tflops * 1e12))
    if peaks.gbps and nbytes:
        terms.append(nbytes / (peaks.gbps * 1e9))
    floor = max(terms) if terms else None
    if floor is None or t >= floor / (1 + PEAK_MARGIN):
        return None
    breaks = []
    if peaks.tflops and cost.flops:
        tf = cost.flops / t / 1e12
        if tf > peaks.tflops * (1 + PEAK_MARGIN):
            breaks.append(f"implied {tf:.4g} TFLOP/s exceeds the datasheet peak {peaks.tflops:.4g} TFLOP/s")
    if peaks.gbps and nbytes:
        gb = nbytes / t / 1e9
        if gb > peaks.gbps * (1 + PEAK_MARGIN):
            what = " of DRAM bytes (lower bound)" if dram_bytes is not None else ""
            breaks.append(f"implied {gb:.4g} GB/s{what} exceeds the datasheet peak {peaks.gbps:.4g} GB/s")
    return (f"time {t:.4g} s is below the roofline floor {floor:.4g} s by more than the "
            f"{PEAK_MARGIN:.0%} margin ({'; '.join(breaks + [datasheet.source])})")


def _ratio(x, peak):
    return x / peak if (x is not None and peak) else None


def compute_metrics(
    cost: Cost,
    time_s,
    datasheet: Peaks | None,
    measured: Peaks | None = None,
    *,
    bandwidth_guard: bool = True,
    dram_bytes: int | None = None,
    cache_resident: bool = False,
    cache_bytes: int | None = None,
) -> Metrics:
    """Derive every figure for one measured time.

    Parameters
    ----------
    cost : Cost
        Analytic FLOPs and compulsory bytes.
    time_s : float
        Measured time per invocation in seconds (the median of the samples).
    datasheet : Peaks or None
        Datasheet peaks; ``None`` for an unknown device or a CPU.
    measured : Peaks or None
        Measured ceilings from calibration, if any.
    bandwidth_guard : bool
        Apply the above-peak-bandwidth guard. Turn it off for hot-cache runs on
        working sets that fit in cache, where bytes/time legitimately exceeds
        DRAM bandwidth (the caller decides; see :func:`working_set_in_cache`).
    dram_bytes : int, optional
        Lower bound on the DRAM traffic of the timed call for the guard
        (:func:`dram_bytes_lower_bound`); ``bw_util`` and ``gbps`` still use
        the compulsory ``cost.bytes_total``.
    cache_resident : bool
        The working set fits in the last-level cache and was not flushed
        (:func:`working_set_in_cache`): ``bw_util``/``bw_util_measured`` are
        ``None`` and ``sol``/``floor_ms`` use only the compute roof, and only
        for a compute-bound op; ``cache_note`` says why.
    cache_bytes : int, optional
        The cache size, quoted in ``cache_note``.

    Returns
    -------
    Metrics
        ``status`` is ``ok``, ``invalid`` (unusable time) or ``timing_bug``
        (faster than physics allows); in the latter two every derived figure is
        ``None`` and ``reason`` says why.
    """
    reason = valid_time(time_s)
    none = dict(
        tflops=None, gbps=None, mfu=None, bw_util=None, sol=None, floor_ms=None, bound=None,
        mfu_measured=None, bw_util_measured=None, sol_measured=None,
    )
    ai = cost.arithmetic_intensity
    ref = datasheet if datasheet is not None else measured
    if reason:
        return Metrics(status=STATUS_INVALID, reason=reason, time_s=None, latency_ms=None,
                       arithmetic_intensity=ai, peaks_source=ref.source if ref else None,
                       measured_source=measured.source if measured else None, **none)
    t = float(time_s)
    tf = cost.flops / t / 1e12
    gb = cost.bytes_total / t / 1e9

    bug = integrity_guard(cost, t, datasheet, bandwidth_guard=bandwidth_guard, dram_bytes=dram_bytes)
    if bug:
        # The impossible time stays in ``reason`` (and the raw samples in the
        # record's timing block), never in a numeric field a report could plot.
        return Metrics(status=STATUS_TIMING_BUG, reason=bug, time_s=None, latency_ms=None,
                       arithmetic_intensity=ai, peaks_source=datasheet.source,
                       measured_source=measured.source if measured else None, **none)

    def against(p: Peaks | None):
        if p is None:
            return None, None, None, None, None
        tfl = p.tflops if cost.flops else None
        bnd = bound(cost, p)
        if cache_resident:
            # No DRAM roof for bytes that stay on chip; the compute roof holds.
            floor = cost.flops / (p.tflops * 1e12) if (p.tflops and cost.flops and bnd == "compute") else None
            return _ratio(tf, tfl), None, (floor / t if floor is not None else None), floor, bnd
        floor = roofline_floor_s(cost, p)
        return _ratio(tf, tfl), _ratio(gb, p.gbps), (floor / t if floor is not None else None), floor, bnd

    mfu, bw, sol, floor, bnd = against(ref)
    mfu_m, bw_m, sol_m, _, _ = against(measured)
    return Metrics(
        status=STATUS_OK,
        reason=None if ref is not None else "no peaks known for this device: no mfu, bw_util or sol",
        time_s=t,
        latency_ms=t * 1e3,
        tflops=tf,
        gbps=gb,
        arithmetic_intensity=ai,
        mfu=mfu,
        bw_util=bw,
        sol=sol,
        floor_ms=floor * 1e3 if floor is not None else None,
        bound=bnd,
        mfu_measured=mfu_m,
        bw_util_measured=bw_m,
        sol_measured=sol_m,
        peaks_source=ref.source if ref else None,
        measured_source=measured.source if measured else None,
        cache_resident=bool(cache_resident),
        cache_note=cache_note(cost, cache_bytes) if cache_resident else None,
    )


def cache_note(cost: Cost, cache_bytes: int | None) -> str:
    """Why a cache-resident figure has no ``bw_util``: sizes in MiB."""
    size = f"the {cache_bytes / 2**20:.3g} MiB last-level cache" if cache_bytes else "the last-level cache"
    return (f"cache-resident: the {cost.bytes_total / 2**20:.3g} MiB working set fits in {size}, so gbps is "
            f"cache bandwidth, not DRAM-bandwidth utilisation (no bw_util, no DRAM-roof sol)")


# --------------------------------------------------------------------- guards when read


@dataclass(frozen=True)
class Work:
    """FLOPs and compulsory bytes of one call, as stored in a record's ``cost`` block.

    The read-time stand-in for :class:`kernels._base.Cost` (which needs torch):
    it has what :func:`compute_metrics` reads.
    """

    flops: float
    bytes_read: float
    bytes_written: float

    @property
    def bytes_total(self) -> float:
        return self.bytes_read + self.bytes_written

    @property
    def arithmetic_intensity(self) -> float | None:
        return self.flops / self.bytes_total if self.bytes_total else None


def work_from(cost: dict) -> Work:
    """A :class:`Work` from a record's ``cost`` block: ``flops`` and
    ``bytes_read``/``bytes_written`` (or only ``bytes_total``).

    Raises ``ValueError`` naming the field for a missing, non-numeric,
    negative, NaN or infinite count.
    """
    if not isinstance(cost, dict):
        raise ValueError(f"cost is {type(cost).__name__}, not an object")
    keys = ("flops", "bytes_read", "bytes_written") if "bytes_read" in cost else ("flops", "bytes_total")
    vals = []
    for k in keys:
        v = cost.get(k)
        if isinstance(v, bool) or not isinstance(v, numbers.Real) or not math.isfinite(float(v)) or v < 0:
            raise ValueError(f"cost.{k} = {v!r} is not a finite count >= 0")
        vals.append(float(v))
    if len(vals) == 2:
        return Work(vals[0], vals[1], 0.0)
    return Work(*vals)


def sanity_guard(cost, time_s: float, sanity: Peaks | None) -> str | None:
    """Why ``time_s`` is physically impossible against ``sanity`` peaks (a CPU's
    :func:`harness.core.devices.cpu_sanity_peaks`), or ``None``.

    Both terms are always checked, cache-resident or not: the sanity bandwidth
    bounds on-chip traffic too. Raises ``ValueError`` for an unusable time.
    """
    reason = valid_time(time_s)
    if reason:
        raise ValueError(reason)
    if sanity is None:
        return None
    t = float(time_s)
    breaks = []
    if sanity.tflops and cost.flops and cost.flops / t / 1e12 > sanity.tflops * (1 + PEAK_MARGIN):
        breaks.append(f"{cost.flops / t / 1e12:.4g} TFLOP/s exceeds {sanity.tflops:.4g} TFLOP/s")
    if sanity.gbps and cost.bytes_total and cost.bytes_total / t / 1e9 > sanity.gbps * (1 + PEAK_MARGIN):
        breaks.append(f"{cost.bytes_total / t / 1e9:.4g} GB/s exceeds {sanity.gbps:.4g} GB/s")
    if not breaks:
        return None
    return f"time {t:.4g} s is physically impossible: {'; '.join(breaks)} ({sanity.source})"


def ceiling_guard(cost, time_s: float, measured: Peaks | None, *, cache_resident: bool = False) -> str | None:
    """Why ``time_s`` beats this machine's measured ceilings by more than
    :data:`PEAK_MARGIN`, or ``None``.

    The bandwidth term is skipped for a cache-resident working set (it may
    legitimately beat the DRAM copy). A kernel above a ceiling means the
    ceiling was under-measured (calibrated under load, or too small a problem)
    or the time is wrong; either way neither figure can be trusted as is.
    Raises ``ValueError`` for an unusable time.
    """
    reason = valid_time(time_s)
    if reason:
        raise ValueError(reason)
    if measured is None:
        return None
    t = float(time_s)
    breaks = []
    if measured.tflops and cost.flops and cost.flops / t / 1e12 > measured.tflops * (1 + PEAK_MARGIN):
        breaks.append(f"{cost.flops / t / 1e12:.4g} TFLOP/s is above the measured {measured.tflops:.4g} TFLOP/s")
    if (not cache_resident and measured.gbps and cost.bytes_total
            and cost.bytes_total / t / 1e9 > measured.gbps * (1 + PEAK_MARGIN)):
        breaks.append(f"{cost.bytes_total / t / 1e9:.4g} GB/s is above the measured {measured.gbps:.4g} GB/s")
    if not breaks:
        return None
    return (f"{'; '.join(breaks)} by more than {PEAK_MARGIN:.0%} ({measured.source}): the ceiling is "
            f"under-measured or the time is wrong")


def _rejected(status: str, reason: str, cost, ref: Peaks | None, measured: Peaks | None,
              cache_resident: bool, note: str | None) -> Metrics:
    none = dict(time_s=None, latency_ms=None, tflops=None, gbps=None, mfu=None, bw_util=None, sol=None,
                floor_ms=None, bound=None, mfu_measured=None, bw_util_measured=None, sol_measured=None)
    return Metrics(status=status, reason=reason, arithmetic_intensity=cost.arithmetic_intensity,
                   peaks_source=ref.source if ref else None, measured_source=measured.source if measured else None,
                   cache_resident=bool(cache_resident), cache_note=note, **none)


def read_metrics(cost, time_s, *, datasheet: Peaks | None = None, sanity: Peaks | None = None,
                 measured: Peaks | None = None, cache_resident: bool = False, cache_bytes: int | None = None,
                 dram_bytes: int | None = None, contended: str | None = None) -> Metrics:
    """Every figure of a stored measurement, derived again when it is read, with its guard.

    Records keep the figures computed when they were written, against the
    calibration of that day; reading derives them again from the stored time
    and cost against today's ceilings (so recalibrating and republishing
    changes them), and validates them, in this order:

    1. ``invalid``: the time is missing, zero, negative, NaN or infinite;
    2. ``timing_bug``: above the ``datasheet`` peak by more than
       :data:`PEAK_MARGIN` (:func:`integrity_guard`; the bandwidth term only
       for DRAM traffic: off when ``cache_resident``, ``dram_bytes`` as there),
       or above the ``sanity`` bound of a CPU (:func:`sanity_guard`);
    3. ``above_ceiling``: above a ``measured`` ceiling by more than the margin
       (:func:`ceiling_guard`);
    4. ``contended``: ``contended`` gives why (the CPU timing kept contended
       samples, ``extra.cpu.contended`` in the record).

    Any status but ``ok`` leaves every figure ``None`` with the reason (which
    quotes the impossible figure), so no report can print it as a number.

    Parameters
    ----------
    cost : Cost or Work
        FLOPs and compulsory bytes (:func:`work_from` for a record's block).
    time_s : float
        The stored time per call, seconds.
    datasheet, sanity, measured : Peaks or None
        Datasheet peaks (GPU), physical bounds (CPU), validated measured ceilings.
    cache_resident : bool, cache_bytes : int or None
        See :func:`compute_metrics`.
    """
    ref = datasheet if datasheet is not None else measured
    note = cache_note(cost, cache_bytes) if cache_resident else None
    bad = valid_time(time_s)
    if bad:
        return _rejected(STATUS_INVALID, bad, cost, ref, measured, cache_resident, note)
    t = float(time_s)
    bug = integrity_guard(cost, t, datasheet, bandwidth_guard=not cache_resident, dram_bytes=dram_bytes)
    bug = bug or sanity_guard(cost, t, sanity)
    if bug:
        return _rejected(STATUS_TIMING_BUG, bug, cost, ref, measured, cache_resident, note)
    above = ceiling_guard(cost, t, measured, cache_resident=cache_resident)
    if above:
        return _rejected(STATUS_ABOVE_CEILING, above, cost, ref, measured, cache_resident, note)
    if contended:
        return _rejected(STATUS_CONTENDED, f"measured under CPU contention ({t * 1e3:.4g} ms): {contended}",
                         cost, ref, measured, cache_resident, note)
    return compute_metrics(cost, t, datasheet, measured, bandwidth_guard=False, cache_resident=cache_resident,
                           cache_bytes=cache_bytes)


def check_ceiling(value, *, unit: str, what: str, datasheet: float | None = None,
                  sanity: float | None = None) -> str | None:
    """Why a calibration figure (``value`` in ``unit``, GB/s or TFLOP/s) cannot
    be a ceiling, or ``None``: not a number, NaN, infinite, zero or negative
    (a zero is not "no calibration"), above the ``datasheet`` peak or the CPU
    ``sanity`` bound by more than :data:`PEAK_MARGIN`."""
    if value is None:
        return None  # not measured: the calibration says why elsewhere
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return f"{what} {value!r} is not a number"
    v = float(value)
    if math.isnan(v) or math.isinf(v):
        return f"{what} is {v!r}"
    if v <= 0:
        return f"{what} {v:.4g} {unit} is not positive"
    if datasheet and v > datasheet * (1 + PEAK_MARGIN):
        return f"{what} {v:.4g} {unit} exceeds the datasheet peak {datasheet:.4g} {unit}"
    if sanity and v > sanity * (1 + PEAK_MARGIN):
        return f"{what} {v:.4g} {unit} exceeds what any CPU of this size can do ({sanity:.4g} {unit})"
    return None


def validate_calibration(cal, where: str = "calibration") -> tuple[dict | None, list[str]]:
    """Validate a stored calibration when it is read.

    Each ceiling (``copy.gbps``, ``matmul.<dtype>.tflops``) that is not a
    positive finite number (:func:`check_ceiling`), that disagrees with its own
    bytes or FLOPs over ``p50_s`` by more than 1% (an edited file), or that is
    above the datasheet peak (GPU, :func:`harness.core.devices.lookup_spec`) or the
    physical bound (CPU, :func:`harness.core.devices.cpu_sanity_peaks`) by more than
    :data:`PEAK_MARGIN`, is rejected: in the returned copy its value is
    ``None`` and its ``status``/``reason`` say why, so it is never used as a
    ceiling.

    Returns
    -------
    (dict or None, list of str)
        The checked copy (``None`` when no ceiling is usable: the calibration
        is rejected as a whole) and one message per rejected figure, each
        starting with ``where`` (the file and line) and the calibration's date.
    """
    import copy as _copy

    from harness.core import devices as _devices

    if not isinstance(cal, dict):
        return None, [f"{where}: calibration is {type(cal).__name__}, not an object: rejected"]
    out = _copy.deepcopy(cal)
    dev = out.get("device") if isinstance(out.get("device"), dict) else {}
    kind = dev.get("kind")
    spec = _devices.lookup_spec(dev.get("name"), warn=False) if kind == "cuda" else None
    cores = dev.get("cores") if isinstance(dev.get("cores"), int) and not isinstance(dev.get("cores"), bool) else None
    threads = out.get("cpu_threads") if isinstance(out.get("cpu_threads"), int) else None
    label = f"{where}: calibration of {out.get('date', '?')}"
    problems: list[str] = []
    usable = 0

    def sanity(dtype: str):
        if kind != "cpu" or not cores or cores < 1:
            return None
        return _devices.cpu_sanity_peaks(cores, dtype, threads)

    def check(fig, key: str, unit: str, what: str, work, ds, sane) -> None:
        nonlocal usable
        if not isinstance(fig, dict):
            problems.append(f"{label}: {what} is not an object: not used")
            return
        if fig.get("status", STATUS_OK) != STATUS_OK:
            return  # rejected when written, with its reason
        v = fig.get(key)
        why = check_ceiling(v, unit=unit, what=what, datasheet=ds, sanity=sane)
        t = fig.get("p50_s")
        if why is None and v is not None and work and not valid_time(t):
            implied = work / float(t) / (1e9 if unit == "GB/s" else 1e12)
            if abs(float(v) / implied - 1) > 0.01:
                why = f"{what} {float(v):.4g} {unit} disagrees with its own work / p50_s = {implied:.4g} {unit}"
        if why is None:
            usable += v is not None
            return
        status = STATUS_TIMING_BUG if "exceeds" in why else STATUS_INVALID
        fig.update({key: None, "status": status, "reason": f"rejected when read: {why}"})
        problems.append(f"{label}: {why}: not used as a ceiling")

    cp = out.get("copy")
    s_fp32 = sanity("fp32")
    check(cp, "gbps", "GB/s", "copy bandwidth", (cp or {}).get("bytes") if isinstance(cp, dict) else None,
          spec.peak_gbps if spec else None, s_fp32[1] if s_fp32 else None)
    mm = out.get("matmul") if isinstance(out.get("matmul"), dict) else {}
    for dtype, fig in sorted(mm.items()):
        shape = (fig or {}).get("shape") if isinstance(fig, dict) else None
        flops = (2 * shape[0] * shape[1] * shape[2] if isinstance(shape, list) and len(shape) == 3
                 and all(isinstance(x, int) and x > 0 for x in shape) else None)
        sn = sanity(dtype)
        check(fig, "tflops", "TFLOP/s", f"matmul {dtype}", flops,
              spec.peak_tflops.get(dtype) if spec else None, sn[0] if sn else None)
    if not usable:
        problems.append(f"{label}: rejected: no usable ceiling")
        return None, problems
    return out, problems


def calibration_ceilings(cal: dict | None, dtype: str, uses_tensor_cores: bool) -> Peaks | None:
    """Ceilings for an op from a (validated) calibration: the copy bandwidth,
    and the matmul rate of ``dtype`` for tensor-core ops, or the fp32 matmul
    rate (CUDA-core / SIMD FMA rate) for everything else; ``None`` when neither
    is usable."""
    if not cal:
        return None
    gb = _usable((cal.get("copy") or {}), "gbps")
    key = dtype if uses_tensor_cores else "fp32"
    tf = _usable(((cal.get("matmul") or {}).get(key) or {}), "tflops")
    if gb is None and tf is None:
        return None
    return Peaks(tflops=tf, gbps=gb, source=f"measured {cal.get('date', '?')} on {cal.get('machine', '?')}")


def _usable(entry: dict, key: str) -> float | None:
    """``entry[key]`` when it is a positive finite number from an ``ok`` figure
    (calibrations without a ``status`` predate the guard and count as ok)."""
    if not isinstance(entry, dict) or entry.get("status", STATUS_OK) != STATUS_OK:
        return None
    v = entry.get(key)
    if valid_time(v):  # same test: a positive finite real number
        return None
    return float(v)


def guard_record(rec: dict, time_s=None, calibration: dict | None = None) -> Metrics:
    """The figures of one stored record, derived again and validated when read.

    Parameters
    ----------
    rec : dict
        A kernelwatch record (``docs/records.md``): ``cost``, ``device``,
        ``dtype``, ``uses_tensor_cores``, ``timing`` (``method``, ``p50_s``,
        ``config.threads``, ``extra.cpu.contended``), ``metrics.status``.
    time_s : float, optional
        The time to judge, seconds (the series value shown for this point);
        default the record's ``timing.p50_s``.
    calibration : dict, optional
        This machine's calibration, already validated (:func:`validate_calibration`).

    Returns
    -------
    Metrics
        From :func:`read_metrics` against the datasheet (GPU, looked up by the
        record's device name), the physical bound (CPU: its cores, the timing's
        thread count) and the calibration. A record already rejected when
        written keeps that status and reason; a record whose cost block is
        unusable is ``invalid``, naming the field. Never raises for a bad record.
    """
    from harness.core import devices as _devices

    timing = rec.get("timing") if isinstance(rec.get("timing"), dict) else {}
    stored = rec.get("metrics") if isinstance(rec.get("metrics"), dict) else {}
    if time_s is None:
        time_s = timing.get("p50_s")
    if stored.get("status", STATUS_OK) != STATUS_OK:
        try:
            cost = work_from(rec.get("cost"))
        except ValueError:
            cost = Work(0.0, 0.0, 0.0)
        return _rejected(str(stored["status"]), str(stored.get("reason") or "rejected when written"),
                         cost, None, None, False, None)
    try:
        cost = work_from(rec.get("cost"))
    except ValueError as exc:
        # The time may still be good: judge it, but derive nothing from a broken cost.
        bad = valid_time(time_s)
        z = Work(0.0, 0.0, 0.0)
        if bad:
            return _rejected(STATUS_INVALID, bad, z, None, None, False, None)
        m = _rejected(STATUS_OK, f"no figures: record cost unusable: {exc}", z, None, None, False, None)
        t = float(time_s)
        return replace(m, time_s=t, latency_ms=t * 1e3, arithmetic_intensity=None)
    dev = rec.get("device") if isinstance(rec.get("device"), dict) else {}
    dtype = str(rec.get("dtype") or "fp32")
    tc = bool(rec.get("uses_tensor_cores"))
    datasheet = sanity = None
    if dev.get("kind") == "cuda":
        spec = _devices.lookup_spec(dev.get("name"), warn=False)
        if spec is not None:
            datasheet = Peaks(tflops=spec.peak_for(dtype, tc), gbps=spec.peak_gbps,
                              source=f"datasheet {spec.sku}: {spec.source.split(';')[0].strip()}")
    elif dev.get("kind") == "cpu":
        cores = dev.get("cores") if isinstance(dev.get("cores"), int) and dev.get("cores", 0) >= 1 else None
        threads = (timing.get("config") or {}).get("threads") if isinstance(timing.get("config"), dict) else None
        threads = threads if isinstance(threads, int) and threads >= 1 else None
        b = _devices.cpu_sanity_peaks(cores, dtype, threads) if cores else None
        if b is not None:
            n = min(cores, threads) if threads else cores
            datasheet = None
            sanity = Peaks(tflops=b[0], gbps=b[1],
                           source=f"physical bound of {n} CPU core(s) at {_devices.CPU_CORE_MAX_GHZ:g} GHz")
    measured = calibration_ceilings(calibration, dtype, tc)
    method = timing.get("method")
    cache_bytes = dev.get("l2_bytes") if isinstance(dev.get("l2_bytes"), int) and dev.get("l2_bytes") > 0 else None
    resident = method in ("hot", "graph", "cpu") and working_set_in_cache(cost, cache_bytes)
    dram = dram_bytes_lower_bound(cost, method, cache_bytes) if method in ("cold", "hot", "graph", "cpu") else None
    cpu = (timing.get("extra") or {}).get("cpu") if isinstance(timing.get("extra"), dict) else None
    contended = None
    if isinstance(cpu, dict) and cpu.get("contended"):
        if "contended_samples" in cpu:
            n = sum((cpu.get("batches") or {}).get("n_samples") or []) or "?"
            contended = (f"{cpu['contended_samples']} of {n} samples were preempted or waited on a run queue; "
                         f"too few clean ones were left, so all were kept")
        else:
            contended = (f"{cpu.get('contended_batches', '?')} of {cpu.get('batches_total', '?')} stretches of "
                         f"samples waited on a run queue for more than the contention limit")
    return read_metrics(cost, time_s, datasheet=datasheet, sanity=sanity, measured=measured,
                        cache_resident=resident, cache_bytes=cache_bytes, dram_bytes=dram, contended=contended)


def working_set_in_cache(cost: Cost, cache_bytes: int | None) -> bool:
    """True when the compulsory traffic (``cost.bytes_total``, bytes) fits in the
    device's last-level cache of ``cache_bytes`` (L2 on a GPU, LLC on a CPU:
    :attr:`harness.core.devices.DeviceIdentity.cache_bytes`), so a timing without a
    flush may legitimately beat DRAM bandwidth. ``False`` for an unknown cache."""
    return cache_bytes is not None and cost.bytes_total <= cache_bytes
