"""Per-batch clock bookkeeping: the readings around one batch of samples
(:class:`BatchClocks`: throttled, CPU-contended, mean SM clock), the
clock-normalised time (:func:`normalise`) and the clock summary of a timing
result (:func:`summarize`). The readings and monitors are
:mod:`harness.measure.clocks`, which describes what is read and why.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Sequence

from harness.measure.clocks import (
    CPU_CONTENTION_LIMIT,
    SLOWDOWN_REASONS,
    THROTTLE_CLOCK_FRACTION,
    ClockReading,
    run_queue_wait_s,
)


@dataclass
class BatchClocks:
    """Readings taken around one batch of samples.

    ``n_samples`` is how many samples the batch produced; ``kept`` is False when
    the batch was throttled and throttled samples are being excluded;
    ``max_sm_clock_mhz`` is the device's maximum SM clock (``None``: unknown),
    against which :attr:`throttled` compares the batch's clock.
    """

    n_samples: int
    readings: list[ClockReading] = field(default_factory=list)
    kept: bool = True
    max_sm_clock_mhz: float | None = None

    @property
    def cpu_wait_frac(self) -> float | None:
        """Run-queue wait of the process's threads per second of the batch's wall
        time (first to last reading with scheduler statistics,
        :func:`run_queue_wait_s`); ``None`` without them. With one busy thread
        it is the share of the batch that thread spent waiting for a core; with
        several it can exceed 1."""
        rs = [r for r in self.readings if r.sched_wait_s is not None]
        if len(rs) < 2 or rs[-1].t_s <= rs[0].t_s:
            return None
        return run_queue_wait_s(rs[0], rs[-1]) / (rs[-1].t_s - rs[0].t_s)

    @property
    def reasons(self) -> tuple[str, ...]:
        """Slowdown reasons seen in the batch, ``cpu_contention`` included."""
        seen = {x for r in self.readings if r.reasons for x in r.reasons if x in SLOWDOWN_REASONS}
        w = self.cpu_wait_frac
        if w is not None and w > CPU_CONTENTION_LIMIT:
            seen.add("cpu_contention")
        return tuple(sorted(seen))

    @property
    def throttled(self) -> bool | None:
        """True if the CPU threads waited more than :data:`CPU_CONTENTION_LIMIT`, or
        the batch's mean SM clock is below :data:`THROTTLE_CLOCK_FRACTION` of
        ``max_sm_clock_mhz`` (NVBench's rule; False at or above it, whatever the
        reasons say); where either clock is unknown, the readings' hard reasons
        decide (:attr:`ClockReading.throttled`). ``None`` when unknown."""
        if "cpu_contention" in self.reasons:
            return True
        w = self.cpu_wait_frac
        clk, top = self.sm_clock_mhz, self.max_sm_clock_mhz
        if clk is not None and top:
            return clk < THROTTLE_CLOCK_FRACTION * top
        flags = [r.throttled for r in self.readings if r.sched_wait_s is None]
        if any(f is True for f in flags):
            return True
        if w is not None and not flags:
            return False
        if flags and all(f is False for f in flags):
            return False
        return None

    @property
    def sm_clock_mhz(self) -> float | None:
        """Mean SM clock over the batch's readings; ``None`` when none has one."""
        xs = [r.sm_clock_mhz for r in self.readings if r.sm_clock_mhz is not None]
        return sum(xs) / len(xs) if xs else None


def normalise(time_s: float, sm_clock_mhz: float | None, max_sm_clock_mhz: float | None) -> float | None:
    """Clock-normalised time: ``time_s * sm_clock_mhz / max_sm_clock_mhz``.

    The time the sample would have taken at the maximum SM clock if it scaled
    inversely with the SM clock. That holds for compute- and launch-bound
    kernels; a memory-bound kernel depends on the memory clock, so for it the
    normalised time over-corrects. It is recorded *beside* the raw time (never
    instead of it) to tell a code change from a clock change. ``None`` when
    either clock is unknown; ``ValueError`` for a non-positive clock.
    """
    if sm_clock_mhz is None or max_sm_clock_mhz is None:
        return None
    if sm_clock_mhz <= 0 or max_sm_clock_mhz <= 0:
        raise ValueError(f"clocks must be positive, got {sm_clock_mhz} and {max_sm_clock_mhz} MHz")
    return time_s * sm_clock_mhz / max_sm_clock_mhz


def _median(xs: Sequence[float]) -> float | None:
    return statistics.median(xs) if xs else None


def _spread(xs: Sequence[float]) -> dict | None:
    return {"min": min(xs), "p50": statistics.median(xs), "max": max(xs)} if xs else None


def _per_sample(
    kept: Sequence[BatchClocks], samples_s: Sequence[float], max_clk: float | None
) -> tuple[list[bool | None], list[float], list[float]]:
    """Per kept sample, in order: its batch's throttle flag; and the
    clock-normalised times (:func:`normalise`, where known) and the samples
    known not throttled."""
    flags: list[bool | None] = []
    normed: list[float] = []
    unthrottled: list[float] = []
    i = 0
    for b in kept:
        if b.max_sm_clock_mhz is None:
            b.max_sm_clock_mhz = max_clk
        f = b.throttled
        clk = b.sm_clock_mhz
        for s in samples_s[i : i + b.n_samples]:
            flags.append(f)
            n = normalise(s, clk, max_clk)
            if n is not None:
                normed.append(n)
            if f is False:
                unthrottled.append(s)
        i += b.n_samples
    return flags, normed, unthrottled


def summarize(batches: Sequence[BatchClocks], samples_s: Sequence[float], monitor) -> dict:
    """Everything clock-related for one timing result.

    Parameters
    ----------
    batches : sequence of BatchClocks
        In the order taken; the kept batches' ``n_samples`` add up to ``len(samples_s)``.
    samples_s : sequence of float
        The kept samples, seconds, in order.
    monitor : ClockMonitor or NullMonitor

    Returns
    -------
    dict
        ``clocks`` (summary dict, always with ``available`` and ``reason``),
        ``throttled`` (per kept sample: bool, or ``None`` when unknown; the whole
        list is ``None`` without NVML), ``p50_clock_normalised_s`` and
        ``p50_unthrottled_s`` (median of the samples known not throttled;
        ``None`` when unknown or when every sample was throttled).

    Raises
    ------
    ValueError
        If the kept batches do not account for exactly ``len(samples_s)`` samples.
    """
    kept = [b for b in batches if b.kept]
    if sum(b.n_samples for b in kept) != len(samples_s):
        raise ValueError(
            f"kept batches hold {sum(b.n_samples for b in kept)} samples, but {len(samples_s)} samples were given"
        )
    excluded = sum(b.n_samples for b in batches if not b.kept)
    readings = [r for b in batches for r in b.readings]
    if not getattr(monitor, "available", False) or not readings:
        reason = getattr(monitor, "reason", None) or "no clock readings were taken"
        return {
            "clocks": {"available": False, "reason": reason, "excluded_samples": excluded},
            "throttled": None,
            "p50_clock_normalised_s": None,
            "p50_unthrottled_s": None,
        }
    max_clk = monitor.max_sm_clock_mhz
    flags, normed, unthrottled = _per_sample(kept, samples_s, max_clk)
    seen = sorted({r for b in batches for r in b.reasons})
    waits = [w for w in (b.cpu_wait_frac for b in batches) if w is not None]
    sm = [x.sm_clock_mhz for x in readings if x.sm_clock_mhz is not None]
    mem = [x.mem_clock_mhz for x in readings if x.mem_clock_mhz is not None]
    temp = [x.temperature_c for x in readings if x.temperature_c is not None]
    power = [x.power_w for x in readings if x.power_w is not None]
    known = [f for f in flags if f is not None]
    return {
        "clocks": {
            "available": True,
            "reason": None,
            "device_index": getattr(monitor, "index", None),
            "source": getattr(monitor, "name", None),
            "readings": len(readings),
            "max_sm_clock_mhz": max_clk,
            "max_mem_clock_mhz": monitor.max_mem_clock_mhz,
            "sm_clock_mhz": _spread(sm),
            "mem_clock_mhz": _spread(mem),
            "temperature_c": _spread(temp),
            "power_w": _spread(power),
            "throttle_reasons": seen,
            "throttled_samples": sum(1 for f in known if f) if known else None,
            "unknown_throttle_samples": sum(1 for f in flags if f is None),
            "excluded_samples": excluded,
            "cpu_wait_frac": _spread(waits),
            "cpu_contention_limit": CPU_CONTENTION_LIMIT if waits else None,
            "normalisation": ("time_s * sm_clock_mhz / max_sm_clock_mhz (batch mean SM clock)" if max_clk else None),
        },
        "throttled": flags,
        "p50_clock_normalised_s": _median(normed) if len(normed) == len(samples_s) else None,
        "p50_unthrottled_s": _median(unthrottled),
    }
