"""Budgeted mutation testing with cosmic-ray: a seeded sample of mutants per module.

Usage::

    nice -n 15 python scripts/mutation_sample.py harness/gate/decide.py \\
        --tests tests/test_gate_boundaries.py tests/test_check_gate.py \\
        --sample 40 --budget-s 1800 --out mutation-decide.json

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


def _sample(db_path: Path, source: str, n: int, seed: int) -> tuple[int, int]:
    """Mark all but a seeded sample of ``n`` work items skipped, never drawing a
    mutant inside an annotation (:func:`annotation_spans`); returns
    ``(mutants, of which in annotations)``."""
    from cosmic_ray.work_db import WorkDB, use_db
    from cosmic_ray.work_item import WorkerOutcome, WorkResult

    spans = annotation_spans(source)

    def in_annotation(item) -> bool:
        m = item.mutations[0]
        return any(lo <= tuple(m.start_pos) and tuple(m.end_pos) <= hi for lo, hi in spans)

    with use_db(str(db_path), WorkDB.Mode.open) as db:
        items = sorted(db.work_items, key=lambda item: item.job_id)
        pool = [item.job_id for item in items if not in_annotation(item)]
        keep = set(random.Random(seed).sample(pool, min(n, len(pool))))
        skip = [item.job_id for item in items if item.job_id not in keep]
        if skip:
            db.set_multiple_results(skip, WorkResult(worker_outcome=WorkerOutcome.SKIPPED))
        return len(items), len(items) - len(pool)


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


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("module", help="module file to mutate, relative to the repository root")
    ap.add_argument("--tests", nargs="+", required=True, help="test files run against each mutant")
    ap.add_argument("--select", help="a pytest -k expression narrowing the tests (default: all of them)")
    ap.add_argument("--sample", type=int, default=40, help="mutants drawn (default 40)")
    ap.add_argument("--seed", type=int, default=0, help="seed of the draw (default 0)")
    ap.add_argument("--budget-s", type=float, default=1800, help="wall-clock cap of the whole run (default 1800)")
    ap.add_argument("--timeout-s", type=float, default=300, help="cap of one mutant's test run (default 300)")
    ap.add_argument("--out", type=Path, help="write the tally as JSON here")
    args = ap.parse_args(argv)
    if args.sample < 1:
        ap.error("--sample must be at least 1")
    if not (ROOT / args.module).is_file():
        ap.error(f"no such module: {args.module}")
    exe = shutil.which("cosmic-ray") or str(Path(sys.executable).with_name("cosmic-ray"))
    if not Path(exe).exists():
        print("cosmic-ray is not installed (pip install cosmic-ray)", file=sys.stderr)
        return 2
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="kw-mutation-") as tmp:
        work = Path(tmp)
        _copy_tree(work)
        (work / "cr.toml").write_text(_config(args.module, args.tests, args.timeout_s, args.select))
        init = subprocess.run([exe, "init", "cr.toml", "session.sqlite"], cwd=work, capture_output=True, text=True)
        if init.returncode != 0:
            print(init.stdout + init.stderr, file=sys.stderr)
            return 2
        source = (ROOT / args.module).read_text()
        total, in_annotations = _sample(work / "session.sqlite", source, args.sample, args.seed)
        proc = subprocess.Popen([exe, "exec", "cr.toml", "session.sqlite"], cwd=work, start_new_session=True)
        try:
            proc.wait(timeout=args.budget_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGTERM)  # the exec and the pytest it is running
            proc.wait()
            print(f"budget of {args.budget_s:.0f} s spent; tallying what ran", file=sys.stderr)
        result = _tally(work / "session.sqlite", total, min(args.sample, total - in_annotations))
    result.update(
        annotation_mutants_excluded=in_annotations,
        module=args.module,
        tests=args.tests,
        seed=args.seed,
        wall_s=round(time.monotonic() - start, 1),
    )
    text = json.dumps(result, indent=2)
    if args.out:
        args.out.write_text(text + "\n")
    summary = {k: v for k, v in result.items() if k != "survivors"}
    print(json.dumps(summary))
    for s in result["survivors"]:
        print(f"--- survivor at line {s['line']}\n{s['diff']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
