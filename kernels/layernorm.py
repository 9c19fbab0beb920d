"""``layernorm``: LayerNorm forward over the last dimension, fused in one kernel.

``out[i, j] = (x[i, j] - mean_i) * rsqrt(var_i + eps) * weight[j] + bias[j]``
with ``mean_i = sum_j x[i, j] / N`` and the *biased* variance
``var_i = sum_j (x[i, j] - mean_i)**2 / N`` (Ba et al. 2016, "Layer Normalization",
arXiv:1607.06450; ``torch.nn.LayerNorm`` semantics), ``eps = 1e-5``.

Exercises: kernel fusion plus a numerically careful row reduction. The fused
kernels read ``x`` once from DRAM and write ``out`` once, with the statistics
kept in fp32 on chip; the unfused eager sequence (mean, var, sub, mul, mul, add)
round-trips five intermediates through memory. Pattern from the Triton tutorial
``python/tutorials/05-layer-norm.py`` (forward only; mean and rstd are not saved).

Shapes: ``x``: ``(M, N)``; ``weight``, ``bias``: ``(N,)``; ``out``: ``(M, N)``
contiguous, in ``x``'s dtype (fp32 statistics inside every fused provider).
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

#: ``torch.nn.LayerNorm``'s default epsilon.
EPS = 1e-5


def make_inputs(shape, dtype, device, seed=0):
    """``x`` ~ N(2, 1) (a non-zero mean, so a kernel that skips centring or
    computes ``E[x^2] - E[x]^2`` in low precision is caught), ``weight`` ~ N(1, 0.1^2),
    ``bias`` ~ N(0, 0.1^2); generated in fp32 on the CPU, cast, then moved."""
    M, N = shape
    td = torch_dtype(dtype)
    x = torch.randn((M, N), generator=generator(seed)) + 2.0
    w = 1.0 + 0.1 * torch.randn((N,), generator=generator(seed + 1))
    b = 0.1 * torch.randn((N,), generator=generator(seed + 2))
    return tuple(t.to(td).to(device) for t in (x, w, b))


def reference(x, weight, bias):
    """fp64 ``torch.nn.functional.layer_norm`` on the (already rounded) inputs."""
    return torch.nn.functional.layer_norm(x.double(), (x.shape[-1],), weight.double(), bias.double(), EPS)


def cost(shape, dtype) -> Cost:
    # Per element: 1 add for the mean; 1 sub + 1 FMA (2) for the variance;
    # sub, mul by rstd, FMA (2) with weight and bias for the output: 8 FLOPs.
    # The O(M) per-row divisions and rsqrt are ignored. Compulsory traffic:
    # x read once (M * N), weight and bias read once (2 * N), out written once (M * N),
    # all in the input dtype; mean and rstd stay on chip (forward-only, not saved).
    M, N = shape
    s = itemsize(dtype)
    return Cost(flops=8 * M * N, bytes_read=(M * N + 2 * N) * s, bytes_written=M * N * s)


def torch_layernorm(x, weight, bias):
    return torch.nn.functional.layer_norm(x, (x.shape[-1],), weight, bias, EPS)


def torch_unfused_layernorm(x, weight, bias):
    """The unfused eager sequence in the input dtype: mean, var, sub, mul (by rstd),
    mul (weight), add (bias); each a separate kernel with its result through memory."""
    mean = x.mean(dim=-1, keepdim=True)
    var = x.var(dim=-1, keepdim=True, unbiased=False)
    return (x - mean) * torch.rsqrt(var + EPS) * weight + bias


@triton.jit
def _layernorm_kernel(
    x_ptr,
    w_ptr,
    b_ptr,
    out_ptr,
    N,
    stride_xm,
    stride_xn,
    stride_w,
    stride_b,
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
        # The whole row sits in registers: exact two-pass statistics for free,
        # x is read from DRAM once.
        mask = cols < N
        x = tl.load(x_row + cols * stride_xn, mask=mask, other=0.0).to(tl.float32)
        mean = tl.sum(x, axis=0) / N
        xc = tl.where(mask, x - mean, 0.0)
        var = tl.sum(xc * xc, axis=0) / N
        rstd = tl.rsqrt(var + eps)
        w = tl.load(w_ptr + cols * stride_w, mask=mask, other=0.0).to(tl.float32)
        b = tl.load(b_ptr + cols * stride_b, mask=mask, other=0.0).to(tl.float32)
        tl.store(out_row + cols, (xc * rstd * w + b).to(out_ptr.dtype.element_ty), mask=mask)
    else:
        # Rows wider than a register tile: per-chunk (count, mean, M2) merged with
        # Chan, Golub & LeVeque's pairwise update (the parallel form of Welford),
        # which avoids the cancellation of sum(x^2) - sum(x)^2 / N.
        count = 0.0
        mean = 0.0
        m2 = 0.0
        for c in range(NUM_CHUNKS):
            offs = c * BLOCK_SIZE + cols
            mask = offs < N
            x = tl.load(x_row + offs * stride_xn, mask=mask, other=0.0).to(tl.float32)
            n_b = tl.minimum(N - c * BLOCK_SIZE, BLOCK_SIZE).to(tl.float32)
            mean_b = tl.sum(x, axis=0) / n_b
            d = tl.where(mask, x - mean_b, 0.0)
            m2_b = tl.sum(d * d, axis=0)
            n_ab = count + n_b
            delta = mean_b - mean
            mean = mean + delta * (n_b / n_ab)
            m2 = m2 + m2_b + delta * delta * (count * n_b / n_ab)
            count = n_ab
        rstd = tl.rsqrt(m2 / N + eps)
        # Second sweep re-reads the row; it was just read by this program, so
        # mostly from L2 rather than DRAM.
        for c in range(NUM_CHUNKS):
            offs = c * BLOCK_SIZE + cols
            mask = offs < N
            x = tl.load(x_row + offs * stride_xn, mask=mask, other=0.0).to(tl.float32)
            w = tl.load(w_ptr + offs * stride_w, mask=mask, other=0.0).to(tl.float32)
            b = tl.load(b_ptr + offs * stride_b, mask=mask, other=0.0).to(tl.float32)
            tl.store(out_row + offs, ((x - mean) * rstd * w + b).to(out_ptr.dtype.element_ty), mask=mask)


#: Widest row kept whole in registers (fp32 values per program); wider rows loop.
MAX_BLOCK_SIZE = 8192


def _triton_launch_config(N: int, block_size: int | None = None) -> dict:
    BLOCK_SIZE = block_size or min(triton.next_power_of_2(N), MAX_BLOCK_SIZE)
    num_warps = 4 if BLOCK_SIZE < 2048 else (8 if BLOCK_SIZE < 4096 else 16)
    return {"BLOCK_SIZE": BLOCK_SIZE, "NUM_CHUNKS": triton.cdiv(N, BLOCK_SIZE), "num_warps": num_warps}


def triton_layernorm(x, weight, bias, block_size: int | None = None):
    """Fused Triton LayerNorm, one program per row; strided inputs read in place.

    ``block_size`` (a power of two) overrides the tile width; a value below ``N``
    forces the chunked path (used by the tests). Raises ``ValueError`` for
    mismatched shapes.
    """
    if x.dim() != 2 or weight.shape != (x.shape[1],) or bias.shape != (x.shape[1],):
        raise ValueError(
            f"layernorm expects x (M, N), weight (N,), bias (N,); got {tuple(x.shape)}, "
            f"{tuple(weight.shape)}, {tuple(bias.shape)}"
        )
    M, N = x.shape
    out = torch.empty((M, N), dtype=x.dtype, device=x.device)
    cfg = _triton_launch_config(N, block_size)
    _layernorm_kernel[(M,)](
        x,
        weight,
        bias,
        out,
        N,
        x.stride(0),
        x.stride(1),
        weight.stride(0),
        bias.stride(0),
        out.stride(0),
        EPS,
        BLOCK_SIZE=cfg["BLOCK_SIZE"],
        NUM_CHUNKS=cfg["NUM_CHUNKS"],
        num_warps=cfg["num_warps"],
    )
    return out


def triton_layernorm_config(x, weight, bias):
    return _triton_launch_config(x.shape[-1])


CUDA_SOURCE = _cupy.register_source(
    "layernorm",
    ("layernorm_f32", "layernorm_f16", "layernorm_bf16"),
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
    __syncthreads();  // a previous call may still be reading partial
    if (lane == 0) partial[warp] = v;
    __syncthreads();
    v = (lane < (int)(blockDim.x >> 5)) ? partial[lane] : 0.0f;
    return warp_sum(v);
}
// One block per row. Statistics use shifted data (shift = the row's first
// element): sum(d) and sum(d^2) with d = x - shift in fp32, in one read of the
// row. Shifting by a value near the mean removes the catastrophic cancellation
// of the textbook E[x^2] - E[x]^2 (Chan, Golub & LeVeque 1983, "Algorithms for
// computing the sample variance"). The second loop re-reads the row (L2 hits).
template <typename T>
__device__ void layernorm_row(const T* __restrict__ x, const T* __restrict__ w, const T* __restrict__ b,
                              T* __restrict__ out, long long n, long long sxm, long long sxn,
                              long long sw, long long sb, float eps) {
    const T* xr = x + (long long)blockIdx.x * sxm;
    T* orow = out + (long long)blockIdx.x * n;
    const float shift = (float)xr[0];
    float s1 = 0.0f, s2 = 0.0f;
    for (long long j = threadIdx.x; j < n; j += blockDim.x) {
        float d = (float)xr[j * sxn] - shift;
        s1 += d;
        s2 += d * d;
    }
    s1 = block_sum(s1);
    s2 = block_sum(s2);
    const float inv_n = 1.0f / (float)n;
    const float dmean = s1 * inv_n;
    const float var = fmaxf(s2 * inv_n - dmean * dmean, 0.0f);
    const float mean = shift + dmean;
    const float rstd = rsqrtf(var + eps);
    for (long long j = threadIdx.x; j < n; j += blockDim.x) {
        float y = ((float)xr[j * sxn] - mean) * rstd * (float)w[j * sw] + (float)b[j * sb];
        orow[j] = (T)y;
    }
}
extern "C" __global__ void layernorm_f32(const float* x, const float* w, const float* b, float* out, long long n,
                                         long long sxm, long long sxn, long long sw, long long sb, float eps) {
    layernorm_row<float>(x, w, b, out, n, sxm, sxn, sw, sb, eps);
}
extern "C" __global__ void layernorm_f16(const __half* x, const __half* w, const __half* b, __half* out, long long n,
                                         long long sxm, long long sxn, long long sw, long long sb, float eps) {
    layernorm_row<__half>(x, w, b, out, n, sxm, sxn, sw, sb, eps);
}
extern "C" __global__ void layernorm_bf16(const __nv_bfloat16* x, const __nv_bfloat16* w, const __nv_bfloat16* b,
                                          __nv_bfloat16* out, long long n, long long sxm, long long sxn,
                                          long long sw, long long sb, float eps) {
    layernorm_row<__nv_bfloat16>(x, w, b, out, n, sxm, sxn, sw, sb, eps);
}
""",
)

_CUPY_NAMES = {torch.float32: "layernorm_f32", torch.float16: "layernorm_f16", torch.bfloat16: "layernorm_bf16"}


def _cupy_block(N: int) -> int:
    # About 8 elements per thread, 32..1024 threads (a whole number of warps).
    return int(min(1024, max(32, triton.next_power_of_2(triton.cdiv(N, 8)))))


def cupy_layernorm(x, weight, bias):
    _cupy.check_cuda_tensor(x, weight, bias)
    if x.dtype not in _CUPY_NAMES or weight.dtype != x.dtype or bias.dtype != x.dtype:
        raise ValueError(f"cupy layernorm supports one dtype of {list(_CUPY_NAMES)} for x, weight and bias")
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
            _cupy.ptr(bias),
            _cupy.ptr(out),
            np.int64(N),
            np.int64(x.stride(0)),
            np.int64(x.stride(1)),
            np.int64(weight.stride(0)),
            np.int64(bias.stride(0)),
            np.float32(EPS),
        ),
    )
    return out


def cupy_layernorm_config(x, weight, bias):
    return {"block": _cupy_block(x.shape[-1])}


OP = Op(
    name="layernorm",
    description="LayerNorm forward; fusion of a numerically careful row reduction (one DRAM round trip) vs the eager sequence",
    shape_names=("M", "N"),
    dtypes=("fp32", "fp16", "bf16"),
    make_inputs=make_inputs,
    reference=reference,
    # Outputs are O(1) (|out| < ~5). Fused providers: fp32 statistics, one rounding
    # of the output. The eager sequence rounds mean, x - mean and rstd in the input
    # dtype, a few ulps at |x| ~ 2; tolerances cover that with ~2x margin and still
    # reject a biased/unbiased variance mix-up in fp32 (relative error 1/(2N)).
    tolerances={
        "fp32": Tolerance(atol=1e-5, rtol=1e-5),
        "fp16": Tolerance(atol=4e-3, rtol=4e-3),
        "bf16": Tolerance(atol=3e-2, rtol=1.6e-2),
    },
    cost=cost,
    providers={
        "torch": Provider("torch", "torch", torch_layernorm, "torch.nn.functional.layer_norm (one fused ATen kernel)"),
        "torch_unfused": Provider(
            "torch_unfused",
            "torch",
            torch_unfused_layernorm,
            "mean, var, sub, mul, mul, add as six eager ops in the input dtype",
        ),
        "triton": Provider(
            "triton",
            "triton",
            triton_layernorm,
            "Triton fused, one row per program, fp32 statistics",
            config=triton_layernorm_config,
        ),
        "cupy": Provider(
            "cupy",
            "cupy",
            cupy_layernorm,
            "CUDA C, one block per row, shifted-data sums, shuffle reductions",
            config=cupy_layernorm_config,
        ),
    },
    # (32768, 8192) bf16 is 512 MiB each way: far past a 60 MB L2, so cold DRAM traffic.
    # CPU shapes keep the slowest eager provider (torch_unfused) near 20-40 ms on 1-2 cores.
    bench_shapes={"cuda": [(4096, 4096), (32768, 8192)], "cpu": [(256, 1024), (1024, 1024)], "quick": [(1024, 1024)]},
    bench_dtypes={"cuda": ["fp32", "bf16"], "cpu": ["fp32"]},
    test_shapes=[(1, 1), (19, 19), (7, 1823)],
)


def WRONG(x, weight, bias):
    """Negative control: uses the unbiased (N - 1) variance, ``torch.var``'s
    default, instead of LayerNorm's biased one: right to about 1/(2N) relative."""
    xf = x.float()
    mean = xf.mean(dim=-1, keepdim=True)
    var = xf.var(dim=-1, keepdim=True)
    return ((xf - mean) * torch.rsqrt(var + EPS) * weight.float() + bias.float()).to(x.dtype)
