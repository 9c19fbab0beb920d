"""Raw CUDA C kernels launched through CuPy, on PyTorch tensors.

Every CuPy provider in kernelwatch is a hand-written CUDA C kernel
(``cupy.RawKernel``), never a call into CuPy's own array ops: the point is to
measure a kernel we wrote. Sources are registered in :data:`SOURCES` so the
test suite can compile each one to PTX for sm_80 and sm_90 with ``nvcc`` on a
machine without a GPU, and with NVRTC (what CuPy compiles with on the GPU) for
the same targets, with the include path from :func:`compile_options`.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass
from pathlib import Path

import torch

from kernels._backends import cupy_unavailable_reason


@dataclass(frozen=True)
class CudaSource:
    """One CUDA C translation unit: ``op`` it belongs to, ``name`` of its
    ``extern "C" __global__`` entry point(s) and the source text."""

    op: str
    names: tuple[str, ...]
    code: str


#: Every CUDA C source in the suite, keyed ``(op, first kernel name)``.
SOURCES: dict[tuple[str, str], CudaSource] = {}


def register_source(op: str, names: tuple[str, ...] | str, code: str) -> CudaSource:
    """Register a CUDA C source so tests can compile it with ``nvcc -ptx``."""
    if isinstance(names, str):
        names = (names,)
    src = CudaSource(op=op, names=tuple(names), code=code)
    SOURCES[(op, names[0])] = src
    return src


#: Headers every source may include; a folder that holds them is an include dir.
_HEADERS = ("cuda_fp16.h", "cuda_bf16.h")


def _candidate_include_dirs() -> list[Path]:
    out = []
    if os.environ.get("KERNELWATCH_CUDA_INCLUDE"):
        out.append(Path(os.environ["KERNELWATCH_CUDA_INCLUDE"]))
    for var in ("CUDA_PATH", "CUDA_HOME"):
        if os.environ.get(var):
            out.append(Path(os.environ[var]) / "include")
    out.append(Path("/usr/local/cuda/include"))
    import importlib.util

    # NVIDIA's wheels: nvidia-cuda-runtime (cu13 layout, then the cu12 one), and
    # the CUDA headers Triton bundles with its NVIDIA backend.
    for pkg, sub in (
        ("nvidia", "cu13/include"),
        ("nvidia", "cuda_runtime/include"),
        ("triton", "backends/nvidia/include"),
    ):
        try:
            spec = importlib.util.find_spec(pkg)
        except (ImportError, ValueError):
            spec = None
        for loc in (spec.submodule_search_locations or []) if spec is not None else []:
            out.append(Path(loc) / sub)
    return out


@functools.lru_cache(maxsize=None)
def include_dirs() -> tuple[str, ...]:
    """Folders to pass to NVRTC with ``-I`` so ``cuda_fp16.h`` and ``cuda_bf16.h`` resolve.

    NVRTC, unlike nvcc, searches no system include path: without ``-I`` both
    headers are "cannot open source file". The first folder holding both, in
    this order: ``$KERNELWATCH_CUDA_INCLUDE``, ``$CUDA_PATH/include``,
    ``$CUDA_HOME/include``, ``/usr/local/cuda/include``, the
    ``nvidia-cuda-runtime`` wheel's include folder, Triton's bundled
    ``triton/backends/nvidia/include``. Empty when none is found (the
    compile error then names the header).
    """
    for d in _candidate_include_dirs():
        if all((d / h).is_file() for h in _HEADERS):
            return (str(d),)
    return ()


def compile_options(base: tuple[str, ...] = ("-std=c++17",)) -> tuple[str, ...]:
    """NVRTC options for every source: ``base`` plus ``-I`` for :func:`include_dirs`."""
    return tuple(base) + tuple(f"-I{d}" for d in include_dirs())


class CupyUnavailable(RuntimeError):
    """Raised when a CuPy provider is called where CuPy cannot run (no GPU, no CuPy)."""


@functools.lru_cache(maxsize=None)
def _module(code: str, options: tuple[str, ...]):
    import cupy

    return cupy.RawModule(code=code, options=options)


def kernel(src: CudaSource, name: str, options: tuple[str, ...] | None = None):
    """Compile (once, cached) and return the ``cupy.RawKernel`` ``name`` of ``src``.

    ``options`` default to :func:`compile_options` (C++17 and the CUDA include dir).

    Raises
    ------
    CupyUnavailable
        When no CUDA device or no CuPy is present here; the message says which.
    """
    reason = cupy_unavailable_reason()
    if reason:
        raise CupyUnavailable(reason)
    if name not in src.names:
        raise ValueError(f"{name!r} is not an entry point of the {src.op} source ({src.names})")
    return _module(src.code, compile_options() if options is None else tuple(options)).get_function(name)


def check_cuda_tensor(*tensors: torch.Tensor) -> None:
    """Raise ``ValueError`` unless every tensor is a contiguous CUDA tensor."""
    for t in tensors:
        if not t.is_cuda:
            raise ValueError("CuPy providers take CUDA tensors")


def ptr(t: torch.Tensor) -> int:
    """Raw device pointer of a tensor, as CuPy launches take it."""
    return t.data_ptr()


def stream_ptr() -> int:
    """The current PyTorch CUDA stream, so CuPy launches order with torch work."""
    return torch.cuda.current_stream().cuda_stream


def launch(fn, grid, block, args, shared_mem: int = 0) -> None:
    """Launch a RawKernel on PyTorch's current stream."""
    import cupy

    with cupy.cuda.ExternalStream(stream_ptr()):
        fn(grid, block, args, shared_mem=shared_mem)
