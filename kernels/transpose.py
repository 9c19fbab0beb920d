"""``transpose``: ``out = x.T`` materialised contiguously, the memory-access-pattern kernel.

Exercises: coalescing on both sides of a copy. Reading ``x`` row by row makes
the writes to ``out`` stride ``M`` elements apart (one DRAM sector per element);
staging a tile in shared memory lets both the reads and the writes be coalesced,
and padding the tile by one element removes the shared-memory bank conflicts
of its column-wise reads. The CUDA C variants follow NVIDIA's "An Efficient
Matrix Transpose in CUDA C/C++" (Mark Harris, NVIDIA Developer Blog, 2013):
32x32 tile, 32x8 threads, +1 padding.

Shapes: ``x``: ``(M, N)``, any strides; ``out``: ``(N, M)``, contiguous, same
dtype as ``x``. A pure copy: the result is bit-exact, so the tolerance is 0.
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
from kernels._base import Cost, Op, Provider, Tolerance, itemsize, randn


def make_inputs(shape, dtype, device, seed=0):
    """One seeded ``(M, N)`` tensor of ``dtype`` on ``device``."""
    M, N = shape
    return (randn((M, N), dtype, device, seed),)


def reference(x):
    """``x.T`` in fp64 (exact for every dtype: the op only moves values)."""
    return x.double().t().contiguous()


def cost(shape, dtype) -> Cost:
    # No arithmetic: flops = 0. x is read once and out written once:
    # bytes_read = bytes_written = M * N * itemsize.
    M, N = shape
    s = itemsize(dtype)
    return Cost(flops=0, bytes_read=M * N * s, bytes_written=M * N * s)


def torch_transpose(x):
    return x.t().contiguous()


# --- Triton -------------------------------------------------------------------


@triton.jit
def _transpose_naive_kernel(x_ptr, out_ptr, M, N, n_elements, stride_xm, stride_xn, BLOCK_SIZE: tl.constexpr):
    # Each program copies BLOCK_SIZE consecutive elements of x in row-major
    # order: the loads are coalesced, the stores land M elements apart.
    pid = tl.program_id(axis=0)
    offsets = pid.to(tl.int64) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    i = offsets // N
    j = offsets % N
    x = tl.load(x_ptr + i * stride_xm + j * stride_xn, mask=mask)
    tl.store(out_ptr + j * M + i, x, mask=mask)


@triton.jit
def _transpose_tiled_kernel(
    x_ptr, out_ptr, M, N, stride_xm, stride_xn, BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr
):
    # A (BLOCK_SIZE_M, BLOCK_SIZE_N) tile is loaded along N and stored along M;
    # the compiler converts the register layout between the two through shared
    # memory, so both global accesses are coalesced.
    pid = tl.program_id(axis=0)
    num_pid_n = tl.cdiv(N, BLOCK_SIZE_N)
    pid_m = pid // num_pid_n
    pid_n = pid % num_pid_n
    offs_m = pid_m.to(tl.int64) * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)
    offs_n = pid_n.to(tl.int64) * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)
    mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)
    tile = tl.load(x_ptr + offs_m[:, None] * stride_xm + offs_n[None, :] * stride_xn, mask=mask)
    out_ptrs = out_ptr + offs_n[:, None] * M + offs_m[None, :]
    tl.store(out_ptrs, tl.trans(tile), mask=tl.trans(mask))


TRITON_NAIVE_BLOCK_SIZE = 1024
TRITON_TILE = {"BLOCK_SIZE_M": 64, "BLOCK_SIZE_N": 64, "num_warps": 4}


def _out(x):
    if x.dim() != 2:
        raise ValueError(f"transpose takes a 2-D tensor, got shape {tuple(x.shape)}")
    M, N = x.shape
    return M, N, torch.empty((N, M), dtype=x.dtype, device=x.device)


def triton_transpose_naive(x):
    """Triton, 1-D blocks in input order: coalesced reads, writes strided by ``M``."""
    M, N, out = _out(x)
    grid = (triton.cdiv(M * N, TRITON_NAIVE_BLOCK_SIZE),)
    _transpose_naive_kernel[grid](
        x, out, M, N, M * N, x.stride(0), x.stride(1), BLOCK_SIZE=TRITON_NAIVE_BLOCK_SIZE, num_warps=4
    )
    return out


def triton_transpose_naive_config(x):
    return {"BLOCK_SIZE": TRITON_NAIVE_BLOCK_SIZE, "num_warps": 4}


def triton_transpose_tiled(x):
    """Triton, 2-D tiles transposed in registers/shared memory: coalesced both ways."""
    M, N, out = _out(x)
    bm, bn = TRITON_TILE["BLOCK_SIZE_M"], TRITON_TILE["BLOCK_SIZE_N"]
    grid = (triton.cdiv(M, bm) * triton.cdiv(N, bn),)
    _transpose_tiled_kernel[grid](
        x, out, M, N, x.stride(0), x.stride(1), BLOCK_SIZE_M=bm, BLOCK_SIZE_N=bn, num_warps=TRITON_TILE["num_warps"]
    )
    return out


def triton_transpose_tiled_config(x):
    return dict(TRITON_TILE)


# --- CUDA C through CuPy ------------------------------------------------------

CUDA_SOURCE = _cupy.register_source(
    "transpose",
    (
        "transpose_naive_b4",
        "transpose_naive_b2",
        "transpose_tiled_b4",
        "transpose_tiled_b2",
        "transpose_tiled_padded_b4",
        "transpose_tiled_padded_b2",
    ),
    r"""
// A transpose only moves bits, so the kernels are instantiated per element
// size (4 bytes: fp32; 2 bytes: fp16 and bf16) on unsigned integer types.
#define TILE 32
#define BLOCK_ROWS 8

// One thread per element, threadIdx.x along N: coalesced reads of x, writes
// to out M elements apart.
template <typename T>
__device__ void transpose_naive(const T* __restrict__ x, T* __restrict__ out, int M, int N,
                                long long sxm, long long sxn) {
    int j = blockIdx.x * TILE + threadIdx.x;
    int i0 = blockIdx.y * TILE + threadIdx.y;
    if (j >= N) return;
    for (int k = 0; k < TILE; k += BLOCK_ROWS) {
        int i = i0 + k;
        if (i < M) out[(long long)j * M + i] = x[i * sxm + j * sxn];
    }
}

// The tile goes through shared memory: it is read along rows of x and written
// along rows of out, both coalesced. PAD = 1 shifts each tile row by one
// element so that the column-wise reads tile[tx][.] of a warp hit 32 distinct
// banks (for 2-byte types the 33-element row stride also gives 32 distinct
// 4-byte words); PAD = 0 leaves the 32-way (4-byte) or 16-way (2-byte) conflict.
template <typename T, int PAD>
__device__ void transpose_tiled(const T* __restrict__ x, T* __restrict__ out, int M, int N,
                                long long sxm, long long sxn) {
    __shared__ T tile[TILE][TILE + PAD];
    int j0 = blockIdx.x * TILE, i0 = blockIdx.y * TILE;
    int tx = threadIdx.x, ty = threadIdx.y;
    for (int k = 0; k < TILE; k += BLOCK_ROWS) {
        int i = i0 + ty + k, j = j0 + tx;
        if (i < M && j < N) tile[ty + k][tx] = x[i * sxm + j * sxn];
    }
    __syncthreads();
    for (int k = 0; k < TILE; k += BLOCK_ROWS) {
        int j = j0 + ty + k, i = i0 + tx;
        if (j < N && i < M) out[(long long)j * M + i] = tile[tx][ty + k];
    }
}

#define ENTRY(name, body, T)                                                                   \
    extern "C" __global__ void name(const T* x, T* out, int M, int N, long long sxm, long long sxn) { \
        body(x, out, M, N, sxm, sxn);                                                           \
    }
ENTRY(transpose_naive_b4, transpose_naive<unsigned int>, unsigned int)
ENTRY(transpose_naive_b2, transpose_naive<unsigned short>, unsigned short)
ENTRY(transpose_tiled_b4, (transpose_tiled<unsigned int, 0>), unsigned int)
ENTRY(transpose_tiled_b2, (transpose_tiled<unsigned short, 0>), unsigned short)
ENTRY(transpose_tiled_padded_b4, (transpose_tiled<unsigned int, 1>), unsigned int)
ENTRY(transpose_tiled_padded_b2, (transpose_tiled<unsigned short, 1>), unsigned short)
""",
)

_CUDA_TILE, _CUDA_BLOCK_ROWS = 32, 8
_MAX_GRID_Y = 65535  # CUDA limit on gridDim.y


def _cupy_transpose(x, variant):
    _cupy.check_cuda_tensor(x)
    M, N, out = _out(x)
    size = x.element_size()
    if size not in (2, 4):
        raise ValueError(f"cupy transpose supports 2- and 4-byte dtypes, got {x.dtype}")
    if max(M, N) > 2**31 - 1 - _CUDA_TILE:
        raise ValueError(f"cupy transpose indexes rows and columns with int32; shape {(M, N)} is too large")
    grid = (triton.cdiv(N, _CUDA_TILE), triton.cdiv(M, _CUDA_TILE))
    if grid[1] > _MAX_GRID_Y:
        raise ValueError(f"cupy transpose: M={M} needs {grid[1]} blocks along y, over CUDA's limit {_MAX_GRID_Y}")
    fn = _cupy.kernel(CUDA_SOURCE, f"transpose_{variant}_b{size}")
    _cupy.launch(
        fn,
        grid,
        (_CUDA_TILE, _CUDA_BLOCK_ROWS),
        (_cupy.ptr(x), _cupy.ptr(out), np.int32(M), np.int32(N), np.int64(x.stride(0)), np.int64(x.stride(1))),
    )
    return out


def cupy_transpose_naive(x):
    return _cupy_transpose(x, "naive")


def cupy_transpose_tiled(x):
    return _cupy_transpose(x, "tiled")


def cupy_transpose_tiled_padded(x):
    return _cupy_transpose(x, "tiled_padded")


def _cupy_config(x):
    return {"TILE": _CUDA_TILE, "BLOCK_ROWS": _CUDA_BLOCK_ROWS}


OP = Op(
    name="transpose",
    description="out = x.T contiguous; memory access patterns (coalescing, shared-memory tiling, bank conflicts)",
    shape_names=("M", "N"),
    dtypes=("fp32", "fp16", "bf16"),
    make_inputs=make_inputs,
    reference=reference,
    # A copy: every provider must reproduce x bit for bit.
    tolerances={
        "fp32": Tolerance(atol=0.0, rtol=0.0),
        "fp16": Tolerance(atol=0.0, rtol=0.0),
        "bf16": Tolerance(atol=0.0, rtol=0.0),
    },
    cost=cost,
    providers={
        "torch": Provider("torch", "torch", torch_transpose, "x.t().contiguous() (ATen copy kernel)"),
        "triton_naive": Provider(
            "triton_naive",
            "triton",
            triton_transpose_naive,
            "Triton, 1-D blocks in input order: coalesced reads, uncoalesced writes",
            config=triton_transpose_naive_config,
        ),
        "triton_tiled": Provider(
            "triton_tiled",
            "triton",
            triton_transpose_tiled,
            "Triton, 64x64 tiles, tl.trans (layout conversion through shared memory)",
            config=triton_transpose_tiled_config,
        ),
        "cupy_naive": Provider(
            "cupy_naive",
            "cupy",
            cupy_transpose_naive,
            "CUDA C, one thread per element: coalesced reads, uncoalesced writes",
            config=_cupy_config,
        ),
        "cupy_tiled": Provider(
            "cupy_tiled",
            "cupy",
            cupy_transpose_tiled,
            "CUDA C, 32x32 shared-memory tile, no padding (bank conflicts)",
            config=_cupy_config,
        ),
        "cupy_tiled_padded": Provider(
            "cupy_tiled_padded",
            "cupy",
            cupy_transpose_tiled_padded,
            "CUDA C, 32x33 shared-memory tile (+1 padding: no bank conflicts)",
            config=_cupy_config,
        ),
    },
    # cuda: 16 MiB (fp32) sits in a 60 MB L2; 1 GiB (16384^2 fp32) is far past it.
    bench_shapes={"cuda": [(2048, 2048), (16384, 16384)], "cpu": [(1024, 1024), (2048, 2048)], "quick": [(1024, 1024)]},
    bench_dtypes={"cuda": ["fp32", "bf16"], "cpu": ["fp32"]},
    test_shapes=[(1, 1), (1, 19), (19, 1), (37, 1823)],
)


def WRONG(x):
    """Negative control: ``reshape`` instead of a transpose, right shape, wrong
    element order (a classic confusion of view ops)."""
    M, N = x.shape
    return x.contiguous().reshape(N, M)
