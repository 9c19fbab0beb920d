"""Control kernels: a frozen device copy and a torch matmul (issue 24).

They measure the machine, not the code: written against torch only, never
edited with the suite, benchmarked in every ``kernelwatch run`` and
``kernelwatch check`` as ``suite.control_copy.track_time`` and
``suite.control_matmul.track_time`` (names containing ``control``). Their
compiled-code identity is the same at every commit that leaves this file, the
timing code and the torch build alone, so when they move the machine moved:
``kernelwatch check`` reports an unstable machine (exit 2) when a control moved
far beyond noise between base and head rounds, and warns when it moved less;
the analysis names a move of the controls at a commit as a machine event's
evidence.

Not in :data:`kernels.OP_MODULES` (the suite's op families, each with a Triton
kernel, a wrong-kernel negative control and an error budget): they are not ops
under test. :data:`CONTROL_OPS` lists them; :func:`kernels.get_op` finds them.

Do not edit the providers, shapes or dtypes: a change here changes every
control's fingerprint and cuts its history.

Shapes: ``control_copy``: ``x`` ``(n,)`` -> ``(n,)``; ``control_matmul``:
``a`` ``(m, k)``, ``b`` ``(k, n)`` -> ``(m, n)``, fp32.
"""

from __future__ import annotations

import torch

from harness.core.model import CONTROL_MARK, is_control  # noqa: F401  (the one definition of "a control")
from kernels._base import Cost, Op, Provider, Tolerance, itemsize, randn


def _copy_inputs(shape, dtype, device, seed=0):
    (n,) = shape
    return (randn((n,), dtype, device, seed),)


def _copy_reference(x):
    return x.double()


def _copy_cost(shape, dtype) -> Cost:
    # x read once, out written once: no flops, 2 * n * itemsize bytes.
    (n,) = shape
    return Cost(flops=0, bytes_read=n * itemsize(dtype), bytes_written=n * itemsize(dtype))


def torch_copy(x):
    """``x.clone()``: one read and one write of every element."""
    return x.clone()


def _mm_inputs(shape, dtype, device, seed=0):
    m, n, k = shape
    return randn((m, k), dtype, device, seed), randn((k, n), dtype, device, seed + 1)


def _mm_reference(a, b):
    return a.double() @ b.double()


def _mm_cost(shape, dtype) -> Cost:
    # 2 m n k flops; a and b read once, out written once.
    m, n, k = shape
    s = itemsize(dtype)
    return Cost(flops=2 * m * n * k, bytes_read=(m * k + k * n) * s, bytes_written=m * n * s)


def torch_matmul(a, b):
    """``torch.matmul`` in fp32 with TF32 as the process has it (the suite never changes it)."""
    return torch.matmul(a, b)


COPY = Op(
    name="control_copy",
    description="control: device copy (x.clone()), frozen; measures the machine's memory path",
    shape_names=("n",),
    dtypes=("fp32",),
    make_inputs=_copy_inputs,
    reference=_copy_reference,
    tolerances={"fp32": Tolerance(atol=0.0, rtol=0.0)},  # a copy is exact
    cost=_copy_cost,
    providers={"torch": Provider("torch", "torch", torch_copy, "x.clone() (frozen control)")},
    bench_shapes={"cuda": [(1 << 26,)], "cpu": [(1 << 20,)], "quick": [(1 << 20,)]},
    bench_dtypes={"cuda": ["fp32"], "cpu": ["fp32"]},
    test_shapes=[(1,), (1823,)],
)

MATMUL = Op(
    name="control_matmul",
    description="control: torch.matmul fp32, frozen; measures the machine's compute path",
    shape_names=("m", "n", "k"),
    dtypes=("fp32",),
    make_inputs=_mm_inputs,
    reference=_mm_reference,
    # fp32 (or TF32 on a GPU that allows it) accumulation over k: TF32's 2**-11 x sqrt(k) bounds both.
    tolerances={"fp32": Tolerance(atol=5e-2, rtol=2e-2)},
    cost=_mm_cost,
    providers={"torch": Provider("torch", "torch", torch_matmul, "torch.matmul (frozen control)")},
    bench_shapes={"cuda": [(4096, 4096, 4096)], "cpu": [(256, 256, 256)], "quick": [(256, 256, 256)]},
    bench_dtypes={"cuda": ["fp32"], "cpu": ["fp32"]},
    test_shapes=[(19, 33, 47)],
    uses_tensor_cores=False,
)

#: The control ops by name, in display order.
CONTROL_OPS: dict[str, Op] = {COPY.name: COPY, MATMUL.name: MATMUL}
