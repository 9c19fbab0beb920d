"""``reduction``: the sum of a large 1-D vector, accumulated in fp32.

Exercises: how partial sums are combined. Every variant first sums a block of
elements per program/thread block (a tree in registers, warp shuffles, shared
memory); they differ in how those partials meet: one global ``atomic_add``
per program (contention on one address, non-deterministic order) or a second
pass over a buffer of partials (one more launch, deterministic). Pattern from
Mark Harris, "Optimizing Parallel Reduction in CUDA" (NVIDIA, 2007) and the
CUDA C++ Programming Guide's warp shuffle functions.

Shapes: ``x``: ``(n,)`` of fp32, fp16 or bf16, any stride; ``out``: a 0-d fp32
tensor (what ``torch.sum(x, dtype=torch.float32)`` returns) whatever the input
dtype: the output is the fp32 accumulator, not rounded back to 16 bits.

Inputs are ``randn + 1`` (mean 1, all magnitudes O(1)), so the sum grows like
``n`` and a relative tolerance means the same thing at every size.
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


def make_inputs(shape, dtype, device, seed=0):
    """One seeded ``(n,)`` tensor of ``dtype``: standard normal values plus 1."""
    (n,) = shape
    x = torch.randn((n,), generator=generator(seed), dtype=torch.float32) + 1.0
    return (x.to(torch_dtype(dtype)).to(device),)


def reference(x):
    """fp64 sum of the (already rounded) input values, as a 0-d tensor."""
    return x.double().sum()


def cost(shape, dtype) -> Cost:
    # One add per element (n - 1 strictly; n keeps the count independent of
    # how the tree is shaped). x is read once; the result is one fp32 scalar:
    # bytes_read = n * itemsize, bytes_written = 4.
    (n,) = shape
    return Cost(flops=n, bytes_read=n * itemsize(dtype), bytes_written=4)


def torch_sum(x):
    return torch.sum(x, dtype=torch.float32)


def _check(x):
    if x.dim() != 1:
        raise ValueError(f"reduction takes a 1-D tensor, got shape {tuple(x.shape)}")


# --- Triton -------------------------------------------------------------------


@triton.jit
def _sum_atomic_kernel(x_ptr, out_ptr, n_elements, stride_x, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid.to(tl.int64) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    x = tl.load(x_ptr + offsets * stride_x, mask=offsets < n_elements, other=0.0).to(tl.float32)
    # Order between programs does not matter for a sum: relaxed is enough.
    tl.atomic_add(out_ptr, tl.sum(x, axis=0), sem="relaxed")


@triton.jit
def _partial_sums_kernel(x_ptr, partial_ptr, n_elements, stride_x, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid.to(tl.int64) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    x = tl.load(x_ptr + offsets * stride_x, mask=offsets < n_elements, other=0.0).to(tl.float32)
    tl.store(partial_ptr + pid, tl.sum(x, axis=0))


@triton.jit
def _final_sum_kernel(partial_ptr, out_ptr, n_partials, BLOCK_SIZE: tl.constexpr):
    # One program: BLOCK_SIZE running sums over the partials, then a tree.
    acc = tl.zeros((BLOCK_SIZE,), dtype=tl.float32)
    for start in range(0, n_partials, BLOCK_SIZE):
        offs = start + tl.arange(0, BLOCK_SIZE)
        acc += tl.load(partial_ptr + offs, mask=offs < n_partials, other=0.0)
    tl.store(out_ptr, tl.sum(acc, axis=0))


TRITON_BLOCK_SIZE = 4096
TRITON_NUM_WARPS = 8
TRITON_FINAL_BLOCK_SIZE = 1024


def triton_sum_atomic(x):
    """Triton: one ``BLOCK_SIZE`` chunk per program, ``tl.atomic_add`` of its sum
    into one fp32 accumulator (``cdiv(n, BLOCK_SIZE)`` atomics on one address)."""
    _check(x)
    out = torch.zeros((), dtype=torch.float32, device=x.device)
    n = x.numel()
    grid = (triton.cdiv(n, TRITON_BLOCK_SIZE),)
    _sum_atomic_kernel[grid](x, out, n, x.stride(0), BLOCK_SIZE=TRITON_BLOCK_SIZE, num_warps=TRITON_NUM_WARPS)
    return out


def _triton_sum_tree(x, block_size: int, final_block_size: int):
    _check(x)
    n = x.numel()
    n_partials = triton.cdiv(n, block_size)
    partials = torch.empty((n_partials,), dtype=torch.float32, device=x.device)
    out = torch.empty((), dtype=torch.float32, device=x.device)
    _partial_sums_kernel[(n_partials,)](x, partials, n, x.stride(0), BLOCK_SIZE=block_size, num_warps=TRITON_NUM_WARPS)
    _final_sum_kernel[(1,)](partials, out, n_partials, BLOCK_SIZE=final_block_size, num_warps=4)
    return out


def triton_sum_tree(x):
    """Triton, two launches: per-program partial sums to a buffer, then one
    program sums the partials. Deterministic."""
    return _triton_sum_tree(x, TRITON_BLOCK_SIZE, TRITON_FINAL_BLOCK_SIZE)


def triton_atomic_config(x):
    return {"BLOCK_SIZE": TRITON_BLOCK_SIZE, "num_warps": TRITON_NUM_WARPS}


def triton_tree_config(x):
    return {"BLOCK_SIZE": TRITON_BLOCK_SIZE, "num_warps": TRITON_NUM_WARPS, "FINAL_BLOCK_SIZE": TRITON_FINAL_BLOCK_SIZE}


# --- CUDA C through CuPy ------------------------------------------------------

CUDA_SOURCE = _cupy.register_source(
    "reduction",
    (
        "sum_atomic_f32",
        "sum_atomic_f16",
        "sum_atomic_bf16",
        "sum_partials_f32",
        "sum_partials_f16",
        "sum_partials_bf16",
        "sum_final",
    ),
    r"""
#include <cuda_fp16.h>
#include <cuda_bf16.h>

__device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffff, v, o);
    return v;
}

// Block-wide sum: shuffles within each warp, warp sums through shared memory,
// then the first warp sums those. The result is valid in thread 0.
// blockDim.x must be a multiple of 32 (the launchers use 256 and 1024).
__device__ float block_sum(float v) {
    __shared__ float warp_sums[32];
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    v = warp_sum(v);
    if (lane == 0) warp_sums[warp] = v;
    __syncthreads();
    int nwarps = blockDim.x >> 5;
    v = (threadIdx.x < nwarps) ? warp_sums[threadIdx.x] : 0.0f;
    if (warp == 0) v = warp_sum(v);
    return v;
}

// Each thread sums a grid-stride slice of x in fp32 (in registers).
template <typename T>
__device__ float thread_sum(const T* __restrict__ x, long long n, long long sx) {
    float acc = 0.0f;
    long long stride = (long long)blockDim.x * gridDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) acc += (float)x[i * sx];
    return acc;
}

// Variant 1: one atomicAdd per block into the zero-initialised accumulator.
template <typename T>
__device__ void sum_atomic(const T* x, float* out, long long n, long long sx) {
    float s = block_sum(thread_sum(x, n, sx));
    if (threadIdx.x == 0) atomicAdd(out, s);
}

// Variant 2, first stage: one partial per block, no atomics.
template <typename T>
__device__ void sum_partials(const T* x, float* partials, long long n, long long sx) {
    float s = block_sum(thread_sum(x, n, sx));
    if (threadIdx.x == 0) partials[blockIdx.x] = s;
}

extern "C" __global__ void sum_atomic_f32(const float* x, float* out, long long n, long long sx) {
    sum_atomic<float>(x, out, n, sx);
}
extern "C" __global__ void sum_atomic_f16(const __half* x, float* out, long long n, long long sx) {
    sum_atomic<__half>(x, out, n, sx);
}
extern "C" __global__ void sum_atomic_bf16(const __nv_bfloat16* x, float* out, long long n, long long sx) {
    sum_atomic<__nv_bfloat16>(x, out, n, sx);
}
extern "C" __global__ void sum_partials_f32(const float* x, float* partials, long long n, long long sx) {
    sum_partials<float>(x, partials, n, sx);
}
extern "C" __global__ void sum_partials_f16(const __half* x, float* partials, long long n, long long sx) {
    sum_partials<__half>(x, partials, n, sx);
}
extern "C" __global__ void sum_partials_bf16(const __nv_bfloat16* x, float* partials, long long n, long long sx) {
    sum_partials<__nv_bfloat16>(x, partials, n, sx);
}
// Variant 2, second stage: launched with one block; writes the total.
extern "C" __global__ void sum_final(const float* partials, float* out, long long n_partials) {
    float s = block_sum(thread_sum(partials, n_partials, 1));
    if (threadIdx.x == 0) *out = s;
}
""",
)

_CUPY_SUFFIX = {torch.float32: "f32", torch.float16: "f16", torch.bfloat16: "bf16"}
#: Threads per block of the first stage; blocks are capped so that each thread
#: sums many elements in registers and the second stage is a single block.
CUDA_BLOCK = 256
CUDA_MAX_BLOCKS = 1024
CUDA_FINAL_BLOCK = 1024


def _cupy_launch_shape(x):
    _cupy.check_cuda_tensor(x)
    _check(x)
    if x.dtype not in _CUPY_SUFFIX:
        raise ValueError(f"cupy reduction supports {list(_CUPY_SUFFIX)}, got {x.dtype}")
    n = x.numel()
    return n, min(triton.cdiv(n, CUDA_BLOCK), CUDA_MAX_BLOCKS)


def cupy_sum_atomic(x):
    n, blocks = _cupy_launch_shape(x)
    out = torch.zeros((), dtype=torch.float32, device=x.device)
    fn = _cupy.kernel(CUDA_SOURCE, f"sum_atomic_{_CUPY_SUFFIX[x.dtype]}")
    _cupy.launch(fn, (blocks,), (CUDA_BLOCK,), (_cupy.ptr(x), _cupy.ptr(out), np.int64(n), np.int64(x.stride(0))))
    return out


def cupy_sum_tree(x):
    n, blocks = _cupy_launch_shape(x)
    partials = torch.empty((blocks,), dtype=torch.float32, device=x.device)
    out = torch.empty((), dtype=torch.float32, device=x.device)
    first = _cupy.kernel(CUDA_SOURCE, f"sum_partials_{_CUPY_SUFFIX[x.dtype]}")
    _cupy.launch(
        first, (blocks,), (CUDA_BLOCK,), (_cupy.ptr(x), _cupy.ptr(partials), np.int64(n), np.int64(x.stride(0)))
    )
    final = _cupy.kernel(CUDA_SOURCE, "sum_final")
    _cupy.launch(final, (1,), (CUDA_FINAL_BLOCK,), (_cupy.ptr(partials), _cupy.ptr(out), np.int64(blocks)))
    return out


def _cupy_config(x):
    n = x.numel()
    return {"BLOCK": CUDA_BLOCK, "blocks": min(triton.cdiv(n, CUDA_BLOCK), CUDA_MAX_BLOCKS)}


OP = Op(
    name="reduction",
    description="sum of a 1-D vector in fp32; combining partials (atomics vs a second pass), shuffles, shared-memory trees",
    shape_names=("n",),
    dtypes=("fp32", "fp16", "bf16"),
    make_inputs=make_inputs,
    reference=reference,
    # Every provider accumulates in fp32 and returns fp32, and the reference sums
    # the same (already rounded) inputs, so one tolerance fits all input dtypes.
    # Providers differ from the fp64 sum only by fp32 rounding in their own
    # summation order. With all terms of one sign (mean 1 here, tails aside),
    # recursive summation of k terms errs by at most (k - 1) * u relative and
    # typically ~sqrt(k) * u (Higham, "Accuracy and Stability of Numerical
    # Algorithms", 2nd ed., sec. 4.2); the longest sequential chain here is the
    # atomic one, k = n / 4096 = 65536 at n = 2**28: sqrt(k) * u ~ 1.5e-5.
    # rtol = 1e-4 leaves margin for that while a lost or doubled block (>= 3%
    # of the sum at the test sizes) or a 1% error is rejected. atol covers
    # sums that land near zero at n = 1.
    tolerances={
        "fp32": Tolerance(atol=1e-5, rtol=1e-4),
        "fp16": Tolerance(atol=1e-5, rtol=1e-4),
        "bf16": Tolerance(atol=1e-5, rtol=1e-4),
    },
    cost=cost,
    providers={
        "torch": Provider("torch", "torch", torch_sum, "torch.sum(x, dtype=torch.float32)"),
        "triton_atomic": Provider(
            "triton_atomic",
            "triton",
            triton_sum_atomic,
            "Triton, per-program tl.sum then tl.atomic_add into one accumulator",
            config=triton_atomic_config,
        ),
        "triton_tree": Provider(
            "triton_tree",
            "triton",
            triton_sum_tree,
            "Triton, per-program partials then a one-program second pass (deterministic)",
            config=triton_tree_config,
        ),
        "cupy_atomic": Provider(
            "cupy_atomic",
            "cupy",
            cupy_sum_atomic,
            "CUDA C, grid-stride + warp shuffles + shared memory, one atomicAdd per block",
            config=_cupy_config,
        ),
        "cupy_tree": Provider(
            "cupy_tree",
            "cupy",
            cupy_sum_tree,
            "CUDA C, same block reduction writing partials, then a one-block second launch",
            config=_cupy_config,
        ),
    },
    # cuda: 4 MiB (fp32) in L2, 1 GiB (2**28 fp32) far past a 60 MB L2.
    bench_shapes={"cuda": [(1 << 20,), (1 << 28,)], "cpu": [(1 << 20,), (1 << 24,)], "quick": [(1 << 20,)]},
    bench_dtypes={"cuda": ["fp32", "bf16"], "cpu": ["fp32"]},
    # 12289 = 3 * 4096 + 1: four Triton programs, the last one with a single element.
    test_shapes=[(1,), (19,), (1823,), (12289,)],
)


def WRONG(x):
    """Negative control: the classic race of a per-program ``store`` where an
    ``atomic_add`` belongs. The last program's partial sum overwrites the rest."""
    n = x.numel()
    last = (n - 1) // TRITON_BLOCK_SIZE * TRITON_BLOCK_SIZE
    return x[last:].float().sum()
