"""GPU clocks, temperature, power and throttle reasons, read through NVML during a measurement.

A GPU that is power- or temperature-limited runs its SMs at a lower clock, and
a kernel timed then looks slower although the code did not change. So every
CUDA timing reads NVML (``nvidia-ml-py``, module ``pynvml``) around each batch
of samples (once while the batch is executing, once after it completed; see
:func:`harness.measure.timing.time_cuda`) and records:

- SM and memory clock (MHz), temperature (deg C), board power (W);
- the clock-event ("throttle") reasons, decoded from NVML's bit mask, reported
  (:data:`SLOWDOWN_REASONS`: power cap, thermal, hardware slowdown, power brake,
  sync boost, board limit, reliability). A batch is *throttled* when its mean SM
  clock is below :data:`THROTTLE_CLOCK_FRACTION` (75%) of the device's maximum,
  NVBench's rule (``nvbench::state::set_throttle_threshold``, default 0.75): a
  reason alone is not throttling, because a datacenter GPU running dense matmuls
  sits at its power cap (``sw_power_cap`` set at 700 W on an H200) with its
  clock a few percent under boost, and every matmul record would be flagged.
  Only where a clock or the maximum is unknown do the hard reasons decide
  (:data:`HARD_SLOWDOWN_REASONS`: thermal, hardware slowdown, power brake).
  ``gpu_idle``, ``applications_clocks_setting`` and ``display_clock_setting``
  only say why the clock is not at boost while nothing, or a user's clock
  setting, demands it;
- per sample: whether it was taken while throttled (it can then be excluded,
  :attr:`harness.measure.timing.TimingConfig.exclude_throttled`), and a clock-normalised
  time ``time_s * sm_clock_mhz / max_sm_clock_mhz`` (see
  :func:`harness.measure.clock_batches.normalise`; the per-batch bookkeeping is there).

Where NVML cannot be used (no ``pynvml``, no driver, a device NVML cannot
map) everything above is *unknown*: ``None`` with a reason, never a failure of
the measurement.

CPU timings have no clocks to read, but they have the CPU analogue of
throttling: a thread of the process being runnable yet not running because
other processes hold the cores. :class:`CpuSchedMonitor` reads the cumulative
run-queue wait of **every thread of the process** from Linux's
``/proc/self/task/<tid>/schedstat`` (``Documentation/scheduler/sched-stats.rst``:
time on the CPU, time waiting on a run queue, in ns) before and after each
batch. Watching only the timing thread misses PyTorch's intra-op workers: a
multi-threaded op waits for its slowest worker, and a worker waiting for a
core stalls the op while the timing thread itself is merely blocked, not
queued. A batch whose threads together waited more than
:data:`CPU_CONTENTION_LIMIT` of its wall time (thread-seconds of run-queue wait
per second of wall time) is flagged with the reason ``cpu_contention``, and is
then handled like a throttled GPU batch (flagged, excludable; the ``cpu``
timing method excludes such batches by default, see
:func:`harness.measure.timing.time_cpu`).

Bit values of the reasons are those of ``nvml.h`` (``nvmlClocksEventReason*``,
formerly ``nvmlClocksThrottleReason*``), as exported by ``pynvml``; they are
listed here so an older ``nvidia-ml-py`` without the newer names still decodes them.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import Callable

#: NVML clock-event reason bits (nvml.h, ``nvmlClocksEventReason*``).
REASON_BITS: dict[str, int] = {
    "gpu_idle": 0x1,
    "applications_clocks_setting": 0x2,
    "sw_power_cap": 0x4,
    "hw_slowdown": 0x8,
    "sync_boost": 0x10,
    "sw_thermal_slowdown": 0x20,
    "hw_thermal_slowdown": 0x40,
    "hw_power_brake_slowdown": 0x80,
    "display_clock_setting": 0x100,
    "board_limit": 0x200,
    "reliability": 0x400,
}

#: Reasons that mean the device ran slower than it could have for the work it had
#: (``cpu_contention`` is ours, for CPU timings: see :class:`CpuSchedMonitor`).
SLOWDOWN_REASONS = frozenset(
    {
        "sw_power_cap",
        "hw_slowdown",
        "sync_boost",
        "sw_thermal_slowdown",
        "hw_thermal_slowdown",
        "hw_power_brake_slowdown",
        "board_limit",
        "reliability",
        "cpu_contention",
    }
)

#: A GPU batch is throttled when its mean SM clock is below this share of the
#: maximum SM clock (NVBench's default throttle threshold, 0.75).
THROTTLE_CLOCK_FRACTION = 0.75
#: Reasons that mark a reading throttled when its clock cannot be compared with
#: the maximum: the device is being slowed down for its own protection.
HARD_SLOWDOWN_REASONS = frozenset(
    {"hw_slowdown", "sw_thermal_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown", "cpu_contention"}
)

#: A CPU batch is contended when the process's threads together spent more than
#: this share of the batch's wall time waiting on a run queue. An idle machine shows well
#: under 1%; 5% is interference large enough to move a median by percents.
CPU_CONTENTION_LIMIT = 0.05

SCHEDSTAT = "/proc/thread-self/schedstat"
#: Folder of the process's threads; each ``<tid>/schedstat`` is one thread's counters.
TASK_DIR = "/proc/self/task"


def decode_reasons(mask: int) -> tuple[str, ...]:
    """Names of the reason bits set in an NVML clock-event mask, in bit order.

    Unknown bits are reported as ``"bit_0x..."`` rather than dropped. Raises
    ``ValueError`` for a negative mask and ``TypeError`` for a non-integer.
    """
    if isinstance(mask, bool) or not isinstance(mask, int):
        raise TypeError(f"clock-event mask must be an int, got {type(mask).__name__}")
    if mask < 0:
        raise ValueError(f"negative clock-event mask {mask}")
    names = [name for name, bit in REASON_BITS.items() if mask & bit]
    known = 0
    for bit in REASON_BITS.values():
        known |= bit
    rest = mask & ~known
    b = 1
    while rest:
        if rest & b:
            names.append(f"bit_{b:#x}")
            rest &= ~b
        b <<= 1
    return tuple(names)


@dataclass(frozen=True)
class ClockReading:
    """One NVML reading; any field NVML would not give is ``None``.

    Attributes
    ----------
    t_s : float
        ``time.perf_counter()`` when read, seconds.
    sm_clock_mhz, mem_clock_mhz : int or None
        Current SM and memory clocks, MHz.
    temperature_c : int or None
        GPU core temperature, degrees Celsius.
    power_w : float or None
        Board power draw, watts (NVML reports milliwatts).
    reasons : tuple of str or None
        Decoded clock-event reasons (:func:`decode_reasons`); ``None`` when unknown.
    sched_run_s, sched_wait_s : float or None
        CPU timings: cumulative time on a CPU and waiting on a run queue,
        seconds, summed over the threads read (every thread of the process, or
        the one ``schedstat`` file the monitor was opened on).
    sched_tasks : dict or None
        Per thread id, ``(run_ns, wait_ns)``: lets a batch's wait be taken per
        thread, so a thread that starts or ends between two readings does not
        make the sum jump.
    """

    t_s: float
    sm_clock_mhz: int | None = None
    mem_clock_mhz: int | None = None
    temperature_c: int | None = None
    power_w: float | None = None
    reasons: tuple[str, ...] | None = None
    sched_run_s: float | None = None
    sched_wait_s: float | None = None
    sched_tasks: dict | None = field(default=None, compare=False)

    @property
    def throttled(self) -> bool | None:
        """By the reasons alone (used where the clock rule cannot be applied): True when
        a hard slowdown reason is set (:data:`HARD_SLOWDOWN_REASONS`; the power cap
        is not one); ``None`` when the reasons are unknown."""
        if self.reasons is None:
            return None
        return any(r in HARD_SLOWDOWN_REASONS for r in self.reasons)


class ClockMonitor:
    """Reads one GPU's clocks through NVML. Use :func:`open_monitor` to get one.

    ``available`` is True; ``max_sm_clock_mhz`` is the device's maximum SM clock
    (``nvmlDeviceGetMaxClockInfo``), ``None`` when NVML does not report it.
    """

    available = True
    reason = None

    def __init__(self, nvml, handle, index: int, name: str | None = None, now: Callable[[], float] = time.perf_counter):
        self._nvml = nvml
        self._handle = handle
        self._now = now
        self.index = index
        self.name = name
        self.max_sm_clock_mhz = self._try(
            lambda: int(nvml.nvmlDeviceGetMaxClockInfo(handle, _const(nvml, "NVML_CLOCK_SM", 1)))
        )
        self.max_mem_clock_mhz = self._try(
            lambda: int(nvml.nvmlDeviceGetMaxClockInfo(handle, _const(nvml, "NVML_CLOCK_MEM", 2)))
        )
        self._closed = False

    @staticmethod
    def _try(fn):
        # NVML answers NOT_SUPPORTED for some queries on some boards (power on
        # a few PCIe cards, reasons on old drivers): that field is unknown.
        try:
            return fn()
        except Exception:
            return None

    def _reasons(self) -> tuple[str, ...] | None:
        nv, h = self._nvml, self._handle
        for fname in ("nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons"):
            fn = getattr(nv, fname, None)
            if fn is None:
                continue
            mask = self._try(lambda fn=fn: int(fn(h)))
            if mask is not None:
                return decode_reasons(mask)
        return None

    def read(self) -> ClockReading:
        """One reading now. Never raises for an unsupported query (field is ``None``)."""
        nv, h = self._nvml, self._handle
        power_mw = self._try(lambda: nv.nvmlDeviceGetPowerUsage(h))
        return ClockReading(
            t_s=self._now(),
            sm_clock_mhz=self._try(lambda: int(nv.nvmlDeviceGetClockInfo(h, _const(nv, "NVML_CLOCK_SM", 1)))),
            mem_clock_mhz=self._try(lambda: int(nv.nvmlDeviceGetClockInfo(h, _const(nv, "NVML_CLOCK_MEM", 2)))),
            temperature_c=self._try(lambda: int(nv.nvmlDeviceGetTemperature(h, _const(nv, "NVML_TEMPERATURE_GPU", 0)))),
            power_w=power_mw / 1000.0 if power_mw is not None else None,
            reasons=self._reasons(),
        )

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._try(self._nvml.nvmlShutdown)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class NullMonitor:
    """Stands in when NVML cannot be used: every reading is unknown, with ``reason``."""

    available = False
    max_sm_clock_mhz = None
    max_mem_clock_mhz = None

    def __init__(self, reason: str):
        self.reason = reason

    def read(self) -> None:
        return None

    def close(self) -> None:
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        pass


class CpuSchedMonitor:
    """Reads the scheduler statistics of every thread of this process (Linux ``schedstat``).

    Use :func:`open_cpu_monitor`. ``read()`` gives a :class:`ClockReading` with
    ``sched_run_s``/``sched_wait_s`` (summed over threads) and ``sched_tasks``
    (per thread); :class:`BatchClocks` turns two of them into a run-queue wait
    share and the ``cpu_contention`` flag.

    Parameters
    ----------
    path : str, optional
        One ``schedstat`` file to read instead of every thread (tests, or a
        kernel without ``/proc/<pid>/task``).
    task_dir : str
        Folder whose ``<tid>/schedstat`` files are read (default
        :data:`TASK_DIR`, this process's threads).
    """

    available = True
    reason = None
    max_sm_clock_mhz = None
    max_mem_clock_mhz = None
    index = None

    def __init__(self, path: str | None = None, now: Callable[[], float] = time.perf_counter, task_dir: str = TASK_DIR):
        self._path = path
        self._task_dir = task_dir
        self._now = now
        self.name = f"linux schedstat ({path})" if path else "linux schedstat (every thread of the process)"
        tasks = self._read_tasks()  # fail early, in open_cpu_monitor
        if not tasks:
            raise ValueError(f"no readable schedstat under {task_dir}")

    def _read_text(self, path: str) -> str:
        with open(path) as fh:
            return fh.read()

    def _read_tasks(self) -> dict:
        if self._path:
            return {0: parse_schedstat(self._read_text(self._path))}
        out = {}
        for tid in os.listdir(self._task_dir):
            try:
                out[int(tid)] = parse_schedstat(self._read_text(os.path.join(self._task_dir, tid, "schedstat")))
            except (OSError, ValueError):
                continue  # the thread ended between listing and reading
        return out

    def read(self) -> ClockReading:
        t = self._now()
        try:
            tasks = self._read_tasks()
        except (OSError, ValueError):
            return ClockReading(t_s=t)
        if not tasks:
            return ClockReading(t_s=t)
        return ClockReading(
            t_s=t,
            sched_run_s=sum(r for r, _ in tasks.values()) / 1e9,
            sched_wait_s=sum(w for _, w in tasks.values()) / 1e9,
            sched_tasks=tasks,
        )

    def close(self) -> None:
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        pass


def parse_schedstat(text: str) -> tuple[int, int]:
    """``(run_ns, wait_ns)`` from a ``schedstat`` line ``"<run ns> <wait ns> <timeslices>"``.
    Raises ``ValueError`` for anything else."""
    parts = text.split()
    if len(parts) < 2:
        raise ValueError(f"schedstat: expected '<run ns> <wait ns> <slices>', got {text.strip()!r}")
    run_ns, wait_ns = int(parts[0]), int(parts[1])
    if run_ns < 0 or wait_ns < 0:
        raise ValueError(f"schedstat: negative counters in {text.strip()!r}")
    return run_ns, wait_ns


def open_cpu_monitor(path: str | None = None, task_dir: str = TASK_DIR) -> CpuSchedMonitor | NullMonitor:
    """A :class:`CpuSchedMonitor` over every thread of the process (or the one
    ``schedstat`` file ``path``), or a :class:`NullMonitor` saying why not (not
    Linux, or a kernel without ``CONFIG_SCHED_INFO``). Never raises."""
    try:
        return CpuSchedMonitor(path, task_dir=task_dir)
    except (OSError, ValueError) as exc:
        where = path or task_dir
        return NullMonitor(f"CPU contention unknown: cannot read {where} ({type(exc).__name__}: {exc})")


def run_queue_wait_s(first: ClockReading, last: ClockReading) -> float | None:
    """Run-queue wait between two readings, seconds, summed over threads.

    Per thread when both readings carry ``sched_tasks``: a thread present in
    both contributes the growth of its counter, a thread born in between its
    whole counter (its life lies inside the interval); a thread that ended in
    between is not seen (its last wait is lost, an undercount). Otherwise the
    growth of the summed counter. ``None`` without scheduler statistics.
    """
    if first.sched_wait_s is None or last.sched_wait_s is None:
        return None
    if first.sched_tasks is not None and last.sched_tasks is not None:
        total = 0
        for tid, (_, wait_ns) in last.sched_tasks.items():
            before = first.sched_tasks.get(tid)
            total += max(0, wait_ns - before[1]) if before is not None else wait_ns
        return total / 1e9
    return max(0.0, last.sched_wait_s - first.sched_wait_s)


def _const(nvml, name: str, default: int) -> int:
    return getattr(nvml, name, default)


def _load_nvml():
    try:
        import pynvml
    except ImportError as exc:
        raise RuntimeError(f"pynvml (nvidia-ml-py) is not installed ({exc})") from None
    return pynvml


def _handle_for(nvml, index: int, props) -> object:
    """NVML handle of CUDA device ``index``.

    CUDA and NVML number devices differently (``CUDA_VISIBLE_DEVICES`` renumbers
    CUDA's, and CUDA may order by speed), so match by UUID, then by PCI bus id,
    and fall back to the index only when nothing remaps CUDA's numbering.
    """
    uuid = getattr(props, "uuid", None) if props is not None else None
    if uuid:
        text = str(uuid)
        for candidate in (text, f"GPU-{text}"):
            try:
                return nvml.nvmlDeviceGetHandleByUUID(candidate)
            except Exception:
                pass
    bus = getattr(props, "pci_bus_id", None) if props is not None else None
    if bus is not None:
        dom = getattr(props, "pci_domain_id", 0) or 0
        dev = getattr(props, "pci_device_id", 0) or 0
        try:
            return nvml.nvmlDeviceGetHandleByPciBusId(f"{dom:08x}:{bus:02x}:{dev:02x}.0")
        except Exception:
            pass
    if "CUDA_VISIBLE_DEVICES" not in os.environ:
        # Same numbering on single-GPU hosts; on mixed multi-GPU hosts CUDA's
        # default FASTEST_FIRST order may differ, which UUID/PCI matching avoids.
        return nvml.nvmlDeviceGetHandleByIndex(index)
    raise RuntimeError(
        f"cannot map CUDA device {index} to an NVML device (CUDA_VISIBLE_DEVICES is set and "
        "neither UUID nor PCI bus id matched)"
    )


def open_monitor(device_index: int | None = None, *, nvml=None, props=None) -> ClockMonitor | NullMonitor:
    """A clock monitor for CUDA device ``device_index``, or a :class:`NullMonitor` saying why not.

    Parameters
    ----------
    device_index : int or None
        CUDA device index; ``None`` means ``torch.cuda.current_device()`` when
        CUDA is available, else there is nothing to monitor.
    nvml : module, optional
        The ``pynvml`` module (injectable for tests); imported when ``None``.
    props : object, optional
        ``torch.cuda.get_device_properties(device_index)`` (its ``uuid`` and
        ``pci_*`` fields map CUDA's device to NVML's); read from torch when ``None``.

    Never raises: every failure (no ``pynvml``, no driver, no device) becomes a
    ``NullMonitor`` whose ``reason`` names it.
    """
    if device_index is None or props is None:
        try:
            import torch

            if not torch.cuda.is_available():
                return NullMonitor("no CUDA device: GPU clocks are unknown")
            if device_index is None:
                device_index = torch.cuda.current_device()
            if props is None:
                props = torch.cuda.get_device_properties(device_index)
        except Exception as exc:
            return NullMonitor(f"cannot query the CUDA device ({type(exc).__name__}: {exc})")
    try:
        nv = nvml if nvml is not None else _load_nvml()
        nv.nvmlInit()
    except Exception as exc:
        return NullMonitor(f"NVML unavailable: {type(exc).__name__}: {exc}")
    try:
        handle = _handle_for(nv, int(device_index), props)
        name = None
        try:
            raw = nv.nvmlDeviceGetName(handle)
            name = raw.decode() if isinstance(raw, bytes) else str(raw)
        except Exception:
            pass
        return ClockMonitor(nv, handle, int(device_index), name)
    except Exception as exc:
        try:
            nv.nvmlShutdown()
        except Exception:
            pass
        return NullMonitor(f"NVML has no handle for CUDA device {device_index}: {type(exc).__name__}: {exc}")


#: The per-batch bookkeeping moved to :mod:`harness.measure.clock_batches` (which
#: imports this module); its old names here still resolve, lazily, to avoid an import cycle.
_BATCH_NAMES = frozenset({"BatchClocks", "normalise", "summarize"})


def __getattr__(name: str):
    if name in _BATCH_NAMES:
        from harness.measure import clock_batches

        return getattr(clock_batches, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
