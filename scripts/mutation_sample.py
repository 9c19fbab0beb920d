"""Budgeted mutation testing with cosmic-ray: a seeded sample of mutants per module.

Usage::

    nice -n 15 python scripts/mutation_sample.py harness/gate/decide.py \\
        --tests tests/test_gate_boundaries.py tests/test_check_gate.py \\
        --sample 40 --budget-s 1800 --out mutation-decide.json
    nice -n 15 python scripts/mutation_sample.py --package kernels \\
        --sample 40 --budget-s 1800 --out mutation-kernels.json

What it does, per module: copies the git-tracked tree into a temporary folder
(cosmic-ray edits the module on disk; the working tree is never touched),
``cosmic-ray init`` lists every mutant of the module, a seeded random sample of
``--sample`` of them is kept and the rest marked skipped (mutants inside
type annotations are never drawn: with ``from __future__ import annotations``
they are never evaluated, so they are equivalent by construction), ``cosmic-ray exec``
runs the given test files (``-m "not slow"``, ``-x``) once per kept mutant
until the budget is spent, and the result is printed and written as JSON:
killed, survived, incompetent (the mutant does not even import), not reached
(budget spent), the survival rate ``survived / (killed + survived)`` and each
survivor's diff, so a survivor can be killed by a test or argued equivalent.

``--package kernels`` (or ``harness/analysis``, ``harness/gate``,
``harness/store``) does the same for every module of :data:`PLAN` under that
folder, each run against its own tests: the sample is drawn uniformly from the
pooled mutants of all those modules (so the package's survival rate is an
unbiased estimate of the rate over all its mutants, and each module gets about
its share), one cosmic-ray session per module in one copy of the tree, the
budget split between the modules by their share of the sample; the result has
the package's tally and one per module.

Why our own code around cosmic-ray: cosmic-ray has no sampling or time budget
of its own (its filters skip by operator, pragma or git diff), and one mutant
costs one pytest start with torch imported (15-30 s on a shared 2-core
machine), so the full set of a module (hundreds) does not fit a nightly job.
Why cosmic-ray over mutmut: it runs an arbitrary test command on a plain copy
of the tree, so the Triton interpreter, torch and our import-time backend
choice (``kernels._backends``) see ordinary modules; mutmut 3 rewrites every
function into a trampoline in a ``mutants/`` copy and runs its own pytest
session with its own statistics phase over the tests.

Exit codes: 0 the run finished (whatever the survival rate), 2 cosmic-ray is
missing or a step failed (its output is printed).
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import random
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

_KERNEL_TESTS = [
    "tests/test_kernels_adversarial.py",
    "tests/test_kernels.py",
    "tests/test_kernels_suite_a.py",
    "tests/test_kernels_suite_b.py",
    "tests/test_cupy_launch_model.py",
    "tests/test_triton_aot.py",
    "tests/test_kernel_declarations.py",
]
_ANALYSIS_TESTS = [
    "tests/test_analysis_snapshot.py",  # first: it fails in 2 s on most mutants
    "tests/test_analysis_random_snapshot.py",
    "tests/test_analysis.py",
    "tests/test_analysis_rules.py",
    "tests/test_analysis_boundaries.py",
    "tests/test_analysis_shapes.py",
    "tests/test_analysis_arbitration.py",
    "tests/test_analysis_bound.py",
    "tests/test_analysis_edges.py",
]
_GATE_TESTS = [
    "tests/test_gate_boundaries.py",
    "tests/test_check_gate.py",
    "tests/test_sequential.py",
    "tests/test_gate_controls.py",
    "tests/test_gate_hostile.py",
    "tests/test_gate_edges.py",
    "tests/test_gate_paths.py",
]
_STORE_TESTS = [
    "tests/test_store_faults.py",
    "tests/test_store_samples.py",
    "tests/test_store_streaming.py",
    "tests/test_read_guards.py",
    "tests/test_bad_input.py",
    "tests/test_results_cli.py",
]

#: Module -> (test files run against its mutants, a pytest ``-k`` expression or
#: None). The tests are the ones meant to catch a bug in that module: its own
#: files, and for a kernel the kernel tests narrowed to its op name.
PLAN: dict[str, tuple[list[str], str | None]] = {
    **{
        f"kernels/{op}.py": (_KERNEL_TESTS, op)
        for op in (
            "vector_add",
            "softmax",
            "matmul",
            "layernorm",
            "rmsnorm",
            "reduction",
            "transpose",
            "histogram",
            "attention",
            "bias_gelu",
        )
    },
    "kernels/control.py": (["tests/test_controls.py", *_KERNEL_TESTS], "control"),
    "kernels/_check.py": (
        [
            "tests/test_tolerances.py",
            "tests/test_wrong_triton_kernels.py",
            "tests/test_bounds.py",
            "tests/test_bench_shape_check.py",
            "tests/test_cupy_launch_model.py",
        ],
        None,
    ),
    "kernels/_base.py": (
        [
            "tests/test_ceilings.py",
            "tests/test_metrics.py",
            "tests/test_selfcheck.py",
            "tests/test_kernels_adversarial.py",
        ],
        None,
    ),
    "kernels/_autotune.py": (["tests/test_kernels_suite_b.py", "tests/test_triton_aot.py"], None),
    "kernels/__init__.py": (["tests/test_kernels_suite_a.py", "tests/test_controls.py"], None),
    "kernels/_backends.py": (["tests/test_kernels_suite_a.py", "tests/test_kernels_adversarial.py"], None),
    "kernels/_cupy.py": (["tests/test_cuda_sources.py", "tests/test_cupy_launch_model.py"], None),
    **{
        f"harness/analysis/{m}.py": (_ANALYSIS_TESTS, None)
        for m in ("detect", "detectors", "drift", "events", "findings", "machine", "model", "run", "series", "stats")
    },
    "harness/analysis/cross.py": (["tests/test_site.py", *_ANALYSIS_TESTS], None),
    "harness/analysis/autotune.py": (["tests/test_kernels_suite_b.py", *_ANALYSIS_TESTS], None),
    **{
        f"harness/gate/{m}.py": (_GATE_TESTS, None)
        for m in ("decide", "check", "sequential", "controls", "settings", "probe", "suites")
    },
    "harness/gate/check.py": ([*_GATE_TESTS, "tests/test_check_paths.py"], None),
    "harness/gate/bisect.py": (
        ["tests/test_bisect.py", "tests/test_check_gate.py", "tests/test_gate_edges.py", "tests/test_bisect_paths.py"],
        None,
    ),
    "harness/gate/asvrun.py": (["tests/test_hostile_h29t.py", "tests/test_asvrun_paths.py", *_GATE_TESTS], None),
    "harness/gate/summary.py": (
        [
            "tests/test_check_gate.py",
            "tests/test_check.py",
            "tests/test_gate_hostile.py",
            "tests/test_gate_edges.py",
            "tests/test_gate_paths.py",
        ],
        None,
    ),
    "harness/gate/triage_summary.py": (["tests/test_profile_triage.py"], None),
    "harness/gate/progress.py": (["tests/test_bad_input.py", "tests/test_check.py", "tests/test_gate_edges.py"], None),
    "harness/gate/triage.py": (["tests/test_profile_triage.py", "tests/test_triage_e2e.py"], None),
    **{
        f"harness/store/{m}.py": (_STORE_TESTS, None)
        for m in ("asvfile", "columns", "dataset", "importers", "layout", "model", "results", "suite")
    },
    "harness/store/parse_cache.py": (["tests/test_parse_cache.py"], None),
}


#: Modules of the four packages left out of :data:`PLAN`, with the reason.
NOT_PLANNED: dict[str, str] = {
    "harness/analysis/__init__.py": "re-exports and __all__ only",
    "harness/gate/__init__.py": "a docstring only",
    "harness/store/__init__.py": "a docstring only",
}


def package_modules(package: str) -> list[str]:
    """The modules of :data:`PLAN` under ``package`` (``"kernels"``,
    ``"harness/analysis"``), sorted; ``[]`` when none is."""
    prefix = package.strip("/") + "/"
    return sorted(m for m in PLAN if m.startswith(prefix))


def split_budget(budget_s: float, shares: list[int]) -> list[float]:
    """``budget_s`` split in proportion to ``shares`` (mutants drawn per module);
    a module with no share gets 0."""
    total = sum(shares)
    return [budget_s * k / total if total else 0.0 for k in shares]


def _copy_tree(dest: Path) -> None:
    files = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    for rel in files.decode().split("\0"):
        if not rel or not (ROOT / rel).is_file():
            continue
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / rel, dest / rel)


def _config(module: str, tests: list[str], timeout_s: float, select: str | None = None) -> str:
    cmd = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", "-m", "not slow and not browser"]
    if select:
        cmd += ["-k", select]
    return (
        "[cosmic-ray]\n"
        f"module-path = {json.dumps(module)}\n"
        f"timeout = {float(timeout_s)}\n"
        "excluded-modules = []\n"
        f"test-command = {json.dumps(shlex.join(cmd + tests))}\n"
        "[cosmic-ray.distributor]\n"
        'name = "local"\n'
    )


def annotation_spans(source: str) -> list[tuple[tuple[int, int], tuple[int, int]]]:
    """``((line, col), (end_line, end_col))`` of every annotation in ``source``, when
    the module has ``from __future__ import annotations`` (PEP 563: annotations are
    never evaluated, so a mutant inside one is equivalent); else ``[]``."""
    tree = ast.parse(source)
    future = any(
        isinstance(node, ast.ImportFrom)
        and node.module == "__future__"
        and any(a.name == "annotations" for a in node.names)
        for node in tree.body
    )
    if not future:
        return []
    found = []
    for node in ast.walk(tree):
        anns = []
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            anns.append(node.returns)
        elif isinstance(node, ast.arg):
            anns.append(node.annotation)
        elif isinstance(node, ast.AnnAssign):
            anns.append(node.annotation)
        found += [((a.lineno, a.col_offset), (a.end_lineno, a.end_col_offset)) for a in anns if a is not None]
    return found


def _drawable(db_path: Path, source: str) -> tuple[list[str], list[str]]:
    """``(every job id, the ids of mutants outside annotations)`` of one session
    (:func:`annotation_spans`)."""
    from cosmic_ray.work_db import WorkDB, use_db

    spans = annotation_spans(source)

    def in_annotation(item) -> bool:
        m = item.mutations[0]
        return any(lo <= tuple(m.start_pos) and tuple(m.end_pos) <= hi for lo, hi in spans)

    with use_db(str(db_path), WorkDB.Mode.open) as db:
        items = sorted(db.work_items, key=mutant_key)
        return [i.job_id for i in items], [i.job_id for i in items if not in_annotation(i)]


def mutant_key(item) -> tuple:
    """A work item's place in the pool: its mutation's module, position, operator
    and occurrence. cosmic-ray's job ids are fresh random UUIDs at every ``init``,
    so a pool ordered by job id (as before 2026-12-05) drew different mutants for
    the same seed and source on every run; ordered by what the mutant is, the same
    seed on the same source draws the same mutants."""
    m = item.mutations[0]
    return (str(m.module_path), tuple(m.start_pos), tuple(m.end_pos), m.operator_name, m.occurrence)


def draw(pools: list[list[str]], n: int, seed: int) -> list[set[str]]:
    """A seeded uniform sample of ``n`` mutants from the pooled ``pools`` (one list
    of job ids per module), returned as the kept ids per module: each mutant of
    the package is equally likely to be drawn, whatever its module."""
    pooled = [(i, job) for i, pool in enumerate(pools) for job in pool]
    kept: list[set[str]] = [set() for _ in pools]
    for i, job in random.Random(seed).sample(pooled, min(n, len(pooled))):
        kept[i].add(job)
    return kept


def _skip_all_but(db_path: Path, keep: set[str]) -> None:
    from cosmic_ray.work_db import WorkDB, use_db
    from cosmic_ray.work_item import WorkerOutcome, WorkResult

    with use_db(str(db_path), WorkDB.Mode.open) as db:
        skip = [item.job_id for item in db.work_items if item.job_id not in keep]
        if skip:
            db.set_multiple_results(skip, WorkResult(worker_outcome=WorkerOutcome.SKIPPED))


def _tally(db_path: Path, total: int, sampled: int) -> dict:
    from cosmic_ray.work_db import WorkDB, use_db
    from cosmic_ray.work_item import TestOutcome, WorkerOutcome

    out = {"mutants": total, "sampled": sampled, "killed": 0, "survived": 0, "incompetent": 0, "survivors": []}
    with use_db(str(db_path), WorkDB.Mode.open) as db:
        for item, result in db.completed_work_items:
            if result.worker_outcome is WorkerOutcome.SKIPPED:
                continue
            if result.test_outcome is TestOutcome.SURVIVED:
                out["survived"] += 1
                out["survivors"].append({"line": item.mutations[0].start_pos[0], "diff": result.diff})
            elif result.test_outcome is TestOutcome.INCOMPETENT:
                out["incompetent"] += 1
            else:
                out["killed"] += 1
    decided = out["killed"] + out["survived"]
    out["not_reached"] = sampled - decided - out["incompetent"]
    out["survival_rate"] = round(out["survived"] / decided, 4) if decided else None
    return out


def _exec(exe: str, work: Path, config: str, db: str, budget_s: float) -> bool:
    """Run ``cosmic-ray exec`` for at most ``budget_s``; False when the budget ran out."""
    proc = subprocess.Popen([exe, "exec", config, db], cwd=work, start_new_session=True)
    try:
        proc.wait(timeout=max(budget_s, 1.0))
        return True
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGTERM)  # the exec and the pytest it is running
        proc.wait()
        return False


def _sum(tallies: list[dict]) -> dict:
    out = {k: sum(t[k] for t in tallies) for k in ("mutants", "sampled", "killed", "survived", "incompetent")}
    out["not_reached"] = sum(t["not_reached"] for t in tallies)
    decided = out["killed"] + out["survived"]
    out["survival_rate"] = round(out["survived"] / decided, 4) if decided else None
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("module", nargs="?", help="module file to mutate, relative to the repository root")
    ap.add_argument(
        "--package", help="mutate every module of the plan under this folder (kernels, harness/analysis ...)"
    )
    ap.add_argument("--tests", nargs="+", help="test files run against each mutant (one module only)")
    ap.add_argument("--select", help="a pytest -k expression narrowing the tests (default: all of them)")
    ap.add_argument("--sample", type=int, default=40, help="mutants drawn (default 40)")
    ap.add_argument("--seed", type=int, default=0, help="seed of the draw (default 0)")
    ap.add_argument("--budget-s", type=float, default=1800, help="wall-clock cap of the whole run (default 1800)")
    ap.add_argument("--timeout-s", type=float, default=300, help="cap of one mutant's test run (default 300)")
    ap.add_argument("--out", type=Path, help="write the tally as JSON here")
    args = ap.parse_args(argv)
    if args.sample < 1:
        ap.error("--sample must be at least 1")
    if bool(args.module) == bool(args.package):
        ap.error("give one module, or --package")
    if args.package:
        modules = package_modules(args.package)
        if not modules:
            ap.error(
                f"no module of the plan under {args.package!r}; known: {sorted({m.rsplit('/', 1)[0] for m in PLAN})}"
            )
        if args.tests or args.select:
            ap.error("--tests and --select are for one module; --package takes each module's tests from PLAN")
        jobs = [(m, *PLAN[m]) for m in modules]
    else:
        if not args.tests:
            ap.error("--tests is required with a module")
        jobs = [(args.module, args.tests, args.select)]
    for module, tests, _ in jobs:
        for rel in (module, *tests):
            if not (ROOT / rel).is_file():
                ap.error(f"no such file: {rel}")
    exe = shutil.which("cosmic-ray") or str(Path(sys.executable).with_name("cosmic-ray"))
    if not Path(exe).exists():
        print("cosmic-ray is not installed (pip install cosmic-ray)", file=sys.stderr)
        return 2
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="kw-mutation-") as tmp:
        work = Path(tmp)
        _copy_tree(work)
        pools, totals = [], []
        for i, (module, tests, select) in enumerate(jobs):
            (work / f"cr-{i}.toml").write_text(_config(module, tests, args.timeout_s, select))
            init = subprocess.run(
                [exe, "init", f"cr-{i}.toml", f"session-{i}.sqlite"], cwd=work, capture_output=True, text=True
            )
            if init.returncode != 0:
                print(f"cosmic-ray init failed on {module}:\n" + init.stdout + init.stderr, file=sys.stderr)
                return 2
            every, drawable = _drawable(work / f"session-{i}.sqlite", (ROOT / module).read_text())
            pools.append(drawable)
            totals.append((len(every), len(every) - len(drawable)))
        kept = draw(pools, args.sample, args.seed)
        for i, keep in enumerate(kept):
            _skip_all_but(work / f"session-{i}.sqlite", keep)
        tallies = []
        for i, (module, tests, select) in enumerate(jobs):
            left = args.budget_s - (time.monotonic() - start)
            budget = split_budget(left, [len(k) for k in kept[i:]])[0]
            if kept[i] and not _exec(exe, work, f"cr-{i}.toml", f"session-{i}.sqlite", budget):
                print(f"{module}: its {budget:.0f} s of the budget spent; tallying what ran", file=sys.stderr)
            t = _tally(work / f"session-{i}.sqlite", totals[i][0], len(kept[i]))
            t.update(module=module, tests=tests, select=select, annotation_mutants_excluded=totals[i][1])
            tallies.append(t)
    if args.package:
        result = {"package": args.package, **_sum(tallies), "modules": tallies}
    else:
        result = tallies[0]
    result.update(seed=args.seed, wall_s=round(time.monotonic() - start, 1))
    text = json.dumps(result, indent=2)
    if args.out:
        args.out.write_text(text + "\n")
    for t in tallies:
        print(json.dumps({k: v for k, v in t.items() if k not in ("survivors", "tests")}))
        for s in t["survivors"]:
            print(f"--- survivor in {t['module']} at line {s['line']}\n{s['diff']}")
    if args.package:
        print(json.dumps({k: v for k, v in result.items() if k != "modules"}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
