"""``histogram``: int32 counts of values in ``bins`` equal bins over ``[0, 1)``.

Exercises: atomic contention and privatisation. Every value increments one
counter; with global atomics all threads fight over ``bins`` addresses, while
private per-block (CUDA shared memory) or per-program (``tl.histogram``)
histograms absorb the increments on chip and touch global memory ``bins`` times
per block. Pattern from Kirk and Hwu, "Programming Massively Parallel
Processors" (4th ed., ch. 9: parallel histogram, privatisation) and the CUDA
samples' ``histogram256``.

Definition (the same in every provider and in the reference): a value ``v``,
up-cast to fp32, is counted when ``0 <= v < 1``, in bin
``min(floor(fp32(v * bins)), bins - 1)`` where ``fp32(v * bins)`` is the
round-to-nearest fp32 product. Values outside ``[0, 1)``, infinities and NaN
are not counted; ``-0.0`` counts in bin 0. Computing the bin from one correctly
rounded fp32 product (rather than from a bin-edge table or a division) makes
values on or next to a bin edge land in the same bin in every implementation;
the ``min`` never fires for ``v < 1`` (``bins * (1 - 2**-24)`` is more than half an
fp32 ulp below ``bins``) but keeps a stray index in bounds. Other ranges map
affinely onto ``[0, 1)`` before the call.

Shapes: the op's shape is ``(n, bins)``; inputs are ``x``: ``(n,)`` of fp32,
fp16 or bf16, any stride, and ``bins`` as a Python int (``1 <= bins < 2**24``,
so that ``float(bins)`` is exact); ``out``: ``(bins,)`` int32 counts.
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

#: Values that exercise the definition's edges: signed zero, non-finite values,
#: the largest fp32 below 1 (last bin) and the smallest subnormal (bin 0).
SPECIAL_VALUES = (
    -0.0,
    float("nan"),
    float("inf"),
    float("-inf"),
    float(np.nextafter(np.float32(1), np.float32(0))),
    float(np.float32(1e-45)),
    1.0,
    0.0,
)
MAX_BINS = 2**24 - 1


def _check_bins(bins) -> int:
    if not isinstance(bins, int) or isinstance(bins, bool) or not 1 <= bins <= MAX_BINS:
        raise ValueError(f"histogram: bins must be an int in [1, {MAX_BINS}], got {bins!r}")
    return bins


def _check(x, bins) -> int:
    if not isinstance(x, torch.Tensor) or x.dim() != 1:
        raise ValueError(f"histogram takes a 1-D tensor of values, got {getattr(x, 'shape', type(x).__name__)}")
    return _check_bins(bins)


def make_inputs(shape, dtype, device, seed=0):
    """Seeded values and the bin count: ``(x, bins)``.

    ``x`` is uniform on ``[-0.125, 1.125)`` (so about a fifth of the values fall
    outside the range and must be ignored), with every 8th value replaced by a
    bin edge ``k / bins`` (``k = 0 .. bins``, 1.0 included) and every 97th by
    one of :data:`SPECIAL_VALUES`, then cast to ``dtype``.
    """
    n, bins = shape
    _check_bins(bins)
    x = torch.rand((n,), generator=generator(seed), dtype=torch.float32) * 1.25 - 0.125
    i = torch.arange(n)
    edges = (i // 8 % (bins + 1)).to(torch.float32) / bins
    x = torch.where(i % 8 == 3, edges, x)
    specials = torch.tensor(SPECIAL_VALUES, dtype=torch.float32)[i // 97 % len(SPECIAL_VALUES)]
    x = torch.where(i % 97 == 7, specials, x)
    return x.to(torch_dtype(dtype)).to(device), bins


def reference(x, bins):
    """Counts by the module's definition with a boolean mask and ``torch.bincount`` (int64)."""
    v = x.float()
    v = v[(v >= 0) & (v < 1)]
    idx = torch.clamp((v * bins).floor(), max=bins - 1).long()
    return torch.bincount(idx, minlength=bins)


def cost(shape, dtype) -> Cost:
    # One fp32 multiply per value to find its bin (comparisons and integer
    # increments are not floating-point operations): flops = n. x is read once,
    # the counts are written once: bytes_read = n * itemsize, bytes_written = 4 * bins.
    n, bins = shape
    return Cost(flops=n, bytes_read=n * itemsize(dtype), bytes_written=4 * bins)


def torch_histogram(x, bins):
    """Eager PyTorch: bin indices (invalid values sent to a spare bin ``bins``,
    so no data-dependent compaction), then ``scatter_add_`` of ones."""
    _check(x, bins)
    v = x.float()
    valid = (v >= 0) & (v < 1)
    idx = torch.where(valid, torch.clamp((v * bins).floor(), max=bins - 1), float(bins)).long()
    counts = torch.zeros((bins + 1,), dtype=torch.int32, device=x.device)
    counts.scatter_add_(0, idx, torch.ones((1,), dtype=torch.int32, device=x.device).expand(idx.numel()))
    return counts[:bins]


# --- Triton -------------------------------------------------------------------


@triton.jit
def _bin_index(x_ptr, offsets, n_elements, stride_x, bins):
    in_bounds = offsets < n_elements
    v = tl.load(x_ptr + offsets * stride_x, mask=in_bounds, other=-1.0).to(tl.float32)
    valid = in_bounds & (v >= 0.0) & (v < 1.0)
    # Invalid lanes get v = 0 (bin 0) before the int cast so NaN/inf never
    # reach it; they are masked out of every update.
    v = tl.where(valid, v, 0.0)
    idx = tl.minimum((v * bins).to(tl.int32), bins - 1)
    return idx, valid


@triton.jit
def _histogram_atomic_kernel(x_ptr, hist_ptr, n_elements, stride_x, bins, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid.to(tl.int64) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    idx, valid = _bin_index(x_ptr, offsets, n_elements, stride_x, bins)
    tl.atomic_add(hist_ptr + idx, 1, mask=valid, sem="relaxed")


@triton.jit
def _histogram_private_kernel(
    x_ptr, hist_ptr, n_elements, stride_x, bins, BLOCK_SIZE: tl.constexpr, BINS_PAD: tl.constexpr
):
    # Grid-stride over BLOCK_SIZE chunks, counting into a program-private
    # histogram (tl.histogram: warp ballots + shared memory on GPU); one atomic
    # per non-empty bin merges it at the end.
    pid = tl.program_id(axis=0)
    local = tl.zeros((BINS_PAD,), dtype=tl.int32)
    for start in range(pid * BLOCK_SIZE, n_elements, tl.num_programs(axis=0) * BLOCK_SIZE):
        offsets = tl.arange(0, BLOCK_SIZE).to(tl.int64) + start
        idx, valid = _bin_index(x_ptr, offsets, n_elements, stride_x, bins)
        local += tl.histogram(idx, BINS_PAD, mask=valid)
    bin_offsets = tl.arange(0, BINS_PAD)
    tl.atomic_add(hist_ptr + bin_offsets, local, mask=(bin_offsets < bins) & (local > 0), sem="relaxed")


TRITON_BLOCK_SIZE = 1024
TRITON_NUM_WARPS = 4
TRITON_MAX_PROGRAMS = 1024
#: tl.histogram keeps BINS_PAD counters per program in registers and shared memory.
TRITON_PRIVATE_MAX_BINS = 4096


def triton_histogram_atomic(x, bins):
    """Triton: one global ``tl.atomic_add`` per counted value."""
    bins = _check(x, bins)
    hist = torch.zeros((bins,), dtype=torch.int32, device=x.device)
    n = x.numel()
    grid = (triton.cdiv(n, TRITON_BLOCK_SIZE),)
    _histogram_atomic_kernel[grid](
        x, hist, n, x.stride(0), bins, BLOCK_SIZE=TRITON_BLOCK_SIZE, num_warps=TRITON_NUM_WARPS
    )
    return hist


def _triton_histogram_private(x, bins, max_programs: int):
    bins = _check(x, bins)
    if bins > TRITON_PRIVATE_MAX_BINS:
        raise ValueError(f"triton_private histogram supports bins <= {TRITON_PRIVATE_MAX_BINS}, got {bins}")
    hist = torch.zeros((bins,), dtype=torch.int32, device=x.device)
    n = x.numel()
    grid = (min(triton.cdiv(n, TRITON_BLOCK_SIZE), max_programs),)
    _histogram_private_kernel[grid](
        x,
        hist,
        n,
        x.stride(0),
        bins,
        BLOCK_SIZE=TRITON_BLOCK_SIZE,
        BINS_PAD=max(32, triton.next_power_of_2(bins)),
        num_warps=TRITON_NUM_WARPS,
    )
    return hist


def triton_histogram_private(x, bins):
    """Triton: per-program private histograms over a grid-stride loop, merged
    with one atomic per bin per program. ``bins <= 4096``."""
    return _triton_histogram_private(x, bins, TRITON_MAX_PROGRAMS)


def triton_atomic_config(x, bins):
    return {"BLOCK_SIZE": TRITON_BLOCK_SIZE, "num_warps": TRITON_NUM_WARPS}


def triton_private_config(x, bins):
    return {
        "BLOCK_SIZE": TRITON_BLOCK_SIZE,
        "num_warps": TRITON_NUM_WARPS,
        "BINS_PAD": max(32, triton.next_power_of_2(bins)),
        "programs": min(triton.cdiv(x.numel(), TRITON_BLOCK_SIZE), TRITON_MAX_PROGRAMS),
    }


# --- CUDA C through CuPy ------------------------------------------------------

CUDA_SOURCE = _cupy.register_source(
    "histogram",
    (
        "histogram_atomic_f32",
        "histogram_atomic_f16",
        "histogram_atomic_bf16",
        "histogram_private_f32",
        "histogram_private_f16",
        "histogram_private_bf16",
    ),
    r"""
#include <cuda_fp16.h>
#include <cuda_bf16.h>

// The module's bin definition: counted when 0 <= v < 1 (false for NaN), bin
// floor of the round-to-nearest fp32 product (v >= 0, so truncation is floor).
__device__ __forceinline__ bool bin_of(float v, int bins, int* bin) {
    if (!(v >= 0.0f && v < 1.0f)) return false;
    int b = (int)__fmul_rn(v, (float)bins);
    *bin = b < bins ? b : bins - 1;
    return true;
}

// Variant 1: one global atomicAdd per counted value.
template <typename T>
__device__ void histogram_atomic(const T* __restrict__ x, int* hist, long long n, long long sx, int bins) {
    long long stride = (long long)blockDim.x * gridDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        int b;
        if (bin_of((float)x[i * sx], bins, &b)) atomicAdd(&hist[b], 1);
    }
}

// Variant 2: a private histogram per block in shared memory (bins ints of
// dynamic shared memory), shared-memory atomics in the loop, then one global
// atomicAdd per non-empty bin per block.
template <typename T>
__device__ void histogram_private(const T* __restrict__ x, int* hist, long long n, long long sx, int bins) {
    extern __shared__ int local[];
    for (int b = threadIdx.x; b < bins; b += blockDim.x) local[b] = 0;
    __syncthreads();
    long long stride = (long long)blockDim.x * gridDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        int b;
        if (bin_of((float)x[i * sx], bins, &b)) atomicAdd(&local[b], 1);
    }
    __syncthreads();
    for (int b = threadIdx.x; b < bins; b += blockDim.x) {
        int c = local[b];
        if (c) atomicAdd(&hist[b], c);
    }
}

#define ENTRY(name, body, T)                                                                  \
    extern "C" __global__ void name(const T* x, int* hist, long long n, long long sx, int bins) { \
        body<T>(x, hist, n, sx, bins);                                                         \
    }
ENTRY(histogram_atomic_f32, histogram_atomic, float)
ENTRY(histogram_atomic_f16, histogram_atomic, __half)
ENTRY(histogram_atomic_bf16, histogram_atomic, __nv_bfloat16)
ENTRY(histogram_private_f32, histogram_private, float)
ENTRY(histogram_private_f16, histogram_private, __half)
ENTRY(histogram_private_bf16, histogram_private, __nv_bfloat16)
""",
)

_CUPY_SUFFIX = {torch.float32: "f32", torch.float16: "f16", torch.bfloat16: "bf16"}
CUDA_BLOCK = 256
CUDA_MAX_BLOCKS = 1024
#: Dynamic shared memory available without opting in to more: 48 KiB.
CUDA_PRIVATE_MAX_BINS = 48 * 1024 // 4


def _cupy_histogram(x, bins, variant):
    _cupy.check_cuda_tensor(x)
    bins = _check(x, bins)
    if x.dtype not in _CUPY_SUFFIX:
        raise ValueError(f"cupy histogram supports {list(_CUPY_SUFFIX)}, got {x.dtype}")
    shared = 0
    if variant == "private":
        if bins > CUDA_PRIVATE_MAX_BINS:
            raise ValueError(
                f"cupy_private histogram keeps bins in 48 KiB of shared memory: bins <= {CUDA_PRIVATE_MAX_BINS}, got {bins}"
            )
        shared = 4 * bins
    hist = torch.zeros((bins,), dtype=torch.int32, device=x.device)
    n = x.numel()
    blocks = min(triton.cdiv(n, CUDA_BLOCK), CUDA_MAX_BLOCKS)
    fn = _cupy.kernel(CUDA_SOURCE, f"histogram_{variant}_{_CUPY_SUFFIX[x.dtype]}")
    _cupy.launch(
        fn,
        (blocks,),
        (CUDA_BLOCK,),
        (_cupy.ptr(x), _cupy.ptr(hist), np.int64(n), np.int64(x.stride(0)), np.int32(bins)),
        shared_mem=shared,
    )
    return hist


def cupy_histogram_atomic(x, bins):
    return _cupy_histogram(x, bins, "atomic")


def cupy_histogram_private(x, bins):
    return _cupy_histogram(x, bins, "private")


def _cupy_config(x, bins):
    return {"BLOCK": CUDA_BLOCK, "blocks": min(triton.cdiv(x.numel(), CUDA_BLOCK), CUDA_MAX_BLOCKS)}


OP = Op(
    name="histogram",
    description="int32 counts in equal bins over [0, 1); atomic contention vs privatised (shared-memory / per-program) histograms",
    shape_names=("n", "bins"),
    dtypes=("fp32", "fp16", "bf16"),
    make_inputs=make_inputs,
    reference=reference,
    # Integer counts under one exact bin definition: every provider must match exactly.
    tolerances={
        "fp32": Tolerance(atol=0.0, rtol=0.0),
        "fp16": Tolerance(atol=0.0, rtol=0.0),
        "bf16": Tolerance(atol=0.0, rtol=0.0),
    },
    cost=cost,
    providers={
        "torch": Provider("torch", "torch", torch_histogram, "eager: fp32 bin indices, scatter_add_ into int32 counts"),
        "triton_atomic": Provider(
            "triton_atomic",
            "triton",
            triton_histogram_atomic,
            "Triton, one global tl.atomic_add per value",
            config=triton_atomic_config,
        ),
        "triton_private": Provider(
            "triton_private",
            "triton",
            triton_histogram_private,
            "Triton, per-program tl.histogram over a grid-stride loop, merged with atomics",
            config=triton_private_config,
        ),
        "cupy_atomic": Provider(
            "cupy_atomic",
            "cupy",
            cupy_histogram_atomic,
            "CUDA C, grid-stride, one global atomicAdd per value",
            config=_cupy_config,
        ),
        "cupy_private": Provider(
            "cupy_private",
            "cupy",
            cupy_histogram_private,
            "CUDA C, per-block shared-memory histogram merged with global atomics",
            config=_cupy_config,
        ),
    },
    # cuda: 64 MiB and 1 GiB of fp32 values (past a 60 MB L2); 16 bins is the
    # high-contention case where privatisation matters most.
    bench_shapes={
        "cuda": [(1 << 24, 256), (1 << 28, 256), (1 << 28, 16)],
        "cpu": [(1 << 18, 256), (1 << 20, 256)],
        "quick": [(1 << 18, 256)],
    },
    bench_dtypes={"cuda": ["fp32"], "cpu": ["fp32"]},
    test_shapes=[(1, 1), (19, 7), (1823, 37), (4099, 256)],
)


def WRONG(x, bins):
    """Negative control: clamps out-of-range values into the first and last
    bins instead of ignoring them (what ``clamp`` on the index silently does)."""
    v = x.float()
    v = v[~torch.isnan(v)]
    idx = torch.clamp((v * bins).floor(), min=0, max=bins - 1).long()
    return torch.bincount(idx, minlength=bins).to(torch.int32)
