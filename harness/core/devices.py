"""Device identity and the datasheet peak table.

A *machine* in kernelwatch is one device model on one host; its identity carries
the GPU name, driver, CUDA, torch and Triton versions, so results from different
GPUs (or a different software stack) are never one series.

Peak figures are data, not literals: ``harness/data/gpu_specs.csv`` holds one row
per SKU (H100 SXM and H100 PCIe are different rows), dense figures only, with the
source of each row. It was compiled from the vendor datasheets listed in its
``source`` column (via ``shared/data/gpu_specs.csv``). An unknown device gets no
spec (``None``) and a warning, never another GPU's numbers.
"""

from __future__ import annotations

import csv
import functools
import math
import os
import platform
import re
import socket
import sys
import warnings
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Mapping

SPEC_TABLE = Path(__file__).resolve().parent.parent / "data" / "gpu_specs.csv"

#: dtype name -> column of the spec table holding its dense tensor-core peak.
TENSOR_PEAK_COLUMNS = {
    "fp64": "fp64_tflops",
    "fp32": "fp32_tflops",  # plain fp32 matmul runs on CUDA cores (no TF32)
    "tf32": "tf32_tflops",
    "bf16": "bf16_tflops",
    "fp16": "fp16_tflops",
    "fp8": "fp8_tflops",
}


class UnknownDeviceWarning(UserWarning):
    """A device with no row in the spec table: MFU against the datasheet is unavailable."""


@dataclass(frozen=True)
class DeviceSpec:
    """Datasheet figures for one SKU (dense, no sparsity).

    Attributes
    ----------
    sku : str
        Row name, e.g. ``"H200 SXM 141GB"``.
    device_names : tuple of str
        Exact ``torch.cuda.get_device_name()`` strings that identify this SKU.
    peak_gbps : float
        Peak DRAM bandwidth in GB/s (1e9 bytes/s).
    peak_tflops : mapping of str to float
        Dense peak TFLOP/s per dtype name (``fp32`` is the CUDA-core vector rate;
        ``tf32``/``bf16``/``fp16``/``fp8`` are tensor-core rates). Missing dtypes
        are absent, never zero.
    l2_mb, sm_count, memory_gb : float or None
    source : str
        Where the numbers come from (datasheet URL).
    confidence : str
        ``"datasheet"`` or ``"low: ..."`` with the reason.
    """

    sku: str
    device_names: tuple[str, ...]
    architecture: str
    compute_capability: str
    peak_gbps: float
    peak_tflops: Mapping[str, float]
    l2_mb: float | None
    sm_count: int | None
    memory_gb: float | None
    source: str
    confidence: str
    notes: str = ""

    def peak_for(self, dtype: str, uses_tensor_cores: bool) -> float | None:
        """Peak TFLOP/s that an op of ``dtype`` can reach.

        Tensor-core ops (matmul, attention) use the dtype's tensor peak;
        everything else runs on the vector units and uses the fp32 rate
        (``fp64`` ops use the fp64 rate). ``None`` when the table has no figure.
        """
        if uses_tensor_cores:
            return self.peak_tflops.get(dtype)
        return self.peak_tflops.get("fp64" if dtype == "fp64" else "fp32")

    def as_dict(self) -> dict:
        d = asdict(self)
        d["device_names"] = list(self.device_names)
        d["peak_tflops"] = dict(self.peak_tflops)
        return d


def _num(text: str) -> float | None:
    text = (text or "").strip()
    if not text:
        return None
    try:
        return float(text)
    except ValueError:
        return None


def _spec_cell(row: dict, col: str, at: str, sku: str, *, peak: bool = False) -> float | None:
    """One numeric cell of the spec table: ``None`` when empty; raises
    ``ValueError`` naming ``at`` (file:row), the column and the SKU for a cell
    that is not a finite number >= 0, or a peak above zero but subnormal."""
    text = (row.get(col) or "").strip()
    if not text:
        return None
    v = _num(text)
    if v is None or not math.isfinite(v) or v < 0 or (peak and 0 < v < sys.float_info.min):
        raise ValueError(
            f"{at}: {col} is {text!r} for {sku!r}; expected a finite number >= 0 "
            "(empty or 0 in a peak column: no such unit)"
        )
    return v


@functools.lru_cache(maxsize=None)
def spec_table(path: str | None = None) -> tuple[DeviceSpec, ...]:
    """Load the spec table. Raises ``ValueError`` naming the file, row and column
    for a malformed row: an empty ``sku``, a missing ``peak_gbps``, or a numeric
    cell that is not a number, not finite, negative, or (for a peak) above zero
    but below the smallest normal float. An empty cell or ``0`` in a peak column
    means the device has no such unit."""
    rows = []
    where = path or SPEC_TABLE
    with open(where, newline="") as fh:
        for lineno, r in enumerate(csv.DictReader(fh), start=2):
            at = f"{where}:{lineno}"
            sku = (r.get("sku") or "").strip()
            if not sku:
                raise ValueError(f"{at}: sku is empty")
            bw = _spec_cell(r, "peak_gbps", at, sku, peak=True)
            if not bw:
                raise ValueError(f"{at}: peak_gbps missing or not a finite number > 0 for {sku!r}")
            peaks = {}
            for dtype, col in TENSOR_PEAK_COLUMNS.items():
                v = _spec_cell(r, col, at, sku, peak=True)
                if v:
                    peaks[dtype] = v
            sm = _spec_cell(r, "sm_count", at, sku)
            if sm is not None and sm != int(sm):
                raise ValueError(f"{at}: sm_count is {sm!r} for {sku!r}; expected a whole number")
            rows.append(
                DeviceSpec(
                    sku=r["sku"],
                    device_names=tuple(n.strip() for n in r["device_names"].split(";") if n.strip()),
                    architecture=r["architecture"],
                    compute_capability=r["compute_capability"],
                    peak_gbps=bw,
                    peak_tflops=peaks,
                    l2_mb=_spec_cell(r, "l2_mb", at, sku),
                    sm_count=int(sm) if sm else None,
                    memory_gb=_spec_cell(r, "memory_gb", at, sku),
                    source=r["source"],
                    confidence=r["confidence"],
                    notes=r.get("notes", ""),
                )
            )
    return tuple(rows)


def _norm(name: str) -> str:
    return re.sub(r"\s+", " ", name.strip()).lower()


def lookup_spec(device_name: str | None, *, warn: bool = True) -> DeviceSpec | None:
    """The spec row whose ``device_names`` contains ``device_name`` exactly
    (case- and whitespace-insensitive), else ``None`` with an
    :class:`UnknownDeviceWarning`. Never a nearest match: an H100 NVL must not
    borrow H100 SXM peaks."""
    if not device_name:
        return None
    key = _norm(device_name)
    for spec in spec_table():
        if any(_norm(n) == key for n in spec.device_names):
            return spec
    if warn:
        warnings.warn(
            f"unknown device {device_name!r}: no datasheet peaks, so no MFU against the datasheet "
            f"(add a row with a source to {SPEC_TABLE.name})",
            UnknownDeviceWarning,
            stacklevel=2,
        )
    return None


# --------------------------------------------------------------------------- CPU physical sanity

#: Physical upper bounds of one CPU core, deliberately generous: above any
#: x86 or Arm server core shipping in 2026, so only an impossible figure
#: trips them. A CPU has no datasheet row, so these stand in for the datasheet
#: guard (a figure above them is a timing or record bug, not a fast kernel).
#:
#: - clock: 6.0 GHz (the fastest boost clocks sold are about 6.2 GHz on
#:   desktop parts; server parts run below 4 GHz);
#: - fp32/fp64: two 512-bit FMA units per core, 2 x 16 fp32 lanes x 2 FLOP =
#:   64 fp32 (32 fp64) FLOP per cycle (Intel 64 and IA-32 Architectures
#:   Optimization Reference Manual, AVX-512 FMA throughput);
#: - bf16/fp16: AMX, 1024 bf16 FMAs per cycle per core = 2048 FLOP (Intel AMX
#:   TMUL, Intel Architecture Instruction Set Extensions Programming Reference);
#: - bytes: 256 B per cycle in and out of L1 (Golden Cove: 3 x 64 B loads +
#:   2 x 64 B stores = 320 B/cycle at best in mixed traffic; 256 covers the
#:   sustained rates Intel and Arm publish), which bounds cache-resident traffic too.
CPU_CORE_MAX_GHZ = 6.0
CPU_CORE_MAX_FLOP_PER_CYCLE = {"fp64": 32, "fp32": 64, "tf32": 64, "bf16": 2048, "fp16": 2048, "fp8": 2048}
CPU_CORE_MAX_BYTES_PER_CYCLE = 256


def cpu_sanity_peaks(cores: int | None, dtype: str, threads: int | None = None) -> tuple[float, float] | None:
    """``(tflops, gbps)`` no CPU of ``cores`` cores can exceed for ``dtype``.

    ``threads`` (the ``cpu`` timing method's thread count) limits the cores
    that can have worked; ``None`` means all. Returns ``None`` for an unknown
    core count or dtype. Raises ``ValueError`` for a core or thread count
    below 1. Source of the constants: :data:`CPU_CORE_MAX_GHZ`.
    """
    if cores is None:
        return None
    if cores < 1 or (threads is not None and threads < 1):
        raise ValueError(f"core and thread counts must be >= 1, got cores={cores}, threads={threads}")
    per_cycle = CPU_CORE_MAX_FLOP_PER_CYCLE.get(dtype)
    if per_cycle is None:
        return None
    n = min(cores, threads) if threads else cores
    hz = CPU_CORE_MAX_GHZ * 1e9
    return n * hz * per_cycle / 1e12, n * hz * CPU_CORE_MAX_BYTES_PER_CYCLE / 1e9


# --------------------------------------------------------------------------- identity


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown cpu"


def _llc_bytes() -> int | None:
    """Size of the last-level cache from sysfs, in bytes; ``None`` when unknown."""
    base = Path("/sys/devices/system/cpu/cpu0/cache")
    best = None
    for idx in sorted(base.glob("index*")):
        try:
            level = int((idx / "level").read_text())
            size = (idx / "size").read_text().strip()
        except (OSError, ValueError):
            continue
        m = re.fullmatch(r"(\d+)([KMG]?)", size)
        if not m:
            continue
        n = int(m.group(1)) * {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}[m.group(2)]
        if best is None or level >= best[0]:
            best = (level, n)
    return best[1] if best else None


def _versions(kind: str | None = None) -> dict:
    import torch

    out = {
        "torch": torch.__version__,
        "cuda": torch.version.cuda or None,
        "triton": None,
        "harness": harness_version(kind),
    }
    try:
        import triton

        out["triton"] = triton.__version__
    except Exception:
        pass
    return out


#: Environment variable that sets the ``cpu`` timing method's intra-op thread count.
CPU_THREADS_ENV = "KERNELWATCH_CPU_THREADS"
#: The ``cpu`` method's thread count when the variable is unset: one thread
#: measures the code, not the neighbours, on a shared machine (docs/measuring.md).
DEFAULT_CPU_THREADS = 1
#: Most threads the variable may ask for: above the largest server's CPU count
#: (2 x 192 cores x 2 hyper-threads = 768); 999999 segfaulted in ``torch.set_num_threads``.
MAX_CPU_THREADS = 1024


def cpu_timing_threads() -> int | None:
    """Intra-op threads of the ``cpu`` timing method: ``$KERNELWATCH_CPU_THREADS``
    (an integer from 1 to :data:`MAX_CPU_THREADS`, or ``torch`` for PyTorch's own
    default), else :data:`DEFAULT_CPU_THREADS`. Raises ``ValueError``
    (:class:`harness.core.env.EnvError`) naming the variable and the accepted range
    for any other value."""
    from harness.core import env

    raw = os.environ.get(CPU_THREADS_ENV, "").strip()
    if not raw:
        return DEFAULT_CPU_THREADS
    if raw.lower() == "torch":
        return None
    try:
        return env.integer(CPU_THREADS_ENV, 1, MAX_CPU_THREADS, raw)
    except env.EnvError as exc:
        raise env.EnvError(f"{exc} or 'torch'") from None


_UNSET = object()


def harness_version(kind: str | None = None, cpu_threads=_UNSET) -> str:
    """The harness version recorded in every record and asv machine entry.

    On a CPU (``kind="cpu"``) the ``cpu`` timing method's thread count is part
    of it, ``<version>+cpu<N>t`` (``+cpu-torch-threads`` for PyTorch's own
    default), so a change of thread count shows as a change of environment,
    never as a regression. ``cpu_threads`` defaults to
    :func:`cpu_timing_threads`.
    """
    from harness import __version__

    if kind != "cpu":
        return __version__
    n = cpu_timing_threads() if cpu_threads is _UNSET else cpu_threads
    return f"{__version__}+cpu{n}t" if n is not None else f"{__version__}+cpu-torch-threads"


@dataclass(frozen=True)
class DeviceIdentity:
    """What kernelwatch measured on.

    ``kind`` is ``"cuda"`` or ``"cpu"``. For CUDA: name, compute capability, SM
    count, L2 size (bytes), memory (bytes), driver; for the CPU: model, cores
    used, torch threads, last-level cache (bytes). ``versions`` holds torch,
    CUDA, Triton and harness versions.
    """

    kind: str
    name: str
    host: str
    versions: Mapping[str, str | None]
    compute_capability: str | None = None
    sm_count: int | None = None
    l2_bytes: int | None = None
    memory_bytes: int | None = None
    driver: str | None = None
    cores: int | None = None
    torch_threads: int | None = None
    extra: Mapping[str, object] = field(default_factory=dict)

    @property
    def cache_bytes(self) -> int | None:
        """The largest on-chip cache between the cores and DRAM (L2 on a GPU, LLC on a CPU)."""
        return self.l2_bytes

    def as_dict(self) -> dict:
        d = asdict(self)
        d["versions"] = dict(self.versions)
        d["extra"] = dict(self.extra)
        return d

    def machine_name(self) -> str:
        """asv machine name: ``<host>-<device slug>``; different GPUs are different machines."""
        return machine_name_for(self.host, self.kind, self.name)


def machine_name_for(host: str, kind: str, name: str) -> str:
    slug = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")
    slug = re.sub(r"^(nvidia|amd)-", "", slug)
    if kind == "cpu":
        slug = "cpu"
    host = re.sub(r"[^A-Za-z0-9_.-]+", "-", host) or "host"
    return f"{host}-{slug}"


def _nvidia_driver() -> str | None:
    try:
        import pynvml

        pynvml.nvmlInit()
        try:
            v = pynvml.nvmlSystemGetDriverVersion()
            return v.decode() if isinstance(v, bytes) else str(v)
        finally:
            pynvml.nvmlShutdown()
    except Exception:
        return None


@functools.lru_cache(maxsize=None)
def cuda_available() -> bool:
    """True when PyTorch sees at least one CUDA device; a broken driver install is
    "no CUDA", not a crash. NVML-based (``PYTORCH_NVML_BASED_CUDA_CHECK=1``): no
    CUDA context is created in this process, so forking benchmark workers stays safe."""
    os.environ.setdefault("PYTORCH_NVML_BASED_CUDA_CHECK", "1")
    try:
        import torch

        return bool(torch.cuda.is_available())
    except Exception:
        return False


def benchmark_device() -> str:
    """The device the suite measures on: ``"cuda"`` when a GPU is visible, else ``"cpu"``."""
    return "cuda" if cuda_available() else "cpu"


@functools.lru_cache(maxsize=None)
def identify(device: str | None = None) -> DeviceIdentity:
    """Identity of the device the suite measures on (``"cuda"`` when visible, else ``"cpu"``).

    The host part of the machine name comes from ``KERNELWATCH_HOST`` when set
    (useful for runner pools that should share one series), else the hostname.
    Raises ``ValueError`` (:class:`harness.core.env.EnvError`) for a
    ``KERNELWATCH_HOST`` outside :data:`harness.core.env.HOST_PATTERN`.
    """
    import torch

    from harness.core import env

    host = env.host("KERNELWATCH_HOST") or socket.gethostname().split(".")[0]
    device = device or benchmark_device()
    if device == "cuda":
        props = torch.cuda.get_device_properties(torch.cuda.current_device())
        return DeviceIdentity(
            kind="cuda",
            name=props.name,
            host=host,
            versions=_versions(),
            compute_capability=f"{props.major}.{props.minor}",
            sm_count=props.multi_processor_count,
            l2_bytes=getattr(props, "L2_cache_size", None),
            memory_bytes=props.total_memory,
            driver=_nvidia_driver(),
        )
    if device != "cpu":
        raise ValueError(f"unknown device kind {device!r}; expected 'cuda' or 'cpu'")
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return DeviceIdentity(
        kind="cpu",
        name=_cpu_model(),
        host=host,
        versions=_versions("cpu"),
        l2_bytes=_llc_bytes(),
        cores=cores,
        torch_threads=torch.get_num_threads(),
        extra={"arch": platform.machine()},
    )


def asv_machine_info(ident: DeviceIdentity) -> dict:
    """The asv machine entry for ``ident``: asv's own fields plus GPU identity keys
    (``gpu``, ``driver``, ``cuda``, ``torch``, ``triton``, ``harness``), which asv
    carries into every results file."""
    import multiprocessing

    return {
        "machine": ident.machine_name(),
        "arch": platform.machine(),
        "cpu": _cpu_model(),
        "num_cpu": str(multiprocessing.cpu_count()),
        "os": f"{platform.system()} {platform.release()}",
        "ram": str(_ram_bytes() or ""),
        "gpu": ident.name if ident.kind == "cuda" else "none",
        "compute_capability": ident.compute_capability or "",
        "driver": ident.driver or "",
        "cuda": ident.versions.get("cuda") or "",
        "torch": ident.versions.get("torch") or "",
        "triton": ident.versions.get("triton") or "",
        "harness": ident.versions.get("harness") or "",
    }


def meminfo_bytes(key: str) -> int | None:
    """The ``key`` line of ``/proc/meminfo`` (``MemTotal``, ``MemAvailable``, ...)
    in bytes; ``None`` where the file or the line cannot be read (not Linux)."""
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith(f"{key}:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def _ram_bytes() -> int | None:
    return meminfo_bytes("MemTotal")
