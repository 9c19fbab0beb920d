"""Raw CUDA C kernels launched through CuPy, on PyTorch tensors.

Every CuPy provider in kernelwatch is a hand-written CUDA C kernel
(``cupy.RawKernel``), never a call into CuPy's own array ops: the point is to
measure a kernel we wrote. Sources are registered in :data:`SOURCES` so the
test suite can compile each one to PTX for sm_80 and sm_90 with ``nvcc`` on a
machine without a GPU.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

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


class CupyUnavailable(RuntimeError):
    """Raised when a CuPy provider is called where CuPy cannot run (no GPU, no CuPy)."""


@functools.lru_cache(maxsize=None)
def _module(code: str, options: tuple[str, ...]):
    import cupy

    return cupy.RawModule(code=code, options=options)


def kernel(src: CudaSource, name: str, options: tuple[str, ...] = ("-std=c++17",)):
    """Compile (once, cached) and return the ``cupy.RawKernel`` ``name`` of ``src``.

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
    return _module(src.code, options).get_function(name)


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
