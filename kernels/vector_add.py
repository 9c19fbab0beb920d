"""``vector_add``: ``out = x + y`` elementwise, the memory-bound baseline.

Exercises: coalesced streaming access; nothing to reuse, so a good kernel runs
at the device's copy bandwidth. Pattern from the Triton tutorial
``python/tutorials/01-vector-add.py``.

Shapes: ``x``, ``y``: ``(n,)``; ``out``: ``(n,)``, same dtype as ``x``.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from kernels import (
    _backends,  # noqa: F401  (sets TRITON_INTERPRET before triton is imported)
    _cupy,
)
from kernels._base import Cost, Op, Provider, Tolerance, itemsize, randn


def make_inputs(shape, dtype, device, seed=0):
    """Two seeded ``(n,)`` tensors of ``dtype`` on ``device``."""
    (n,) = shape
    return randn((n,), dtype, device, seed), randn((n,), dtype, device, seed + 1)


def reference(x, y):
    """fp64 sum: exact for every dtype we test, so the only error is the provider's rounding."""
    return x.double() + y.double()


def cost(shape, dtype) -> Cost:
    # One add per element; x and y are read once and out written once:
    # flops = n, bytes_read = 2 * n * itemsize, bytes_written = n * itemsize.
    (n,) = shape
    s = itemsize(dtype)
    return Cost(flops=n, bytes_read=2 * n * s, bytes_written=n * s)


def torch_vector_add(x, y):
    return torch.add(x, y)


@triton.jit
def _add_kernel(x_ptr, y_ptr, out_ptr, n_elements, stride_x, stride_y, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid.to(tl.int64) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets * stride_x, mask=mask)
    y = tl.load(y_ptr + offsets * stride_y, mask=mask)
    # Add in fp32 and round once: what the hardware does for fp16/bf16 anyway, and
    # Triton's CPU interpreter computes bf16 arithmetic wrongly without it.
    out = x.to(tl.float32) + y.to(tl.float32)
    tl.store(out_ptr + offsets, out.to(out_ptr.dtype.element_ty), mask=mask)


TRITON_BLOCK_SIZE = 1024


def triton_vector_add(x, y):
    """Triton launch over 1-D ``x``, ``y`` of any stride (read in place, no copy);
    ``out`` is contiguous. Raises ``ValueError`` unless both are 1-D of one length."""
    if x.dim() != 1 or x.shape != y.shape:
        raise ValueError(f"vector_add takes two 1-D tensors of one length, got {tuple(x.shape)} and {tuple(y.shape)}")
    out = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    n = out.numel()
    grid = (triton.cdiv(n, TRITON_BLOCK_SIZE),)
    _add_kernel[grid](x, y, out, n, x.stride(0), y.stride(0), BLOCK_SIZE=TRITON_BLOCK_SIZE, num_warps=4)
    return out


CUDA_SOURCE = _cupy.register_source(
    "vector_add",
    ("vector_add_f32", "vector_add_f16", "vector_add_bf16"),
    r"""
#include <cuda_fp16.h>
#include <cuda_bf16.h>
// Grid-stride loop: each thread handles elements i, i + stride, ...; consecutive
// threads touch consecutive addresses, so every warp access is coalesced.
template <typename T>
__device__ void vector_add(const T* __restrict__ x, const T* __restrict__ y,
                           T* __restrict__ out, long long n) {
    long long stride = (long long)blockDim.x * gridDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        out[i] = x[i] + y[i];
    }
}
extern "C" __global__ void vector_add_f32(const float* x, const float* y, float* out, long long n) {
    vector_add<float>(x, y, out, n);
}
extern "C" __global__ void vector_add_f16(const __half* x, const __half* y, __half* out, long long n) {
    vector_add<__half>(x, y, out, n);
}
extern "C" __global__ void vector_add_bf16(const __nv_bfloat16* x, const __nv_bfloat16* y,
                                           __nv_bfloat16* out, long long n) {
    vector_add<__nv_bfloat16>(x, y, out, n);
}
""",
)

_CUPY_NAMES = {torch.float32: "vector_add_f32", torch.float16: "vector_add_f16", torch.bfloat16: "vector_add_bf16"}


def cupy_vector_add(x, y):
    """CUDA C grid-stride add. The kernel indexes flat memory, so non-contiguous
    ``x``, ``y`` are copied to contiguous buffers first (explicitly, inside the
    timed call; the provider declares ``needs_contiguous``)."""
    _cupy.check_cuda_tensor(x, y)
    x, y = x.contiguous(), y.contiguous()
    if x.dtype not in _CUPY_NAMES:
        raise ValueError(f"cupy vector_add supports {list(_CUPY_NAMES)}, got {x.dtype}")
    out = torch.empty_like(x)
    n = out.numel()
    fn = _cupy.kernel(CUDA_SOURCE, _CUPY_NAMES[x.dtype])
    block = 256
    grid = min(triton.cdiv(n, block), 65535 * 8)
    import numpy as np

    _cupy.launch(fn, (grid,), (block,), (_cupy.ptr(x), _cupy.ptr(y), _cupy.ptr(out), np.int64(n)))
    return out


OP = Op(
    name="vector_add",
    description="out = x + y; memory-bound streaming baseline (coalescing, achieved bandwidth)",
    shape_names=("n",),
    dtypes=("fp32", "fp16", "bf16"),
    make_inputs=make_inputs,
    reference=reference,
    # One correctly rounded add in the output dtype: |out - ref| <= u * |ref| with
    # u = 2**-p (fp32 2**-24, fp16 2**-11, bf16 2**-8); tolerances are 2u. A sum
    # that cancels is exact (Sterbenz), so atol only covers the subnormal range.
    # tests/test_tolerances.py holds each op's error budget in units of u.
    tolerances={
        "fp32": Tolerance(atol=1.2e-7, rtol=1.2e-7),
        "fp16": Tolerance(atol=1e-3, rtol=1e-3),
        "bf16": Tolerance(atol=8e-3, rtol=8e-3),
    },
    cost=cost,
    providers={
        "torch": Provider("torch", "torch", torch_vector_add, "torch.add (eager)"),
        "triton": Provider("triton", "triton", triton_vector_add, f"Triton, BLOCK_SIZE={TRITON_BLOCK_SIZE}"),
        "cupy": Provider(
            "cupy",
            "cupy",
            cupy_vector_add,
            "CUDA C grid-stride loop (copies non-contiguous inputs)",
            needs_contiguous=True,
        ),
    },
    bench_shapes={"cuda": [(1 << 20,), (1 << 28,)], "cpu": [(1 << 20,), (1 << 24,)], "quick": [(1 << 20,)]},
    bench_dtypes={"cuda": ["fp32", "bf16"], "cpu": ["fp32"]},
    test_shapes=[(1,), (19,), (1823,)],
)


def WRONG(x, y):
    """Negative control: reads ``x`` twice (a wrong pointer), a classic launcher bug."""
    return x + x
