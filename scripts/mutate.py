#!/usr/bin/env python
"""Re-apply known mutations to a scratch copy of this repository and report which
ones the test suite kills.

Each mutation is a source edit that makes a kernel, a tolerance, a cost or a gate
decision wrong in a way a reviewer could miss (most were found surviving by hand
mutation testing, issue 19). For each one, the edit is applied in a scratch copy
of the tracked files (as they are in the working tree), the listed test files are
run with ``pytest -x``, and the first failing test is reported as the killer.

    .venv/bin/python scripts/mutate.py            # every mutation, markdown table
    .venv/bin/python scripts/mutate.py -k softmax # those whose name contains "softmax"
    .venv/bin/python scripts/mutate.py --list

Exit status: 0 when every mutation was killed, 1 when one survived, 2 when one
could not be applied (its source text is gone: update the list) or its tests did
not run.

Why our own script and not mutmut: mutmut generates operator-level mutants of
whole files and reruns the suite for each (hours under Triton's interpreter);
this list holds specific, realistic bugs and runs only the tests that should
catch each one, in minutes.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Mutation:
    """One source edit: every ``(old, new)`` pair must occur exactly once in ``path``."""

    name: str
    path: str
    edits: tuple[tuple[str, str], ...]
    tests: tuple[str, ...]


def _tolerance_mutations(root: Path) -> list[Mutation]:
    """Every op's every dtype tolerance loosened 10x (atol and rtol)."""
    out = []
    pattern = re.compile(r'"(\w+)": Tolerance\(atol=([0-9.e+-]+), rtol=([0-9.e+-]+)\)')
    for path in sorted((root / "kernels").glob("*.py")):
        text = path.read_text()
        op = path.stem
        for m in pattern.finditer(text):
            dtype, atol, rtol = m.group(1), float(m.group(2)), float(m.group(3))
            if atol == 0 and rtol == 0:
                new = f'"{dtype}": Tolerance(atol=1e-3, rtol=1e-3)'  # an exact op made approximate
                label = f"{op} {dtype} exact tolerance made 1e-3"
            else:
                new = f'"{dtype}": Tolerance(atol={atol * 10!r}, rtol={rtol * 10!r})'
                label = f"{op} {dtype} tolerance loosened 10x"
            out.append(
                Mutation(
                    label, f"kernels/{op}.py", ((m.group(0), new),), ("tests/test_tolerances.py", "-k", f"{op}-{dtype}")
                )
            )
    return out


MUTATIONS = [
    # --- the survivors of issue 19's hand mutation testing
    Mutation(
        "vector_add bf16 tolerance 8e-3 -> 0.5",
        "kernels/vector_add.py",
        (('"bf16": Tolerance(atol=8e-3, rtol=8e-3)', '"bf16": Tolerance(atol=0.5, rtol=0.5)'),),
        ("tests/test_tolerances.py", "tests/test_kernels.py", "-k", "vector_add"),
    ),
    Mutation(
        "softmax fp32 tolerance -> 0.09",
        "kernels/softmax.py",
        (('"fp32": Tolerance(atol=1e-6, rtol=1e-5)', '"fp32": Tolerance(atol=0.09, rtol=0.09)'),),
        ("tests/test_tolerances.py", "tests/test_kernels.py", "-k", "softmax"),
    ),
    Mutation(
        "vector_add Triton load masks removed",
        "kernels/vector_add.py",
        (
            ("x = tl.load(x_ptr + offsets * stride_x, mask=mask)", "x = tl.load(x_ptr + offsets * stride_x)"),
            ("y = tl.load(y_ptr + offsets * stride_y, mask=mask)", "y = tl.load(y_ptr + offsets * stride_y)"),
        ),
        ("tests/test_kernels.py", "tests/test_bounds.py", "-k", "vector_add or past_its_inputs"),
    ),
    Mutation(
        "softmax Triton row offset row * n_cols * stride_xn",
        "kernels/softmax.py",
        (
            (
                "tl.load(x_ptr + row * stride_xm + cols * stride_xn",
                "tl.load(x_ptr + row * n_cols * stride_xn + cols * stride_xn",
            ),
        ),
        ("tests/test_kernels.py", "-k", "softmax"),
    ),
    Mutation(
        "make_noncontiguous returns its input",
        "kernels/_check.py",
        (
            (
                '    if layout not in LAYOUTS:\n        raise ValueError(f"unknown layout',
                '    return t\n    if layout not in LAYOUTS:\n        raise ValueError(f"unknown layout',
            ),
        ),
        ("tests/test_tolerances.py", "-k", "noncontiguous or layouts"),
    ),
    Mutation(
        "vector_add Triton silently copies strided inputs",
        "kernels/vector_add.py",
        (
            (
                '    if x.dim() != 1 or x.shape != y.shape:\n        raise ValueError(f"vector_add takes',
                "    x, y = x.contiguous(), y.contiguous()\n    if x.dim() != 1 or x.shape != y.shape:\n"
                '        raise ValueError(f"vector_add takes',
            ),
        ),
        ("tests/test_tolerances.py", "-k", "copy_only"),
    ),
    Mutation(
        "Liger swiglu FLOP count halved",
        "harness/core/costs.py",
        (("f_fwd = 2 * tokens * 3 * h * i", "f_fwd = tokens * 3 * h * i"),),
        ("tests/test_analysis_cli.py",),
    ),
    Mutation(
        "check: problems path exits 0 instead of 2",
        "harness/gate/check.py",
        (
            (
                "code = gate.EXIT_BROKEN if found.problems else gate.exit_code(verdicts)",
                "code = 0 if found.problems else gate.exit_code(verdicts)",
            ),
        ),
        ("tests/test_check_gate.py",),
    ),
    # --- further realistic bugs
    Mutation(
        "Liger MLP backward FLOPs = forward",
        "harness/core/costs.py",
        (('mult = {"forward": 1, "backward": 2, "full": 3}', 'mult = {"forward": 1, "backward": 1, "full": 3}'),),
        ("tests/test_analysis_cli.py",),
    ),
    Mutation(
        "Liger MLP full mode bytes of one pass",
        "harness/core/costs.py",
        (('passes = {"forward": 1, "backward": 1, "full": 2}', 'passes = {"forward": 1, "backward": 1, "full": 1}'),),
        ("tests/test_analysis_cli.py",),
    ),
    Mutation(
        "Liger norm backward bytes without dw",
        "harness/core/costs.py",
        (("bwd = (8 * M * H, (3 * M * H + 2 * H) * e)", "bwd = (8 * M * H, (3 * M * H + H) * e)"),),
        ("tests/test_analysis_cli.py",),
    ),
    Mutation(
        "gate: nothing measured exits 0",
        "harness/gate/decide.py",
        (("    if not verdicts:\n        return EXIT_BROKEN", "    if not verdicts:\n        return EXIT_OK"),),
        ("tests/test_check_gate.py",),
    ),
    Mutation(
        "checker uses the loosest dtype's tolerance",
        "kernels/_check.py",
        (("    tol = op.tolerance(dtype)\n    got", "    tol = op.tolerance(op.dtypes[-1])\n    got"),),
        ("tests/test_tolerances.py", "-k", "outside or downcast"),
    ),
    Mutation(
        "reduction Triton partial sums skip the last element",
        "kernels/reduction.py",
        (
            (
                "    x = tl.load(x_ptr + offsets * stride_x, mask=offsets < n_elements, other=0.0).to(tl.float32)\n"
                "    tl.store(partial_ptr + pid",
                "    x = tl.load(x_ptr + offsets * stride_x, mask=offsets < n_elements - 1, other=0.0).to(tl.float32)\n"
                "    tl.store(partial_ptr + pid",
            ),
        ),
        ("tests/test_kernels.py", "-k", "reduction"),
    ),
    Mutation(
        "matmul Triton b strides swapped",
        "kernels/matmul.py",
        (
            (
                "offs_k[:, None] * stride_bk + offs_bn[None, :] * stride_bn",
                "offs_k[:, None] * stride_bn + offs_bn[None, :] * stride_bk",
            ),
        ),
        ("tests/test_kernels.py", "-k", "matmul and triton and not bf16"),
    ),
    Mutation(
        "matmul Triton a-tile K mask off by one (reads past a)",
        "kernels/matmul.py",
        (
            (
                "a = tl.load(a_ptrs, mask=offs_k[None, :] < K - k * BLOCK_SIZE_K, other=0.0)",
                "a = tl.load(a_ptrs, mask=offs_k[None, :] < K - k * BLOCK_SIZE_K + 1, other=0.0)",
            ),
        ),
        ("tests/test_kernels.py", "tests/test_bounds.py", "-k", "matmul-triton-fp32 or past_its_inputs"),
    ),
    Mutation(
        "layernorm Triton ignores the weight stride",
        "kernels/layernorm.py",
        (
            (
                "        w = tl.load(w_ptr + cols * stride_w, mask=mask, other=0.0).to(tl.float32)\n"
                "        b = tl.load(b_ptr + cols * stride_b, mask=mask, other=0.0).to(tl.float32)\n"
                "        tl.store(out_row + cols",
                "        w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)\n"
                "        b = tl.load(b_ptr + cols * stride_b, mask=mask, other=0.0).to(tl.float32)\n"
                "        tl.store(out_row + cols",
            ),
        ),
        ("tests/test_kernels.py", "-k", "layernorm and triton"),
    ),
    Mutation(
        "attention Triton ignores the key stride",
        "kernels/attention.py",
        (
            (
                "k = tl.load(k_base + cols[None, :] * stride_ks + offs_d[:, None] * stride_kd",
                "k = tl.load(k_base + cols[None, :] * HEAD_DIM + offs_d[:, None] * stride_kd",
            ),
        ),
        ("tests/test_kernels.py", "-k", "attention and triton and not bf16"),
    ),
]


def copy_tree(dst: Path) -> None:
    files = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        check=True,
        capture_output=True,
    ).stdout.split(b"\0")
    for f in filter(None, files):
        src = ROOT / f.decode()
        if src.is_file():
            out = dst / f.decode()
            out.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, out)


def _files(tests: tuple[str, ...]) -> tuple[str, ...]:
    """The test files of a pytest argument list (without ``-k EXPR``)."""
    out, skip = [], False
    for arg in tests:
        if skip:
            skip = False
        elif arg == "-k":
            skip = True
        else:
            out.append(arg)
    return tuple(out)


def apply(scratch: Path, m: Mutation) -> str | None:
    """Apply ``m`` in ``scratch``; returns the original text, or None if an edit does not match once."""
    path = scratch / m.path
    original = path.read_text()
    text = original
    for old, new in m.edits:
        if text.count(old) != 1:
            return None
        text = text.replace(old, new)
    path.write_text(text)
    return original


def run_tests(scratch: Path, tests: tuple[str, ...], timeout: int) -> tuple[int, str, float]:
    env = dict(os.environ, PYTHONPATH=str(scratch), OMP_NUM_THREADS="1", PYTHONDONTWRITEBYTECODE="1")
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", *tests],
            cwd=scratch,
            capture_output=True,
            text=True,
            timeout=timeout,
            env=env,
        )
    except subprocess.TimeoutExpired:
        return 124, "timeout", time.perf_counter() - t0
    killer = ""
    for line in proc.stdout.splitlines():
        if line.startswith(("FAILED ", "ERROR ")):
            killer = line.split(" - ")[0].split(" ", 1)[1]
            break
    if not killer:
        tail = proc.stdout.strip().splitlines()
        killer = tail[-1] if tail else (proc.stderr.strip().splitlines() or [""])[-1]
    return proc.returncode, killer, time.perf_counter() - t0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-k", dest="select", default=None, help="only mutations whose name contains this text")
    ap.add_argument("--list", action="store_true", help="list the mutations and exit")
    ap.add_argument("--timeout", type=int, default=600, help="seconds per mutation's test run (default: 600)")
    ap.add_argument(
        "--no-tolerance-sweep",
        action="store_true",
        help="skip the generated 10x-looser mutation of every op's every tolerance",
    )
    args = ap.parse_args(argv)

    mutations = list(MUTATIONS) + ([] if args.no_tolerance_sweep else _tolerance_mutations(ROOT))
    if args.select:
        mutations = [m for m in mutations if args.select in m.name]
    if args.list:
        for m in mutations:
            print(f"{m.name}  [{m.path}]  tests: {' '.join(m.tests)}")
        return 0

    rows, worst = [], 0
    with tempfile.TemporaryDirectory(prefix="kw-mutate-") as tmp:
        scratch = Path(tmp) / "repo"
        copy_tree(scratch)
        probe = subprocess.run(
            [sys.executable, "-c", "import kernels; print(kernels.__file__)"],
            cwd=scratch,
            capture_output=True,
            text=True,
            env=dict(os.environ, PYTHONPATH=str(scratch)),
        )
        if not probe.stdout.strip().startswith(str(scratch)):
            print(
                f"the scratch copy's kernels package is not the one imported ({probe.stdout.strip()!r})",
                file=sys.stderr,
            )
            return 2
        # Baseline: each mutation's test files must pass unmutated (all of them, so
        # any -k selection of them does too), or a "kill" means nothing.
        baseline = {}
        for files in dict.fromkeys(_files(m.tests) for m in mutations):
            code, first, secs = run_tests(scratch, files, args.timeout)
            baseline[files] = (code, first)
            print(f"baseline {' '.join(files)}: exit {code} ({secs:.0f} s)", file=sys.stderr)
        for m in mutations:
            if baseline[_files(m.tests)][0] != 0:
                rows.append((m.name, "NOT RUN", f"baseline fails: {baseline[_files(m.tests)][1]}", 0.0))
                worst = max(worst, 2)
                continue
            original = apply(scratch, m)
            if original is None:
                rows.append((m.name, "NOT APPLIED", f"source text not found once in {m.path}", 0.0))
                worst = max(worst, 2)
                continue
            try:
                code, first, secs = run_tests(scratch, m.tests, args.timeout)
            finally:
                (scratch / m.path).write_text(original)
            if code == 1:
                status = "killed"
            elif code == 0:
                status, first = "SURVIVED", "-"
                worst = max(worst, 1)
            else:
                status = f"ERROR (exit {code})"
                worst = max(worst, 2)
            rows.append((m.name, status, first, secs))
            print(f"{status:>9}  {m.name}  {first}  ({secs:.0f} s)", file=sys.stderr)

    print("| mutation | result | killed by | s |")
    print("|---|---|---|---|")
    for name, status, first, secs in rows:
        print(f"| {name} | {status} | `{first}` | {secs:.0f} |")
    killed = sum(1 for r in rows if r[1] == "killed")
    print(f"\n{killed} of {len(rows)} mutations killed")
    return worst


if __name__ == "__main__":
    sys.exit(main())
