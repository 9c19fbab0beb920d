"""Which backends can run here, decided once per process.

Importing this module before any Triton kernel is defined matters: on a machine
without a CUDA device it sets ``TRITON_INTERPRET=1`` (unless the user set it),
so ``@triton.jit`` kernels run in Triton's interpreter over CPU tensors for
correctness. Interpreter timings mean nothing and are never recorded.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass

# NVML-based device check: does not initialise a CUDA context in this process,
# so forking benchmark workers afterwards stays safe.
os.environ.setdefault("PYTORCH_NVML_BASED_CUDA_CHECK", "1")

# The device decision is harness.core's (one definition); re-exported for the kernels.
from harness.core.devices import benchmark_device, cuda_available  # noqa: E402, F401

if not cuda_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")


def triton_interpreted() -> bool:
    """True when Triton kernels run in the interpreter (no GPU, or forced by the user)."""
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


@functools.lru_cache(maxsize=None)
def triton_import_error() -> str | None:
    try:
        import triton  # noqa: F401
        import triton.language  # noqa: F401
    except Exception as exc:  # ImportError, or a broken install raising anything
        return f"triton is not importable: {type(exc).__name__}: {exc}"
    return None


@functools.lru_cache(maxsize=None)
def cupy_unavailable_reason() -> str | None:
    """``None`` when CuPy can launch raw CUDA kernels here, else the reason why not."""
    if not cuda_available():
        return "no CUDA device: CuPy raw kernels need a GPU"
    try:
        import cupy
    except Exception as exc:
        return f"cupy is not importable ({type(exc).__name__}: {exc}); install the 'cupy' extra"
    try:
        cupy.cuda.runtime.getDeviceCount()
    except Exception as exc:
        return f"cupy cannot reach the CUDA driver: {type(exc).__name__}: {exc}"
    return None


@dataclass(frozen=True)
class Availability:
    """Whether a provider can run here, and whether its times mean anything.

    Attributes
    ----------
    runnable : bool
        The provider can produce results here (possibly in an interpreter).
    timeable : bool
        Its times are real device times and may be benchmarked.
    reason : str
        Why not, or how it runs ("TRITON_INTERPRET=1: correctness only").
    """

    runnable: bool
    timeable: bool
    reason: str


def availability(backend: str) -> Availability:
    """Decide where a backend can run on this machine.

    Parameters
    ----------
    backend : {"torch", "triton", "cupy"}

    Raises
    ------
    ValueError
        For an unknown backend name.
    """
    if backend == "torch":
        where = "CUDA" if cuda_available() else "CPU"
        return Availability(True, True, f"PyTorch eager on {where}")
    if backend == "triton":
        err = triton_import_error()
        if err:
            return Availability(False, False, err)
        if cuda_available() and not triton_interpreted():
            return Availability(True, True, "Triton on CUDA")
        return Availability(
            True, False, "no CUDA device: runs under TRITON_INTERPRET=1 for correctness only, never timed"
        )
    if backend == "cupy":
        reason = cupy_unavailable_reason()
        if reason:
            return Availability(False, False, reason)
        return Availability(True, True, "CuPy RawKernel on CUDA")
    raise ValueError(f"unknown backend {backend!r}")


def provider_device(backend: str) -> str:
    """The torch device a provider's inputs must live on: Triton in the interpreter
    takes CPU tensors; everything else uses :func:`benchmark_device`."""
    if backend == "cupy":
        return "cuda"
    return benchmark_device()
