"""Cost of the matrix page's per-suite means (:func:`harness.report.matrix.suite_means`)
as the number of benchmark classes grows (issue 29, item 5).

Each benchmark class is one suite on the matrix page; a trial with 16,000 classes
took 49 s and 32,000 took 658 s when the rows were filtered once per suite
(quadratic). Synthetic rows (one case per class, 2 machines, 2 baselines) are
built before the clock starts; the script prints the best of ``--repeat`` times
at ``N`` and ``2N`` classes and their ratio: about 2 is linear, about 4 quadratic.
Exit 1 when the ratio exceeds ``--max-ratio`` (default 3).

    python experiments/scale/bench_matrix.py [--classes 16000] [--repeat 3] [--max-ratio 3]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from types import SimpleNamespace

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from harness.report.matrix import suite_means  # noqa: E402

MACHINES = ["m1", "m2"]
CANDIDATES = [{"hash": "a" * 40}, {"hash": "b" * 40}]


def rows(classes: int) -> list[dict]:
    """One case per benchmark class, with ``sol`` and speed-ups on every machine."""
    out = []
    for i in range(classes):
        out.append(
            {
                "suite": f"suite.op{i}",
                "sol": {m: 0.5 for m in MACHINES},
                "sol_status": {},
                "speedup": {c["hash"]: {m: 1.1 for m in MACHINES} for c in CANDIDATES},
                "doubt": {},
            }
        )
    return out


def best_time(classes: int, repeat: int) -> float:
    model = SimpleNamespace(machines=MACHINES, candidates=CANDIDATES)
    data = rows(classes)
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        geo = suite_means(model, data)
        best = min(best, time.perf_counter() - t0)
    if len(geo) != classes:
        raise SystemExit(f"expected {classes} suites, got {len(geo)}")
    return best


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--classes", type=int, default=16000, help="N, the smaller size (default 16000)")
    ap.add_argument("--repeat", type=int, default=3, help="best of this many runs (default 3)")
    ap.add_argument("--max-ratio", type=float, default=3.0, help="fail above this t(2N)/t(N) (default 3)")
    a = ap.parse_args(argv)
    if a.classes < 1 or a.repeat < 1:
        ap.error("--classes and --repeat must be at least 1")
    t1 = best_time(a.classes, a.repeat)
    t2 = best_time(2 * a.classes, a.repeat)
    ratio = t2 / t1
    print(f"suite_means: {a.classes} classes {t1:.3f} s, {2 * a.classes} classes {t2:.3f} s, ratio {ratio:.2f}")
    print("linear ~2, quadratic ~4: " + ("ok" if ratio <= a.max_ratio else f"FAIL (above {a.max_ratio})"))
    return 0 if ratio <= a.max_ratio else 1


if __name__ == "__main__":
    sys.exit(main())
