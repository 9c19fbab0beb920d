"""The op model shared by every kernel family.

An *op* (``vector_add``, ``softmax``, ``matmul`` ...) owns what is computed and
what it costs: a reference, a seeded input generator, tolerances per dtype, a
pure analytic cost model and a set of *providers* (``torch``, ``triton``,
``cupy`` and variants such as ``triton_tiled``) that share one signature::

    out = provider.fn(*inputs)

Nothing in ``kernels/`` times anything; timing lives in ``harness.timing``.
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass, field
from typing import Callable, Mapping, Sequence

import torch

from harness.core.costs import Cost  # noqa: F401

#: Dtype names used throughout kernelwatch (the field's short names).
#: ``tf32`` means fp32 storage with TF32 tensor-core math allowed for matmuls.
DTYPES: Mapping[str, torch.dtype] = {
    "fp64": torch.float64,
    "fp32": torch.float32,
    "tf32": torch.float32,
    "fp16": torch.float16,
    "bf16": torch.bfloat16,
    "fp8": torch.float8_e4m3fn,
    "int32": torch.int32,
    "int64": torch.int64,
}

BACKENDS = ("torch", "triton", "cupy")


def torch_dtype(dtype: str) -> torch.dtype:
    """Map a kernelwatch dtype name (``fp32``, ``bf16`` ...) to a ``torch.dtype``.

    Raises
    ------
    ValueError
        If ``dtype`` is not one of :data:`DTYPES`.
    """
    try:
        return DTYPES[dtype]
    except KeyError:
        raise ValueError(f"unknown dtype {dtype!r}; expected one of {sorted(DTYPES)}") from None


def itemsize(dtype: str) -> int:
    """Bytes per element of a kernelwatch dtype name (``bf16`` -> 2)."""
    return torch.empty((), dtype=torch_dtype(dtype)).element_size()


# Cost is the one cost vocabulary of harness.core (re-exported: kernels' cost() return it).


@dataclass(frozen=True)
class Tolerance:
    """``torch.testing.assert_close`` tolerances for one dtype."""

    atol: float
    rtol: float


@dataclass(frozen=True)
class Provider:
    """One implementation of an op.

    Attributes
    ----------
    name : str
        The ``provider`` parameter value (``torch``, ``triton``, ``triton_tiled``, ``cupy`` ...).
    backend : str
        One of :data:`BACKENDS`; decides where the provider can run
        (see :func:`kernels._backends.availability`).
    fn : callable
        ``fn(*inputs) -> torch.Tensor``, the op's shared signature.
    description : str
        One line saying what this variant does differently.
    dtypes : tuple of str or None
        The dtypes the provider supports; ``None`` means all of the op's dtypes.
    config : callable or None
        ``config(*inputs) -> dict`` returning the launch configuration chosen for
        these inputs (block sizes, ``num_warps``, ``num_stages``), recorded with
        each result. ``None`` when the provider has no tunable launch.
    needs_contiguous : bool or tuple of str
        The kernel indexes flat memory, so the provider copies non-contiguous
        inputs (``Tensor.contiguous()``, inside the timed call) before launching:
        ``True`` for every dtype, or the dtypes for which it does. ``False`` means
        strided inputs reach the kernel as they are (tests check both claims).
    """

    name: str
    backend: str
    fn: Callable[..., torch.Tensor]
    description: str = ""
    dtypes: tuple[str, ...] | None = None
    config: Callable[..., dict] | None = None
    needs_contiguous: bool | tuple[str, ...] = False

    def __post_init__(self) -> None:
        if self.backend not in BACKENDS:
            raise ValueError(f"provider {self.name!r}: backend must be one of {BACKENDS}, got {self.backend!r}")

    def supports(self, dtype: str) -> bool:
        return self.dtypes is None or dtype in self.dtypes

    def copies_noncontiguous(self, dtype: str) -> bool:
        """Whether the provider copies non-contiguous inputs for ``dtype`` (see ``needs_contiguous``)."""
        if isinstance(self.needs_contiguous, bool):
            return self.needs_contiguous
        return dtype in self.needs_contiguous


@dataclass(frozen=True)
class Op:
    """One op family: reference, inputs, tolerances, cost and providers.

    Attributes
    ----------
    name : str
        Op name (``vector_add``).
    description : str
        What it computes and why it is in the suite (which optimisation it exercises).
    shape_names : tuple of str
        Names of the shape dimensions, e.g. ``("M", "N", "K")``.
    dtypes : tuple of str
        Supported dtype names (see :data:`DTYPES`).
    make_inputs : callable
        ``make_inputs(shape, dtype, device, seed=0) -> tuple[torch.Tensor, ...]``;
        deterministic for a given seed.
    reference : callable
        ``reference(*inputs) -> torch.Tensor`` computed in higher precision
        (fp32 or fp64), returned in that precision.
    tolerances : mapping of str to Tolerance
        Per-dtype tolerance against the reference.
    cost : callable
        ``cost(shape, dtype) -> Cost``; pure.
    providers : mapping of str to Provider
    bench_shapes : mapping of str to sequence of shapes
        Shapes the asv suite sweeps, keyed ``"cuda"``, ``"cpu"`` and ``"quick"``.
    bench_dtypes : mapping of str to sequence of str
        Dtypes the asv suite sweeps, keyed ``"cuda"`` and ``"cpu"``.
    test_shapes : sequence of shapes
        Odd and small shapes used by the correctness tests (1, 19, 1823 ...).
    uses_tensor_cores : bool
        Whether the op's FLOPs run on matrix units (matmul, attention). Decides
        which datasheet peak MFU is measured against: the dtype's tensor-core
        peak, or the fp32 vector (CUDA-core) peak for elementwise and reduction
        ops whatever their storage dtype.
    """

    name: str
    description: str
    shape_names: tuple[str, ...]
    dtypes: tuple[str, ...]
    make_inputs: Callable[..., tuple]
    reference: Callable[..., torch.Tensor]
    tolerances: Mapping[str, Tolerance]
    cost: Callable[[tuple, str], Cost]
    providers: Mapping[str, Provider]
    bench_shapes: Mapping[str, Sequence[tuple]] = field(default_factory=dict)
    bench_dtypes: Mapping[str, Sequence[str]] = field(default_factory=dict)
    test_shapes: Sequence[tuple] = ()
    uses_tensor_cores: bool = False

    def __post_init__(self) -> None:
        missing = [d for d in self.dtypes if d not in self.tolerances]
        if missing:
            raise ValueError(f"op {self.name!r}: no tolerance for dtypes {missing}")
        for key, provider in self.providers.items():
            if key != provider.name:
                raise ValueError(f"op {self.name!r}: provider registered as {key!r} is named {provider.name!r}")

    def tolerance(self, dtype: str) -> Tolerance:
        """Tolerance for ``dtype``; raises ``ValueError`` for an unsupported dtype."""
        if dtype not in self.tolerances:
            raise ValueError(f"op {self.name!r} has no tolerance for dtype {dtype!r}")
        return self.tolerances[dtype]

    def check_shape(self, shape: tuple) -> tuple[int, ...]:
        """Validate a shape tuple against :attr:`shape_names`; returns it as ints."""
        shape = tuple(shape)
        if len(shape) != len(self.shape_names):
            raise ValueError(f"op {self.name!r} expects shape {self.shape_names}, got {shape!r}")
        for n in shape:
            if not isinstance(n, int) or isinstance(n, bool) or n < 1:
                raise ValueError(f"op {self.name!r}: shape entries must be positive ints, got {shape!r}")
        return shape


def numel(shape: Sequence[int]) -> int:
    return math.prod(shape)


def shape_label(shape: Sequence[int]) -> str:
    """Human and asv parameter label for a shape: ``(4096, 4096)`` -> ``"4096x4096"``."""
    return "x".join(str(int(n)) for n in shape)


def parse_shape(label: str) -> tuple[int, ...]:
    """Inverse of :func:`shape_label`; raises ``ValueError`` on malformed input."""
    text = str(label).strip().strip("'\"")
    try:
        shape = tuple(int(part) for part in text.split("x"))
    except ValueError:
        raise ValueError(f"malformed shape label {label!r}; expected e.g. '4096x4096'") from None
    # Entries may be 0 (e.g. attention's causal flag); Op.check_shape applies each op's own range.
    if not shape or any(n < 0 for n in shape):
        raise ValueError(f"malformed shape label {label!r}")
    return shape


#: Where :func:`generator` makes its generators; set only inside :func:`inputs_on`.
_INPUT_DEVICE: str | None = None


@contextlib.contextmanager
def inputs_on(device: str | torch.device):
    """Generate inputs directly on ``device`` inside the block.

    By default inputs are generated on the CPU then moved, so the same seed
    gives the same values on every device (what the tests rely on). At bench
    shapes that costs seconds per case (``randn`` of 8192^2 takes 0.36 s on a
    CPU core, a 2^28-element histogram input several seconds): inside this
    block PyTorch's default device is ``device`` and :func:`generator` seeds a
    generator there, so every factory call in an op's ``make_inputs`` runs on
    the device (same seed, same values on that device; not the CPU's values).
    Restores the previous default device on exit, also on error.
    """
    global _INPUT_DEVICE
    prev_default = torch.get_default_device() if hasattr(torch, "get_default_device") else torch.device("cpu")
    prev = _INPUT_DEVICE
    _INPUT_DEVICE = str(torch.device(device))
    torch.set_default_device(device)
    try:
        yield
    finally:
        torch.set_default_device(prev_default)
        _INPUT_DEVICE = prev


def generator(seed: int, device: str | torch.device | None = None) -> torch.Generator:
    """A seeded ``torch.Generator`` on ``device`` (default: the CPU, or the
    device of an enclosing :func:`inputs_on`). Inputs are generated on the CPU
    then moved, so the same seed gives the same values on every device."""
    g = torch.Generator(device=device if device is not None else (_INPUT_DEVICE or "cpu"))
    g.manual_seed(int(seed))
    return g


def randn(shape: Sequence[int], dtype: str, device, seed: int, scale: float = 1.0) -> torch.Tensor:
    """Seeded normal values, generated in fp32 on the CPU, cast, then moved to ``device``."""
    x = torch.randn(tuple(shape), generator=generator(seed), dtype=torch.float32) * scale
    return x.to(torch_dtype(dtype)).to(device)
