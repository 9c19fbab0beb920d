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


#: Non-contiguous layouts :func:`make_noncontiguous` builds, in the order the
#: tests sweep them.
LAYOUTS = ("padded", "transposed", "strided")


def make_noncontiguous(t: torch.Tensor, layout: str = "padded") -> torch.Tensor:
    """Same values as ``t`` in a non-contiguous view.

    Layouts
    -------
    ``padded``
        Rows of a wider buffer, ``buf[..., :N]`` of a ``(..., N + 3)`` buffer: the
        row stride is not ``N`` (what a slice of a padded or fused tensor gives).
        The padding holds NaN (floating) or the largest integer.
        Falls back to ``strided`` when every leading dimension is 1 (a single
        row is contiguous whatever its padding).
    ``transposed``
        The last two dimensions stored in transposed (column-major) order,
        ``buf.transpose(-1, -2)`` of a ``(..., N, M)`` buffer: unit stride on the
        second-to-last dimension. Falls back to ``padded`` below two dimensions
        or when either of the last two is 1.
    ``strided``
        Every other element of a buffer twice as wide in the last dimension
        (``stride(-1) == 2``), the gaps poisoned as for ``padded``.

    A 0-d tensor is returned as is; a one-element tensor is copied into a fresh
    buffer but stays contiguous in PyTorch's sense (no layout can change that).

    Raises
    ------
    ValueError
        For an unknown layout.
    RuntimeError
        If the view built is contiguous although ``t`` has two or more elements.
    """
    if layout not in LAYOUTS:
        raise ValueError(f"unknown layout {layout!r}; expected one of {LAYOUTS}")
    if t.dim() == 0:
        return t
    shape = tuple(t.shape)
    if layout == "transposed" and (t.dim() < 2 or shape[-1] == 1 or shape[-2] == 1):
        layout = "padded"
    if layout == "padded" and all(n == 1 for n in shape[:-1]):
        layout = "strided"
    # Gaps are poisoned (NaN, or the dtype's largest integer), so a kernel that
    # reads one instead of the element it should is caught, not lucky.
    poison = float("nan") if t.dtype.is_floating_point else torch.iinfo(t.dtype).max
    if layout == "padded":
        view = torch.full((*shape[:-1], shape[-1] + 3), poison, dtype=t.dtype, device=t.device)[..., : shape[-1]]
    elif layout == "transposed":
        view = torch.empty(*shape[:-2], shape[-1], shape[-2], dtype=t.dtype, device=t.device).transpose(-1, -2)
    else:
        view = torch.full((*shape[:-1], 2 * shape[-1]), poison, dtype=t.dtype, device=t.device)[..., ::2]
    view.copy_(t)
    if view.is_contiguous() and t.numel() > 1:
        raise RuntimeError(f"could not build a non-contiguous {layout} view of shape {shape}")
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
    noncontiguous: bool | str = False,
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
    noncontiguous : bool or str
        Pass non-contiguous views of the same values: a layout name of
        :data:`LAYOUTS`, or ``True`` for ``"padded"``.

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
        layout = "padded" if noncontiguous is True else noncontiguous
        inputs = tuple(make_noncontiguous(t, layout) if isinstance(t, torch.Tensor) else t for t in inputs)
    out = fn(*inputs)
    if out.is_cuda:
        torch.cuda.synchronize()
    compare(op, out, ref, dtype, label=f"{op.name}[{'x'.join(map(str, shape))}, {dtype}]")


#: Anonymous mappings behind :func:`guarded_copy` views; kept alive for the process.
_GUARDED: list = []


def guarded_copy(t: torch.Tensor) -> torch.Tensor:
    """A contiguous CPU copy of ``t`` whose last byte sits just before an
    inaccessible (``PROT_NONE``) page, so a kernel reading past its end faults
    (SIGSEGV) instead of reading garbage that a masked store then discards.

    Electric Fence's technique (Bruce Perens, 1987; ``mprotect(2)``), for Triton
    kernels under ``TRITON_INTERPRET=1``, whose loads dereference the raw
    addresses: a missing or off-by-one load mask is otherwise invisible in the
    output. The memory is never unmapped (the view may outlive any owner here).
    Run such a check in a subprocess: the failure mode is the process dying.

    Raises
    ------
    OSError
        Where ``mprotect`` is unavailable (not Linux/POSIX) or fails.
    """
    import ctypes
    import mmap

    t = t.detach().cpu()
    page = mmap.PAGESIZE
    nbytes = t.numel() * t.element_size()
    pages = max(1, -(-nbytes // page))
    mm = mmap.mmap(-1, (pages + 1) * page)
    addr = ctypes.addressof(ctypes.c_char.from_buffer(mm))
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.mprotect(ctypes.c_void_p(addr + pages * page), ctypes.c_size_t(page), 0) != 0:
        raise OSError(ctypes.get_errno(), "mprotect(PROT_NONE) failed for a guard page")
    _GUARDED.append(mm)
    flat = torch.frombuffer(mm, dtype=t.dtype, count=t.numel(), offset=pages * page - nbytes)
    out = flat.view(t.shape)
    out.copy_(t)
    return out
