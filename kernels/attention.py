"""``attention``: scaled dot-product attention forward, causal or not.

``out = softmax(q @ k^T * D**-0.5 + mask) @ v`` per batch and head, where ``mask``
is ``-inf`` above the diagonal (key index > query index) when ``causal`` and 0
otherwise (Vaswani et al. 2017; ``torch.nn.functional.scaled_dot_product_attention``
semantics with ``is_causal``).

Exercises: fusion of two GEMMs around a softmax without materialising the
``S x S`` score matrix (FlashAttention: tiling plus an online softmax, Dao et al.
2022, arXiv:2205.14135; Milakov & Gimelshein 2018 for the online softmax), and
skipping the masked half of the work when causal. The naive provider writes and
re-reads the scores; SDPA dispatches to a fused backend (flash, memory-efficient,
cuDNN) where one exists.

Shapes: ``q``, ``k``, ``v``, ``out``: ``(B, H, S, D)`` in the input dtype. The shape
tuple is ``(B, H, S, D, causal)`` with ``causal`` 0 or 1, so a benchmark sweeps
causality like any other shape parameter and :func:`cost` sees it. The inputs
tuple is ``(q, k, v, causal: bool)``.
"""

from __future__ import annotations

import math

import torch
import triton
import triton.language as tl

from kernels import _backends
from kernels._autotune import ConfigRecord
from kernels._base import Cost, Op, Provider, Tolerance, itemsize, randn


class AttentionOp(Op):
    """:class:`Op` whose last shape entry is the ``causal`` flag, which may be 0."""

    def check_shape(self, shape: tuple) -> tuple[int, ...]:
        shape = tuple(shape)
        if len(shape) != len(self.shape_names):
            raise ValueError(f"op {self.name!r} expects shape {self.shape_names}, got {shape!r}")
        *dims, causal = shape
        if causal not in (0, 1) or isinstance(causal, bool):
            raise ValueError(f"op {self.name!r}: causal (last shape entry) must be 0 or 1, got {shape!r}")
        super().check_shape((*dims, 1))
        return shape


def make_inputs(shape, dtype, device, seed=0):
    """Seeded ``q``, ``k``, ``v`` ~ N(0, 1) of shape ``(B, H, S, D)`` and the causal flag.
    With the ``D**-0.5`` scale the scores are O(1), as in a trained model."""
    B, H, S, D, causal = shape
    q = randn((B, H, S, D), dtype, device, seed)
    k = randn((B, H, S, D), dtype, device, seed + 1)
    v = randn((B, H, S, D), dtype, device, seed + 2)
    return q, k, v, bool(causal)


def reference(q, k, v, causal):
    """Materialised attention in fp64 on the (already rounded) inputs."""
    S, D = q.shape[-2], q.shape[-1]
    scores = (q.double() @ k.double().transpose(-2, -1)) * (1.0 / math.sqrt(D))
    if causal:
        above = torch.ones(S, S, dtype=torch.bool, device=q.device).triu(1)
        scores = scores.masked_fill(above, float("-inf"))
    return torch.softmax(scores, dim=-1) @ v.double()


def cost(shape, dtype) -> Cost:
    # FLOPs, FlashAttention convention (Dao et al. 2022; Triton tutorial 06): the
    # two GEMMs only, softmax ignored. Non-causal: q @ k^T is 2*S*S*D and p @ v is
    # 2*S*S*D per (batch, head), so 4*B*H*S*S*D. Causal: only the S*(S+1)/2 score
    # entries on or below the diagonal are needed, so 4*B*H*D*S*(S+1)/2 =
    # 2*B*H*D*S*(S+1), "about half" (FlashAttention's benchmarks use exactly
    # half; the two differ by a factor (S+1)/S, 0.02% at S=4096).
    # Compulsory traffic: q, k and v read once (3*B*H*S*D), out written once
    # (B*H*S*D), in the input dtype. A causal kernel still reads all of k and v
    # (the last query row sees every key), so bytes do not depend on causal.
    B, H, S, D, causal = shape
    s = itemsize(dtype)
    flops = 2 * B * H * D * S * (S + 1) if causal else 4 * B * H * S * S * D
    n = B * H * S * D
    return Cost(flops=flops, bytes_read=3 * n * s, bytes_written=n * s)


def torch_sdpa(q, k, v, causal):
    return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)


def torch_naive_attention(q, k, v, causal):
    """Materialised ``S x S`` scores in the input dtype: matmul, scale, mask, softmax,
    matmul, each an eager kernel with its result through memory."""
    S, D = q.shape[-2], q.shape[-1]
    scores = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(D))
    if causal:
        above = torch.ones(S, S, dtype=torch.bool, device=q.device).triu(1)
        scores = scores.masked_fill(above, float("-inf"))
    return torch.softmax(scores, dim=-1) @ v


def _configs():
    if _backends.triton_interpreted():
        # The interpreter runs programs serially in numpy: one small tile.
        return [triton.Config({"BLOCK_SIZE_M": 16, "BLOCK_SIZE_N": 16}, num_warps=4, num_stages=1)]
    # BLOCK_SIZE_M must be a multiple of BLOCK_SIZE_N (the causal split below).
    sizes = [(128, 64, 4, 3), (128, 64, 8, 3), (128, 128, 8, 3), (128, 32, 4, 4), (64, 64, 4, 3), (64, 32, 4, 2)]
    return [triton.Config({"BLOCK_SIZE_M": m, "BLOCK_SIZE_N": n}, num_warps=w, num_stages=s) for m, n, w, s in sizes]


#: Below this sequence length the autotuner is skipped (one 64-row tile): the
#: launch is tiny and tuning would cost more compile time than it could save.
TUNE_MIN_S = 512


def _prune_configs(configs, named_args, **kwargs):
    """``early_config_prune`` for the autotuner: fp32 (IEEE dots on CUDA cores)
    gets one small tile, since 128-row fp32 tiles need ~225 KB of shared memory
    and minutes to compile; short sequences get one 64-row tile, no tuning."""
    small = [c for c in configs if c.kwargs["BLOCK_SIZE_M"] == 64]
    if kwargs.get("DOT_PRECISION") == "ieee":
        return [c for c in small if c.kwargs["BLOCK_SIZE_N"] == 32][:1] or configs[:1]
    if named_args["S"] < TUNE_MIN_S:
        return small[:1] or configs[:1]
    return configs


@triton.jit
def _attn_inner(
    acc,
    l_i,
    m_i,
    q,
    k_base,
    v_base,
    stride_ks,
    stride_kd,
    stride_vs,
    stride_vd,
    offs_m,
    offs_d,
    d_mask,
    lo,
    hi,
    S,
    qk_scale,
    MASK_CAUSAL: tl.constexpr,
    MASK_BOUNDS: tl.constexpr,
    BLOCK_SIZE_N: tl.constexpr,
    DOT_PRECISION: tl.constexpr,
    UPCAST_DOT: tl.constexpr,
):
    offs_n = tl.arange(0, BLOCK_SIZE_N)
    for start_n in range(lo, hi, BLOCK_SIZE_N):
        cols = start_n + offs_n
        if MASK_BOUNDS:
            k_mask = (cols[None, :] < S) & d_mask[:, None]
            v_mask = (cols[:, None] < S) & d_mask[None, :]
        else:
            k_mask = d_mask[:, None]
            v_mask = d_mask[None, :]
        # k loaded transposed, (BLOCK_SIZE_D, BLOCK_SIZE_N), so q @ k is the score tile.
        k = tl.load(k_base + cols[None, :] * stride_ks + offs_d[:, None] * stride_kd, mask=k_mask, other=0.0)
        if UPCAST_DOT:
            qk = tl.dot(q.to(tl.float32), k.to(tl.float32), input_precision="ieee") * qk_scale
        else:
            qk = tl.dot(q, k, input_precision=DOT_PRECISION) * qk_scale
        if MASK_CAUSAL:
            qk = tl.where((cols[None, :] <= offs_m[:, None]) & (cols[None, :] < S), qk, float("-inf"))
        elif MASK_BOUNDS:
            qk = tl.where(cols[None, :] < S, qk, float("-inf"))
        # Online softmax in base 2 (qk_scale carries log2(e)): rescale the running
        # sum and accumulator by 2^(m_old - m_new) when the row maximum grows. Every
        # tile processed first has a valid key (key 0) for every row, so m_new is finite.
        m_new = tl.maximum(m_i, tl.max(qk, 1))
        p = tl.math.exp2(qk - m_new[:, None])
        alpha = tl.math.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, 1)
        v = tl.load(v_base + cols[:, None] * stride_vs + offs_d[None, :] * stride_vd, mask=v_mask, other=0.0)
        if UPCAST_DOT:
            # Same rounding of p to the input dtype as below, then fp32 operands.
            acc = tl.dot(p.to(v.dtype).to(tl.float32), v.to(tl.float32), acc * alpha[:, None], input_precision="ieee")
        else:
            acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None], input_precision=DOT_PRECISION)
        m_i = m_new
    return acc, l_i, m_i


@triton.autotune(
    configs=_configs(),
    key=["B", "H", "S", "HEAD_DIM", "CAUSAL"],
    prune_configs_by={"early_config_prune": _prune_configs},
)
@triton.jit
def _attn_fwd_kernel(
    q_ptr,
    k_ptr,
    v_ptr,
    o_ptr,
    B,
    H,
    S,
    stride_qb,
    stride_qh,
    stride_qs,
    stride_qd,
    stride_kb,
    stride_kh,
    stride_ks,
    stride_kd,
    stride_vb,
    stride_vh,
    stride_vs,
    stride_vd,
    stride_ob,
    stride_oh,
    stride_os,
    stride_od,
    qk_scale,
    HEAD_DIM: tl.constexpr,
    CAUSAL: tl.constexpr,
    DOT_PRECISION: tl.constexpr,
    UPCAST_DOT: tl.constexpr,
    BLOCK_SIZE_D: tl.constexpr,
    BLOCK_SIZE_M: tl.constexpr,
    BLOCK_SIZE_N: tl.constexpr,
):
    start_m = tl.program_id(0)
    off_bh = tl.program_id(1)
    off_b = (off_bh // H).to(tl.int64)
    off_h = (off_bh % H).to(tl.int64)
    q_base = q_ptr + off_b * stride_qb + off_h * stride_qh
    k_base = k_ptr + off_b * stride_kb + off_h * stride_kh
    v_base = v_ptr + off_b * stride_vb + off_h * stride_vh
    o_base = o_ptr + off_b * stride_ob + off_h * stride_oh

    offs_m = start_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)
    offs_d = tl.arange(0, BLOCK_SIZE_D)
    d_mask = offs_d < HEAD_DIM
    q_mask = (offs_m[:, None] < S) & d_mask[None, :]
    q = tl.load(q_base + offs_m[:, None] * stride_qs + offs_d[None, :] * stride_qd, mask=q_mask, other=0.0)

    m_i = tl.full([BLOCK_SIZE_M], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_SIZE_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_SIZE_M, BLOCK_SIZE_D], dtype=tl.float32)
    if CAUSAL:
        # Key tiles wholly below the diagonal need no mask; only the diagonal tile
        # does; tiles above it are skipped (the causal half of the FLOPs saved).
        diag = start_m * BLOCK_SIZE_M
        acc, l_i, m_i = _attn_inner(
            acc,
            l_i,
            m_i,
            q,
            k_base,
            v_base,
            stride_ks,
            stride_kd,
            stride_vs,
            stride_vd,
            offs_m,
            offs_d,
            d_mask,
            0,
            diag,
            S,
            qk_scale,
            False,
            False,
            BLOCK_SIZE_N,
            DOT_PRECISION,
            UPCAST_DOT,
        )
        acc, l_i, m_i = _attn_inner(
            acc,
            l_i,
            m_i,
            q,
            k_base,
            v_base,
            stride_ks,
            stride_kd,
            stride_vs,
            stride_vd,
            offs_m,
            offs_d,
            d_mask,
            diag,
            tl.minimum(diag + BLOCK_SIZE_M, S),
            S,
            qk_scale,
            True,
            True,
            BLOCK_SIZE_N,
            DOT_PRECISION,
            UPCAST_DOT,
        )
    else:
        # Full key tiles without a bounds mask, then the ragged tail (0 or 1 tile) with one.
        full = (S // BLOCK_SIZE_N) * BLOCK_SIZE_N
        acc, l_i, m_i = _attn_inner(
            acc,
            l_i,
            m_i,
            q,
            k_base,
            v_base,
            stride_ks,
            stride_kd,
            stride_vs,
            stride_vd,
            offs_m,
            offs_d,
            d_mask,
            0,
            full,
            S,
            qk_scale,
            False,
            False,
            BLOCK_SIZE_N,
            DOT_PRECISION,
            UPCAST_DOT,
        )
        acc, l_i, m_i = _attn_inner(
            acc,
            l_i,
            m_i,
            q,
            k_base,
            v_base,
            stride_ks,
            stride_kd,
            stride_vs,
            stride_vd,
            offs_m,
            offs_d,
            d_mask,
            full,
            S,
            S,
            qk_scale,
            False,
            True,
            BLOCK_SIZE_N,
            DOT_PRECISION,
            UPCAST_DOT,
        )
    out = acc / l_i[:, None]
    tl.store(
        o_base + offs_m[:, None] * stride_os + offs_d[None, :] * stride_od, out.to(o_ptr.dtype.element_ty), mask=q_mask
    )


_RECORD = ConfigRecord(_attn_fwd_kernel)
_LOG2E = 1.4426950408889634


def _tuning_key(q, causal) -> tuple:
    # Same equivalence classes as the autotuner's key: (B, H, S, HEAD_DIM, CAUSAL)
    # plus the dtype of every tensor argument (q, k, v and out share q's dtype).
    B, H, S, D = q.shape
    return (B, H, S, D, bool(causal), q.dtype)


def triton_attention(q, k, v, causal, *, upcast_dot: bool = False):
    """Fused flash-style attention forward in Triton (own code, structure after
    Triton tutorial ``06-fused-attention.py``): one program per
    ``(BLOCK_SIZE_M query rows, batch * head)``, k and v streamed in
    ``BLOCK_SIZE_N`` tiles, online softmax in fp32, fp32 accumulator. Strided
    inputs are read in place; fp32 inputs use IEEE fp32 dots (no TF32).
    ``upcast_dot=True`` is a test variant: tiles loaded and ``out`` stored in the
    input dtype, ``p`` rounded to it as usual, but both ``tl.dot`` run on fp32
    operands (Triton's CPU interpreter computes 16-bit ``tl.dot`` wrongly).

    Raises
    ------
    ValueError
        When q, k, v differ in shape or dtype, or are not 4-D.
    """
    if q.dim() != 4 or q.shape != k.shape or q.shape != v.shape:
        raise ValueError(
            f"attention expects q, k, v of one shape (B, H, S, D); got "
            f"{tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)}"
        )
    if not (q.dtype == k.dtype == v.dtype):
        raise ValueError(f"q, k, v must share a dtype; got {q.dtype}, {k.dtype}, {v.dtype}")
    B, H, S, D = q.shape
    out = torch.empty((B, H, S, D), dtype=q.dtype, device=q.device)
    grid = lambda META: (triton.cdiv(S, META["BLOCK_SIZE_M"]), B * H)
    _attn_fwd_kernel[grid](
        q,
        k,
        v,
        out,
        B,
        H,
        S,
        *q.stride(),
        *k.stride(),
        *v.stride(),
        *out.stride(),
        _LOG2E / math.sqrt(D),
        HEAD_DIM=D,
        CAUSAL=bool(causal),
        DOT_PRECISION="ieee" if q.dtype == torch.float32 else "tf32",
        UPCAST_DOT=bool(upcast_dot),
        # tl.dot needs every dimension >= 16.
        BLOCK_SIZE_D=max(16, triton.next_power_of_2(D)),
    )
    _RECORD.after_launch(_tuning_key(q, causal))
    return out


def triton_attention_config(q, k, v, causal):
    """The autotuned config used for inputs with this tuning key. If none ran yet,
    runs the provider once (which tunes and records) and returns its choice."""
    key = _tuning_key(q, causal)
    cfg = _RECORD.get(key)
    if cfg is None:
        triton_attention(q, k, v, causal)
        cfg = _RECORD.get(key)
    cfg["BLOCK_SIZE_D"] = max(16, triton.next_power_of_2(q.shape[-1]))
    return cfg


OP = AttentionOp(
    name="attention",
    description="scaled dot-product attention forward, causal or not; flash-style fusion (tiling + online softmax) vs materialised scores",
    shape_names=("B", "H", "S", "D", "causal"),
    dtypes=("fp32", "fp16", "bf16"),
    make_inputs=make_inputs,
    reference=reference,
    # Outputs are convex combinations of rows of v (|out| <~ 3). fp32 accumulation
    # everywhere; in fp16/bf16 the probabilities are rounded to the input dtype
    # before p @ v (as every fused kernel does), plus one output rounding.
    tolerances={
        "fp32": Tolerance(atol=2e-5, rtol=2e-5),
        "fp16": Tolerance(atol=2e-3, rtol=2e-3),
        "bf16": Tolerance(atol=1.6e-2, rtol=1.6e-2),
    },
    cost=cost,
    providers={
        "torch": Provider(
            "torch",
            "torch",
            torch_sdpa,
            "torch.nn.functional.scaled_dot_product_attention (SDPA: flash / memory-efficient / cuDNN / math)",
        ),
        "torch_naive": Provider(
            "torch_naive",
            "torch",
            torch_naive_attention,
            "materialised S x S scores: matmul, scale, mask, softmax, matmul as eager ops",
        ),
        "triton": Provider(
            "triton",
            "triton",
            triton_attention,
            "Triton fused flash-style forward, online softmax, autotuned tiles",
            config=triton_attention_config,
        ),
    },
    # (4, 32, 4096, 128) bf16: q, k, v, out are 128 MiB each, far past a 60 MB L2
    # (and the naive provider's scores are 4 GiB).
    bench_shapes={
        "cuda": [(4, 32, 1024, 128, 0), (4, 32, 1024, 128, 1), (4, 32, 4096, 128, 0), (4, 32, 4096, 128, 1)],
        "cpu": [(1, 4, 512, 64, 0), (1, 4, 512, 64, 1)],
        "quick": [(1, 4, 256, 64, 1)],
    },
    bench_dtypes={"cuda": ["bf16", "fp16"], "cpu": ["fp32"]},
    test_shapes=[(1, 2, 1, 16, 1), (1, 2, 19, 16, 0), (1, 2, 19, 16, 1), (2, 3, 37, 24, 1)],
    uses_tensor_cores=True,
)


def WRONG(q, k, v, causal):
    """Negative control: scales scores by ``1/D`` instead of ``1/sqrt(D)`` (a
    classic slip), so the softmax is too flat."""
    S, D = q.shape[-2], q.shape[-1]
    scores = (q.float() @ k.float().transpose(-2, -1)) / D
    if causal:
        above = torch.ones(S, S, dtype=torch.bool, device=q.device).triu(1)
        scores = scores.masked_fill(above, float("-inf"))
    return (torch.softmax(scores, dim=-1) @ v.float()).to(q.dtype)
