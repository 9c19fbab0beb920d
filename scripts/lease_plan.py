"""The bench-head plan of a GPU lease: which headline cases fit, from per-case costs.

    python scripts/lease_plan.py --budget-s 240 [--device cuda|cpu] [--quick]
                                 [--results DIR] [--regex-out FILE] [--json FILE]

asv stores a commit's results only when every benchmark of the run finished,
so bench-head must be sized to finish: a cut-off run stores nothing. The
headline cases (per op: its largest CUDA shape in bf16, else its first CUDA
dtype; every provider; ``cold`` timing) are costed one by one, kept in the
registry's order while the running total stays within ``--budget-s``, and the
rest are listed as cut. The kept cases go out as one asv ``--bench`` regex
(``--regex-out``).

Per-case cost, in order of preference:

1. **measured**: asv's own ``duration`` of that benchmark in an earlier
   results file of a machine of the same kind (``--results``, every
   ``<machine>/*.json`` asv v2 file; the newest wins), which includes the
   process start, imports, CUDA context, compile and sampling;
2. **estimated**, where nothing was measured:
   ``start_s`` (a fresh interpreter importing ``harness.bench`` and the
   kernels, measured here once per plan, plus :data:`CUDA_CONTEXT_S` on CUDA)
   + the Triton compile on the first case of a tuning key (configs after the
   shared-memory prune times :data:`COMPILE_S_PER_CONFIG`, Triton's on-disk
   cache serves the other methods) + the timing config's ``warmup_s`` and
   ``max_time_s`` (the stopping rule's bound) + :data:`CHECK_S`.

Exit status 0 (the plan printed), 2 bad arguments or no op loadable.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

#: Creating a CUDA context and loading the CUDA libraries in a fresh process, seconds
#: (an assumption until a GPU run measures it: typical figures are 0.3-1 s on a
#: datacenter GPU; the first lease's asv durations replace the whole estimate).
CUDA_CONTEXT_S = 1.0
#: Triton compile seconds per autotune config or jit kernel, by op and dtype,
#: measured on the 2-core CI machine (issue 18: 11 matmul configs took 7 s in
#: bf16 and 28 s in fp32 there); other kernels 0.5 s each.
COMPILE_S_PER_CONFIG = {
    ("matmul", "bf16"): 0.65,
    ("matmul", "fp16"): 0.65,
    ("matmul", "fp32"): 2.5,
    ("matmul", "tf32"): 2.5,
    ("attention", "bf16"): 1.0,
    ("attention", "fp16"): 1.0,
}
COMPILE_S_DEFAULT = 0.5
#: Correctness at the test shape and once at the bench shape (fp64 reference on
#: the device), seconds per case.
CHECK_S = 0.5
#: asv's own bookkeeping per benchmark (spawn, result collection), seconds.
ASV_OVERHEAD_S = 0.5
#: Environment variable that gives the process start in seconds instead of
#: measuring it. For tests: a start measured on a loaded 2-core machine is 3-4x
#: the idle figure, and the plan's cut moves with it.
START_S_ENV = "KERNELWATCH_PLAN_START_S"


def headline_cases(device: str = "cuda", quick: bool = False) -> list[dict]:
    """The headline cases in registry order: ``{"op", "provider", "shape", "dtype", "timing", "name"}``."""
    import kernels
    from kernels import _backends
    from kernels._base import shape_label

    out = []
    for name in kernels.OP_MODULES:
        try:
            op = kernels.get_op(name)
        except Exception as exc:  # a broken op must not hide the others
            print(f"lease_plan: op {name} skipped: {type(exc).__name__}: {exc}", file=sys.stderr)
            continue
        if device == "cuda":
            shapes = list(op.bench_shapes.get("quick" if quick else "cuda") or op.test_shapes[-1:])
            dtypes = list(op.bench_dtypes.get("cuda") or op.dtypes[:1])
            shape = max(shapes, key=lambda s: math.prod(s))
            dtype = "bf16" if "bf16" in dtypes else dtypes[0]
            provs = list(op.providers)
            method = "cold"
        else:  # the CPU grid of --allow-cpu: what benchmarks/suite.py times there
            shapes = list(op.bench_shapes.get("quick" if quick else "cpu") or op.test_shapes[-1:])
            shape = max(shapes, key=lambda s: math.prod(s))
            dtype = (op.bench_dtypes.get("cpu") or op.dtypes[:1])[0]
            provs = [p for p, prov in op.providers.items() if _backends.availability(prov.backend).timeable]
            method = "cpu"
        for rank, prov in enumerate(provs):
            out.append(
                {
                    "op": name,
                    "provider": prov,
                    "shape": shape_label(shape),
                    "dtype": dtype,
                    "timing": method,
                    "name": f"suite.{name}.track_time('{prov}', '{shape_label(shape)}', '{dtype}', '{method}')",
                    "backend": op.providers[prov].backend,
                    "rank": rank,
                    "supported": op.providers[prov].supports(dtype),
                }
            )
    # Every op's first provider first, then every op's second, ...: a cut drops
    # variants (cupy_tiled_padded), not whole ops.
    order = {n: i for i, n in enumerate(kernels.OP_MODULES)}
    return sorted(out, key=lambda c: (c["rank"], order[c["op"]]))


def case_regex(cases: list[dict]) -> str:
    """One asv ``--bench`` regex matching exactly ``cases`` ('.' stands for asv's quotes)."""
    parts = [
        rf"suite\.{re.escape(c['op'])}\.track_time\(.{re.escape(c['provider'])}., .{re.escape(c['shape'])}., "
        rf".{re.escape(c['dtype'])}., .{c['timing']}.\)"
        for c in cases
    ]
    return "|".join(parts)


def measured_durations(results: Path | None, kind: str) -> dict[str, float]:
    """``{benchmark name with params: seconds}`` from asv v2 results files of
    machines whose ``machine.json`` says ``kind`` (``cuda`` or ``cpu``); newest file wins."""
    out: dict[str, tuple[float, float]] = {}
    if results is None or not results.is_dir():
        return {}
    for mdir in sorted(p for p in results.iterdir() if p.is_dir()):
        try:
            machine = json.loads((mdir / "machine.json").read_text())
        except (OSError, ValueError):
            continue
        gpu = str(machine.get("gpu") or machine.get("kernelwatch_device_kind") or machine.get("cpu") or "")
        is_cuda = machine.get("kernelwatch_device_kind") == "cuda" or "nvidia" in gpu.lower() or "h200" in gpu.lower()
        if (kind == "cuda") != is_cuda:
            continue
        for f in mdir.glob("*.json"):
            if f.name == "machine.json":
                continue
            try:
                d = json.loads(f.read_text())
            except (OSError, ValueError):
                continue
            if not isinstance(d, dict) or "results" not in d:
                continue
            cols = d.get("result_columns") or []
            date = float(d.get("date") or 0)
            for bench, row in (d.get("results") or {}).items():
                if not isinstance(row, list) or "duration" not in cols or "params" not in cols:
                    continue
                rec = dict(zip(cols, row))
                dur, params = rec.get("duration"), rec.get("params") or []
                if not isinstance(dur, (int, float)) or not dur > 0:
                    continue
                # asv's duration covers the whole parameter grid of the benchmark: per case.
                combos = math.prod(len(p) for p in params) if params else 1
                per_case = float(dur) / max(1, combos)
                import itertools

                for combo in itertools.product(*params) if params else [()]:
                    key = f"{bench}({', '.join(combo)})"
                    if key not in out or out[key][0] < date:
                        out[key] = (date, per_case)
    return {k: v for k, (_, v) in out.items()}


def start_seconds() -> float:
    """Wall time of a fresh interpreter importing harness.measure.bench and every op, measured now.

    ``$KERNELWATCH_PLAN_START_S`` (:data:`START_S_ENV`), when set, is used
    instead; exits 2 when it is not a finite number >= 0.
    """
    given = os.environ.get(START_S_ENV)
    if given:
        try:
            seconds = float(given)
        except ValueError:
            seconds = -1.0
        if not seconds >= 0 or math.isinf(seconds):
            print(f"lease_plan: error: {START_S_ENV} must be seconds >= 0, got {given!r}", file=sys.stderr)
            raise SystemExit(2)
        return seconds
    t0 = time.perf_counter()
    subprocess.run(
        [sys.executable, "-c", "import harness.measure.bench, kernels; kernels.all_ops()"],
        cwd=ROOT,
        capture_output=True,
        timeout=300,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
    )
    return time.perf_counter() - t0


def _n_configs(op: str, dtype: str) -> int:
    """Triton kernels compiled for one tuning key: configs kept by the H200's shared
    memory for the autotuned ops, else the op's jit kernels (1-3)."""
    if op == "matmul":
        from kernels import matmul
        from kernels._autotune import SHARED_MEM_OPTIN_BYTES, fit_shared_memory

        if not hasattr(matmul._matmul_kernel, "configs"):
            return 1
        size = 4 if dtype in ("fp32", "tf32") else 2
        return len(
            fit_shared_memory(
                matmul._matmul_kernel.configs,
                lambda c: matmul.shared_mem_estimate(c, size, (9, 0), dtype == "tf32"),
                SHARED_MEM_OPTIN_BYTES[(9, 0)],
            )
        )
    if op == "attention":
        return 6  # its GPU config list (kernels/attention.py _configs)
    return 2 if op in ("reduction", "histogram", "layernorm", "rmsnorm") else 1


def plan(budget_s: float, device: str = "cuda", quick: bool = False, results: Path | None = None) -> dict:
    """Cost every headline case and cut to ``budget_s``; see the module docstring."""
    from harness.measure import bench, timing

    cases = headline_cases(device, quick)
    if not cases:
        raise SystemExit(2)
    measured = measured_durations(results, device)
    start = start_seconds() + (CUDA_CONTEXT_S if device == "cuda" else 0.0)
    method_cfg = bench.DEFAULT_CONFIGS["cold" if device == "cuda" else "cpu"]
    if quick:
        method_cfg = timing.quick(method_cfg)
    compiled: set = set()
    total, kept, cut = 0.0, [], []
    for c in cases:
        if c["name"] in measured:
            c["seconds"], c["source"] = measured[c["name"]], "measured"
        elif not c["supported"]:  # asv records it skipped after the imports
            c["seconds"], c["source"] = round(start + ASV_OVERHEAD_S, 2), "skip"
        else:
            compile_s = 0.0
            key = (c["op"], c["provider"], c["dtype"])
            if c["backend"] == "triton" and device == "cuda" and key not in compiled:
                compiled.add(key)
                compile_s = _n_configs(c["op"], c["dtype"]) * COMPILE_S_PER_CONFIG.get(
                    (c["op"], c["dtype"]), COMPILE_S_DEFAULT
                )
            c["seconds"] = round(
                start + ASV_OVERHEAD_S + compile_s + method_cfg.warmup_s + method_cfg.max_time_s + CHECK_S, 2
            )
            c["source"] = "estimated"
        if total + c["seconds"] <= budget_s:
            total += c["seconds"]
            c["cumulative_s"] = round(total, 1)
            kept.append(c)
        else:
            cut.append(c)
    pairs = sorted({(c["op"], c["dtype"]) for c in cases})
    return {
        "device": device,
        "budget_s": budget_s,
        "start_s": round(start, 2),
        "total_s": round(total, 1),
        "kept": kept,
        "cut": cut,
        "regex": case_regex(kept) if kept else None,
        # pytest -k for the kernel tests at the headline dtypes (correctness after bench-head)
        "pytest_k": " or ".join(f"({op} and {dt})" for op, dt in pairs),
        "measured": sum(c["source"] == "measured" for c in kept + cut),
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--budget-s", type=float, required=True, help="seconds bench-head may use")
    ap.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--results", type=Path, help="asv results folder with earlier runs (measured durations)")
    ap.add_argument("--regex-out", type=Path, help="write the kept cases' asv --bench regex here")
    ap.add_argument("--json", type=Path, help="write the plan as JSON here")
    ap.add_argument("--k-out", type=Path, help="write the pytest -k expression for the headline (op, dtype) pairs here")
    args = ap.parse_args(argv)
    if args.budget_s <= 0:
        ap.error("--budget-s must be positive")
    if args.device == "cuda":
        # The GPU config lists (the autotuners hold one tile under the interpreter).
        os.environ["TRITON_INTERPRET"] = "0"
    p = plan(args.budget_s, args.device, args.quick, args.results)
    print(
        f"bench-head plan ({p['device']}): {len(p['kept'])} of {len(p['kept']) + len(p['cut'])} headline cases "
        f"in {p['total_s']:.0f}s of {p['budget_s']:.0f}s; {p['measured']} measured, the rest estimated "
        f"(process start {p['start_s']:.1f}s {'from ' + START_S_ENV if os.environ.get(START_S_ENV) else 'measured here'}"
        f"{' + CUDA context' if p['device'] == 'cuda' else ''})"
    )
    for c in p["kept"]:
        print(f"    keep {c['seconds']:6.1f}s  {c['cumulative_s']:6.1f}s  {c['source']:9s}  {c['name']}")
    for c in p["cut"]:
        print(f"    CUT  {c['seconds']:6.1f}s  {'-':>6s}   {c['source']:9s}  {c['name']}  (over budget: not measured)")
    if args.regex_out and p["regex"]:
        args.regex_out.write_text(p["regex"] + "\n")
    if args.k_out:
        args.k_out.write_text(p["pytest_k"] + "\n")
    if args.json:
        args.json.write_text(json.dumps(p, indent=1) + "\n")
    return 0 if p["kept"] else 1


if __name__ == "__main__":
    sys.exit(main())
