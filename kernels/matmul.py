"""``matmul``: ``C = A @ B``, the compute-bound kernel (tensor cores on GPU).

Exercises: shared-memory tiling and reuse, tensor-core shapes and dtypes,
software pipelining (``num_stages``), grouped launch order for L2 reuse. The
Triton kernel follows ``python/tutorials/03-matrix-multiplication.py``.

Shapes: ``a``: ``(M, K)``, ``b``: ``(K, N)``, ``c``: ``(M, N)`` in the input
dtype (accumulation in fp32). Dtype ``tf32`` is fp32 storage with TF32
tensor-core math allowed. Dtype ``fp8`` is e4m3 (``torch.float8_e4m3fn``) inputs
with ``b`` stored column-major (the layout fp8 tensor-core GEMMs take), fp32
accumulation and a **bf16** ``c``, the usual fp8 GEMM contract; only the
``torch`` provider implements it (``torch._scaled_mm``), and on a GPU older than
sm_89 it raises ``NotImplementedError`` with the reason, which benchmarks record
as skipped.
"""

from __future__ import annotations

import contextlib
import functools

import numpy as np
import torch
import triton
import triton.language as tl

from kernels import _backends, _cupy
from kernels._autotune import ConfigRecord, device_shared_mem_bytes, fit_shared_memory
from kernels._base import Cost, Op, Provider, Tolerance, itemsize, randn

_STORAGE = {"tf32": "fp32"}
#: Output dtype when it differs from the input dtype: fp8 GEMMs write bf16.
_OUTPUT = {"fp8": "bf16"}


def make_inputs(shape, dtype, device, seed=0):
    M, N, K = shape
    store = _STORAGE.get(dtype, dtype)
    # Scale so that entries of C are O(1) whatever K is.
    scale = 1.0 / max(1.0, K**0.25)
    a = randn((M, K), store, device, seed, scale=scale)
    if dtype == "fp8":
        # Column-major b (a transposed (N, K) buffer): what fp8 tensor-core GEMMs
        # consume, so the provider makes no copy inside the timed call.
        return a, randn((N, K), store, device, seed + 1, scale=scale).t()
    b = randn((K, N), store, device, seed + 1, scale=scale)
    if dtype == "tf32":
        return a, b, "tf32"
    return a, b


def reference(a, b, *_):
    return a.double() @ b.double()


def cost(shape, dtype) -> Cost:
    # One multiply and one add per (m, n, k): flops = 2 * M * N * K.
    # Compulsory traffic: A and B read once in the storage dtype, C written once
    # in the output dtype (the storage dtype, except fp8 in -> bf16 out).
    M, N, K = shape
    s = itemsize(_STORAGE.get(dtype, dtype))
    s_out = itemsize(_OUTPUT.get(dtype, _STORAGE.get(dtype, dtype)))
    return Cost(flops=2 * M * N * K, bytes_read=(M * K + K * N) * s, bytes_written=M * N * s_out)


@contextlib.contextmanager
def tf32_mode(enabled: bool):
    """Allow (or forbid) TF32 in cuBLAS fp32 matmuls inside the block, restoring
    the previous setting after.

    Uses ``torch.backends.cuda.matmul.fp32_precision`` (``"tf32"``/``"ieee"``)
    where PyTorch has it: on torch >= 2.9, once anything set that, reading the
    legacy ``allow_tf32`` raises ``RuntimeError`` ("mix of the legacy and new
    APIs"). Older torch: ``allow_tf32``.
    """
    m = torch.backends.cuda.matmul
    if hasattr(m, "fp32_precision"):
        old = m.fp32_precision
        m.fp32_precision = "tf32" if enabled else "ieee"
        try:
            yield
        finally:
            m.fp32_precision = old
        return
    old = m.allow_tf32
    m.allow_tf32 = enabled
    try:
        yield
    finally:
        m.allow_tf32 = old


_tf32 = tf32_mode


def fp8_unsupported_reason(device) -> str | None:
    """Why an e4m3 GEMM cannot run on ``device`` (a ``torch.device``), or ``None``.

    fp8 tensor cores exist from compute capability 8.9 (Ada; Hopper is 9.0): see
    the CUDA C Programming Guide, "Compute Capabilities". On the CPU PyTorch
    provides a reference ``torch._scaled_mm``. Does not initialise CUDA for a CPU device.
    """
    if not hasattr(torch, "_scaled_mm"):
        return f"torch {torch.__version__} has no torch._scaled_mm (fp8 GEMM)"
    device = torch.device(device)
    if device.type == "cuda":
        major, minor = torch.cuda.get_device_capability(device)
        if (major, minor) < (8, 9):
            name = torch.cuda.get_device_name(device)
            return (
                f"fp8 (e4m3) GEMM needs compute capability >= 8.9 (Ada, Hopper or newer); {name} is sm_{major}{minor}"
            )
    return None


@functools.lru_cache(maxsize=None)
def _unit_scale(device: torch.device) -> torch.Tensor:
    # Cached so the timed call launches the GEMM only, not a fill kernel.
    return torch.ones((), dtype=torch.float32, device=device)


def _round_up(n: int, m: int) -> int:
    return (n + m - 1) // m * m


def pad_for_fp8(a, b, multiple: int = 16):
    """``a`` (M, K) and ``b`` (K, N) zero-padded to dimensions that are multiples
    of ``multiple`` (cuBLASLt's fp8 GEMM requirement), ``b``'s copy column-major;
    returned unchanged when every dimension already is one. Exact: the padding
    of K adds zero products, the padded rows and columns are cut from the result.
    Any dtype and device (the CPU tests run it on fp32)."""
    M, K = a.shape
    N = b.shape[1]
    if not (M % multiple or N % multiple or K % multiple):
        return a, b
    Mp, Np, Kp = _round_up(M, multiple), _round_up(N, multiple), _round_up(K, multiple)
    a_p = torch.zeros((Mp, Kp), dtype=a.dtype, device=a.device)
    a_p[:M, :K] = a
    b_p = torch.zeros((Np, Kp), dtype=b.dtype, device=b.device).t()
    b_p[:K, :N] = b
    return a_p, b_p


def torch_fp8_matmul(a, b):
    """e4m3 ``a @ b`` through ``torch._scaled_mm`` with unit per-tensor scales
    (the inputs are already e4m3 values), fp32 accumulation, bf16 output.

    cuBLASLt's fp8 GEMM wants ``a`` row-major, ``b`` column-major and every
    dimension a multiple of 16: other layouts are copied and odd sizes
    zero-padded (exact; padding in K adds zeros), so only the tests' odd shapes
    pay for that.

    Raises
    ------
    NotImplementedError
        When the device cannot run fp8 GEMMs (see :func:`fp8_unsupported_reason`).
    """
    reason = fp8_unsupported_reason(a.device)
    if reason:
        raise NotImplementedError(reason)
    M, K = a.shape
    N = b.shape[1]
    if a.is_cuda:
        a, b = pad_for_fp8(a, b)
    a = a.contiguous()
    b = b.t().contiguous().t()  # column-major; no copy when it already is
    one = _unit_scale(a.device)
    out = torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
    return out[:M, :N]


def torch_matmul(a, b, mode=None):
    if a.dtype == torch.float8_e4m3fn:
        return torch_fp8_matmul(a, b)
    with _tf32(mode == "tf32"):
        return torch.matmul(a, b)


def _configs():
    if _backends.triton_interpreted():
        # The interpreter runs every program serially in numpy: one small tile.
        return [
            triton.Config(
                {"BLOCK_SIZE_M": 32, "BLOCK_SIZE_N": 32, "BLOCK_SIZE_K": 32, "GROUP_SIZE_M": 4},
                num_warps=4,
                num_stages=1,
            )
        ]
    sizes = [
        (128, 256, 64, 3, 8),
        (64, 256, 32, 4, 4),
        (128, 128, 32, 4, 4),
        (128, 64, 32, 4, 4),
        (64, 128, 32, 4, 4),
        (128, 32, 32, 4, 4),
        (64, 32, 32, 5, 2),
        (32, 64, 32, 5, 2),
        (128, 256, 64, 4, 8),
        (256, 128, 64, 3, 8),
        (128, 128, 64, 4, 8),
    ]
    return [
        triton.Config(
            {"BLOCK_SIZE_M": m, "BLOCK_SIZE_N": n, "BLOCK_SIZE_K": k, "GROUP_SIZE_M": 8}, num_stages=s, num_warps=w
        )
        for m, n, k, s, w in sizes
    ]


def shared_mem_estimate(cfg, itemsize: int, capability: tuple[int, int] = (9, 0), tf32: bool = False) -> int:
    """Upper bound on a config's shared memory, bytes: pipeline buffers of an A
    tile (``BLOCK_SIZE_M x BLOCK_SIZE_K``) and a B tile (``BLOCK_SIZE_K x
    BLOCK_SIZE_N``) of ``itemsize``-byte elements. Triton keeps ``num_stages``
    buffers on Hopper's wgmma path (sm_90+, 16-bit or TF32 operands) and
    ``num_stages - 1`` otherwise (mma.sync on sm_80, IEEE fp32 FMA dots).
    ``scripts/triton_aot.py`` (run by ``tests/test_triton_aot.py``) checks that
    it bounds the compiled kernels' ``metadata.shared`` for every config on
    sm_80 and sm_90."""
    k = cfg.kwargs
    wgmma = capability[0] >= 9 and (itemsize <= 2 or tf32)
    buffers = cfg.num_stages if wgmma else max(1, cfg.num_stages - 1)
    return buffers * (k["BLOCK_SIZE_M"] + k["BLOCK_SIZE_N"]) * k["BLOCK_SIZE_K"] * itemsize


def _prune_configs(configs, named_args, **kwargs):
    """``early_config_prune``: drop configs that cannot fit the device's shared
    memory (tf32 128x256x64 with 3-4 stages needs 288-384 KiB, fp32 with 4
    stages 288 KiB; an H100/H200 block gets 227 KiB, an A100 163 KiB), so they
    are never compiled, rejected and compiled again in every process and key."""
    a = named_args["a_ptr"]
    if not getattr(a, "is_cuda", False):
        return configs
    cap = torch.cuda.get_device_capability(a.device)
    tf32 = bool(kwargs.get("ALLOW_TF32", named_args.get("ALLOW_TF32", False)))
    return fit_shared_memory(
        configs, lambda c: shared_mem_estimate(c, a.element_size(), cap, tf32), device_shared_mem_bytes(a.device)
    )


@triton.autotune(
    configs=_configs(), key=["M", "N", "K", "ALLOW_TF32"], prune_configs_by={"early_config_prune": _prune_configs}
)
@triton.jit
def _matmul_kernel(
    a_ptr,
    b_ptr,
    c_ptr,
    M,
    N,
    K,
    stride_am,
    stride_ak,
    stride_bk,
    stride_bn,
    stride_cm,
    stride_cn,
    ALLOW_TF32: tl.constexpr,
    UPCAST_DOT: tl.constexpr,
    BLOCK_SIZE_M: tl.constexpr,
    BLOCK_SIZE_N: tl.constexpr,
    BLOCK_SIZE_K: tl.constexpr,
    GROUP_SIZE_M: tl.constexpr,
):
    # Grouped ordering: GROUP_SIZE_M row-blocks share B tiles in L2.
    pid = tl.program_id(axis=0)
    num_pid_m = tl.cdiv(M, BLOCK_SIZE_M)
    num_pid_n = tl.cdiv(N, BLOCK_SIZE_N)
    num_pid_in_group = GROUP_SIZE_M * num_pid_n
    group_id = pid // num_pid_in_group
    first_pid_m = group_id * GROUP_SIZE_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_SIZE_M)
    pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)
    pid_n = (pid % num_pid_in_group) // group_size_m

    offs_am = (pid_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)) % M
    offs_bn = (pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)) % N
    offs_k = tl.arange(0, BLOCK_SIZE_K)
    a_ptrs = a_ptr + (offs_am[:, None] * stride_am + offs_k[None, :] * stride_ak)
    b_ptrs = b_ptr + (offs_k[:, None] * stride_bk + offs_bn[None, :] * stride_bn)
    acc = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_SIZE_K)):
        a = tl.load(a_ptrs, mask=offs_k[None, :] < K - k * BLOCK_SIZE_K, other=0.0)
        b = tl.load(b_ptrs, mask=offs_k[:, None] < K - k * BLOCK_SIZE_K, other=0.0)
        if UPCAST_DOT:
            # Test variant (see triton_matmul): fp32 operands, so 16-bit loads,
            # masks and the store are checked where a 16-bit tl.dot cannot be.
            acc = tl.dot(a.to(tl.float32), b.to(tl.float32), acc, input_precision="ieee")
        elif ALLOW_TF32:
            acc = tl.dot(a, b, acc, input_precision="tf32")
        else:
            acc = tl.dot(a, b, acc, input_precision="ieee")
        a_ptrs += BLOCK_SIZE_K * stride_ak
        b_ptrs += BLOCK_SIZE_K * stride_bk
    c = acc.to(c_ptr.dtype.element_ty)
    offs_cm = pid_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)
    offs_cn = pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)
    c_ptrs = c_ptr + stride_cm * offs_cm[:, None] + stride_cn * offs_cn[None, :]
    tl.store(c_ptrs, c, mask=(offs_cm[:, None] < M) & (offs_cn[None, :] < N))


_RECORD = ConfigRecord(_matmul_kernel)


def _tuning_key(a, b, mode) -> tuple:
    # Same equivalence classes as the autotuner's key: (M, N, K, ALLOW_TF32) plus
    # the dtype of every tensor argument (c has a's dtype).
    return (a.shape[0], b.shape[1], a.shape[1], mode == "tf32", a.dtype, b.dtype)


def triton_matmul(a, b, mode=None, *, upcast_dot: bool = False):
    """Autotuned Triton GEMM over strided ``a``, ``b``; fp32 accumulation.
    ``ieee`` dot precision unless ``mode == "tf32"``. ``upcast_dot=True`` is a
    test variant: tiles are loaded and ``c`` stored in the input dtype, but cast
    to fp32 before ``tl.dot`` (Triton's CPU interpreter computes bf16 ``tl.dot``
    wrongly, so this is how bf16 loads, masks and stores get checked there).
    Raises ``ValueError`` for incompatible shapes."""
    if a.shape[1] != b.shape[0]:
        raise ValueError(f"incompatible shapes {tuple(a.shape)} @ {tuple(b.shape)}")
    M, K = a.shape
    _, N = b.shape
    c = torch.empty((M, N), device=a.device, dtype=a.dtype)
    grid = lambda META: (triton.cdiv(M, META["BLOCK_SIZE_M"]) * triton.cdiv(N, META["BLOCK_SIZE_N"]),)
    _matmul_kernel[grid](
        a,
        b,
        c,
        M,
        N,
        K,
        a.stride(0),
        a.stride(1),
        b.stride(0),
        b.stride(1),
        c.stride(0),
        c.stride(1),
        ALLOW_TF32=(mode == "tf32"),
        UPCAST_DOT=bool(upcast_dot),
    )
    _RECORD.after_launch(_tuning_key(a, b, mode))
    return c


def triton_matmul_config(a, b, mode=None):
    """The autotuned config (``BLOCK_SIZE_M/N/K``, ``GROUP_SIZE_M``, ``num_warps``,
    ``num_stages``) used for inputs with this tuning key, whatever ran since. If
    nothing with this key ran yet, runs the provider once (which tunes and
    records) and returns its choice."""
    key = _tuning_key(a, b, mode)
    cfg = _RECORD.get(key)
    if cfg is None:
        triton_matmul(a, b, mode)
        cfg = _RECORD.get(key)
    return cfg


CUDA_SOURCE = _cupy.register_source(
    "matmul",
    ("matmul_tiled_f32",),
    r"""
// Classic shared-memory tiled SGEMM: each 16x16 block loads a tile of A and B
// into shared memory, then every thread accumulates one C element. Teaching
// baseline against tensor-core kernels: no register blocking, no tensor cores.
#define TILE 16
extern "C" __global__ void matmul_tiled_f32(const float* __restrict__ a, const float* __restrict__ b,
                                            float* __restrict__ c, int M, int N, int K,
                                            long long sam, long long sak, long long sbk, long long sbn) {
    __shared__ float As[TILE][TILE];
    __shared__ float Bs[TILE][TILE + 1];  // +1 pad: column reads hit distinct banks
    int row = blockIdx.y * TILE + threadIdx.y;
    int col = blockIdx.x * TILE + threadIdx.x;
    float acc = 0.0f;
    for (int t = 0; t < K; t += TILE) {
        int ka = t + threadIdx.x, kb = t + threadIdx.y;
        As[threadIdx.y][threadIdx.x] = (row < M && ka < K) ? a[row * sam + ka * sak] : 0.0f;
        Bs[threadIdx.y][threadIdx.x] = (kb < K && col < N) ? b[kb * sbk + col * sbn] : 0.0f;
        __syncthreads();
        #pragma unroll
        for (int k = 0; k < TILE; ++k) acc += As[threadIdx.y][k] * Bs[k][threadIdx.x];
        __syncthreads();
    }
    if (row < M && col < N) c[(long long)row * N + col] = acc;
}
""",
)


def cupy_matmul(a, b, mode=None):
    _cupy.check_cuda_tensor(a, b)
    if a.dtype != torch.float32 or mode == "tf32":
        raise ValueError("cupy matmul is an fp32 CUDA-core kernel (no tensor cores)")
    M, K = a.shape
    _, N = b.shape
    c = torch.empty((M, N), device=a.device, dtype=a.dtype)
    fn = _cupy.kernel(CUDA_SOURCE, "matmul_tiled_f32")
    grid = (triton.cdiv(N, 16), triton.cdiv(M, 16))
    _cupy.launch(
        fn,
        grid,
        (16, 16),
        (
            _cupy.ptr(a),
            _cupy.ptr(b),
            _cupy.ptr(c),
            np.int32(M),
            np.int32(N),
            np.int32(K),
            np.int64(a.stride(0)),
            np.int64(a.stride(1)),
            np.int64(b.stride(0)),
            np.int64(b.stride(1)),
        ),
    )
    return c


OP = Op(
    name="matmul",
    description="C = A @ B; compute-bound (tiling, tensor cores, dtypes, pipelining)",
    shape_names=("M", "N", "K"),
    dtypes=("fp32", "tf32", "fp16", "bf16", "fp8"),
    make_inputs=make_inputs,
    reference=reference,
    # fp32 accumulation everywhere; error grows ~sqrt(K) * eps(dtype) with O(1) outputs.
    tolerances={
        "fp32": Tolerance(atol=1e-4, rtol=1e-4),
        "tf32": Tolerance(atol=2e-2, rtol=2e-2),
        "fp16": Tolerance(atol=1e-2, rtol=1e-2),
        "bf16": Tolerance(atol=3e-2, rtol=3e-2),
        # fp8: the inputs are exact e4m3 values in the reference too, so the only
        # errors are the accumulation and rounding c to bf16 (2^-9 relative). The
        # accumulation is fp32 on the CPU; Hopper's fp8 tensor cores keep about 14
        # mantissa bits (DeepSeek-V3 report, arXiv:2412.19437, sec. 3.3.2) and
        # cuBLAS promotes to fp32 periodically (use_fast_accum=False). With O(1)
        # outputs both stay well inside 1e-2 + 1e-2 * |c|.
        "fp8": Tolerance(atol=1e-2, rtol=1e-2),
    },
    cost=cost,
    providers={
        "torch": Provider(
            "torch",
            "torch",
            torch_matmul,
            "torch.matmul (cuBLAS / CPU BLAS); fp8: torch._scaled_mm, unit scales, bf16 out",
            needs_contiguous=("fp8",),
        ),
        "triton": Provider(
            "triton",
            "triton",
            triton_matmul,
            "Triton autotuned tiled GEMM (tutorial 03)",
            dtypes=("fp32", "tf32", "fp16", "bf16"),
            config=triton_matmul_config,
        ),
        "cupy": Provider(
            "cupy", "cupy", cupy_matmul, "CUDA C shared-memory tiled SGEMM, fp32 CUDA cores", dtypes=("fp32",)
        ),
    },
    bench_shapes={
        "cuda": [(4096, 4096, 4096), (8192, 8192, 8192)],
        "cpu": [(512, 512, 512), (1024, 1024, 1024)],
        "quick": [(512, 512, 512)],
    },
    bench_dtypes={"cuda": ["fp32", "tf32", "bf16", "fp16", "fp8"], "cpu": ["fp32"]},
    test_shapes=[(1, 1, 1), (19, 19, 19), (33, 1823, 47)],
    uses_tensor_cores=True,
)


def WRONG(a, b, *_):
    """Negative control: silently down-casts operands to bf16 (precision loss a
    tolerance must catch for fp32)."""
    return (a.to(torch.bfloat16) @ b.to(torch.bfloat16)).to(a.dtype)
