"""Measured ceilings: what this device actually reaches.

``kernelwatch calibrate`` measures

- memory bandwidth: a large device-to-device copy (``dst.copy_(src)``), a read-only
  sum and STREAM's Add (:data:`BANDWIDTH_FIGURES`; the ceiling is the highest), counting
  bytes read plus bytes written, with the L2 flushed between samples on CUDA;
- matmul FLOP/s per dtype (``torch.matmul`` on random data): fp32, tf32, fp16,
  bf16 and fp8 (``torch._scaled_mm``, compute capability 8.9 and up) on CUDA;
  fp32, fp16 and bf16 on the CPU; every other dtype is listed as skipped, with why;

Each figure is measured repeatedly until stable (:func:`repeat_until_stable`):
the value is the best of the converged, uncontended runs, and the runs, their
contention and whether they agreed are stored beside it, so a ceiling measured
on a busy machine says so instead of silently halving every ceiling. A figure
whose every run was contended is not a ceiling: it is stored ``contended``
with no value (the calibration could not measure it; the figures that need it
are withheld when read); a figure is not repeated once its first
:data:`CONTENDED_RUNS_STOP` runs were contended, and after
:data:`CONTENDED_FIGURES_STOP` such figures in a row the rest of their group
(the bandwidths, the matmuls) are not attempted
("could not calibrate: contended"). The whole calibration has a time cap
(``time_cap_s``, default :data:`DEFAULT_TIME_CAP_S`), a wall-clock bound checked
before every figure and every run, each run's sampling time cut to half of what
is left: a figure that no longer fits is stored ``no_time`` with no value, the headline figures first (copy,
then the bf16 and fp16 matmuls: :data:`MATMUL_ORDER`), so under contention
it says what it could not calibrate in bounded time instead of repeating
(issue 25 item 7, issue 26 finding 4). The
calibration times with the same ``cpu`` method thread count as the suite
(``cpu_threads``), so CPU ceilings and CPU records are comparable.

It stores the result per machine (``<results>/<machine>/kernelwatch/calibration.jsonl``,
history kept, the newest usable line wins) with its date, software versions,
timing configuration and, on CUDA, the clocks seen. A figure above the
datasheet peak (by more than ``metrics.PEAK_MARGIN``) or from an unusable time
is stored with ``status`` ``timing_bug``/``invalid`` and no value. MFU and
bw_util are then reported against these ceilings (``mfu_measured`` ...) beside
the datasheet figures. On a CPU there is no datasheet: the measured ceilings are
the peaks.
"""

from __future__ import annotations

import json
import os
import platform
import time
from pathlib import Path
from typing import Callable

from harness.core import guards, metrics
from harness.core.devices import DeviceIdentity, identify, lookup_spec
from harness.core.metrics import Peaks
from harness.core.records import (
    ANY_THREADS,
    CALIBRATION_FILE,
    CALIBRATION_SCHEMA,
    append_jsonl,
    latest_calibration,
    now_iso,
    records_dir,
)
from harness.measure import clocks, timing
from harness.measure.calibration_plan import (  # noqa: F401 (re-exported: callers use calibrate.X)
    CALIBRATION_DTYPES,
    CPU_MAX_BUFFER_BYTES,
    CPU_MAX_MEMORY_SHARE,
    CalibrationPlan,
    available_memory_bytes,
    plan_for,
    unsupported_reason,
)


def _time(fn, ident: DeviceIdentity, cfg: timing.TimingConfig, monitor=None) -> timing.TimingResult:
    if ident.kind == "cuda":
        return timing.time_cuda(fn, cfg, l2_bytes=ident.l2_bytes, monitor=monitor)
    return timing.time_cpu(fn, cfg)


#: Seconds one calibration may take unless told otherwise (``kernelwatch calibrate --time-cap``).
DEFAULT_TIME_CAP_S = 90.0
#: Matmul dtypes in the order they are measured: the suite's headline dtypes first,
#: so a time cap drops the rarer ones.
MATMUL_ORDER = ("bf16", "fp16", "fp32", "tf32", "fp8")
#: The same on the CPU, where the suite times fp32 and an fp16 matmul call takes
#: seconds: fp32 first, so the cap never leaves the suite's own dtype without a
#: ceiling (a fresh run spent 71 s of 90 on fp16 and stored fp32 as no_time: no mfu
#: on any page; newcomer trial, issue 25).
CPU_MATMUL_ORDER = ("fp32", "bf16", "fp16")
#: Status of a figure the time cap left no time for (stored with no value).
STATUS_NO_TIME = "no_time"

#: A figure is stable when its two best converged, uncontended runs agree within this (relative).
STABLE_REL = 0.02
#: Runs per figure at most (``--quick``: 3); at least 2 are always taken.
MAX_REPEATS = 5
#: No new run is started once a figure has used this many times its timing's ``max_time_s``.
REPEAT_BUDGET = 4.0
#: A figure whose first this-many runs were all contended is not repeated: it is
#: stored ``contended`` ("could not calibrate: contended"); repeating on a busy
#: machine only spends the time cap (the newcomer trial's calibration took 575 s).
CONTENDED_RUNS_STOP = 2
#: After this many figures of one group (the bandwidths, the matmuls) in a row
#: withheld as contended, the rest of that group is not attempted (stored
#: ``contended``, "not attempted"). Per group: measured at load 3 on the 2-vCPU
#: VM, copy, read and add were all contended while the three matmuls were clean.
CONTENDED_FIGURES_STOP = 2


def _run_info(r: timing.TimingResult) -> dict:
    cpu = r.extra.get("cpu") or {}
    wait = (r.clocks or {}).get("cpu_wait_frac") or {}
    return {
        "p50_s": r.p50_s,
        "converged": r.converged,
        "ci_rel": r.ci_rel,
        "n_samples": len(r.samples_s),
        "contended": bool(cpu.get("contended")),
        "excluded_samples": cpu.get("excluded_samples"),
        "cpu_wait_frac_max": wait.get("max"),
        "throttled_samples": (r.clocks or {}).get("throttled_samples"),
    }


def repeat_until_stable(
    time_once: Callable[[], timing.TimingResult],
    *,
    max_repeats: int = MAX_REPEATS,
    budget_s: float | None = None,
    stable_rel: float = STABLE_REL,
    clock: Callable[[], float] = time.perf_counter,
    min_runs: int = 2,
    deadline: float | None = None,
    contended_stop: int | None = CONTENDED_RUNS_STOP,
) -> tuple[timing.TimingResult, dict]:
    """Time a calibration figure until its best runs agree, and keep the best.

    A run is *clean* when it converged (its stopping rule met ``target_rel``)
    and was not flagged contended (``extra["cpu"]["contended"]``). Runs are
    added until the two fastest clean runs (smallest ``p50_s``) agree within
    ``stable_rel``, or ``max_repeats`` runs were taken, or ``budget_s`` seconds
    were spent (checked before each new run; at least ``min_runs`` runs are
    taken, 1 or 2), or another run as long as the last one would end after
    ``deadline`` (a ``clock`` reading; this one overrides ``min_runs``: a call
    that takes seconds, a CPU fp16 matmul, must not push a capped calibration
    past its cap), or the first ``contended_stop`` runs were all contended
    (``None``: never; the figure is then withheld, :func:`contention_status`,
    instead of being repeated on a busy machine).
    The ceiling is the fastest clean run: interference only ever slows a run
    down, so on a busy machine the best of several runs is the closest to what
    the device can do ("best of converged runs"). Without a clean run the
    fastest valid run is returned and ``stable`` is False.

    Parameters
    ----------
    time_once : callable
        Returns one :class:`harness.measure.timing.TimingResult` per call.
    max_repeats : int
        At least 2. Raises ``ValueError`` otherwise.
    budget_s : float, optional
        Time budget in seconds (``None``: no budget).
    stable_rel : float
        Agreement wanted between the two best clean runs, relative (> 0).

    Returns
    -------
    (TimingResult, dict)
        The chosen run, and ``{"runs": [per run: p50_s, converged, ci_rel,
        contended, ...], "chosen": index, "stable": bool, "stability": why,
        "contended_runs": n, "clean_runs": n}``.
    """
    if max_repeats < 2:
        raise ValueError(f"max_repeats must be at least 2, got {max_repeats}")
    if min_runs not in (1, 2):
        raise ValueError(f"min_runs must be 1 or 2, got {min_runs!r}")
    if not stable_rel > 0:
        raise ValueError(f"stable_rel must be positive, got {stable_rel!r}")
    runs: list[timing.TimingResult] = []
    t0 = clock()
    why = ""
    while True:
        t_run = clock()
        runs.append(time_once())
        last_s = clock() - t_run
        clean = sorted(
            (
                i
                for i, r in enumerate(runs)
                if r.converged and not (r.extra.get("cpu") or {}).get("contended") and not metrics.valid_time(r.p50_s)
            ),
            key=lambda i: runs[i].p50_s,
        )
        if len(clean) >= 2:
            a, b = runs[clean[0]].p50_s, runs[clean[1]].p50_s
            if b / a - 1 <= stable_rel:
                why = f"the best two of {len(clean)} clean runs agree within {b / a - 1:.2%} (<= {stable_rel:.0%})"
                break
        if len(runs) >= max_repeats:
            why = f"{max_repeats} runs taken"
            break
        if len(runs) >= min_runs and budget_s is not None and clock() - t0 >= budget_s:
            why = f"time budget {budget_s:.3g} s spent after {len(runs)} runs"
            break
        if deadline is not None and clock() + last_s > deadline:
            why = f"time cap: another {last_s:.3g} s run would end after it ({len(runs)} runs)"
            break
        n_contended = sum(1 for r in runs if (r.extra.get("cpu") or {}).get("contended"))
        if contended_stop is not None and len(runs) >= contended_stop and n_contended == len(runs):
            why = f"contended: all {len(runs)} runs contended, not repeated"
            break
    stable = why.startswith("the best two")
    if not stable:
        if len(clean) >= 2:
            spread = runs[clean[1]].p50_s / runs[clean[0]].p50_s - 1
            why += f"; the best two clean runs differ by {spread:.2%} (> {stable_rel:.0%})"
        else:
            why += f"; {len(clean)} clean (converged, uncontended) run(s)"
    pool = clean or sorted(
        (i for i, r in enumerate(runs) if not metrics.valid_time(r.p50_s)), key=lambda i: runs[i].p50_s
    )
    chosen = pool[0] if pool else len(runs) - 1
    info = {
        "runs": [_run_info(r) for r in runs],
        "chosen": chosen,
        "stable": stable,
        "stability": why,
        "contended_runs": sum(1 for r in runs if (r.extra.get("cpu") or {}).get("contended")),
        "clean_runs": len(clean),
    }
    return runs[chosen], info


def contention_status(info: dict) -> dict | None:
    """``{"status": "contended", "reason"}`` when every run of a figure
    (:func:`repeat_until_stable`'s ``info``) was contended: no run is a ceiling,
    so the figure is withheld. ``None`` otherwise."""
    n = len(info.get("runs") or [])
    if n and info.get("contended_runs", 0) >= n:
        return {
            "status": metrics.STATUS_CONTENDED,
            "reason": f"could not calibrate: contended (all {n} runs; the CPU was busy); "
            "the figures that need this ceiling are withheld",
        }
    return None


def _capped_config(cfg: timing.TimingConfig, left_s: float) -> timing.TimingConfig:
    """``cfg`` with its sampling time (``max_time_s``, and ``min_time_s`` below
    it) cut to half of ``left_s``, the seconds left in the cap: one run then
    cannot take most of what is left (with the contended extension of
    :data:`harness.measure.timing_cpu.CONTENDED_EXTENSION` it stays within a few
    times that). Unchanged when it already fits."""
    import dataclasses

    room = max(0.0, left_s / 2 - cfg.warmup_s)
    if cfg.max_time_s <= room:
        return cfg
    return dataclasses.replace(cfg, max_time_s=room, min_time_s=min(cfg.min_time_s, room))


def _not_attempted(what: str, after: list[str]) -> dict:
    return {
        "status": metrics.STATUS_CONTENDED,
        "reason": f"could not calibrate: contended; {what} not attempted after {' and '.join(after)} "
        "were contended (the CPU was busy); the figures that need this ceiling are withheld",
    }


def _no_time(what: str, cap_s: float | None = None) -> dict:
    cap = f"{cap_s:g} s " if cap_s is not None else ""
    return {
        "status": STATUS_NO_TIME,
        "reason": f"could not calibrate {what}: the calibration's {cap}time cap was reached first",
    }


def _loadavg() -> float | None:
    try:
        return os.getloadavg()[0]
    except (AttributeError, OSError):
        return None


def _guard(kind: str, value, datasheet_value, time_s, what: str) -> dict:
    """Status of one calibration figure: ``invalid`` for an unusable time,
    ``timing_bug`` above the datasheet peak by more than ``PEAK_MARGIN``, else ``ok``."""
    bad = metrics.valid_time(time_s)
    if bad:
        return {"status": metrics.STATUS_INVALID, "reason": bad}
    if datasheet_value and value > datasheet_value * (1 + metrics.PEAK_MARGIN):
        return {
            "status": metrics.STATUS_TIMING_BUG,
            "reason": f"{what} {value:.4g} {kind} exceeds the datasheet peak {datasheet_value:.4g} {kind} "
            f"by more than {metrics.PEAK_MARGIN:.0%}",
        }
    return {"status": metrics.STATUS_OK, "reason": None}


def _timing_block(r: timing.TimingResult, repeats: dict | None = None) -> dict:
    out = {
        "p50_s": r.p50_s,
        "ci_rel": r.ci_rel,
        "converged": r.converged,
        "stop_reason": r.stop_reason,
        "n_samples": len(r.samples_s),
        "method": r.method,
        "config": r.config,
        "clocks": r.clocks,
        "p50_clock_normalised_s": r.p50_clock_normalised_s,
    }
    if repeats is not None:
        out.update(
            repeats=repeats["runs"],
            chosen_run=repeats["chosen"],
            stable=repeats["stable"],
            stability=repeats["stability"],
            contended_runs=repeats["contended_runs"],
        )
    return out


class _ContendedStreak:
    """What :func:`measure` does not start: a figure once the time cap
    (``cap_s`` seconds after ``t_start``, a ``time.perf_counter`` reading) is
    reached (``no_time``), or once :data:`CONTENDED_FIGURES_STOP` figures of its
    group in a row were withheld as contended (``contended``, not attempted;
    :meth:`new_group` starts a group). ``say`` gets a line for each."""

    def __init__(self, cap_s: float | None, t_start: float, say):
        self.cap_s, self.t_start, self.say = cap_s, t_start, say
        self.contended: list[str] = []  # the figures withheld as contended in a row, newest last

    def new_group(self) -> None:
        """The next figures are of another kind (the matmuls after the bandwidths): a fresh streak."""
        self.contended.clear()

    def skip_why(self, what: str) -> dict | None:
        """Why ``what`` is not started, as its status and reason, else ``None``."""
        if self.cap_s is not None and time.perf_counter() - self.t_start >= self.cap_s:
            self.say(f"{what}: no time left in the {self.cap_s:g} s cap")
            return _no_time(what, self.cap_s)
        if len(self.contended) >= CONTENDED_FIGURES_STOP:
            self.say(f"{what}: could not calibrate: contended (not attempted)")
            return _not_attempted(what, self.contended[-CONTENDED_FIGURES_STOP:])
        return None

    def done(self, what: str, fig: dict) -> dict:
        """Count a measured figure into the streak (a clean one ends it); returns ``fig``."""
        if fig.get("status") == metrics.STATUS_CONTENDED:
            self.contended.append(what)
            self.say(f"{what}: could not calibrate: contended")
        elif fig.get("status") != STATUS_NO_TIME:
            self.contended.clear()
        return fig


def measure(
    ident: DeviceIdentity | None = None,
    quick: bool = False,
    progress=None,
    plan: CalibrationPlan | None = None,
    time_cap_s: float | None = DEFAULT_TIME_CAP_S,
) -> dict:
    """Run the calibration on this machine's benchmark device.

    Parameters
    ----------
    ident : DeviceIdentity, optional
        The device (default: :func:`harness.core.devices.identify`).
    quick : bool
        Smaller sizes and a looser stopping rule.
    progress : callable, optional
        ``progress(message)`` for each step.
    plan : CalibrationPlan, optional
        Override the sizes from :func:`plan_for` (tests use tiny ones).
    time_cap_s : float or None
        Seconds the figures may take in all (``None``: no cap). A figure is
        started only if one run (``warmup_s + max_time_s``, doubled for the
        buffers' set-up) still fits, each run samples for at most half the
        time left (:func:`_capped_config`), and no run is started that, as long
        as the last, would end past the cap; the others get status ``no_time``
        (:data:`STATUS_NO_TIME`) and no value. Raises ``ValueError`` when negative.

    Returns
    -------
    dict
        ``{"schema", "machine", "date", "device", "versions", "quick", "copy": {...},
        "matmul": {dtype: {...}}, "skipped": {dtype: reason}}``. Every dtype of
        :data:`CALIBRATION_DTYPES` is in ``matmul`` or ``skipped``. Figures in
        GB/s (copy: bytes read plus written) and TFLOP/s (``2 n^3`` per matmul),
        each with its p50 time, spread, timing configuration, clocks and a
        ``status`` (``ok``, ``invalid``, ``timing_bug``: see :func:`_guard`);
        a non-``ok`` figure is ``None`` and never used as a ceiling
        (``contended``: every run was; ``no_time``: the cap came first). Each
        figure also holds its ``repeats`` (:func:`repeat_until_stable`),
        ``stable`` and ``stability``; ``contention`` holds the calibration's
        own: load average before and after, contended runs, the largest
        run-queue wait share seen; ``cpu_threads`` the ``cpu`` method's threads.
    """
    import torch

    if time_cap_s is not None and not time_cap_s >= 0:
        raise ValueError(f"time_cap_s must be seconds >= 0 or None, got {time_cap_s!r}")
    ident = ident or identify()
    plan = plan or plan_for(ident, quick)
    dev = "cuda" if ident.kind == "cuda" else "cpu"
    say = progress or (lambda msg: None)
    spec = lookup_spec(ident.name, warn=False) if ident.kind == "cuda" else None
    monitor = clocks.open_monitor() if ident.kind == "cuda" else None
    max_repeats = 3 if quick else MAX_REPEATS
    load_before = _loadavg()
    t_start = time.perf_counter()

    def stable(fn, cfg, what):
        """The figure's chosen run and repeats, or ``None`` when the cap leaves no time for one run."""
        one_run = 2 * (cfg.warmup_s + cfg.max_time_s)
        budget = REPEAT_BUDGET * cfg.max_time_s
        min_runs = 2
        if time_cap_s is not None:
            left = time_cap_s - (time.perf_counter() - t_start)
            if left < one_run / 2:
                return None
            budget = max(0.0, min(budget, left - one_run))
            min_runs = 2 if left >= 2 * one_run else 1
            cfg = _capped_config(cfg, left)
        return repeat_until_stable(
            lambda: _time(fn, ident, cfg, monitor),
            max_repeats=max_repeats,
            budget_s=budget,
            min_runs=min_runs,
            deadline=None if time_cap_s is None else t_start + time_cap_s,
            clock=time.perf_counter,
        )

    streak = _ContendedStreak(time_cap_s, t_start, say)
    try:
        bandwidth = {}
        for k in BANDWIDTH_FIGURES:
            why = streak.skip_why(f"{k} bandwidth")
            bandwidth[k] = (
                {"bytes": None, **why, "gbps": None}
                if why
                else streak.done(f"{k} bandwidth", _measure_bandwidth(torch, k, plan, dev, spec, stable, say))
            )
        streak.new_group()
        matmul, skipped = _measure_matmuls(torch, ident, plan, dev, spec, stable, say, streak.skip_why, streak.done)
    finally:
        if monitor is not None:
            monitor.close()
    versions = dict(ident.versions)
    versions.update({"python": platform.python_version(), "driver": ident.driver})
    return {
        "schema": CALIBRATION_SCHEMA,
        "machine": ident.machine_name(),
        "date": now_iso(),
        "device": ident.as_dict(),
        "versions": versions,
        "quick": quick,
        "plan": {
            "copy_bytes": plan.copy_bytes,
            "matmul_n": plan.matmul_n,
            "dtypes": list(plan.dtypes),
            **({"note": plan.note} if plan.note else {}),
        },
        "cpu_threads": plan.config.threads if ident.kind == "cpu" else None,
        "time_cap_s": time_cap_s,
        "contention": _contention(bandwidth, matmul, load_before, time.perf_counter() - t_start),
        **bandwidth,
        "matmul": matmul,
        "skipped": skipped,
    }


#: Memory-bandwidth figures of a calibration: (buffers of ``plan.copy_bytes`` fp32,
#: the call over them). Every buffer is counted once per call, read or written
#: (the last one is the output where there are several): ``copy`` counts bytes read plus
#: written; ``read`` and ``add`` (STREAM's Add: two reads, one write) exist because
#: on a write-allocate cache (every x86 and Arm CPU) each written line is also read
#: first, so a copy moves 3 bytes per 2 counted (McCalpin, STREAM FAQ, "counting
#: bytes") and a read-mostly kernel (a reduction, ``vector_add``) legitimately shows
#: more counted GB/s than the copy; measured on the 2-vCPU VM, ``vector_add`` at
#: 2**24 reached 46.4 GB/s against a 38.1 GB/s copy. The memory ceiling is the
#: highest of the three (:func:`harness.core.guards.memory_ceiling_gbps`).
BANDWIDTH_FIGURES = {
    "copy": (2, lambda torch, a, b: lambda: b.copy_(a)),
    "read": (1, lambda torch, a: lambda: a.sum()),
    "add": (3, lambda torch, a, b, c: lambda: torch.add(a, b, out=c)),
}


def _measure_bandwidth(torch, kind: str, plan: CalibrationPlan, dev: str, spec, stable, say) -> dict:
    """One memory-bandwidth figure of :data:`BANDWIDTH_FIGURES` (:func:`measure`'s
    ``copy``, ``read`` or ``add``): its call over buffers of ``plan.copy_bytes``
    fp32, the bytes it counts over the p50 time, guarded."""
    n_buffers, make = BANDWIDTH_FIGURES[kind]
    say(f"{kind} bandwidth: {plan.copy_bytes / 2**20:.0f} MiB")
    if plan.note and kind == "copy":
        say(plan.note)
    n_el = plan.copy_bytes // 4
    src = torch.ones(n_el, dtype=torch.float32, device=dev)
    bufs = [src] + [torch.empty_like(src) if i == n_buffers - 1 else torch.ones_like(src) for i in range(1, n_buffers)]
    got = stable(make(torch, *bufs), plan.config, f"{kind} bandwidth")
    counted = n_buffers * n_el * 4
    if got is None:
        return {"bytes": counted, **_no_time(f"{kind} bandwidth"), "gbps": None}
    res, reps = got
    g = contention_status(reps) or _guard(
        "GB/s",
        counted / res.p50_s / 1e9 if not metrics.valid_time(res.p50_s) else None,
        spec.peak_gbps if spec else None,
        res.p50_s,
        f"{kind} bandwidth",
    )
    return {
        "bytes": counted,
        **_timing_block(res, reps),
        **g,
        "gbps": counted / res.p50_s / 1e9 if g["status"] == metrics.STATUS_OK else None,
    }


def _measure_matmuls(
    torch, ident: DeviceIdentity, plan: CalibrationPlan, dev: str, spec, stable, say, skip_why=None, done=None
) -> tuple[dict, dict]:
    """``(matmul, skipped)`` of :func:`measure`: one ``n^3`` matmul figure per dtype
    of the plan, in :data:`MATMUL_ORDER`, timed with the plan's method (``cold``
    on a GPU: the method the suite times its matmul cases with, so a case's
    mfu_measured compares like with like), TFLOP/s guarded; a dtype that fails,
    or is not in the plan, is skipped with why; one ``skip_why(what)`` refuses
    (the time cap: ``no_time``; a contended machine: ``contended``) is stored
    with that status and no value; ``done(what, figure)`` sees each measured one."""
    matmul, skipped = {}, {}
    for dtype in CALIBRATION_DTYPES:
        if dtype not in plan.dtypes:
            skipped[dtype] = unsupported_reason(ident, dtype) or "not in this calibration plan"
    n = plan.matmul_n
    gen = torch.Generator(device="cpu").manual_seed(0)
    mm_cfg = plan.config
    order = CPU_MATMUL_ORDER if ident.kind == "cpu" else MATMUL_ORDER
    for dtype in sorted(plan.dtypes, key=lambda d: order.index(d) if d in order else len(order)):
        why = skip_why(f"matmul {dtype}") if skip_why is not None else None
        if why:
            matmul[dtype] = {"shape": [n, n, n], **why, "tflops": None}
            continue
        say(f"matmul {dtype}: {n}^3")
        try:
            fn = _matmul_fn(torch, dtype, n, dev, gen)
            got = stable(fn, mm_cfg, f"matmul {dtype}")
            if got is None:
                matmul[dtype] = {"shape": [n, n, n], **_no_time(f"matmul {dtype}"), "tflops": None}
                continue
            r, reps = got
            tf = 2 * n**3 / r.p50_s / 1e12 if not metrics.valid_time(r.p50_s) else None
            g = contention_status(reps) or _guard(
                "TFLOP/s", tf, spec.peak_tflops.get(dtype) if spec else None, r.p50_s, f"matmul {dtype}"
            )
            matmul[dtype] = {
                "shape": [n, n, n],
                **_timing_block(r, reps),
                **g,
                "tflops": tf if g["status"] == metrics.STATUS_OK else None,
            }
            if done is not None:
                done(f"matmul {dtype}", matmul[dtype])
        except Exception as exc:  # a dtype the device or BLAS cannot do is skipped, with why
            skipped[dtype] = f"{type(exc).__name__}: {exc}"
    return matmul, skipped


def _contention(bandwidth: dict, matmul: dict, load_before, seconds: float) -> dict:
    """The calibration's own contention: load average before and after, runs
    flagged contended, the largest run-queue wait share any run saw."""
    named = list(bandwidth.items()) + list(matmul.items())
    figs = [f for _, f in named]
    runs = [r for f in figs for r in f.get("repeats") or []]
    waits = [r["cpu_wait_frac_max"] for r in runs if r.get("cpu_wait_frac_max") is not None]
    return {
        "loadavg_1min_before": load_before,
        "loadavg_1min_after": _loadavg(),
        "seconds": round(seconds, 1),
        "runs": len(runs),
        "contended_runs": sum(1 for r in runs if r.get("contended")),
        "unstable_figures": [name for name, f in named if not f.get("stable")],
        "cpu_wait_frac_max": max(waits) if waits else None,
    }


def _matmul_fn(torch, dtype: str, n: int, dev: str, gen):
    """A zero-argument callable computing one ``n x n x n`` matmul in ``dtype``."""
    if dtype == "fp8":
        a = torch.randn(n, n, generator=gen).to(dev).to(torch.float8_e4m3fn)
        b = torch.randn(n, n, generator=gen).to(dev).to(torch.float8_e4m3fn).t()  # _scaled_mm wants column-major B
        one = torch.tensor(1.0, device=dev)
        return lambda: torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
    tdt = {"fp32": torch.float32, "tf32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}[dtype]
    a = torch.randn(n, n, generator=gen).to(dev, tdt)
    b = torch.randn(n, n, generator=gen).to(dev, tdt)
    if dev != "cuda":
        return lambda: torch.matmul(a, b)
    tf32 = dtype == "tf32"

    from kernels.matmul import tf32_mode  # fp32_precision where torch has it (allow_tf32 raises after it)

    def fn():
        with tf32_mode(tf32):
            return torch.matmul(a, b)

    return fn


def save(cal: dict, results_dir) -> Path:
    """Append to ``<results>/<machine>/kernelwatch/calibration.jsonl`` (history kept; latest wins)."""
    path = records_dir(results_dir, cal["machine"]) / CALIBRATION_FILE
    append_jsonl(path, cal)
    return path


def load_latest(results_dir, machine: str, errors: list[str] | None = None, cpu_threads=ANY_THREADS) -> dict | None:
    """The newest usable, validated calibration of ``machine`` under ``results_dir``, or ``None``
    (:func:`harness.core.records.latest_calibration`: absurd figures are not used,
    a calibration without a usable one is skipped with the file and why, and
    ``cpu_threads`` keeps only CPU calibrations with that thread count)."""
    return latest_calibration(results_dir, machine, errors, cpu_threads=cpu_threads)


def measured_peaks(cal: dict | None, dtype: str, uses_tensor_cores: bool) -> Peaks | None:
    """Ceilings for an op from a calibration (:func:`harness.core.guards.calibration_ceilings`):
    the copy bandwidth, and the matmul rate of ``dtype`` for tensor-core ops,
    or the fp32 matmul rate (CUDA-core / SIMD FMA rate) for everything else."""
    return guards.calibration_ceilings(cal, dtype, uses_tensor_cores)


def datasheet_peaks(ident: DeviceIdentity, dtype: str, uses_tensor_cores: bool) -> Peaks | None:
    """Datasheet ceilings for an op on ``ident``; ``None`` on a CPU or an unknown GPU."""
    if ident.kind != "cuda":
        return None
    spec = lookup_spec(ident.name)
    if spec is None:
        return None
    return Peaks(
        tflops=spec.peak_for(dtype, uses_tensor_cores),
        gbps=spec.peak_gbps,
        source=f"datasheet {spec.sku}: {spec.source.split(';')[0].strip()}",
    )


def write_file(cal: dict, out: str | os.PathLike) -> Path:
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(cal, indent=2, sort_keys=True) + "\n")
    return out
