"""What a calibration measures: buffer sizes, matmul size, dtypes and timing
(:func:`plan_for`), and which dtypes a device cannot calibrate
(:func:`unsupported_reason`). Split from :mod:`harness.measure.calibrate`,
which re-exports every name here."""

from __future__ import annotations

import os
from dataclasses import dataclass

from harness.core.devices import DeviceIdentity, cpu_timing_threads, meminfo_bytes
from harness.measure import timing

#: Every dtype a calibration reports, measured or skipped with a reason.
CALIBRATION_DTYPES = ("fp32", "tf32", "fp16", "bf16", "fp8")


@dataclass(frozen=True)
class CalibrationPlan:
    """What to measure.

    Attributes
    ----------
    copy_bytes : int
        Size of the copied buffer (bytes; the copy moves twice that).
    matmul_n : int
        Square matmul size ``n x n x n``.
    dtypes : tuple of str
        Matmul dtypes to attempt (a subset of :data:`CALIBRATION_DTYPES`); the
        others are reported as skipped with the reason from :func:`unsupported_reason`.
    config : TimingConfig
        Timing for every figure (``cold`` on CUDA, as the suite times its
        cases, ``cpu`` on the CPU).
    note : str or None
        Why the buffers are smaller than the plan wanted (a memory cap), kept
        in the calibration's ``plan``.
    """

    copy_bytes: int
    matmul_n: int
    dtypes: tuple[str, ...]
    config: timing.TimingConfig
    note: str | None = None

    def __post_init__(self) -> None:
        if self.copy_bytes < 4 or self.matmul_n < 1:
            raise ValueError("copy_bytes must be >= 4 and matmul_n >= 1")
        unknown = set(self.dtypes) - set(CALIBRATION_DTYPES)
        if unknown:
            raise ValueError(f"unknown calibration dtypes {sorted(unknown)}; expected a subset of {CALIBRATION_DTYPES}")


#: On the CPU, the bandwidth buffers together (``add`` holds three at once) use at
#: most this share of the memory the kernel reports available, and each at most
#: :data:`CPU_MAX_BUFFER_BYTES`. Why: a 2-vCPU VM that reports a 480 MiB L3 got
#: 3.8 GiB buffers from "8x the cache" and peaked at 12.3 GB (a newcomer's
#: ``kernelwatch run``, 2026-12-07); on an 8 GB runner that is killed.
CPU_MAX_MEMORY_SHARE = 0.25
CPU_MAX_BUFFER_BYTES = 1 << 30


def available_memory_bytes() -> int | None:
    """``MemAvailable`` of ``/proc/meminfo`` in bytes (Linux), else free pages from
    ``os.sysconf``; ``None`` when neither can be read."""
    avail = meminfo_bytes("MemAvailable")
    if avail is not None:
        return avail
    try:
        return int(os.sysconf("SC_AVPHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE"))
    except (OSError, ValueError, AttributeError):
        return None


def plan_for(ident: DeviceIdentity, quick: bool = False, *, available_bytes: int | None = -1) -> CalibrationPlan:
    """Sizes: the copy is large against the last-level cache (>= 8x, and at least
    256 MiB on GPUs) so it measures DRAM; the matmul is big enough to saturate.
    On the CPU each buffer is also at most :data:`CPU_MAX_BUFFER_BYTES` and the
    three of ``add`` at most :data:`CPU_MAX_MEMORY_SHARE` of ``available_bytes``
    (default: :func:`available_memory_bytes`; ``None``: unknown, no such cap);
    when that leaves a buffer under 4x the cache, ``plan.note`` says so and the
    calibration carries it."""
    cache = ident.cache_bytes or (64 << 20)
    note = None
    if ident.kind == "cuda":
        copy_bytes = max(8 * cache, 1 << 30 if not quick else 256 << 20)
        n = 8192 if not quick else 4096
        cfg = timing.TimingConfig(method="cold", max_time_s=2.0 if not quick else 0.5)
    else:
        want = max(8 * cache, 256 << 20 if not quick else 64 << 20)
        avail = available_memory_bytes() if available_bytes == -1 else available_bytes
        cap = (
            CPU_MAX_BUFFER_BYTES if avail is None else min(CPU_MAX_BUFFER_BYTES, int(avail * CPU_MAX_MEMORY_SHARE / 3))
        )
        copy_bytes = max(min(want, cap), 4 << 20)
        if copy_bytes < 4 * cache:
            note = (
                f"bandwidth buffers of {copy_bytes / 2**20:.0f} MiB, under 4x the reported last-level cache "
                f"({cache / 2**20:.0f} MiB; capped at {CPU_MAX_BUFFER_BYTES >> 20} MiB a buffer and "
                f"{CPU_MAX_MEMORY_SHARE:.0%} of the memory available): the figures may include cache hits"
            )
        n = 1024 if not quick else 512
        cfg = timing.TimingConfig(method="cpu", max_time_s=1.5 if not quick else 0.3, threads=cpu_timing_threads())
    if quick:
        cfg = timing.quick(cfg)
    dtypes = tuple(d for d in CALIBRATION_DTYPES if unsupported_reason(ident, d) is None)
    return CalibrationPlan(copy_bytes=int(copy_bytes), matmul_n=n, dtypes=dtypes, config=cfg, note=note)


def unsupported_reason(ident: DeviceIdentity, dtype: str) -> str | None:
    """Why ``dtype`` matmul cannot be calibrated on ``ident``, or ``None`` if it can be tried.

    CPU: fp32, fp16 and bf16 (PyTorch's CPU BLAS paths); tf32 is an NVIDIA
    tensor-core mode and fp8 needs ``torch._scaled_mm`` on CUDA. CUDA: fp32,
    tf32 (compute capability >= 8.0), fp16, bf16 (>= 8.0), fp8 (>= 8.9, with a
    torch that has ``float8_e4m3fn`` and ``_scaled_mm``). Raises ``ValueError``
    for a dtype outside :data:`CALIBRATION_DTYPES`.
    """
    if dtype not in CALIBRATION_DTYPES:
        raise ValueError(f"unknown calibration dtype {dtype!r}; expected one of {CALIBRATION_DTYPES}")
    if ident.kind != "cuda":
        if dtype == "tf32":
            return "tf32 is an NVIDIA tensor-core mode; a CPU has none"
        if dtype == "fp8":
            return "fp8 matmul needs torch._scaled_mm on a CUDA device"
        return None
    try:
        major, minor = (int(x) for x in (ident.compute_capability or "0.0").split("."))
    except ValueError:
        return f"unparseable compute capability {ident.compute_capability!r}"
    if dtype in ("tf32", "bf16") and major < 8:
        return f"{dtype} tensor cores need compute capability >= 8.0, device has {ident.compute_capability}"
    if dtype == "fp8":
        import torch

        if not hasattr(torch, "float8_e4m3fn") or not hasattr(torch, "_scaled_mm"):
            return "this torch has no float8_e4m3fn/_scaled_mm"
        if (major, minor) < (8, 9):
            return f"fp8 tensor cores need compute capability >= 8.9, device has {ident.compute_capability}"
    return None
