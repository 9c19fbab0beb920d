"""``rmsnorm``: RMSNorm forward over the last dimension, fused in one kernel.

``out[i, j] = x[i, j] * rsqrt(sum_j x[i, j]**2 / N + eps) * weight[j]``,
``eps = 1e-6`` (Zhang & Sennrich 2019, "Root Mean Square Layer Normalization",
arXiv:1910.07467; ``torch.nn.functional.rms_norm`` semantics, as in Llama).

Exercises: fusion of a single-statistic row reduction; cheaper than LayerNorm
(no centring, no bias), so it sits closer to pure copy bandwidth. The eager
sequence (pow, mean, add, rsqrt, mul, mul) round-trips intermediates through
memory; the fused kernels read ``x`` once and write ``out`` once.

Shapes: ``x``: ``(M, N)``; ``weight``: ``(N,)``; ``out``: ``(M, N)`` contiguous in
``x``'s dtype (fp32 sum of squares inside every fused provider).
"""

from __future__ import annotations

import numpy as np
import torch
import triton
import triton.language as tl

from kernels import (
    _backends,  # noqa: F401  (sets TRITON_INTERPRET before triton is imported)
    _cupy,
)
from kernels._base import Cost, Op, Provider, Tolerance, generator, itemsize, torch_dtype

#: Llama's RMSNorm epsilon.
EPS = 1e-6


def make_inputs(shape, dtype, device, seed=0):
    """``x`` ~ N(0.5, 1) (a non-zero mean, so RMS differs clearly from the standard
    deviation), ``weight`` ~ N(1, 0.1^2); generated in fp32 on the CPU, cast, moved."""
    M, N = shape
    td = torch_dtype(dtype)
    x = torch.randn((M, N), generator=generator(seed)) + 0.5
    w = 1.0 + 0.1 * torch.randn((N,), generator=generator(seed + 1))
    return x.to(td).to(device), w.to(td).to(device)


def reference(x, weight):
    """fp64 RMSNorm on the (already rounded) inputs."""
    xd = x.double()
    return xd * torch.rsqrt(xd.pow(2).mean(dim=-1, keepdim=True) + EPS) * weight.double()


def cost(shape, dtype) -> Cost:
    # Per element: 1 FMA (2 FLOPs) for the sum of squares, 1 mul by rstd, 1 mul by
    # weight: 4 FLOPs; the O(M) per-row division and rsqrt are ignored. Compulsory
    # traffic: x read once (M * N), weight once (N), out written once (M * N), in
    # the input dtype; rstd stays on chip (forward-only, not saved).
    M, N = shape
    s = itemsize(dtype)
    return Cost(flops=4 * M * N, bytes_read=(M * N + N) * s, bytes_written=M * N * s)


def torch_rmsnorm(x, weight):
    """``torch.nn.functional.rms_norm`` (in PyTorch since 2.4)."""
    return torch.nn.functional.rms_norm(x, (x.shape[-1],), weight, EPS)


def torch_unfused_rmsnorm(x, weight):
    """The eager sequence in the input dtype: pow, mean, add, rsqrt, mul, mul."""
    return x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + EPS) * weight


@triton.jit
def _rmsnorm_kernel(
    x_ptr,
    w_ptr,
    out_ptr,
    N,
    stride_xm,
    stride_xn,
    stride_w,
    stride_om,
    eps,
    BLOCK_SIZE: tl.constexpr,
    NUM_CHUNKS: tl.constexpr,
):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * stride_xm
    out_row = out_ptr + row * stride_om
    cols = tl.arange(0, BLOCK_SIZE)
    if NUM_CHUNKS == 1:
        # Whole row in registers: x read from DRAM once.
        mask = cols < N
        x = tl.load(x_row + cols * stride_xn, mask=mask, other=0.0).to(tl.float32)
        rstd = tl.rsqrt(tl.sum(x * x, axis=0) / N + eps)
        w = tl.load(w_ptr + cols * stride_w, mask=mask, other=0.0).to(tl.float32)
        tl.store(out_row + cols, (x * rstd * w).to(out_ptr.dtype.element_ty), mask=mask)
    else:
        # A sum of squares has no cancellation: accumulate per lane in fp32, reduce once.
        acc = tl.zeros((BLOCK_SIZE,), dtype=tl.float32)
        for c in range(NUM_CHUNKS):
            offs = c * BLOCK_SIZE + cols
            x = tl.load(x_row + offs * stride_xn, mask=offs < N, other=0.0).to(tl.float32)
            acc += x * x
        rstd = tl.rsqrt(tl.sum(acc, axis=0) / N + eps)
        # Second sweep re-reads the row just read by this program (mostly L2 hits).
        for c in range(NUM_CHUNKS):
            offs = c * BLOCK_SIZE + cols
            mask = offs < N
            x = tl.load(x_row + offs * stride_xn, mask=mask, other=0.0).to(tl.float32)
            w = tl.load(w_ptr + offs * stride_w, mask=mask, other=0.0).to(tl.float32)
            tl.store(out_row + offs, (x * rstd * w).to(out_ptr.dtype.element_ty), mask=mask)


#: Widest row kept whole in registers (fp32 values per program); wider rows loop.
MAX_BLOCK_SIZE = 8192


def _triton_launch_config(N: int, block_size: int | None = None) -> dict:
    BLOCK_SIZE = block_size or min(triton.next_power_of_2(N), MAX_BLOCK_SIZE)
    num_warps = 4 if BLOCK_SIZE < 2048 else (8 if BLOCK_SIZE < 4096 else 16)
    return {"BLOCK_SIZE": BLOCK_SIZE, "NUM_CHUNKS": triton.cdiv(N, BLOCK_SIZE), "num_warps": num_warps}


def triton_rmsnorm(x, weight, block_size: int | None = None):
    """Fused Triton RMSNorm, one program per row; strided inputs read in place.

    ``block_size`` (a power of two) overrides the tile width; a value below ``N``
    forces the chunked path (used by the tests). Raises ``ValueError`` for
    mismatched shapes.
    """
    if x.dim() != 2 or weight.shape != (x.shape[1],):
        raise ValueError(f"rmsnorm expects x (M, N), weight (N,); got {tuple(x.shape)}, {tuple(weight.shape)}")
    M, N = x.shape
    out = torch.empty((M, N), dtype=x.dtype, device=x.device)
    cfg = _triton_launch_config(N, block_size)
    _rmsnorm_kernel[(M,)](
        x,
        weight,
        out,
        N,
        x.stride(0),
        x.stride(1),
        weight.stride(0),
        out.stride(0),
        EPS,
        BLOCK_SIZE=cfg["BLOCK_SIZE"],
        NUM_CHUNKS=cfg["NUM_CHUNKS"],
        num_warps=cfg["num_warps"],
    )
    return out


def triton_rmsnorm_config(x, weight):
    return _triton_launch_config(x.shape[-1])


CUDA_SOURCE = _cupy.register_source(
    "rmsnorm",
    ("rmsnorm_f32", "rmsnorm_f16", "rmsnorm_bf16"),
    r"""
#include <cuda_fp16.h>
#include <cuda_bf16.h>
__device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffff, v, o);
    return v;
}
// Block-wide sum returned to every thread; blockDim.x a multiple of 32, <= 1024.
__device__ float block_sum(float v) {
    __shared__ float partial[32];
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    v = warp_sum(v);
    __syncthreads();
    if (lane == 0) partial[warp] = v;
    __syncthreads();
    v = (lane < (int)(blockDim.x >> 5)) ? partial[lane] : 0.0f;
    return warp_sum(v);
}
// One block per row: fp32 sum of squares (one read of the row), block reduction,
// then a second loop over the row (L2 hits) writing x * rstd * w.
template <typename T>
__device__ void rmsnorm_row(const T* __restrict__ x, const T* __restrict__ w, T* __restrict__ out,
                            long long n, long long sxm, long long sxn, long long sw, float eps) {
    const T* xr = x + (long long)blockIdx.x * sxm;
    T* orow = out + (long long)blockIdx.x * n;
    float ss = 0.0f;
    for (long long j = threadIdx.x; j < n; j += blockDim.x) {
        float v = (float)xr[j * sxn];
        ss += v * v;
    }
    ss = block_sum(ss);
    const float rstd = rsqrtf(ss / (float)n + eps);
    for (long long j = threadIdx.x; j < n; j += blockDim.x) {
        orow[j] = (T)((float)xr[j * sxn] * rstd * (float)w[j * sw]);
    }
}
extern "C" __global__ void rmsnorm_f32(const float* x, const float* w, float* out, long long n,
                                       long long sxm, long long sxn, long long sw, float eps) {
    rmsnorm_row<float>(x, w, out, n, sxm, sxn, sw, eps);
}
extern "C" __global__ void rmsnorm_f16(const __half* x, const __half* w, __half* out, long long n,
                                       long long sxm, long long sxn, long long sw, float eps) {
    rmsnorm_row<__half>(x, w, out, n, sxm, sxn, sw, eps);
}
extern "C" __global__ void rmsnorm_bf16(const __nv_bfloat16* x, const __nv_bfloat16* w, __nv_bfloat16* out,
                                        long long n, long long sxm, long long sxn, long long sw, float eps) {
    rmsnorm_row<__nv_bfloat16>(x, w, out, n, sxm, sxn, sw, eps);
}
""",
)

_CUPY_NAMES = {torch.float32: "rmsnorm_f32", torch.float16: "rmsnorm_f16", torch.bfloat16: "rmsnorm_bf16"}


def _cupy_block(N: int) -> int:
    # About 8 elements per thread, 32..1024 threads (a whole number of warps).
    return int(min(1024, max(32, triton.next_power_of_2(triton.cdiv(N, 8)))))


def cupy_rmsnorm(x, weight):
    _cupy.check_cuda_tensor(x, weight)
    if x.dtype not in _CUPY_NAMES or weight.dtype != x.dtype:
        raise ValueError(f"cupy rmsnorm supports one dtype of {list(_CUPY_NAMES)} for x and weight")
    M, N = x.shape
    out = torch.empty((M, N), dtype=x.dtype, device=x.device)
    fn = _cupy.kernel(CUDA_SOURCE, _CUPY_NAMES[x.dtype])
    _cupy.launch(
        fn,
        (M,),
        (_cupy_block(N),),
        (
            _cupy.ptr(x),
            _cupy.ptr(weight),
            _cupy.ptr(out),
            np.int64(N),
            np.int64(x.stride(0)),
            np.int64(x.stride(1)),
            np.int64(weight.stride(0)),
            np.float32(EPS),
        ),
    )
    return out


def cupy_rmsnorm_config(x, weight):
    return {"block": _cupy_block(x.shape[-1])}


OP = Op(
    name="rmsnorm",
    description="RMSNorm forward; fused single-statistic row reduction (one DRAM round trip) vs the eager sequence",
    shape_names=("M", "N"),
    dtypes=("fp32", "fp16", "bf16"),
    make_inputs=make_inputs,
    reference=reference,
    # Outputs are O(1) (|out| < ~5). Fused providers: fp32 sum of squares and one
    # output rounding. The eager sequence also rounds x^2, the mean and rstd in the
    # input dtype. fp32 still rejects a kernel that normalises by the standard
    # deviation instead of the RMS (relative error ~0.1 with these inputs).
    tolerances={
        "fp32": Tolerance(atol=1e-5, rtol=1e-5),
        "fp16": Tolerance(atol=4e-3, rtol=4e-3),
        "bf16": Tolerance(atol=3e-2, rtol=1.6e-2),
    },
    cost=cost,
    providers={
        "torch": Provider("torch", "torch", torch_rmsnorm, "torch.nn.functional.rms_norm"),
        "torch_unfused": Provider(
            "torch_unfused",
            "torch",
            torch_unfused_rmsnorm,
            "pow, mean, add, rsqrt, mul, mul as eager ops in the input dtype",
        ),
        "triton": Provider(
            "triton",
            "triton",
            triton_rmsnorm,
            "Triton fused, one row per program, fp32 sum of squares",
            config=triton_rmsnorm_config,
        ),
        "cupy": Provider(
            "cupy", "cupy", cupy_rmsnorm, "CUDA C, one block per row, shuffle reduction", config=cupy_rmsnorm_config
        ),
    },
    # (32768, 8192) bf16 is 512 MiB each way: far past a 60 MB L2, so cold DRAM traffic.
    # CPU shapes keep the slowest eager provider (torch_unfused) near 20-40 ms on 1-2 cores.
    bench_shapes={"cuda": [(4096, 4096), (32768, 8192)], "cpu": [(1024, 1024), (2048, 1024)], "quick": [(1024, 1024)]},
    bench_dtypes={"cuda": ["fp32", "bf16"], "cpu": ["fp32"]},
    test_shapes=[(1, 1), (19, 19), (7, 1823)],
)


def WRONG(x, weight):
    """Negative control: normalises by the standard deviation (LayerNorm's
    statistic, centred) instead of the root mean square."""
    xf = x.float()
    var = xf.var(dim=-1, keepdim=True, unbiased=False)
    return (xf * torch.rsqrt(var + EPS) * weight.float()).to(x.dtype)
