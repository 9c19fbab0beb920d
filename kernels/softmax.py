"""``softmax``: row-wise softmax over the last dimension, fused in one pass.

``out[i, j] = exp(x[i, j] - max_j x[i, :]) / sum_j exp(x[i, :] - max_j x[i, :])``

Exercises: kernel fusion. The fused kernel keeps a row in registers or shared
memory and touches DRAM once per element each way; the unfused torch sequence
(max, sub, exp, sum, div) round-trips intermediates through memory. Pattern
from the Triton tutorial ``python/tutorials/02-fused-softmax.py``.

Shapes: ``x``: ``(M, N)``; ``out``: ``(M, N)``, same dtype, softmax along ``N``.
"""

from __future__ import annotations

import numpy as np
import torch
import triton
import triton.language as tl

from kernels import (
    _backends,  # noqa: F401
    _cupy,
)
from kernels._base import Cost, Op, Provider, Tolerance, itemsize, randn


def make_inputs(shape, dtype, device, seed=0):
    M, N = shape
    return (randn((M, N), dtype, device, seed, scale=3.0),)


def reference(x):
    return torch.softmax(x.double(), dim=-1)


def cost(shape, dtype) -> Cost:
    # Per element: max-compare, subtract, exp, add (row sum), divide = 5 FLOPs,
    # counting exp as one operation (a convention; it runs on the SFU). A fused
    # kernel reads x once and writes out once: bytes = 2 * M * N * itemsize.
    M, N = shape
    s = itemsize(dtype)
    return Cost(flops=5 * M * N, bytes_read=M * N * s, bytes_written=M * N * s)


def torch_softmax(x):
    return torch.softmax(x, dim=-1)


def torch_unfused_softmax(x):
    """The unfused eager sequence: five kernels, four intermediates through memory.
    Accumulates in the input dtype, as a naive implementation would."""
    x_max = x.max(dim=-1, keepdim=True).values
    z = x - x_max
    num = torch.exp(z)
    den = num.sum(dim=-1, keepdim=True)
    return num / den


@triton.jit
def _softmax_kernel(out_ptr, x_ptr, stride_xm, stride_xn, stride_om, n_cols, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride_xm + cols * stride_xn, mask=mask, other=-float("inf")).to(tl.float32)
    x = x - tl.max(x, axis=0)
    num = tl.exp(x)
    den = tl.sum(num, axis=0)
    tl.store(out_ptr + row * stride_om + cols, (num / den).to(out_ptr.dtype.element_ty), mask=mask)


def triton_softmax(x):
    """One program per row, the whole row in registers (``BLOCK_SIZE = next_pow2(N)``);
    strided input is read in place, output is contiguous."""
    M, N = x.shape
    out = torch.empty((M, N), dtype=x.dtype, device=x.device)
    BLOCK_SIZE = triton.next_power_of_2(N)
    num_warps = 4 if BLOCK_SIZE < 2048 else (8 if BLOCK_SIZE < 4096 else 16)
    _softmax_kernel[(M,)](
        out, x, x.stride(0), x.stride(1), out.stride(0), N, BLOCK_SIZE=BLOCK_SIZE, num_warps=num_warps
    )
    return out


def triton_softmax_config(x):
    BLOCK_SIZE = triton.next_power_of_2(x.shape[-1])
    return {"BLOCK_SIZE": BLOCK_SIZE, "num_warps": 4 if BLOCK_SIZE < 2048 else (8 if BLOCK_SIZE < 4096 else 16)}


CUDA_SOURCE = _cupy.register_source(
    "softmax",
    ("softmax_f32", "softmax_f16", "softmax_bf16"),
    r"""
#include <cuda_fp16.h>
#include <cuda_bf16.h>
// One block per row; each thread strides over the row, then block-wide max and
// sum reductions through shared memory (warp shuffles first, then across warps).
// -inf as a bit pattern: INFINITY is a host <math.h> macro that NVRTC (what CuPy
// compiles with) does not define, although nvcc accepts it.
#define KW_NEG_INF __int_as_float(0xff800000)
__device__ float warp_max(float v) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffff, v, o));
    return v;
}
__device__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffff, v, o);
    return v;
}
__device__ float block_reduce(float v, bool is_max) {
    __shared__ float partial[32];
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    v = is_max ? warp_max(v) : warp_sum(v);
    __syncthreads();
    if (lane == 0) partial[warp] = v;
    __syncthreads();
    int nwarps = (blockDim.x + 31) >> 5;
    float r = (threadIdx.x < nwarps) ? partial[threadIdx.x] : (is_max ? KW_NEG_INF : 0.0f);
    if (warp == 0) r = is_max ? warp_max(r) : warp_sum(r);
    if (threadIdx.x == 0) partial[0] = r;
    __syncthreads();
    return partial[0];
}
template <typename T>
__device__ void softmax_row(const T* __restrict__ x, T* __restrict__ out, long long stride_xm,
                            long long stride_xn, long long n) {
    const T* xr = x + (long long)blockIdx.x * stride_xm;
    T* orow = out + (long long)blockIdx.x * n;
    float m = KW_NEG_INF;
    for (long long j = threadIdx.x; j < n; j += blockDim.x) m = fmaxf(m, (float)xr[j * stride_xn]);
    m = block_reduce(m, true);
    float s = 0.0f;
    for (long long j = threadIdx.x; j < n; j += blockDim.x) s += __expf((float)xr[j * stride_xn] - m);
    s = block_reduce(s, false);
    float inv = 1.0f / s;
    for (long long j = threadIdx.x; j < n; j += blockDim.x) orow[j] = (T)(__expf((float)xr[j * stride_xn] - m) * inv);
}
extern "C" __global__ void softmax_f32(const float* x, float* out, long long sm, long long sn, long long n) {
    softmax_row<float>(x, out, sm, sn, n);
}
extern "C" __global__ void softmax_f16(const __half* x, __half* out, long long sm, long long sn, long long n) {
    softmax_row<__half>(x, out, sm, sn, n);
}
extern "C" __global__ void softmax_bf16(const __nv_bfloat16* x, __nv_bfloat16* out, long long sm, long long sn, long long n) {
    softmax_row<__nv_bfloat16>(x, out, sm, sn, n);
}
""",
)

_CUPY_NAMES = {torch.float32: "softmax_f32", torch.float16: "softmax_f16", torch.bfloat16: "softmax_bf16"}


def cupy_softmax(x):
    _cupy.check_cuda_tensor(x)
    if x.dtype not in _CUPY_NAMES:
        raise ValueError(f"cupy softmax supports {list(_CUPY_NAMES)}, got {x.dtype}")
    M, N = x.shape
    out = torch.empty((M, N), dtype=x.dtype, device=x.device)
    fn = _cupy.kernel(CUDA_SOURCE, _CUPY_NAMES[x.dtype])
    _cupy.launch(
        fn, (M,), (256,), (_cupy.ptr(x), _cupy.ptr(out), np.int64(x.stride(0)), np.int64(x.stride(1)), np.int64(N))
    )
    return out


OP = Op(
    name="softmax",
    description="row-wise softmax; fusion (one DRAM round trip) vs the unfused eager sequence",
    shape_names=("M", "N"),
    dtypes=("fp32", "fp16", "bf16"),
    make_inputs=make_inputs,
    reference=reference,
    # Outputs lie in [0, 1]; fp32 accumulation inside the kernels, rounding of the output dtype.
    tolerances={
        "fp32": Tolerance(atol=1e-6, rtol=1e-5),
        "fp16": Tolerance(atol=1e-3, rtol=2e-3),
        "bf16": Tolerance(atol=4e-3, rtol=1.6e-2),
    },
    cost=cost,
    providers={
        "torch": Provider("torch", "torch", torch_softmax, "torch.softmax (one fused ATen kernel)"),
        "torch_unfused": Provider(
            "torch_unfused", "torch", torch_unfused_softmax, "max, sub, exp, sum, div as five eager ops"
        ),
        "triton": Provider(
            "triton", "triton", triton_softmax, "Triton fused, one row per program", config=triton_softmax_config
        ),
        "cupy": Provider("cupy", "cupy", cupy_softmax, "CUDA C, one block per row, shuffle reductions"),
    },
    bench_shapes={"cuda": [(4096, 4096), (32768, 8192)], "cpu": [(1024, 1024), (4096, 4096)], "quick": [(1024, 1024)]},
    bench_dtypes={"cuda": ["fp32", "bf16"], "cpu": ["fp32"]},
    test_shapes=[(1, 1), (19, 19), (7, 1823)],
)


def WRONG(x):
    """Negative control: normalises over the wrong axis (columns instead of rows)."""
    return torch.softmax(x.float(), dim=0).to(x.dtype)
