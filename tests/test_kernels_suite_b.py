"""Family-specific checks for layernorm, rmsnorm, attention and matmul's fp8 and
config extensions: hand-computed costs, the paths the generic odd-shape tests do
not reach (chunked rows, large offsets, causal masks, per-key autotune configs),
and an ahead-of-time compile of the Triton kernels for real GPUs (sm_80, sm_90),
which the CPU interpreter never exercises."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

import kernels
from kernels import _backends, attention, layernorm, matmul, rmsnorm
from kernels._autotune import ConfigRecord
from kernels._base import Tolerance, generator
from kernels._check import WrongResult, check_provider, compare, make_noncontiguous

ROOT = Path(__file__).resolve().parent.parent
#: Where torch and Triton providers run: CPU tensors under the Triton
#: interpreter, CUDA tensors on a GPU machine.
DEV = _backends.benchmark_device()


# --------------------------------------------------------------------------- cost


@pytest.mark.parametrize(
    "op_name,shape,dtype,flops,bytes_read,bytes_written",
    [
        # 8 FLOPs per element; x once, weight + bias once, out once.
        ("layernorm", (4, 10), "fp32", 8 * 40, (40 + 2 * 10) * 4, 40 * 4),
        ("layernorm", (4, 10), "bf16", 8 * 40, (40 + 2 * 10) * 2, 40 * 2),
        # 4 FLOPs per element; x once, weight once, out once.
        ("rmsnorm", (4, 10), "fp32", 4 * 40, (40 + 10) * 4, 40 * 4),
        ("rmsnorm", (3, 7), "fp16", 4 * 21, (21 + 7) * 2, 21 * 2),
        # Non-causal: 4*B*H*S*S*D = 4*2*3*5*5*8 = 4800; q, k, v = 3*240 elements read, 240 written.
        ("attention", (2, 3, 5, 8, 0), "fp16", 4800, 3 * 240 * 2, 240 * 2),
        # Causal: 15 of the 25 scores (S*(S+1)/2) are needed: 4800 * 15 / 25 = 2880. Same bytes.
        ("attention", (2, 3, 5, 8, 1), "fp16", 2880, 3 * 240 * 2, 240 * 2),
        # S = 1: one score either way.
        ("attention", (1, 1, 1, 16, 0), "fp32", 64, 3 * 16 * 4, 16 * 4),
        ("attention", (1, 1, 1, 16, 1), "fp32", 64, 3 * 16 * 4, 16 * 4),
        # fp8 GEMM: 1-byte inputs, bf16 (2-byte) output.
        ("matmul", (128, 256, 64), "fp8", 2 * 128 * 256 * 64, 128 * 64 + 64 * 256, 128 * 256 * 2),
    ],
)
def test_cost_against_hand_computed(op_name, shape, dtype, flops, bytes_read, bytes_written):
    c = kernels.get_op(op_name).cost(shape, dtype)
    assert (c.flops, c.bytes_read, c.bytes_written) == (flops, bytes_read, bytes_written)


@pytest.mark.parametrize("S", [2, 19, 1024, 4096])
def test_causal_attention_flops_are_about_half(S):
    full = attention.cost((4, 8, S, 64, 0), "bf16")
    causal = attention.cost((4, 8, S, 64, 1), "bf16")
    # Exactly (S + 1) / (2 S) of the non-causal count: the diagonal is computed.
    assert causal.flops * 2 * S == full.flops * (S + 1)
    assert causal.bytes_read == full.bytes_read and causal.bytes_written == full.bytes_written


def test_norm_costs_are_memory_bound_on_a_gpu():
    # Arithmetic intensity (FLOPs per byte) of a bf16 norm is a few FLOPs per
    # byte, far below any GPU's ridge point (~200 FLOP/B bf16 on an H100).
    for op in (layernorm.OP, rmsnorm.OP):
        ai = op.cost((32768, 8192), "bf16").arithmetic_intensity
        assert 0.5 < ai < 3


# --------------------------------------------------------------------------- bench shapes


@pytest.mark.parametrize("op_name", ["layernorm", "rmsnorm", "attention", "matmul"])
def test_cuda_bench_shapes_include_one_past_l2(op_name):
    op = kernels.get_op(op_name)
    l2_bytes = 60 * 10**6
    biggest = max(op.cost(s, d).bytes_total for s in op.bench_shapes["cuda"] for d in op.bench_dtypes["cuda"])
    assert biggest > 4 * l2_bytes
    for key in ("cuda", "cpu", "quick"):
        for shape in op.bench_shapes[key]:
            op.check_shape(shape)
    assert len(op.bench_shapes["quick"]) == 1


# --------------------------------------------------------------------------- layernorm / rmsnorm


@pytest.mark.parametrize("dtype", ["fp32", "fp16"])
@pytest.mark.parametrize(
    "module,fn",
    [(layernorm, layernorm.triton_layernorm), (rmsnorm, rmsnorm.triton_rmsnorm)],
    ids=["layernorm", "rmsnorm"],
)
def test_triton_norm_chunked_path(module, fn, dtype):
    """Rows wider than the tile take the looped path (Chan merge for layernorm),
    with a ragged last chunk."""
    for shape, block_size in [((3, 1823), 512), ((2, 17), 16)]:
        inputs = module.OP.make_inputs(shape, dtype, DEV)
        ref = module.OP.reference(*inputs)
        strided = [make_noncontiguous(t) for t in inputs]
        compare(module.OP, fn(*strided, block_size=block_size), ref, dtype, f"{module.OP.name}{shape}/bs{block_size}")
        cfg = module._triton_launch_config(shape[1], block_size)
        assert cfg["NUM_CHUNKS"] == -(-shape[1] // block_size)


def _offset_layernorm_inputs(shape, dtype, device, seed=0):
    """Rows with mean 100 and standard deviation 1: E[x^2] - E[x]^2 in fp32
    cancels ~4 significant digits here."""
    M, N = shape
    x = torch.randn((M, N), generator=generator(seed)) + 100.0
    w = 1.0 + 0.1 * torch.randn((N,), generator=generator(seed + 1))
    b = 0.1 * torch.randn((N,), generator=generator(seed + 2))
    return x.to(device), w.to(device), b.to(device)


def _textbook_layernorm(x, weight, bias):
    """One-pass E[x^2] - E[x]^2 in fp32: the numerically bad formula."""
    n = x.shape[-1]
    mean = x.sum(-1, keepdim=True) / n
    var = ((x * x).sum(-1, keepdim=True) / n - mean * mean).clamp_min(0)
    return (x - mean) * torch.rsqrt(var + layernorm.EPS) * weight + bias


def test_layernorm_statistics_survive_a_large_mean():
    op = dataclasses.replace(
        layernorm.OP,
        make_inputs=_offset_layernorm_inputs,
        tolerances={**layernorm.OP.tolerances, "fp32": Tolerance(atol=1e-4, rtol=1e-4)},
    )
    shape = (4, 1823)
    check_provider(op, layernorm.triton_layernorm, shape, "fp32", DEV)
    check_provider(op, lambda x, w, b: layernorm.triton_layernorm(x, w, b, block_size=512), shape, "fp32", DEV)
    check_provider(op, layernorm.torch_layernorm, shape, "fp32", DEV)
    # The same tolerance rejects the textbook formula: the test can fail.
    with pytest.raises(WrongResult):
        check_provider(op, _textbook_layernorm, shape, "fp32", DEV)


def test_layernorm_single_element_rows_are_the_bias():
    x, w, b = layernorm.OP.make_inputs((5, 1), "fp32", DEV)
    torch.testing.assert_close(layernorm.triton_layernorm(x, w, b), b.expand(5, 1))


@pytest.mark.parametrize("module", [layernorm, rmsnorm], ids=["layernorm", "rmsnorm"])
def test_triton_norm_rejects_mismatched_weight(module):
    inputs = list(module.OP.make_inputs((3, 8), "fp32", DEV))
    inputs[1] = inputs[1][:7]
    fn = module.OP.providers["triton"].fn
    with pytest.raises(ValueError, match="expects"):
        fn(*inputs)


def test_rmsnorm_torch_provider_matches_nn_rmsnorm():
    assert hasattr(torch.nn.functional, "rms_norm")
    x, w = rmsnorm.OP.make_inputs((4, 33), "fp32", "cpu")
    module = torch.nn.RMSNorm(33, eps=rmsnorm.EPS)
    with torch.no_grad():
        module.weight.copy_(w)
        torch.testing.assert_close(rmsnorm.torch_rmsnorm(x, w), module(x))


# --------------------------------------------------------------------------- attention


def test_attention_shape_carries_the_causal_flag():
    op = attention.OP
    assert op.check_shape((1, 2, 19, 16, 0)) == (1, 2, 19, 16, 0)
    assert op.check_shape((1, 2, 19, 16, 1)) == (1, 2, 19, 16, 1)
    for bad in [(1, 2, 19, 16, 2), (1, 2, 19, 16, True), (1, 2, 0, 16, 1), (1, 2, 19, 16)]:
        with pytest.raises(ValueError):
            op.check_shape(bad)
    assert {s[-1] for s in op.bench_shapes["cuda"]} == {0, 1}
    assert {s[-1] for s in op.bench_shapes["cpu"]} == {0, 1}
    assert {s[-1] for s in op.test_shapes} == {0, 1}
    q, k, v, causal = op.make_inputs((1, 2, 3, 16, 1), "fp32", DEV)
    assert causal is True and q.shape == (1, 2, 3, 16)


def test_causal_and_full_attention_differ():
    q, k, v, _ = attention.OP.make_inputs((1, 2, 19, 16, 1), "fp32", DEV)
    full = attention.reference(q, k, v, False)
    causal = attention.reference(q, k, v, True)
    # The last query sees every key either way; the first sees only key 0.
    torch.testing.assert_close(full[..., -1, :], causal[..., -1, :])
    torch.testing.assert_close(causal[..., 0, :], v[..., 0, :].double())
    assert (full[..., 0, :] - causal[..., 0, :]).abs().max() > 0.1


@pytest.mark.parametrize("prov_name", ["torch", "torch_naive", "triton"])
def test_provider_that_ignores_causal_is_rejected(prov_name):
    fn = attention.OP.providers[prov_name].fn
    with pytest.raises(WrongResult):
        check_provider(attention.OP, lambda q, k, v, causal: fn(q, k, v, not causal), (1, 2, 19, 16, 1), "fp32", DEV)
    with pytest.raises(WrongResult):
        check_provider(attention.OP, lambda q, k, v, causal: fn(q, k, v, not causal), (1, 2, 19, 16, 0), "fp32", DEV)


def test_causal_mask_off_by_one_is_rejected():
    """A mask that lets each query see one future key (``triu(2)`` instead of ``triu(1)``)."""

    def leaky(q, k, v, causal):
        S, D = q.shape[-2], q.shape[-1]
        scores = (q @ k.transpose(-2, -1)) / D**0.5
        if causal:
            scores = scores.masked_fill(torch.ones(S, S, dtype=torch.bool, device=q.device).triu(2), float("-inf"))
        return torch.softmax(scores, dim=-1) @ v

    with pytest.raises(WrongResult):
        check_provider(attention.OP, leaky, (1, 2, 19, 16, 1), "fp32", DEV)


def test_triton_attention_online_softmax_with_large_scores():
    """Scores around +-100: exp overflows in fp32 unless the running maximum is
    subtracted, and a wrong rescale between key tiles shows up at once."""

    def big_inputs(shape, dtype, device, seed=0):
        q, k, v, causal = attention.make_inputs(shape, dtype, device, seed)
        return q * 8.0, k * 4.0, v, causal

    op = dataclasses.replace(attention.OP, make_inputs=big_inputs)
    for shape in [(1, 1, 40, 16, 0), (1, 1, 40, 16, 1)]:
        check_provider(op, attention.triton_attention, shape, "fp32", DEV)


@pytest.mark.parametrize("causal", [0, 1])
def test_triton_attention_upcast_dot_variant_matches_reference(causal):
    """The ``upcast_dot`` variant (fp32 operands in both ``tl.dot``; what the CPU
    tests run for bf16, whose interpreted ``tl.dot`` is wrong) matches the fp64
    reference on a ragged last key tile (mutation: ``* qk_scale`` as ``// qk_scale``)."""

    def upcast(q, k, v, causal):
        return attention.triton_attention(q, k, v, causal, upcast_dot=True)

    check_provider(attention.OP, upcast, (1, 2, 19, 16, causal), "bf16", DEV)


def test_triton_attention_rejects_mismatched_inputs():
    q, k, v, _ = attention.OP.make_inputs((1, 2, 5, 16, 0), "fp32", DEV)
    with pytest.raises(ValueError, match="one shape"):
        attention.triton_attention(q, k[:, :, :4], v, False)
    with pytest.raises(ValueError, match="dtype"):
        attention.triton_attention(q, k.half(), v, False)


def test_triton_attention_config_names_the_tiles():
    q, k, v, causal = attention.OP.make_inputs((1, 2, 19, 24, 1), "fp16", DEV)
    cfg = attention.triton_attention_config(q, k, v, causal)
    assert {"BLOCK_SIZE_M", "BLOCK_SIZE_N", "BLOCK_SIZE_D", "num_warps", "num_stages"} <= set(cfg)
    assert cfg["BLOCK_SIZE_D"] == 32 and cfg["BLOCK_SIZE_M"] % cfg["BLOCK_SIZE_N"] == 0


def test_attention_prunes_autotuning_for_short_sequences_and_fp32():
    import triton

    cfgs = [
        triton.Config({"BLOCK_SIZE_M": m, "BLOCK_SIZE_N": n}, num_warps=4, num_stages=2)
        for m, n in [(128, 64), (128, 32), (64, 64), (64, 32)]
    ]
    assert len(attention._prune_configs(cfgs, {"S": 4096}, DOT_PRECISION="tf32")) == 4
    (short,) = attention._prune_configs(cfgs, {"S": 19}, DOT_PRECISION="tf32")
    assert short.kwargs["BLOCK_SIZE_M"] == 64
    (fp32,) = attention._prune_configs(cfgs, {"S": 4096}, DOT_PRECISION="ieee")
    assert fp32.kwargs == {"BLOCK_SIZE_M": 64, "BLOCK_SIZE_N": 32}


# --------------------------------------------------------------------------- matmul fp8 and configs


def test_fp8_is_torch_only_and_uses_scaled_mm():
    op = matmul.OP
    assert "fp8" in op.dtypes
    assert op.providers["torch"].supports("fp8")
    assert not op.providers["triton"].supports("fp8")
    assert not op.providers["cupy"].supports("fp8")
    reason = matmul.fp8_unsupported_reason(torch.device(DEV))
    if reason:
        pytest.skip(reason)
    a, b = op.make_inputs((32, 48, 64), "fp8", DEV)
    assert a.dtype == b.dtype == torch.float8_e4m3fn
    assert b.shape == (64, 48) and b.t().is_contiguous()  # column-major, as fp8 GEMMs take it
    out = op.providers["torch"].fn(a, b)
    assert out.dtype == torch.bfloat16
    compare(op, out, op.reference(a, b), "fp8", "matmul fp8")


def test_fp8_wrong_accumulation_is_rejected():
    """An fp8 GEMM that rounds its result through fp8 (e4m3 out) loses ~3 bits."""

    def fp8_out(a, b):
        return (a.double() @ b.double()).to(torch.float8_e4m3fn).to(torch.bfloat16)

    with pytest.raises(WrongResult):
        check_provider(matmul.OP, fp8_out, (33, 1823, 47), "fp8", DEV)


def test_fp8_capability_check(monkeypatch):
    assert matmul.fp8_unsupported_reason(torch.device("cpu")) is None
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (8, 0))
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "NVIDIA A100-SXM4-80GB")
    reason = matmul.fp8_unsupported_reason(torch.device("cuda"))
    assert "8.9" in reason and "sm_80" in reason and "A100" in reason
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (9, 0))
    assert matmul.fp8_unsupported_reason(torch.device("cuda")) is None


def test_fp8_unsupported_raises_not_implemented(monkeypatch):
    monkeypatch.setattr(matmul, "fp8_unsupported_reason", lambda device: "fp8 needs sm_89+; this is sm_80")
    a, b = matmul.OP.make_inputs((16, 16, 16), "fp8", DEV)
    with pytest.raises(NotImplementedError, match="sm_89"):
        matmul.OP.providers["torch"].fn(a, b)


def test_config_record_is_per_key():
    class FakeAutotuner:
        best_config = None

    import triton

    k = FakeAutotuner()
    rec = ConfigRecord(k)
    k.best_config = triton.Config({"BLOCK_SIZE_M": 128}, num_warps=8, num_stages=3)
    rec.after_launch(("a",))
    k.best_config = triton.Config({"BLOCK_SIZE_M": 64}, num_warps=4, num_stages=2)
    rec.after_launch(("b",))
    assert rec.get(("a",)) == {"BLOCK_SIZE_M": 128, "num_warps": 8, "num_stages": 3}
    assert rec.get(("b",)) == {"BLOCK_SIZE_M": 64, "num_warps": 4, "num_stages": 2}
    assert rec.get(("c",)) is None
    rec.get(("a",))["BLOCK_SIZE_M"] = 1  # a copy: callers cannot corrupt the record
    assert rec.get(("a",))["BLOCK_SIZE_M"] == 128


def test_triton_matmul_config_follows_the_inputs_key(monkeypatch):
    """Two shapes tuned to different configs: each shape's config is reported for
    it, not the config of whichever launch came last."""
    import triton

    kernel = matmul._matmul_kernel
    small = triton.Config(
        {"BLOCK_SIZE_M": 16, "BLOCK_SIZE_N": 16, "BLOCK_SIZE_K": 16, "GROUP_SIZE_M": 2}, num_warps=2, num_stages=1
    )
    large = triton.Config(
        {"BLOCK_SIZE_M": 32, "BLOCK_SIZE_N": 32, "BLOCK_SIZE_K": 32, "GROUP_SIZE_M": 4}, num_warps=4, num_stages=1
    )
    monkeypatch.setattr(kernel, "configs", [small, large])
    monkeypatch.setattr(kernel, "cache", {})
    # A one-config prune per shape: the autotuner takes it without benchmarking.
    monkeypatch.setattr(
        kernel, "early_config_prune", lambda configs, nargs, **kw: [configs[0] if nargs["M"] < 32 else configs[1]]
    )
    monkeypatch.setattr(matmul._RECORD, "_chosen", {})

    a1, b1 = matmul.OP.make_inputs((19, 19, 19), "fp32", DEV)
    a2, b2 = matmul.OP.make_inputs((40, 20, 24), "fp32", DEV)
    compare(matmul.OP, matmul.triton_matmul(a1, b1), matmul.reference(a1, b1), "fp32")
    compare(matmul.OP, matmul.triton_matmul(a2, b2), matmul.reference(a2, b2), "fp32")
    assert kernel.best_config is large  # the last launch
    assert matmul.triton_matmul_config(a1, b1)["BLOCK_SIZE_M"] == 16
    assert matmul.triton_matmul_config(a2, b2)["BLOCK_SIZE_M"] == 32
    assert matmul.triton_matmul_config(a1, b1) == {
        "BLOCK_SIZE_M": 16,
        "BLOCK_SIZE_N": 16,
        "BLOCK_SIZE_K": 16,
        "GROUP_SIZE_M": 2,
        "num_warps": 2,
        "num_stages": 1,
    }
    # Never-launched key: the config call runs the provider once to find out.
    a3, b3 = matmul.OP.make_inputs((64, 16, 16), "fp32", DEV)
    assert matmul.triton_matmul_config(a3, b3)["BLOCK_SIZE_M"] == 32


# --------------------------------------------------------------------------- GPU compile (no GPU needed)

_AOT_SCRIPT = textwrap.dedent(
    """
    import os, sys
    os.environ["TRITON_INTERPRET"] = "0"
    sys.path.insert(0, sys.argv[1])
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    from triton.runtime.jit import JITFunction
    from kernels import attention, layernorm, rmsnorm, vector_add

    def build(kernel, sig, consts, arch, num_warps, num_stages):
        while not isinstance(kernel, JITFunction):  # unwrap @triton.autotune
            kernel = kernel.fn
        sig = dict(sig, **{c: "constexpr" for c in consts})
        k = triton.compile(ASTSource(fn=kernel, signature=sig, constexprs=consts),
                           target=GPUTarget("cuda", arch, 32),
                           options={"num_warps": num_warps, "num_stages": num_stages})
        assert "cubin" in k.asm, kernel.__name__

    for chunks in (1, 3):
        sig = {n: "*bf16" for n in ("x_ptr", "w_ptr", "b_ptr", "out_ptr")}
        sig.update({n: "i32" for n in ("N", "stride_xm", "stride_xn", "stride_w", "stride_b", "stride_om")}, eps="fp32")
        build(layernorm._layernorm_kernel, sig, {"BLOCK_SIZE": 1024, "NUM_CHUNKS": chunks}, 90, 4, 1)
        sig = {n: "*fp16" for n in ("x_ptr", "w_ptr", "out_ptr")}
        sig.update({n: "i32" for n in ("N", "stride_xm", "stride_xn", "stride_w", "stride_om")}, eps="fp32")
        build(rmsnorm._rmsnorm_kernel, sig, {"BLOCK_SIZE": 1024, "NUM_CHUNKS": chunks}, 80, 4, 1)
    # (the up-cast test variant too: tests/test_tolerances.py runs it on a GPU)
    for dtype, causal, arch, upcast in (("bf16", 1, 90, False), ("fp16", 0, 80, False), ("bf16", 0, 90, True)):
        sig = {n: "*" + dtype for n in ("q_ptr", "k_ptr", "v_ptr", "o_ptr")}
        sig.update({n: "i32" for n in ["B", "H", "S"] + [f"stride_{t}{d}" for t in "qkvo" for d in "bhsd"]},
                   qk_scale="fp32")
        build(attention._attn_fwd_kernel, sig,
              {"HEAD_DIM": 64, "CAUSAL": bool(causal), "DOT_PRECISION": "tf32", "UPCAST_DOT": upcast,
               "BLOCK_SIZE_D": 64, "BLOCK_SIZE_M": 64, "BLOCK_SIZE_N": 32}, arch, 4, 2)
    sig = {n: "*bf16" for n in ("x_ptr", "y_ptr", "out_ptr")}
    sig.update({n: "i32" for n in ("n_elements", "stride_x", "stride_y")})
    build(vector_add._add_kernel, sig, {"BLOCK_SIZE": 1024}, 90, 4, 1)
    print("ok")
    """
)


def _triton_cuda_backend_missing() -> str | None:
    try:
        from triton.backends import backends
        from triton.backends.compiler import GPUTarget  # noqa: F401

        if "nvidia" not in backends:
            return "triton has no NVIDIA backend installed"
    except Exception as exc:
        return f"triton backend unavailable: {type(exc).__name__}: {exc}"
    return None


@pytest.mark.skipif(_triton_cuda_backend_missing() is not None, reason=str(_triton_cuda_backend_missing()))
def test_triton_kernels_compile_for_sm80_and_sm90(tmp_path):
    """The interpreter does not type-check: compile the real kernels (both norm
    paths, causal and non-causal attention) to cubin ahead of time, no GPU needed."""
    env = dict(
        os.environ, TRITON_INTERPRET="0", TRITON_CACHE_DIR=str(tmp_path / "triton-cache"), TRITON_DEFAULT_FP_FUSION="1"
    )
    proc = subprocess.run(
        [sys.executable, "-c", _AOT_SCRIPT, str(ROOT)], capture_output=True, text=True, env=env, timeout=600
    )
    assert proc.returncode == 0 and proc.stdout.strip().endswith("ok"), proc.stderr[-4000:]
