"""``bias_gelu``: ``out = gelu(x + bias)``, the elementwise epilogue fusion.

Exercises: fusing two memory-bound ops. Eager PyTorch runs the bias add and
the GELU as two kernels, so the ``(M, N)`` intermediate makes a round trip
through DRAM (written once, read once); a fused kernel reads ``x`` and ``bias``
once and writes ``out`` once, about 2x less traffic.

GELU is the exact (erf) form, ``gelu(z) = 0.5 * z * (1 + erf(z / sqrt(2)))``
(Hendrycks and Gimpel, "Gaussian Error Linear Units", arXiv:1606.08415), as
``torch.nn.functional.gelu`` computes by default (``approximate="none"``);
every provider uses it, never the tanh approximation.

Shapes: ``x``: ``(M, N)``, ``bias``: ``(N,)``, both in the same dtype and any
strides; ``out``: ``(M, N)`` contiguous, in the input dtype. Arithmetic is fp32
inside the fused kernels.
"""

from __future__ import annotations

import math

import numpy as np
import torch
import triton
import triton.language as tl

from kernels import (
    _backends,  # noqa: F401  (sets TRITON_INTERPRET before triton is imported)
    _cupy,
)
from kernels._base import Cost, Op, Provider, Tolerance, itemsize, randn

#: FLOPs per output element: add bias, scale by 1/sqrt(2), erf, add 1, halve,
#: multiply; erf counted as one operation (the convention softmax uses for exp).
FLOPS_PER_ELEMENT = 6


def make_inputs(shape, dtype, device, seed=0):
    """Seeded ``x`` (``(M, N)``, standard normal) and ``bias`` (``(N,)``, scale 0.5)."""
    M, N = shape
    return randn((M, N), dtype, device, seed), randn((N,), dtype, device, seed + 1, scale=0.5)


def reference(x, bias):
    """Exact GELU of ``x + bias`` in fp64."""
    z = x.double() + bias.double()
    return 0.5 * z * (1.0 + torch.erf(z * (1.0 / math.sqrt(2.0))))


def cost(shape, dtype) -> Cost:
    # Fused kernel: x (M*N) and bias (N) read once, out (M*N) written once;
    # flops = FLOPS_PER_ELEMENT * M * N. The unfused eager providers move
    # 2 * M * N more elements (the intermediate); the cost stays the fused
    # compulsory traffic, so their lower gbps shows what fusion saves.
    M, N = shape
    s = itemsize(dtype)
    return Cost(flops=FLOPS_PER_ELEMENT * M * N, bytes_read=(M * N + N) * s, bytes_written=M * N * s)


def torch_unfused_bias_gelu(x, bias):
    """Two eager kernels: ``x + bias`` into a new tensor, then ``F.gelu`` into another."""
    return torch.nn.functional.gelu(x + bias)


def torch_bias_gelu(x, bias):
    """The eager baseline: the same two kernels, the GELU applied in place on the
    intermediate (``aten.gelu_``), so one ``(M, N)`` buffer instead of two.
    Eager PyTorch has no fused bias + GELU for a plain tensor."""
    out = torch.add(x, bias)
    torch.ops.aten.gelu_(out)
    return out


# --- Triton -------------------------------------------------------------------


@triton.jit
def _bias_gelu_kernel(
    x_ptr, bias_ptr, out_ptr, N, stride_xm, stride_xn, stride_b, stride_om, BLOCK_SIZE_N: tl.constexpr
):
    row = tl.program_id(axis=0).to(tl.int64)
    cols = tl.program_id(axis=1) * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)
    mask = cols < N
    # Up-cast before any arithmetic: fp32 math, one rounding on store (and the
    # interpreter's bf16 arithmetic is wrong without it).
    x = tl.load(x_ptr + row * stride_xm + cols * stride_xn, mask=mask, other=0.0).to(tl.float32)
    b = tl.load(bias_ptr + cols * stride_b, mask=mask, other=0.0).to(tl.float32)
    z = x + b
    y = 0.5 * z * (1.0 + tl.math.erf(z * 0.7071067811865476))
    tl.store(out_ptr + row * stride_om + cols, y.to(out_ptr.dtype.element_ty), mask=mask)


TRITON_BLOCK_SIZE_N = 1024
TRITON_NUM_WARPS = 4
_MAX_GRID_Y = 65535  # CUDA limit on the second grid dimension


def _check(x, bias):
    if x.dim() != 2 or bias.dim() != 1 or bias.shape[0] != x.shape[1]:
        raise ValueError(f"bias_gelu takes x (M, N) and bias (N,), got {tuple(x.shape)} and {tuple(bias.shape)}")
    if x.dtype != bias.dtype:
        raise TypeError(f"bias_gelu: x is {x.dtype} but bias is {bias.dtype}")
    M, N = x.shape
    return M, N, torch.empty((M, N), dtype=x.dtype, device=x.device)


def triton_bias_gelu(x, bias):
    """Triton, fused: one program per (row, BLOCK_SIZE_N columns)."""
    M, N, out = _check(x, bias)
    grid = (M, triton.cdiv(N, TRITON_BLOCK_SIZE_N))
    if grid[1] > _MAX_GRID_Y:
        raise ValueError(f"triton bias_gelu: N={N} needs {grid[1]} programs along axis 1, over {_MAX_GRID_Y}")
    _bias_gelu_kernel[grid](
        x,
        bias,
        out,
        N,
        x.stride(0),
        x.stride(1),
        bias.stride(0),
        out.stride(0),
        BLOCK_SIZE_N=TRITON_BLOCK_SIZE_N,
        num_warps=TRITON_NUM_WARPS,
    )
    return out


def triton_config(x, bias):
    return {"BLOCK_SIZE_N": TRITON_BLOCK_SIZE_N, "num_warps": TRITON_NUM_WARPS}


# --- CUDA C through CuPy ------------------------------------------------------

CUDA_SOURCE = _cupy.register_source(
    "bias_gelu",
    ("bias_gelu_f32", "bias_gelu_f16", "bias_gelu_bf16"),
    r"""
#include <cuda_fp16.h>
#include <cuda_bf16.h>
// Fused bias + exact GELU. threadIdx.x runs along N (coalesced); each thread
// loads its bias element once into a register and walks rows with a stride of
// gridDim.y, so bias is read once per thread rather than once per element.
template <typename T>
__device__ void bias_gelu(const T* __restrict__ x, const T* __restrict__ bias, T* __restrict__ out,
                          long long M, long long N, long long sxm, long long sxn, long long sb) {
    long long col = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (col >= N) return;
    float b = (float)bias[col * sb];
    for (long long row = blockIdx.y; row < M; row += gridDim.y) {
        float z = (float)x[row * sxm + col * sxn] + b;
        out[row * N + col] = (T)(0.5f * z * (1.0f + erff(z * 0.70710678118654752f)));
    }
}
extern "C" __global__ void bias_gelu_f32(const float* x, const float* bias, float* out, long long M, long long N,
                                         long long sxm, long long sxn, long long sb) {
    bias_gelu<float>(x, bias, out, M, N, sxm, sxn, sb);
}
extern "C" __global__ void bias_gelu_f16(const __half* x, const __half* bias, __half* out, long long M, long long N,
                                         long long sxm, long long sxn, long long sb) {
    bias_gelu<__half>(x, bias, out, M, N, sxm, sxn, sb);
}
extern "C" __global__ void bias_gelu_bf16(const __nv_bfloat16* x, const __nv_bfloat16* bias, __nv_bfloat16* out,
                                          long long M, long long N, long long sxm, long long sxn, long long sb) {
    bias_gelu<__nv_bfloat16>(x, bias, out, M, N, sxm, sxn, sb);
}
""",
)

_CUPY_SUFFIX = {torch.float32: "f32", torch.float16: "f16", torch.bfloat16: "bf16"}
CUDA_BLOCK = 256


def cupy_bias_gelu(x, bias):
    _cupy.check_cuda_tensor(x, bias)
    M, N, out = _check(x, bias)
    if x.dtype not in _CUPY_SUFFIX:
        raise ValueError(f"cupy bias_gelu supports {list(_CUPY_SUFFIX)}, got {x.dtype}")
    grid = (triton.cdiv(N, CUDA_BLOCK), min(M, _MAX_GRID_Y))
    fn = _cupy.kernel(CUDA_SOURCE, f"bias_gelu_{_CUPY_SUFFIX[x.dtype]}")
    _cupy.launch(
        fn,
        grid,
        (CUDA_BLOCK,),
        (
            _cupy.ptr(x),
            _cupy.ptr(bias),
            _cupy.ptr(out),
            np.int64(M),
            np.int64(N),
            np.int64(x.stride(0)),
            np.int64(x.stride(1)),
            np.int64(bias.stride(0)),
        ),
    )
    return out


def cupy_config(x, bias):
    return {"BLOCK": CUDA_BLOCK, "grid_y": min(x.shape[0], _MAX_GRID_Y)}


OP = Op(
    name="bias_gelu",
    description="out = gelu(x + bias), exact erf GELU; elementwise epilogue fusion vs two eager kernels",
    shape_names=("M", "N"),
    dtypes=("fp32", "fp16", "bf16"),
    make_inputs=make_inputs,
    reference=reference,
    # Fused providers round once (the output); the eager ones also round the
    # intermediate x + bias to the input dtype, whose error passes through
    # gelu' (at most ~1.13). |out| < ~5 here: tolerances are the output dtype's
    # half-ulp (fp16 2**-11, bf16 2**-8) with room for that second rounding.
    # fp32: PyTorch's vectorised CPU GELU errs by up to 1.16e-6 absolute (measured
    # on a dense grid over [-6, 6] against fp64), libdevice erff by 2 ulp; the
    # tanh approximation (WRONG) is off by up to 4.7e-4.
    tolerances={
        "fp32": Tolerance(atol=3e-6, rtol=1e-5),
        "fp16": Tolerance(atol=2e-3, rtol=2e-3),
        "bf16": Tolerance(atol=1.6e-2, rtol=1.6e-2),
    },
    cost=cost,
    providers={
        "torch": Provider("torch", "torch", torch_bias_gelu, "eager torch.add then in-place aten.gelu_ (two kernels)"),
        "torch_unfused": Provider(
            "torch_unfused",
            "torch",
            torch_unfused_bias_gelu,
            "eager x + bias then F.gelu (two kernels, two (M, N) buffers)",
        ),
        "triton": Provider(
            "triton",
            "triton",
            triton_bias_gelu,
            "Triton, fused bias + erf GELU, one DRAM round trip",
            config=triton_config,
        ),
        "cupy": Provider(
            "cupy",
            "cupy",
            cupy_bias_gelu,
            "CUDA C, fused bias + erff GELU, bias held in a register",
            config=cupy_config,
        ),
    },
    # cuda: 32 MiB (fp32 4096^2) near the 60 MB L2; 512 MiB (fp32 16384x8192) far past it.
    bench_shapes={"cuda": [(4096, 4096), (16384, 8192)], "cpu": [(1024, 1024), (2048, 2048)], "quick": [(1024, 1024)]},
    bench_dtypes={"cuda": ["fp32", "bf16"], "cpu": ["fp32"]},
    test_shapes=[(1, 1), (19, 19), (19, 1823)],
)


def WRONG(x, bias):
    """Negative control: the tanh approximation of GELU where the exact erf
    form is specified (a silent convention mix-up, off by up to ~5e-4)."""
    return torch.nn.functional.gelu(x.float() + bias.float(), approximate="tanh").to(x.dtype)
