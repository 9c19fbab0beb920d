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
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from harness.core.costs import Cost

#: Tolerance above datasheet peak before a result is called a timing bug. GPUs
#: can boost a little above the clock a datasheet quotes, and peak bandwidth is
#: rounded; 5% absorbs both while catching the usual failures (missing sync,
#: flush inside the timed region, async launch timed on the host), which are off
#: by factors, not percent.
PEAK_MARGIN = 0.05

STATUS_OK = "ok"
STATUS_INVALID = "invalid"
STATUS_TIMING_BUG = "timing_bug"
#: Read-time statuses (:func:`harness.core.guards.read_metrics`): above this machine's measured
#: ceiling by more than :data:`PEAK_MARGIN` (the ceiling is under-measured, or
#: the time is wrong); measured while the CPU was contended.
STATUS_ABOVE_CEILING = "above_ceiling"
STATUS_CONTENDED = "contended"
#: Every status a figure can carry; all but ``ok`` are excluded from statistics
#: and shown as a badge with the reason, never as a plain number.
STATUSES = (STATUS_OK, STATUS_INVALID, STATUS_TIMING_BUG, STATUS_ABOVE_CEILING, STATUS_CONTENDED)


def reason_status(reason: str | None) -> str | None:
    """The guard status a guarded point's reason starts with (the store writes
    ``"<status>: <why>"``, :func:`harness.store.columns.finish_group`), if any but ``ok``."""
    head = (reason or "").split(":", 1)[0].strip()
    return head if head in STATUSES and head != STATUS_OK else None


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


def rates_above(peaks: Peaks | None, flops: float, nbytes: float, time_s: float) -> tuple[float | None, float | None]:
    """The TFLOP/s and GB/s that ``flops`` and ``nbytes`` in ``time_s`` seconds imply,
    each only where it exceeds its peak in ``peaks`` by more than :data:`PEAK_MARGIN`
    (else ``None``; also ``None`` where the peak or the work is zero or missing).

    The one comparison behind the datasheet, sanity and measured-ceiling guards.
    ``time_s`` must be a valid time (positive, finite).
    """
    if peaks is None:
        return None, None
    tf = flops / time_s / 1e12 if (peaks.tflops and flops) else None
    gb = nbytes / time_s / 1e9 if (peaks.gbps and nbytes) else None
    return (
        tf if tf is not None and tf > peaks.tflops * (1 + PEAK_MARGIN) else None,
        gb if gb is not None and gb > peaks.gbps * (1 + PEAK_MARGIN) else None,
    )


def integrity_guard(
    cost: Cost, time_s: float, datasheet: Peaks | None, *, bandwidth_guard: bool = True, dram_bytes: int | None = None
) -> str | None:
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
    tf, gb = rates_above(peaks, cost.flops, nbytes, t)
    if tf is not None:
        breaks.append(f"implied {tf:.4g} TFLOP/s exceeds the datasheet peak {peaks.tflops:.4g} TFLOP/s")
    if gb is not None:
        what = " of DRAM bytes (lower bound)" if dram_bytes is not None else ""
        breaks.append(f"implied {gb:.4g} GB/s{what} exceeds the datasheet peak {peaks.gbps:.4g} GB/s")
    return (
        f"time {t:.4g} s is below the roofline floor {floor:.4g} s by more than the "
        f"{PEAK_MARGIN:.0%} margin ({'; '.join(breaks + [datasheet.source])})"
    )


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
    ai = cost.arithmetic_intensity
    ref = datasheet if datasheet is not None else measured
    if reason:
        return _no_figures(STATUS_INVALID, reason, ai, ref, measured)
    t = float(time_s)
    bug = integrity_guard(cost, t, datasheet, bandwidth_guard=bandwidth_guard, dram_bytes=dram_bytes)
    if bug:
        # The impossible time stays in ``reason`` (and the raw samples in the
        # record's timing block), never in a numeric field a report could plot.
        return _no_figures(STATUS_TIMING_BUG, bug, ai, datasheet, measured)
    return _figures(cost, t, ref, measured, cache_resident=cache_resident, cache_bytes=cache_bytes)


def _no_figures(status: str, reason: str, ai, ref: Peaks | None, measured: Peaks | None) -> Metrics:
    """A rejected time: every figure, and the time, ``None``; ``reason`` says why."""
    none = dict(
        tflops=None,
        gbps=None,
        mfu=None,
        bw_util=None,
        sol=None,
        floor_ms=None,
        bound=None,
        mfu_measured=None,
        bw_util_measured=None,
        sol_measured=None,
    )
    return Metrics(
        status=status,
        reason=reason,
        time_s=None,
        latency_ms=None,
        arithmetic_intensity=ai,
        peaks_source=ref.source if ref else None,
        measured_source=measured.source if measured else None,
        **none,
    )


def _against(cost: Cost, p: Peaks | None, tf: float, gb: float, t: float, cache_resident: bool):
    """``(mfu, bw_util, sol, floor_s, bound)`` of a valid time ``t`` (``tf`` TFLOP/s,
    ``gb`` GB/s) against peaks ``p``; all ``None`` without peaks."""
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


def _figures(
    cost: Cost, t: float, ref: Peaks | None, measured: Peaks | None, *, cache_resident: bool, cache_bytes: int | None
) -> Metrics:
    """The ``ok`` figures of a valid, physically possible time ``t`` (seconds)."""
    tf = cost.flops / t / 1e12
    gb = cost.bytes_total / t / 1e9
    mfu, bw, sol, floor, bnd = _against(cost, ref, tf, gb, t, cache_resident)
    mfu_m, bw_m, sol_m, _, _ = _against(cost, measured, tf, gb, t, cache_resident)
    return Metrics(
        status=STATUS_OK,
        reason=None if ref is not None else "no peaks known for this device: no mfu, bw_util or sol",
        time_s=t,
        latency_ms=t * 1e3,
        tflops=tf,
        gbps=gb,
        arithmetic_intensity=cost.arithmetic_intensity,
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
    return (
        f"cache-resident: the {cost.bytes_total / 2**20:.3g} MiB working set fits in {size}, so gbps is "
        f"cache bandwidth, not DRAM-bandwidth utilisation (no bw_util, no DRAM-roof sol)"
    )


def working_set_in_cache(cost: Cost, cache_bytes: int | None) -> bool:
    """True when the compulsory traffic (``cost.bytes_total``, bytes) fits in the
    device's last-level cache of ``cache_bytes`` (L2 on a GPU, LLC on a CPU:
    :attr:`harness.core.devices.DeviceIdentity.cache_bytes`), so a timing without a
    flush may legitimately beat DRAM bandwidth. ``False`` for an unknown cache."""
    return cache_bytes is not None and cost.bytes_total <= cache_bytes


#: The read guards moved to :mod:`harness.core.guards` (which imports this
#: module); their old names here still resolve, lazily, to avoid an import cycle.
_GUARD_NAMES = frozenset(
    {
        "Work",
        "work_from",
        "sanity_guard",
        "ceiling_guard",
        "read_metrics",
        "check_ceiling",
        "validate_calibration",
        "calibration_ceilings",
        "guard_record",
    }
)


def __getattr__(name: str):
    if name in _GUARD_NAMES:
        from harness.core import guards

        return getattr(guards, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
