"""The correctness checker used by the tests and by every benchmark run.

A provider is correct for ``(shape, dtype)`` when its output matches the op's
higher-precision reference within the op's tolerance for that dtype
(``torch.testing.assert_close`` semantics: ``|out - ref| <= atol + rtol * |ref|``),
has the reference's shape, and contains no NaN where the reference has none.
"""

from __future__ import annotations

from typing import Callable

import torch

from kernels._base import Op, torch_dtype


class WrongResult(AssertionError):
    """A provider's output does not match the reference. Subclasses
    ``AssertionError`` so pytest reports it as a test failure."""


def make_noncontiguous(t: torch.Tensor) -> torch.Tensor:
    """Same values as ``t`` in a non-contiguous view (every other element of a
    buffer twice as wide in the last dimension)."""
    if t.dim() == 0:
        return t
    wide = torch.empty(*t.shape[:-1], 2 * t.shape[-1], dtype=t.dtype, device=t.device)
    view = wide[..., ::2]
    view.copy_(t)
    if view.is_contiguous() and t.shape[-1] > 1:
        raise RuntimeError("could not build a non-contiguous view")
    return view


def compare(op: Op, out: torch.Tensor, ref: torch.Tensor, dtype: str, label: str = "") -> None:
    """Raise :class:`WrongResult` unless ``out`` matches ``ref`` within ``op``'s tolerance for ``dtype``."""
    if not isinstance(out, torch.Tensor):
        raise WrongResult(f"{label}: provider returned {type(out).__name__}, not a tensor")
    if tuple(out.shape) != tuple(ref.shape):
        raise WrongResult(f"{label}: shape {tuple(out.shape)} != reference shape {tuple(ref.shape)}")
    if not ref.dtype.is_floating_point and out.dtype.is_floating_point:
        # Integer references (histogram counts) are compared exactly in float64
        # below (exact up to 2**53); a floating output is already wrong.
        raise WrongResult(f"{label}: integer reference but {out.dtype} output")
    tol = op.tolerance(dtype)
    got = out.detach().to("cpu", torch.float64)
    want = ref.detach().to("cpu", torch.float64)
    try:
        torch.testing.assert_close(got, want, atol=tol.atol, rtol=tol.rtol, equal_nan=False)
    except AssertionError as exc:
        raise WrongResult(f"{label}: {exc}") from None


def check_provider(
    op: Op,
    fn: Callable[..., torch.Tensor],
    shape: tuple,
    dtype: str,
    device: str,
    *,
    noncontiguous: bool = False,
    seed: int = 0,
) -> None:
    """Run ``fn`` on seeded inputs and compare with ``op.reference``.

    Parameters
    ----------
    op : Op
    fn : callable
        A provider function (``provider.fn``) or a deliberately wrong one.
    shape : tuple of int
    dtype : str
        kernelwatch dtype name (``fp32``, ``bf16`` ...).
    device : str
        Where the inputs live (``"cpu"`` for Triton in the interpreter).
    noncontiguous : bool
        Pass non-contiguous views of the same values.

    Raises
    ------
    WrongResult
        When the output does not match.
    ValueError
        For a shape or dtype the op does not support.
    """
    shape = op.check_shape(shape)
    if dtype not in op.dtypes:
        raise ValueError(f"op {op.name!r} does not support dtype {dtype!r}")
    torch_dtype(dtype)
    inputs = op.make_inputs(shape, dtype, device, seed=seed)
    ref = op.reference(*inputs)
    if noncontiguous:
        inputs = tuple(make_noncontiguous(t) if isinstance(t, torch.Tensor) else t for t in inputs)
    out = fn(*inputs)
    if out.is_cuda:
        torch.cuda.synchronize()
    compare(op, out, ref, dtype, label=f"{op.name}[{'x'.join(map(str, shape))}, {dtype}]")
