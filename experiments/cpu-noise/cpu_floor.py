#!/usr/bin/env python
"""The CPU's own noise floor: how well two runs of the same code can agree here,
measured without kernelwatch.

Why: ``experiments/cpu-noise/aa_stability.py`` (issue 13's P1) asks that two kernelwatch runs of
one commit agree within 2% for 90% of series. When they do not, the question is
whether kernelwatch's timer adds the spread or the machine has it. This script
answers it with nothing of kernelwatch in the loop: the same PyTorch ops at the
CPU quick grid's shapes, each timed by a plain ``time.perf_counter_ns`` loop (warm
up, then the median of ``--seconds`` of back-to-back calls, one intra-op thread),
with glibc's allocator thresholds fixed as kernelwatch fixes them
(``harness.measure.timing_cpu.steady_malloc``), in fresh processes, exactly as an
A/A test runs them: run A is ``k`` processes one
after another, run B the next ``k``. The share of ops whose two medians agree
within 2% is the best any timer that takes ``k`` processes per series could show
on this machine, at this time, under this load.

It also prints, per op, how the medians of the processes spread (p50 of
``|process / median - 1|``) and how far a single long process drifts
(``--drift`` seconds of 0.1 s windows), which tells a spread between processes
(a per-process state: memory placement, which host core, a co-tenant's share of
the last-level cache) from a spread over time.

Usage::

    python experiments/cpu-noise/cpu_floor.py [--processes 8] [--repeats 2] [--seconds 0.2]
                                [--neighbour 1] [--drift 20] [--json OUT]

``--neighbour N`` runs N busy-loop processes pinned to CPU 0 (as
``aa_stability.py --neighbour`` does). Exit 0 always (it is a measurement).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent

#: The CPU quick grid's ops and shapes (``kernels/*.py`` ``bench_shapes["quick"]``),
#: written out in plain PyTorch so that nothing of kernelwatch is timed; two
#: L2-resident variants (working set under 1 MiB) show what the cache level does.
OPS = {
    "vector_add 1M": "a, b = t(1 << 20), t(1 << 20); f = lambda: a + b",
    "rmsnorm 1024x1024": "x, w = t(1024, 1024), t(1024); f = lambda: x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w",
    "bias_gelu unfused 1024x1024": "x, b = t(1024, 1024), t(1024); f = lambda: torch.nn.functional.gelu(x + b)",
    "softmax 1024x1024": "x = t(1024, 1024); f = lambda: torch.softmax(x, -1)",
    "layernorm 1024x1024": "x = t(1024, 1024); f = lambda: torch.nn.functional.layer_norm(x, (1024,))",
    "transpose 1024x1024": "x = t(1024, 1024); f = lambda: x.t().contiguous()",
    "reduction 1M": "x = t(1 << 20); f = lambda: x.sum()",
    "matmul 512": "a, b = t(512, 512), t(512, 512); f = lambda: a @ b",
    "vector_add 64K (L2)": "a, b = t(1 << 16), t(1 << 16); f = lambda: a + b",
    "softmax 128x1024 (L2)": "x = t(128, 1024); f = lambda: torch.softmax(x, -1)",
}

WORKER = r"""
import ctypes, json, sys, time, torch
torch.set_num_threads(1)
# The one allocator setting kernelwatch's cpu method also makes (glibc mallopt(3):
# M_MMAP_THRESHOLD = -3, M_TRIM_THRESHOLD = -1, 1 GiB), so the floor is not an
# unfair one: without it multi-MiB ops page-fault on every call.
libc = ctypes.CDLL(None)
libc.mallopt(-3, 1 << 30); libc.mallopt(-1, 1 << 30)
g = torch.Generator().manual_seed(0)
t = lambda *s: torch.randn(*s, generator=g)
seconds = float(sys.argv[1]); drift = float(sys.argv[2]); ops = json.loads(sys.argv[3])
def med(f, secs):
    end = time.perf_counter() + 0.02
    while time.perf_counter() < end:
        f()
    xs, end = [], time.perf_counter() + secs
    while time.perf_counter() < end:
        t0 = time.perf_counter_ns(); f(); xs.append(time.perf_counter_ns() - t0)
    xs.sort()
    return xs[len(xs) // 2] * 1e-9
out = {}
for name, src in ops.items():
    env = {"torch": torch, "t": t}
    exec(src, env)
    out[name] = med(env["f"], seconds)
if drift > 0:
    env = {"torch": torch, "t": t}
    exec(ops[next(iter(ops))], env)
    out["__drift__"] = [med(env["f"], 0.1) for _ in range(int(drift / 0.1))]
print(json.dumps(out))
"""


def one_process(seconds: float, drift: float = 0.0) -> dict:
    """Run the worker once in a fresh interpreter; ``{op: median seconds}``.

    Raises ``RuntimeError`` with the worker's stderr when it fails."""
    proc = subprocess.run(
        [sys.executable, "-c", WORKER, str(seconds), str(drift), json.dumps(OPS)], capture_output=True, text=True
    )
    if proc.returncode != 0:
        raise RuntimeError(f"cpu_floor worker failed (exit {proc.returncode}): {proc.stderr.strip()[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def agreement(runs: list[dict], k: int, threshold: float) -> tuple[int, int]:
    """Consecutive blocks of ``2k`` processes -> (A = first k, B = next k): how many
    (op, block) pairs have medians of the k process medians within ``threshold``."""
    ok = total = 0
    for start in range(0, len(runs) - 2 * k + 1, 2 * k):
        a, b = runs[start : start + k], runs[start + k : start + 2 * k]
        for op in OPS:
            ma = statistics.median(r[op] for r in a)
            mb = statistics.median(r[op] for r in b)
            ok += abs(mb / ma - 1) <= threshold
            total += 1
    return ok, total


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--processes", type=int, default=8, help="largest k (processes per run) to evaluate (default 8)")
    ap.add_argument("--repeats", type=int, default=2, help="A/B blocks of 2 x --processes processes (default 2)")
    ap.add_argument("--seconds", type=float, default=0.2, help="sampling time per op and process (default 0.2)")
    ap.add_argument("--threshold", type=float, default=0.02, help="agreement threshold, relative (default 0.02)")
    ap.add_argument("--neighbour", type=int, default=0, help="busy-loop processes pinned to CPU 0 (default 0)")
    ap.add_argument(
        "--drift",
        type=float,
        default=20.0,
        help="seconds of one long process timing the first op in 0.1 s windows (default 20; 0: skip)",
    )
    ap.add_argument("--json", dest="json_out", default=None, help="also write everything measured here")
    args = ap.parse_args(argv)
    if args.processes < 1 or args.repeats < 1 or args.seconds <= 0 or args.threshold <= 0:
        ap.error("--processes, --repeats, --seconds and --threshold must be positive")

    sys.path.insert(0, str(HERE))
    from busy_neighbour import loadavg, neighbours

    n = 2 * args.processes * args.repeats
    before = loadavg()
    t0 = time.monotonic()
    with neighbours(args.neighbour, cpu=0):
        runs = [one_process(args.seconds) for _ in range(n)]
        drift = one_process(0.01, args.drift).get("__drift__", []) if args.drift > 0 else []
    after = loadavg()
    print(
        f"cpu_floor: {n} fresh processes one after another, {len(OPS)} ops, {args.seconds:g} s per op, "
        f"1 thread, {args.neighbour} busy neighbour(s), {time.monotonic() - t0:.0f} s; before: {before}; "
        f"after: {after}"
    )
    print(
        f"\nA/A floor: share of ops whose medians agree within {args.threshold:.0%} when run A = k processes "
        f"and run B = the next k (no kernelwatch in the loop):"
    )
    ks = [k for k in (1, 2, 4, 8, 16) if k <= args.processes]
    table = {}
    for k in ks:
        ok, total = agreement(runs, k, args.threshold)
        table[k] = (ok, total)
        print(f"  k = {k:2d} process(es) per run: {ok / total:6.1%} ({ok} of {total})")
    print("\nper op: spread of the process medians (p50 / max of |process / median - 1|), and within 2% for k = 1:")
    per_op = {}
    for op in OPS:
        vals = [r[op] for r in runs]
        m = statistics.median(vals)
        dev = sorted(abs(v / m - 1) for v in vals)
        a = vals[0::2]
        b = vals[1::2]
        within = sum(abs(y / x - 1) <= args.threshold for x, y in zip(a, b)) / len(a)
        per_op[op] = {"median_s": m, "p50_abs_dev": dev[len(dev) // 2], "max_abs_dev": dev[-1], "within_k1": within}
        print(
            f"  {op:30s} {m * 1e6:9.1f} us   p50 {dev[len(dev) // 2]:5.1%}   max {dev[-1]:5.1%}   within {within:4.0%}"
        )
    if drift:
        m = statistics.median(drift)
        dev = sorted(abs(v / m - 1) for v in drift)
        print(
            f"\none process, {list(OPS)[0]}, {len(drift)} windows of 0.1 s: p50 |window / median - 1| "
            f"{dev[len(dev) // 2]:.1%}, max {dev[-1]:.1%}, first-half vs second-half medians "
            f"{statistics.median(drift[len(drift) // 2 :]) / statistics.median(drift[: len(drift) // 2]) - 1:+.1%}"
        )
    if args.json_out:
        Path(args.json_out).write_text(
            json.dumps(
                {
                    "neighbours": args.neighbour,
                    "seconds": args.seconds,
                    "threshold": args.threshold,
                    "load_before": before,
                    "load_after": after,
                    "floor": {str(k): v for k, v in table.items()},
                    "per_op": per_op,
                    "process_medians_s": runs,
                    "drift_s": drift,
                },
                indent=2,
            )
            + "\n"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
