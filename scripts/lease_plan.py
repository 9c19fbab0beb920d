"""The bench plans of a GPU lease: which headline cases fit, from measured per-case costs.

    python scripts/lease_plan.py --budget-s 125 [--device cuda|cpu] [--quick]
                                 [--results DIR] [--probe] [--fill F]
                                 [--regex-out FILE] [--json FILE] [--k-out FILE]
    python scripts/lease_plan.py --range --within bench-plan.json --results OUT/results
                                 --budget-s LEFT --commits N [--head-wall-s W] --json FILE

asv stores a commit's results only when every benchmark of the run finished,
so each bench phase must be sized to finish: a cut-off run stores nothing. The
headline cases (per op: its largest CUDA shape in bf16, else its first CUDA
dtype; every provider; ``cold`` timing) are costed one by one, kept in the
registry's order while the running total stays within ``--fill`` (default
:data:`FILL`, 70%) of ``--budget-s``, and the rest are listed as cut. The kept
cases go out as one asv ``--bench`` regex (``--regex-out``).

Per-case cost, in order of preference:

1. **measured**: asv's own ``duration`` of that case in an earlier results
   file of a machine of the same kind (``--results``; the newest wins). asv's
   ``duration`` covers every parameter combination of the benchmark that ran
   in that run, so it is divided by the combinations that ran (a value or a
   failure, not the NaN of a combination left out by ``--bench``), never by
   the whole grid (issue 26 finding 7: a 15x under-estimate);
2. **probed** (``--probe``): on the machine itself, before planning, one
   spawned torch case and, on CUDA, one Triton matmul case are run end to end
   in fresh interpreters the way asv's benchmark process runs them (import of
   ``benchmarks.suite`` with its backend probes, CUDA context, correctness
   check, compile, timing), their wall time taken and the Triton compiles
   counted (new kernel groups in Triton's cache, :func:`count_compiles`). A
   non-Triton case costs the torch probe; the probed Triton case costs its own
   probe; any other Triton case the torch probe plus its kernels times the
   measured seconds per compile. On the CPU, where asv forks each case from a
   server that imported the suite once per commit (``forkserver``), a case
   costs the probe's prepare and timing only. A probe that fails is reported
   and its cases fall back to the estimate;
3. **estimated**, where neither exists: ``start_s`` (a fresh interpreter
   importing ``harness.bench`` and the kernels, measured here, plus
   :data:`CUDA_CONTEXT_S` on CUDA) + the Triton compile on the first case of a
   tuning key (configs after the shared-memory prune times
   :data:`COMPILE_S_PER_CONFIG`) + the timing config's ``warmup_s`` and
   ``max_time_s`` + :data:`CHECK_S`.

``--range`` plans bench-range from the time left after bench-head: the cases
kept by bench-head's plan (``--within``), costed by the asv durations
bench-head has just stored (``--results``), plus a per-commit overhead
measured as bench-head's wall time (``--head-wall-s``) minus its cases'
durations; as many of ``--commits`` commits as fit ``--fill`` of
``--budget-s`` with at least one case each, the same cases for each. When not
even one commit fits it says so (exit 1) instead of starting one that asv
would not store.

Exit status 0 (the plan printed), 1 nothing fits, 2 bad arguments or no op loadable.
"""

from __future__ import annotations

import argparse
import itertools
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
#: Share of a phase's budget the plan fills; the rest absorbs what the costs do not
#: foresee (a slower compile, a busy host): issue 26 asks for at least 30% left.
FILL = 0.70
#: Seconds one probe case may take before it is stopped (a cold Triton matmul
#: compile took 77 s with Triton 3.6 on the CI machine at two shapes).
PROBE_TIMEOUT_S = 150
#: Per-commit overhead of ``kernelwatch run`` (asv's start, benchmark discovery,
#: the site build) when bench-head's wall time is not given, seconds.
BENCH_COMMIT_OVERHEAD_S = 25.0
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
                # asv's duration covers the combinations of the grid that ran in that
                # run (a value, or None for a failure); NaN marks one skipped or left
                # out by --bench. Per case: the duration over the ones that ran.
                combos = list(itertools.product(*params)) if params else [()]
                values = rec.get("result")
                values = values if isinstance(values, list) else [values] * len(combos)
                ran = [c for c, v in zip(combos, values) if v is None or (isinstance(v, (int, float)) and v == v)]
                if not ran:
                    continue
                per_case = float(dur) / len(ran)
                for combo in ran:
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
    proc = subprocess.run(
        [sys.executable, "-c", "import harness.measure.bench, kernels; kernels.all_ops()"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
    )
    if proc.returncode != 0:  # a start that failed measures nothing
        tail = (proc.stderr.strip() or "no output").splitlines()[-1]
        print(f"lease_plan: error: the process start failed (exit {proc.returncode}): {tail}", file=sys.stderr)
        raise SystemExit(2)
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


PROBE_CODE = r"""
import json, os, sys, time
t0 = time.perf_counter()
import benchmarks.suite  # what asv's benchmark process imports: every op, the backend probes
from harness.measure import bench
from kernels._base import parse_shape
t1 = time.perf_counter()
op, prov, shape, dtype, method = sys.argv[1:6]
case = bench.prepare(op, prov, parse_shape(shape), dtype, method)
t2 = time.perf_counter()
bench.run(case, benchmark=f"suite.{op}.track_time")
t3 = time.perf_counter()
print("KW_PROBE " + json.dumps({"import_s": t1 - t0, "prepare_s": t2 - t1, "time_s": t3 - t2}))
"""


def triton_cache_dir() -> Path:
    """Triton's on-disk kernel cache: ``$TRITON_CACHE_DIR``, else ``~/.triton/cache``."""
    return Path(os.environ.get("TRITON_CACHE_DIR") or Path.home() / ".triton" / "cache")


def count_compiles(before: set[str], cache: Path) -> int:
    """Kernels compiled since ``before`` (a :func:`_cache_groups` snapshot): Triton writes one
    ``__grp__<kernel>.json`` group file per compiled kernel into its cache."""
    return len(_cache_groups(cache) - before)


def _cache_groups(cache: Path) -> set[str]:
    return {str(p) for p in cache.glob("*/__grp__*.json")} if cache.is_dir() else set()


def probe_case(case: dict, timeout_s: float = PROBE_TIMEOUT_S) -> dict:
    """Run one headline case end to end in a fresh interpreter, as asv's benchmark
    process does, and time it.

    Returns ``{"name", "ok", "seconds" (wall, interpreter start included),
    "compiles", "phases" (import / prepare / time seconds), "error"}``; ``ok``
    is False with the error's last line when the process fails, times out
    (``timeout_s``) or prints no result. No record is written (no ``ASV_COMMIT``).
    """
    cache = triton_cache_dir()
    before = _cache_groups(cache)
    env = {k: v for k, v in os.environ.items() if k != "ASV_COMMIT"}
    env["PYTHONPATH"] = str(ROOT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    args = [case["op"], case["provider"], case["shape"], case["dtype"], case["timing"]]
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(
            [sys.executable, "-c", PROBE_CODE, *args],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=timeout_s,
            env=env,
        )
    except subprocess.TimeoutExpired:
        return {
            "name": case["name"],
            "ok": False,
            "seconds": timeout_s,
            "compiles": None,
            "phases": None,
            "error": f"timed out after {timeout_s:g} s",
        }
    wall = time.perf_counter() - t0
    line = next((x for x in proc.stdout.splitlines() if x.startswith("KW_PROBE ")), None)
    if proc.returncode != 0 or line is None:
        tail = (proc.stderr.strip() or proc.stdout.strip() or "no output").splitlines()[-1]
        return {
            "name": case["name"],
            "ok": False,
            "seconds": round(wall, 2),
            "compiles": None,
            "phases": None,
            "error": f"exit {proc.returncode}: {tail}",
        }
    phases = {k: round(v, 2) for k, v in json.loads(line[len("KW_PROBE ") :]).items()}
    return {
        "name": case["name"],
        "ok": True,
        "seconds": round(wall, 2),
        "compiles": count_compiles(before, cache),
        "phases": phases,
        "error": None,
    }


def run_probes(cases: list[dict], device: str) -> dict:
    """The probes of ``--probe``: the first supported non-Triton (torch) case and, on
    CUDA, the Triton matmul headline case (:func:`probe_case`). Returns
    ``{"torch": probe or None, "triton": probe or None, "per_compile_s": float or None}``."""
    if device == "cuda":
        import torch

        if not torch.cuda.is_available():  # a dry run on a machine without the device
            return {"torch": None, "triton": None, "per_compile_s": None, "note": "no CUDA device here: not probed"}
    ok = [c for c in cases if c["supported"]]
    torch_case = next((c for c in ok if c["backend"] == "torch"), None)
    mm = next((c for c in ok if c["op"] == "matmul" and c["backend"] == "triton"), None) if device == "cuda" else None
    out = {"torch": probe_case(torch_case) if torch_case else None, "triton": None, "per_compile_s": None}
    if mm is not None:
        out["triton"] = probe_case(mm)
    t, tr = out["torch"], out["triton"]
    if t and t["ok"] and tr and tr["ok"] and tr["compiles"]:
        out["per_compile_s"] = round(max(0.0, tr["seconds"] - t["seconds"]) / tr["compiles"], 3)
    return out


def _estimate(c: dict, start: float, method_cfg, compiled: set, device: str) -> float:
    """The estimated cost of one case (module docstring, 3.)."""
    compile_s = 0.0
    key = (c["op"], c["provider"], c["dtype"])
    if c["backend"] == "triton" and device == "cuda" and key not in compiled:
        compiled.add(key)
        compile_s = _n_configs(c["op"], c["dtype"]) * COMPILE_S_PER_CONFIG.get((c["op"], c["dtype"]), COMPILE_S_DEFAULT)
    return round(start + ASV_OVERHEAD_S + compile_s + method_cfg.warmup_s + method_cfg.max_time_s + CHECK_S, 2)


def _probed(c: dict, probes: dict | None, device: str) -> float | None:
    """The probed cost of one case (module docstring, 2.), or ``None`` without a usable probe."""
    if not probes:
        return None
    t, tr = probes.get("torch"), probes.get("triton")
    if device == "cpu":  # asv's forkserver on the CPU: the suite is imported once per commit, not per case
        return round(t["phases"]["prepare_s"] + t["phases"]["time_s"] + ASV_OVERHEAD_S, 2) if t and t["ok"] else None
    if c["backend"] != "triton":  # spawn on CUDA: a fresh interpreter per case, as probed
        return round(t["seconds"] + ASV_OVERHEAD_S, 2) if t and t["ok"] else None
    if tr and tr["ok"] and tr["name"] == c["name"]:
        return round(tr["seconds"] + ASV_OVERHEAD_S, 2)
    per = probes.get("per_compile_s")
    if t and t["ok"] and per is not None:
        return round(t["seconds"] + ASV_OVERHEAD_S + _n_configs(c["op"], c["dtype"]) * per, 2)
    return None


def plan(
    budget_s: float,
    device: str = "cuda",
    quick: bool = False,
    results: Path | None = None,
    probes: dict | None = None,
    fill: float = FILL,
    cases: list[dict] | None = None,
) -> dict:
    """Cost every headline case (or ``cases``) and cut to ``fill * budget_s``; see the module docstring."""
    from harness.measure import bench, timing

    cases = headline_cases(device, quick) if cases is None else cases
    if not cases:
        raise SystemExit(2)
    measured = measured_durations(results, device)
    start = start_seconds() + (CUDA_CONTEXT_S if device == "cuda" else 0.0)
    method_cfg = bench.DEFAULT_CONFIGS["cold" if device == "cuda" else "cpu"]
    if quick:
        method_cfg = timing.quick(method_cfg)
    compiled: set = set()
    limit = fill * budget_s
    total, kept, cut = 0.0, [], []
    for c in cases:
        probed = _probed(c, probes, device) if c["supported"] else None
        if c["name"] in measured:
            c["seconds"], c["source"] = round(measured[c["name"]], 2), "measured"
        elif not c["supported"]:  # asv records it skipped after the imports
            c["seconds"], c["source"] = round(start + ASV_OVERHEAD_S, 2), "skip"
        elif probed is not None:
            c["seconds"], c["source"] = probed, "probed"
        else:
            c["seconds"], c["source"] = _estimate(c, start, method_cfg, compiled, device), "estimated"
        if total + c["seconds"] <= limit:
            total += c["seconds"]
            c["cumulative_s"] = round(total, 1)
            kept.append(c)
        else:
            cut.append(c)
    pairs = sorted({(c["op"], c["dtype"]) for c in cases})
    return {
        "device": device,
        "budget_s": budget_s,
        "fill": fill,
        "limit_s": round(limit, 1),
        "start_s": round(start, 2),
        "total_s": round(total, 1),
        "kept": kept,
        "cut": cut,
        "regex": case_regex(kept) if kept else None,
        # pytest -k for the kernel tests at the headline dtypes (correctness after bench-head)
        "pytest_k": " or ".join(f"({op} and {dt})" for op, dt in pairs),
        "measured": sum(c["source"] == "measured" for c in kept + cut),
        "probed": sum(c["source"] == "probed" for c in kept + cut),
        "probes": probes,
    }


def plan_range(
    within: dict, results: Path, budget_s: float, commits: int, head_wall_s: float | None, fill: float = FILL
) -> dict:
    """bench-range's plan from the time left (module docstring, ``--range``).

    ``within`` is bench-head's plan (its ``kept`` cases, in order). Returns
    ``{"commits": k (0 when none fits), "per_commit_s", "overhead_s", "kept",
    "cut", "regex", "why"}``.
    """
    device = within["device"]
    measured = measured_durations(results, device)
    cases = [dict(c) for c in within["kept"]]
    for c in cases:
        if c["name"] in measured:
            c["seconds"], c["source"] = round(measured[c["name"]], 2), "measured"
        # else: bench-head's planned figure (its case stored nothing: failed or skipped)
    head_sum = sum(c["seconds"] for c in cases)
    overhead = max(0.0, head_wall_s - head_sum) if head_wall_s is not None else BENCH_COMMIT_OVERHEAD_S
    limit = fill * budget_s
    why = ""
    for k in range(commits, 0, -1):
        per = limit / k - overhead
        kept, total = [], 0.0
        for c in cases:
            if total + c["seconds"] <= per:
                total += c["seconds"]
                kept.append(dict(c, cumulative_s=round(total, 1)))
        if kept:
            names = {c["name"] for c in kept}
            return {
                "device": device,
                "commits": k,
                "budget_s": budget_s,
                "limit_s": round(limit, 1),
                "per_commit_s": round(per, 1),
                "overhead_s": round(overhead, 1),
                "total_s": round(total, 1),
                "kept": kept,
                "cut": [c for c in cases if c["name"] not in names],
                "regex": case_regex(kept),
                "why": f"{k} of {commits} commits x {len(kept)} of {len(cases)} cases",
            }
    cheapest = min((c["seconds"] for c in cases), default=0.0)
    why = (
        f"cannot fit one commit: the cheapest case ({cheapest:.0f}s) plus the per-commit overhead "
        f"({overhead:.0f}s) exceeds {fill:.0%} of the {budget_s:.0f}s left"
    )
    return {
        "device": device,
        "commits": 0,
        "budget_s": budget_s,
        "limit_s": round(limit, 1),
        "per_commit_s": 0.0,
        "overhead_s": round(overhead, 1),
        "total_s": 0.0,
        "kept": [],
        "cut": cases,
        "regex": None,
        "why": why,
    }


def _print_plan(p: dict, title: str) -> None:
    for c in p["kept"]:
        print(f"    keep {c['seconds']:6.1f}s  {c.get('cumulative_s', 0):6.1f}s  {c['source']:9s}  {c['name']}")
    for c in p["cut"]:
        print(f"    CUT  {c['seconds']:6.1f}s  {'-':>6s}   {c['source']:9s}  {c['name']}  (over {title}: not measured)")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--budget-s", type=float, required=True, help="seconds the phase may use")
    ap.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--results", type=Path, help="asv results folder with earlier runs (measured durations)")
    ap.add_argument("--probe", action="store_true", help="time a torch and a Triton matmul case here first")
    ap.add_argument("--fill", type=float, default=FILL, help=f"share of the budget to fill (default {FILL})")
    ap.add_argument("--range", action="store_true", help="plan bench-range from the time left (see --within)")
    ap.add_argument("--within", type=Path, help="--range: bench-head's plan JSON (its kept cases)")
    ap.add_argument("--commits", type=int, default=2, help="--range: commits wanted (default 2)")
    ap.add_argument("--head-wall-s", type=float, help="--range: bench-head's wall seconds (per-commit overhead)")
    ap.add_argument("--regex-out", type=Path, help="write the kept cases' asv --bench regex here")
    ap.add_argument("--json", type=Path, help="write the plan as JSON here")
    ap.add_argument("--k-out", type=Path, help="write the pytest -k expression for the headline (op, dtype) pairs here")
    args = ap.parse_args(argv)
    if args.budget_s <= 0:
        ap.error("--budget-s must be positive")
    if not 0 < args.fill <= 1:
        ap.error("--fill must be in (0, 1]")
    if args.range:
        return _main_range(ap, args)
    if args.device == "cuda":
        # The GPU config lists (the autotuners hold one tile under the interpreter).
        os.environ["TRITON_INTERPRET"] = "0"
    probes = None
    if args.probe:
        probes = run_probes(headline_cases(args.device, args.quick), args.device)
        if probes.get("note"):
            print(f"probe: {probes['note']}")
        for kind in ("torch", "triton"):
            pr = probes.get(kind)
            if pr:
                state = (
                    f"{pr['seconds']:.1f}s, {pr['compiles']} Triton compiles" if pr["ok"] else f"FAILED: {pr['error']}"
                )
                print(f"probe ({kind}): {pr['name']}: {state}" + (f" {pr['phases']}" if pr["ok"] else ""))
    p = plan(args.budget_s, args.device, args.quick, args.results, probes=probes, fill=args.fill)
    print(
        f"bench-head plan ({p['device']}): {len(p['kept'])} of {len(p['kept']) + len(p['cut'])} headline cases "
        f"in {p['total_s']:.0f}s of {p['limit_s']:.0f}s ({p['fill']:.0%} of {p['budget_s']:.0f}s); "
        f"{p['measured']} measured, {p['probed']} probed, the rest estimated "
        f"(process start {p['start_s']:.1f}s {'from ' + START_S_ENV if os.environ.get(START_S_ENV) else 'measured here'}"
        f"{' + CUDA context' if p['device'] == 'cuda' else ''})"
    )
    _print_plan(p, "budget")
    if args.regex_out and p["regex"]:
        args.regex_out.write_text(p["regex"] + "\n")
    if args.k_out:
        args.k_out.write_text(p["pytest_k"] + "\n")
    if args.json:
        args.json.write_text(json.dumps(p, indent=1) + "\n")
    return 0 if p["kept"] else 1


def _main_range(ap, args) -> int:
    if args.within is None or args.results is None:
        ap.error("--range needs --within (bench-head's plan JSON) and --results")
    if args.commits < 1:
        ap.error("--commits must be at least 1")
    try:
        within = json.loads(args.within.read_text())
    except (OSError, ValueError) as exc:
        ap.error(f"--within {args.within}: cannot read the plan: {exc}")
    p = plan_range(within, args.results, args.budget_s, args.commits, args.head_wall_s, args.fill)
    print(
        f"bench-range plan ({p['device']}): {p['why']}; {p['per_commit_s']:.0f}s a commit "
        f"({p['overhead_s']:.0f}s overhead measured on bench-head) within {p['limit_s']:.0f}s "
        f"({args.fill:.0%} of the {args.budget_s:.0f}s left)"
    )
    _print_plan(p, "per-commit budget")
    if args.regex_out and p["regex"]:
        args.regex_out.write_text(p["regex"] + "\n")
    if args.json:
        args.json.write_text(json.dumps(p, indent=1) + "\n")
    return 0 if p["commits"] else 1


if __name__ == "__main__":
    sys.exit(main())
