"""Compile every Triton kernel and autotune config ahead of time for sm_80 and
sm_90, no GPU needed, and check each fits the target's shared memory.

    python scripts/triton_aot.py [--arch 80,90] [--full] [--json OUT]

For each of the ten op families, every ``@triton.jit`` kernel is compiled with
the launch parameters its provider uses at the op's largest CUDA bench shape,
in every CUDA bench dtype; autotuned kernels (matmul, attention) in every
config. Default: Triton's pipeline up to LLVM IR (``ttir``, ``ttgir``,
``llir``), where shared memory is allocated (``metadata["shared"]``); the
PTX/cubin stages (LLVM codegen and ptxas) add nothing to that figure and most
of the time. ``--full`` compiles to cubin with Triton's bundled ptxas.

Checks, one row each, printed as a table:

- a config the autotuner keeps for that target (``kernels._autotune.fit_shared_memory``
  with the target's opt-in limit, :data:`kernels._autotune.SHARED_MEM_OPTIN_BYTES`)
  fits: ``shared <= limit``;
- for matmul, the pruning estimate (``kernels.matmul.shared_mem_estimate``)
  bounds the compiled figure for every config, kept or pruned, so the prune
  never keeps a config that does not fit.

Exit status: 0 all checks pass, 1 a check failed, 2 Triton has no NVIDIA backend.
Runs with ``TRITON_INTERPRET=0`` (set here before kernels are imported, so the
autotuners hold their GPU config lists).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

os.environ["TRITON_INTERPRET"] = "0"
ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import triton  # noqa: E402

_T = {"fp32": "fp32", "tf32": "fp32", "bf16": "bf16", "fp16": "fp16"}
_ITEMSIZE = {"fp32": 4, "bf16": 2, "fp16": 2}


def _jit(kernel):
    from triton.runtime.jit import JITFunction

    while not isinstance(kernel, JITFunction):  # unwrap @triton.autotune / heuristics
        kernel = kernel.fn
    return kernel


def compile_shared(
    kernel, sig: dict, consts: dict, arch: int, num_warps: int, num_stages: int, full: bool = False
) -> int:
    """Shared memory (bytes) of ``kernel`` compiled for ``sm_<arch>``.

    ``sig`` maps non-constexpr arguments to Triton type strings (``*bf16``,
    ``i32``, ``fp32``); ``consts`` the constexprs. Raises ``ValueError`` naming
    the arguments this script does not give (a kernel signature that changed:
    Triton's own error is an opaque ``_unflatten_ir`` one), else whatever Triton
    raises for a kernel that does not compile.
    """
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    fn = _jit(kernel)
    sig = dict(sig, **{c: "constexpr" for c in consts})
    missing = [a for a in fn.arg_names if a not in sig]
    if missing:
        raise ValueError(
            f"{fn.__name__}: no type or constexpr given for {', '.join(missing)} "
            "(the kernel's signature changed; update scripts/triton_aot.py)"
        )
    src = ASTSource(fn=fn, signature=sig, constexprs=consts)
    target = GPUTarget("cuda", arch, 32)
    opts = {"num_warps": num_warps, "num_stages": num_stages}
    if full:
        k = triton.compile(src, target=target, options=opts)
        if "cubin" not in k.asm:
            raise RuntimeError(f"{fn.__name__}: no cubin produced")
        return int(k.metadata.shared)
    try:  # Triton's own pipeline, stopped after the llir stage (internal API; 3.x)
        from triton._C.libtriton import ir
        from triton.compiler.compiler import make_backend

        backend = make_backend(target)
        options = backend.parse_options(dict(opts, **src.parse_options()))
        stages: dict = {}
        backend.add_stages(stages, options, src.language)
        context = ir.context()
        ir.load_dialects(context)
        backend.load_dialects(context)
        module = src.make_ir(
            target, options, backend.get_codegen_implementation(options), backend.get_module_map(), context
        )
        metadata = {"target": target, **options.__dict__}
        for ext in ("ttir", "ttgir", "llir"):
            module = stages[ext](module, metadata)
        return int(metadata["shared"])
    except (ImportError, AttributeError, KeyError, TypeError):  # another Triton layout: full compile
        return compile_shared(kernel, sig, consts, arch, num_warps, num_stages, full=True)


def launches():
    """``(family, kernel name, kernel, sig, consts, num_warps, configs or None, dtype)`` for
    every Triton kernel at its op's largest CUDA bench shape and each CUDA bench dtype."""
    import kernels
    from kernels import (
        attention,
        bias_gelu,
        histogram,
        layernorm,
        matmul,
        reduction,
        rmsnorm,
        softmax,
        transpose,
        vector_add,
    )

    ops = kernels.all_ops()
    out = []

    def dtypes(op):
        return [d for d in ops[op].bench_dtypes["cuda"] if d in _T]

    def ptrs(names, t):
        return {n: "*" + t for n in names}

    for d in dtypes("vector_add"):
        sig = dict(ptrs(("x_ptr", "y_ptr", "out_ptr"), _T[d]), n_elements="i32", stride_x="i32", stride_y="i32")
        out.append(
            (
                "vector_add",
                "_add_kernel",
                vector_add._add_kernel,
                sig,
                {"BLOCK_SIZE": vector_add.TRITON_BLOCK_SIZE},
                4,
                None,
                d,
            )
        )
    for d in dtypes("bias_gelu"):
        sig = dict(
            ptrs(("x_ptr", "bias_ptr", "out_ptr"), _T[d]),
            **{n: "i32" for n in ("N", "stride_xm", "stride_xn", "stride_b", "stride_om")},
        )
        out.append(
            (
                "bias_gelu",
                "_bias_gelu_kernel",
                bias_gelu._bias_gelu_kernel,
                sig,
                {"BLOCK_SIZE_N": bias_gelu.TRITON_BLOCK_SIZE_N},
                bias_gelu.TRITON_NUM_WARPS,
                None,
                d,
            )
        )
    n_soft = max(s[-1] for s in ops["softmax"].bench_shapes["cuda"])
    for d in dtypes("softmax"):
        block = triton.next_power_of_2(n_soft)
        warps = 4 if block < 2048 else (8 if block < 4096 else 16)
        sig = dict(
            ptrs(("out_ptr", "x_ptr"), _T[d]), **{n: "i32" for n in ("stride_xm", "stride_xn", "stride_om", "n_cols")}
        )
        out.append(("softmax", "_softmax_kernel", softmax._softmax_kernel, sig, {"BLOCK_SIZE": block}, warps, None, d))
    for fam, mod, names, strides in (
        (
            "layernorm",
            layernorm,
            ("x_ptr", "w_ptr", "b_ptr", "out_ptr"),
            ("stride_xm", "stride_xn", "stride_w", "stride_b", "stride_om"),
        ),
        ("rmsnorm", rmsnorm, ("x_ptr", "w_ptr", "out_ptr"), ("stride_xm", "stride_xn", "stride_w", "stride_om")),
    ):
        n_max = max(s[-1] for s in ops[fam].bench_shapes["cuda"])
        kern = getattr(mod, f"_{fam}_kernel")
        for d in dtypes(fam):
            for n in sorted({n_max, 2 * mod.MAX_BLOCK_SIZE + 1}):  # whole-row and chunked paths
                cfg = mod._triton_launch_config(n)
                sig = dict(ptrs(names, _T[d]), N="i32", **{s: "i32" for s in strides}, eps="fp32")
                out.append(
                    (
                        fam,
                        f"_{fam}_kernel[chunks={cfg['NUM_CHUNKS']}]",
                        kern,
                        sig,
                        {"BLOCK_SIZE": cfg["BLOCK_SIZE"], "NUM_CHUNKS": cfg["NUM_CHUNKS"]},
                        cfg["num_warps"],
                        None,
                        d,
                    )
                )
    for d in dtypes("reduction"):
        sig = {"x_ptr": "*" + _T[d], "out_ptr": "*fp32", "n_elements": "i32", "stride_x": "i32"}
        out.append(
            (
                "reduction",
                "_sum_atomic_kernel",
                reduction._sum_atomic_kernel,
                sig,
                {"BLOCK_SIZE": reduction.TRITON_BLOCK_SIZE},
                reduction.TRITON_NUM_WARPS,
                None,
                d,
            )
        )
        sig = {"x_ptr": "*" + _T[d], "partial_ptr": "*fp32", "n_elements": "i32", "stride_x": "i32"}
        out.append(
            (
                "reduction",
                "_partial_sums_kernel",
                reduction._partial_sums_kernel,
                sig,
                {"BLOCK_SIZE": reduction.TRITON_BLOCK_SIZE},
                reduction.TRITON_NUM_WARPS,
                None,
                d,
            )
        )
    out.append(
        (
            "reduction",
            "_final_sum_kernel",
            reduction._final_sum_kernel,
            {"partial_ptr": "*fp32", "out_ptr": "*fp32", "n_partials": "i32"},
            {"BLOCK_SIZE": reduction.TRITON_FINAL_BLOCK_SIZE},
            4,
            None,
            "fp32",
        )
    )
    bins_max = max(s[1] for s in ops["histogram"].bench_shapes["cuda"])
    for d in dtypes("histogram"):
        sig = {"x_ptr": "*" + _T[d], "hist_ptr": "*i32", "n_elements": "i64", "stride_x": "i32", "bins": "i32"}
        out.append(
            (
                "histogram",
                "_histogram_atomic_kernel",
                histogram._histogram_atomic_kernel,
                sig,
                {"BLOCK_SIZE": histogram.TRITON_BLOCK_SIZE},
                histogram.TRITON_NUM_WARPS,
                None,
                d,
            )
        )
        for bins in sorted({bins_max, histogram.TRITON_PRIVATE_MAX_BINS}):
            out.append(
                (
                    "histogram",
                    f"_histogram_private_kernel[bins={bins}]",
                    histogram._histogram_private_kernel,
                    sig,
                    {"BLOCK_SIZE": histogram.TRITON_BLOCK_SIZE, "BINS_PAD": max(32, triton.next_power_of_2(bins))},
                    histogram.TRITON_NUM_WARPS,
                    None,
                    d,
                )
            )
    for d in dtypes("transpose"):
        sig = dict(
            ptrs(("x_ptr", "out_ptr"), _T[d]), **{n: "i32" for n in ("M", "N", "n_elements", "stride_xm", "stride_xn")}
        )
        out.append(
            (
                "transpose",
                "_transpose_naive_kernel",
                transpose._transpose_naive_kernel,
                sig,
                {"BLOCK_SIZE": transpose.TRITON_NAIVE_BLOCK_SIZE},
                4,
                None,
                d,
            )
        )
        sig = dict(ptrs(("x_ptr", "out_ptr"), _T[d]), **{n: "i32" for n in ("M", "N", "stride_xm", "stride_xn")})
        t = transpose.TRITON_TILE
        out.append(
            (
                "transpose",
                "_transpose_tiled_kernel",
                transpose._transpose_tiled_kernel,
                sig,
                {"BLOCK_SIZE_M": t["BLOCK_SIZE_M"], "BLOCK_SIZE_N": t["BLOCK_SIZE_N"]},
                t["num_warps"],
                None,
                d,
            )
        )
    for d in [x for x in ops["matmul"].bench_dtypes["cuda"] if x in _T]:
        sig = dict(
            ptrs(("a_ptr", "b_ptr", "c_ptr"), _T[d]),
            **{
                n: "i32"
                for n in ("M", "N", "K", "stride_am", "stride_ak", "stride_bk", "stride_bn", "stride_cm", "stride_cn")
            },
        )
        out.append(
            (
                "matmul",
                "_matmul_kernel",
                matmul._matmul_kernel,
                sig,
                {"ALLOW_TF32": d == "tf32", "UPCAST_DOT": False},
                None,
                list(matmul._matmul_kernel.configs),
                d,
            )
        )
    d_head = max(s[3] for s in ops["attention"].bench_shapes["cuda"])
    for d in dtypes("attention"):
        # Causal and non-causal allocate the same tiles: both in the first dtype,
        # causal only in the others (the CI time budget).
        sig = dict(
            ptrs(("q_ptr", "k_ptr", "v_ptr", "o_ptr"), _T[d]),
            **{n: "i32" for n in ["B", "H", "S"] + [f"stride_{t}{x}" for t in "qkvo" for x in "bhsd"]},
            qk_scale="fp32",
        )
        for causal in (False, True) if d == dtypes("attention")[0] else (True,):
            consts = {
                "HEAD_DIM": d_head,
                "CAUSAL": causal,
                "DOT_PRECISION": "ieee" if d == "fp32" else "tf32",
                "UPCAST_DOT": False,
                "BLOCK_SIZE_D": max(16, triton.next_power_of_2(d_head)),
            }
            out.append(
                (
                    "attention",
                    f"_attn_fwd_kernel[causal={int(causal)}]",
                    attention._attn_fwd_kernel,
                    sig,
                    consts,
                    None,
                    list(attention._attn_fwd_kernel.configs),
                    d,
                )
            )
    return out


def run(archs=(80, 90), full: bool = False, progress=print) -> list[dict]:
    """Compile everything; one row per (kernel, dtype, config, arch) with
    ``shared``, ``limit``, ``kept`` (by the autotune prune), ``estimate`` and ``ok``."""
    from kernels import matmul
    from kernels._autotune import SHARED_MEM_OPTIN_BYTES, config_dict, fit_shared_memory

    rows = []
    for fam, name, kern, sig, consts, warps, configs, dtype in launches():
        for arch in archs:
            limit = SHARED_MEM_OPTIN_BYTES[(arch // 10, arch % 10)]
            if configs is None:
                todo = [(None, warps, 1, True, None)]
            else:
                est = (
                    (
                        lambda c, s=_ITEMSIZE[_T[dtype]], cap=(arch // 10, arch % 10), tf32=dtype == "tf32": (
                            matmul.shared_mem_estimate(c, s, cap, tf32)
                        )
                    )
                    if fam == "matmul"
                    else None
                )
                kept = fit_shared_memory(configs, est, limit) if est else list(configs)
                todo = [(c, c.num_warps, c.num_stages, c in kept, est(c) if est else None) for c in configs]
            for cfg, nw, ns, kept_, estimate in todo:
                meta = dict(consts, **(cfg.kwargs if cfg is not None else {}))
                t0 = time.perf_counter()
                row = {
                    "family": fam,
                    "kernel": name,
                    "dtype": dtype,
                    "arch": f"sm_{arch}",
                    "limit": limit,
                    "config": config_dict(cfg) if cfg is not None else {**consts, "num_warps": nw},
                    "kept": kept_,
                    "estimate": estimate,
                }
                try:
                    row["shared"] = compile_shared(kern, sig, meta, arch, nw, ns, full=full)
                    problems = []
                    if kept_ and row["shared"] > limit:
                        problems.append(f"kept by the prune but needs {row['shared']} > {limit} bytes")
                    if estimate is not None and row["shared"] > estimate:
                        problems.append(f"estimate {estimate} below the compiled {row['shared']} bytes")
                    row["ok"] = not problems
                    row["problem"] = "; ".join(problems)
                except Exception as exc:
                    row.update(shared=None, ok=not kept_, problem=f"{type(exc).__name__}: {str(exc)[:300]}")
                row["seconds"] = round(time.perf_counter() - t0, 3)
                rows.append(row)
                if progress:
                    cfg_s = ",".join(f"{k}={v}" for k, v in row["config"].items() if k not in consts)
                    progress(
                        f"{'ok  ' if row['ok'] else 'FAIL'} {row['arch']} {fam:10s} {name:36s} {dtype:4s} "
                        f"{cfg_s:70s} shared={row['shared']} limit={limit} "
                        f"{'kept' if kept_ else 'pruned'} {row['seconds']:.2f}s {row['problem']}"
                    )
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--arch", default="80,90", help="comma-separated compute capabilities (default 80,90)")
    ap.add_argument("--full", action="store_true", help="compile to cubin with ptxas (slower)")
    ap.add_argument("--json", help="write the rows as JSON here")
    args = ap.parse_args(argv)
    try:
        from triton.backends import backends

        if "nvidia" not in backends:
            print("triton_aot: Triton has no NVIDIA backend here", file=sys.stderr)
            return 2
    except Exception as exc:
        print(f"triton_aot: Triton backends unavailable: {exc}", file=sys.stderr)
        return 2
    t0 = time.perf_counter()
    rows = run(tuple(int(a) for a in args.arch.split(",")), full=args.full)
    bad = [r for r in rows if not r["ok"]]
    fams = sorted({r["family"] for r in rows})
    print(
        f"triton_aot: {len(rows)} compiles, {len(fams)} families ({', '.join(fams)}), "
        f"{sum(not r['kept'] for r in rows)} pruned configs, {len(bad)} failed, {time.perf_counter() - t0:.1f} s"
    )
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1) + "\n")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
