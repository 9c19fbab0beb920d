"""Guards when read: the figures of a stored record derived again and validated.

A record keeps the figures computed when it was written; reading derives them
again from its stored time and cost (:func:`read_metrics`, :func:`guard_record`)
against today's datasheet, the CPU's physical bound and this machine's
validated calibration (:func:`validate_calibration`), with the statuses of
:mod:`harness.core.metrics` (``invalid``, ``timing_bug``, ``above_ceiling``,
``contended``). The figures themselves come from
:func:`harness.core.metrics.compute_metrics`, the one place they are defined.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, replace

from harness.core.metrics import (
    PEAK_MARGIN,
    STATUS_ABOVE_CEILING,
    STATUS_CONTENDED,
    STATUS_INVALID,
    STATUS_OK,
    STATUS_TIMING_BUG,
    Metrics,
    Peaks,
    cache_note,
    compute_metrics,
    dram_bytes_lower_bound,
    integrity_guard,
    rates_above,
    valid_time,
    working_set_in_cache,
)


@dataclass(frozen=True)
class Work:
    """FLOPs and compulsory bytes of one call, as stored in a record's ``cost`` block.

    The read-time stand-in for :class:`harness.core.costs.Cost` (exact ints; a stored block may hold floats):
    it has what :func:`harness.core.metrics.compute_metrics` reads.
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
    tf, gb = rates_above(sanity, cost.flops, cost.bytes_total, t)
    if tf is not None:
        breaks.append(f"{tf:.4g} TFLOP/s exceeds {sanity.tflops:.4g} TFLOP/s")
    if gb is not None:
        breaks.append(f"{gb:.4g} GB/s exceeds {sanity.gbps:.4g} GB/s")
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
    tf, gb = rates_above(measured, cost.flops, 0 if cache_resident else cost.bytes_total, t)
    if tf is not None:
        breaks.append(f"{tf:.4g} TFLOP/s is above the measured {measured.tflops:.4g} TFLOP/s")
    if gb is not None:
        breaks.append(f"{gb:.4g} GB/s is above the measured {measured.gbps:.4g} GB/s")
    if not breaks:
        return None
    return (
        f"{'; '.join(breaks)} by more than {PEAK_MARGIN:.0%} ({measured.source}): the ceiling is "
        f"under-measured or the time is wrong"
    )


def _rejected(
    status: str, reason: str, cost, ref: Peaks | None, measured: Peaks | None, cache_resident: bool, note: str | None
) -> Metrics:
    none = dict(
        time_s=None,
        latency_ms=None,
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
        arithmetic_intensity=cost.arithmetic_intensity,
        peaks_source=ref.source if ref else None,
        measured_source=measured.source if measured else None,
        cache_resident=bool(cache_resident),
        cache_note=note,
        **none,
    )


def read_metrics(
    cost,
    time_s,
    *,
    datasheet: Peaks | None = None,
    sanity: Peaks | None = None,
    measured: Peaks | None = None,
    cache_resident: bool = False,
    cache_bytes: int | None = None,
    dram_bytes: int | None = None,
    contended: str | None = None,
) -> Metrics:
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
        return _rejected(
            STATUS_CONTENDED,
            f"measured under CPU contention ({t * 1e3:.4g} ms): {contended}",
            cost,
            ref,
            measured,
            cache_resident,
            note,
        )
    return compute_metrics(
        cost, t, datasheet, measured, bandwidth_guard=False, cache_resident=cache_resident, cache_bytes=cache_bytes
    )


def check_ceiling(
    value, *, unit: str, what: str, datasheet: float | None = None, sanity: float | None = None
) -> str | None:
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


def _objects_only(out: dict, label: str, problems: list[str]) -> None:
    """Make calibration ``out`` safe for every reader, in place: a figure that is
    not an object becomes a withheld one (a line in ``problems``), a ``matmul``
    that is not an object an empty one, and the fields derived when the suite is
    read against it (``under_measured``, :func:`harness.store.columns.guard_records`)
    are dropped. A ``"matmul": [1]``, a copy that is a list and a stored
    ``"under_measured": "oops"`` each crashed the whole publish (hostile trial)."""
    for derived in ("under_measured", "under_measured_points"):
        out.pop(derived, None)
    if "matmul" in out and not isinstance(out["matmul"], dict):
        problems.append(f"{label}: matmul is {type(out['matmul']).__name__}, not an object: not used")
        out["matmul"] = {}
    for name in ("copy", "read", "add"):
        if name in out and not isinstance(out[name], dict):
            problems.append(f"{label}: {name} bandwidth is not an object: not used")
            out[name] = {"gbps": None, "status": STATUS_INVALID, "reason": "rejected when read: not an object"}
    for dtype in [k for k, v in out.get("matmul", {}).items() if not isinstance(v, dict)]:
        problems.append(f"{label}: matmul {dtype} is not an object: not used")
        out["matmul"][dtype] = {"tflops": None, "status": STATUS_INVALID, "reason": "rejected when read: not an object"}


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
    _objects_only(out, label, problems)

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

    s_fp32 = sanity("fp32")
    for name in ["copy"] + [k for k in ("read", "add") if k in out]:  # older calibrations: the copy only
        fig = out.get(name)
        check(
            fig,
            "gbps",
            "GB/s",
            f"{name} bandwidth",
            fig.get("bytes") if isinstance(fig, dict) else None,
            spec.peak_gbps if spec else None,
            s_fp32[1] if s_fp32 else None,
        )
    mm = out.get("matmul") if isinstance(out.get("matmul"), dict) else {}
    for dtype, fig in sorted(mm.items()):
        shape = (fig or {}).get("shape") if isinstance(fig, dict) else None
        flops = (
            2 * shape[0] * shape[1] * shape[2]
            if isinstance(shape, list) and len(shape) == 3 and all(isinstance(x, int) and x > 0 for x in shape)
            else None
        )
        sn = sanity(dtype)
        check(
            fig,
            "tflops",
            "TFLOP/s",
            f"matmul {dtype}",
            flops,
            spec.peak_tflops.get(dtype) if spec else None,
            sn[0] if sn else None,
        )
    if not usable:
        problems.append(f"{label}: rejected: no usable ceiling")
        return None, problems
    return out, problems


def calibration_ceilings(cal: dict | None, dtype: str, uses_tensor_cores: bool) -> Peaks | None:
    """Ceilings for an op from a (validated) calibration: the memory bandwidth,
    the highest of the copy's and the read-mostly figures' (a copy is undercounted
    on write-allocate caches: :data:`harness.measure.calibrate.BANDWIDTH_FIGURES`),
    and the matmul rate of ``dtype`` for tensor-core ops, or the fp32 matmul
    rate (CUDA-core / SIMD FMA rate) for everything else; ``None`` when neither
    is usable."""
    if not cal:
        return None
    gb = memory_ceiling_gbps(cal)
    key = dtype if uses_tensor_cores else "fp32"
    tf = _usable(((cal.get("matmul") or {}).get(key) or {}), "tflops")
    if gb is None and tf is None:
        return None
    return Peaks(tflops=tf, gbps=gb, source=f"measured {cal.get('date', '?')} on {cal.get('machine', '?')}")


def memory_ceiling_gbps(cal: dict | None) -> float | None:
    """The calibration's memory ceiling, GB/s: the highest usable figure of ``copy``,
    ``read`` and ``add`` (calibrations before the read-mostly figures: the copy's);
    ``None`` when none is usable."""
    name = memory_ceiling_figure(cal)
    return _usable(cal.get(name), "gbps") if name else None


def memory_ceiling_figure(cal: dict | None) -> str | None:
    """Which figure :func:`memory_ceiling_gbps` takes: the name (``copy``, ``read``
    or ``add``) of the highest usable one, the first on a tie; ``None`` when none is usable."""
    if not cal:
        return None
    figs = [(v, -i, k) for i, k in enumerate(("copy", "read", "add")) if (v := _usable(cal.get(k), "gbps")) is not None]
    return max(figs)[2] if figs else None


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
    timing = rec.get("timing") if isinstance(rec.get("timing"), dict) else {}
    stored = rec.get("metrics") if isinstance(rec.get("metrics"), dict) else {}
    if time_s is None:
        time_s = timing.get("p50_s")
    if stored.get("status", STATUS_OK) != STATUS_OK:
        try:
            cost = work_from(rec.get("cost"))
        except ValueError:
            cost = Work(0.0, 0.0, 0.0)
        return _rejected(
            str(stored["status"]), str(stored.get("reason") or "rejected when written"), cost, None, None, False, None
        )
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
    datasheet, sanity = _reference_peaks(dev, dtype, tc, timing)
    measured = calibration_ceilings(calibration, dtype, tc)
    method = timing.get("method")
    cache_bytes = dev.get("l2_bytes") if isinstance(dev.get("l2_bytes"), int) and dev.get("l2_bytes") > 0 else None
    resident = method in ("hot", "graph", "cpu") and working_set_in_cache(cost, cache_bytes)
    dram = dram_bytes_lower_bound(cost, method, cache_bytes) if method in ("cold", "hot", "graph", "cpu") else None
    contended = _contention(timing)
    return read_metrics(
        cost,
        time_s,
        datasheet=datasheet,
        sanity=sanity,
        measured=measured,
        cache_resident=resident,
        cache_bytes=cache_bytes,
        dram_bytes=dram,
        contended=contended,
    )


def _reference_peaks(dev: dict, dtype: str, tc: bool, timing: dict) -> tuple[Peaks | None, Peaks | None]:
    """``(datasheet, sanity)`` for a record's device block: a GPU's datasheet
    peaks (by its name), a CPU's physical bound (its cores, the timing's thread count)."""
    from harness.core import devices as _devices

    datasheet = sanity = None
    if dev.get("kind") == "cuda":
        spec = _devices.lookup_spec(dev.get("name"), warn=False)
        if spec is not None:
            datasheet = Peaks(
                tflops=spec.peak_for(dtype, tc),
                gbps=spec.peak_gbps,
                source=f"datasheet {spec.sku}: {spec.source.split(';')[0].strip()}",
            )
    elif dev.get("kind") == "cpu":
        cores = dev.get("cores") if isinstance(dev.get("cores"), int) and dev.get("cores", 0) >= 1 else None
        threads = (timing.get("config") or {}).get("threads") if isinstance(timing.get("config"), dict) else None
        threads = threads if isinstance(threads, int) and threads >= 1 else None
        b = _devices.cpu_sanity_peaks(cores, dtype, threads) if cores else None
        if b is not None:
            n = min(cores, threads) if threads else cores
            sanity = Peaks(
                tflops=b[0], gbps=b[1], source=f"physical bound of {n} CPU core(s) at {_devices.CPU_CORE_MAX_GHZ:g} GHz"
            )
    return datasheet, sanity


def _contention(timing: dict) -> str | None:
    """Why a record's CPU timing counts as contended (``extra.cpu.contended``), or ``None``."""
    cpu = (timing.get("extra") or {}).get("cpu") if isinstance(timing.get("extra"), dict) else None
    if not (isinstance(cpu, dict) and cpu.get("contended")):
        return None
    if "contended_samples" in cpu:
        n = sum((cpu.get("batches") or {}).get("n_samples") or []) or "?"
        return (
            f"{cpu['contended_samples']} of {n} samples were preempted or waited on a run queue; "
            f"too few clean ones were left, so all were kept"
        )
    return (
        f"{cpu.get('contended_batches', '?')} of {cpu.get('batches_total', '?')} stretches of "
        f"samples waited on a run queue for more than the contention limit"
    )
